// The ImageFolder convention (torchvision's): a root folder with one subfolder
// per class, classes in sorted name order, every .jpg/.jpeg/.png file under a
// class folder (at any depth) one sample of that class, in sorted path order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringtrain {

struct ImageFile {
  std::string path;
  std::int32_t label = 0;
};

struct ImageFolder {
  std::string root;
  std::vector<std::string> class_names;
  std::vector<ImageFile> files;  // by class, then path
  std::size_t ignored = 0;       // files whose extension is not an image's
};

// Throws Error naming the folder when it is missing, has no class folders, or
// a class folder holds no image file. With `classes` given (a test folder
// against the training classes), every class folder must be one of them and
// labels follow their order.
ImageFolder scan_image_folder(const std::string& root,
                              const std::vector<std::string>* classes = nullptr);

// Whether a file name ends in .jpg, .jpeg or .png (any case).
bool has_image_extension(const std::string& name);

}  // namespace ringtrain
