// Writing a report file so that a reader never sees half of it: the text goes to a temporary
// file beside the target, which is then renamed over it (rename(2) is atomic within a file
// system). A failed write leaves the old file, if any, untouched.
#pragma once

#include <string>

namespace shardcheck::report {

// Writes `text` to `path` atomically. @throws UsageError naming the path when the temporary file
// cannot be written or renamed.
void write_file_atomically(const std::string& path, const std::string& text);

// Creates `dir` (and its parents), then writes dir/report.json, dir/report.md and
// dir/report.html, each atomically.
// @throws UsageError naming the directory or file that cannot be created or written.
void write_report_files(const std::string& dir, const std::string& json,
                        const std::string& markdown, const std::string& html);

}  // namespace shardcheck::report
