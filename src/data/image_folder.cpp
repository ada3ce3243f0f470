#include "data/image_folder.h"

#include <algorithm>
#include <filesystem>

#include "ringtrain/core/check.h"

namespace ringtrain {

namespace fs = std::filesystem;

bool has_image_extension(const std::string& name) {
  std::string ext = fs::path(name).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

ImageFolder scan_image_folder(const std::string& root, const std::vector<std::string>* classes) {
  std::error_code ec;
  RT_CHECK(fs::is_directory(root, ec), "image folder {} does not exist or is not a folder", root);
  ImageFolder f;
  f.root = root;
  std::vector<std::string> dirs;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    if (e.is_directory(ec))
      dirs.push_back(e.path().filename().string());
    else
      ++f.ignored;  // loose files beside the class folders are not samples
  }
  RT_CHECK(!ec, "{}: cannot list: {}", root, ec.message());
  std::sort(dirs.begin(), dirs.end());
  RT_CHECK(!dirs.empty(),
           "image folder {} has no class folders (expected one subfolder per class, "
           "e.g. {}/cat/1.jpg)",
           root, root);
  f.class_names = classes ? *classes : dirs;
  for (const std::string& d : dirs) {
    std::int32_t label = 0;
    if (classes) {
      const auto it = std::find(classes->begin(), classes->end(), d);
      RT_CHECK(it != classes->end(), "{}/{}: class '{}' is not among the training classes", root, d,
               d);
      label = static_cast<std::int32_t>(it - classes->begin());
    } else {
      label = static_cast<std::int32_t>(&d - dirs.data());
    }
    const fs::path dir = fs::path(root) / d;
    std::vector<std::string> paths;
    for (auto it = fs::recursive_directory_iterator(
             dir, fs::directory_options::follow_directory_symlink, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      if (has_image_extension(it->path().filename().string()))
        paths.push_back(it->path().string());
      else
        ++f.ignored;
    }
    RT_CHECK(!ec, "{}: cannot list: {}", dir.string(), ec.message());
    RT_CHECK(!paths.empty(),
             "class folder {} holds no .jpg, .jpeg or .png file (an empty class cannot be "
             "learned; remove the folder or add images)",
             dir.string());
    std::sort(paths.begin(), paths.end());
    for (std::string& p : paths) f.files.push_back({std::move(p), label});
  }
  return f;
}

}  // namespace ringtrain
