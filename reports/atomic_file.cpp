#include "reports/atomic_file.hpp"

#include "runtime/errors.hpp"

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace shardcheck::report {

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw UsageError("report: cannot write '" + tmp + "'; pass a writable --report directory");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw UsageError("report: cannot rename '" + tmp + "' to '" + path + "': " + ec.message() +
                     "; pass a writable --report directory");
  }
}

void write_report_files(const std::string& dir, const std::string& json,
                        const std::string& markdown, const std::string& html) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw UsageError("report: cannot create directory '" + dir + "': " + ec.message() +
                     "; pass a writable --report directory");
  }
  write_file_atomically((std::filesystem::path(dir) / "report.json").string(), json);
  write_file_atomically((std::filesystem::path(dir) / "report.md").string(), markdown);
  write_file_atomically((std::filesystem::path(dir) / "report.html").string(), html);
}

}  // namespace shardcheck::report
