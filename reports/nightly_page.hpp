// summary.html of scripts/nightly (docs/nightly.md, "The summary"): one self-contained page like
// report.html (reports/html_page.hpp: plots inlined, every number also in a static table).
// Tonight's verdict, harnesses and property campaign, and over the nights given, per harness,
// the executions per second, the covered lines, the corpus size, and the new findings of each
// night.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace shardcheck::report {

// `nights`: (where it came from, the text of its summary.json), oldest first, tonight last.
// @throws std::invalid_argument naming the night and the field for a text that is not a
//         shardcheck-nightly/1 summary (an empty list included).
std::string nightly_page(const std::vector<std::pair<std::string, std::string>>& nights);

}  // namespace shardcheck::report
