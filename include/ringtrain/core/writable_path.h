// Outputs proven writable before any work: a run that can train but not save
// should fail in its first second, naming the flag and the path, not after
// its last step (and not as a runtime failure that a wrapper would retry).
#pragma once

#include <string>

namespace ringtrain {

// Creates `dir` (and its parents) if needed and proves that a file can be
// created in it. Throws Error "<flag> <dir>: <what is wrong>" otherwise
// (permission denied, not a directory, read-only file system).
void ensure_writable_directory(const std::string& flag, const std::string& dir);

// The same for the directory that will hold `file`; an existing `file` must be
// a regular file that can be opened for writing.
void ensure_writable_file(const std::string& flag, const std::string& file);

}  // namespace ringtrain
