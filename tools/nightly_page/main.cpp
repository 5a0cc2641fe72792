// shardcheck_nightly_page: writes summary.html from nights of scripts/nightly
// (reports/nightly_page.hpp; docs/nightly.md, "The summary").
//
//   shardcheck_nightly_page OUT.html SUMMARY.json...     (oldest first, tonight last)
//
// Exit 0 written (atomically); 2 bad input (a file that cannot be read or is not a summary),
// with one line naming the file and the field, nothing written.
#include "reports/atomic_file.hpp"
#include "reports/nightly_page.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: shardcheck_nightly_page OUT.html SUMMARY.json... (oldest first)\n";
    return 2;
  }
  try {
    std::vector<std::pair<std::string, std::string>> nights;
    for (int i = 2; i < argc; ++i) {
      std::ifstream in(argv[i], std::ios::binary);
      if (!in) throw std::invalid_argument(std::string(argv[i]) + ": cannot be opened");
      std::ostringstream text;
      text << in.rdbuf();
      nights.emplace_back(argv[i], text.str());
    }
    const std::string page = shardcheck::report::nightly_page(nights);
    const std::filesystem::path out(argv[1]);
    if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
    shardcheck::report::write_file_atomically(argv[1], page);
  } catch (const std::exception& e) {
    std::cerr << "shardcheck_nightly_page: " << e.what() << "\n";
    return 2;
  }
  std::cout << "summary page: " << argv[1] << "\n";
  return 0;
}
