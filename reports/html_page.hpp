// The pieces every report.html is built from (html_report.cpp for check/mutants,
// html_compare.cpp for compare): escaping, the page skeleton with its inlined script and style,
// static tables, and the figures report.js draws.
//
// A page is readable without JavaScript: every number a figure plots is also in a static table
// beside it. A figure is <figure class="plot" id=ID> holding a <canvas role="img" aria-label>
// and a <figcaption>; its data is entry ID of the page's JSON block
// <script type="application/json" id="plot-data"> (an object ID -> {"type": ..., ...};
// reports/html/report.js reads it and draws each type; docs/reports.md lists them).
#pragma once

#include "engine/collector.hpp"
#include "engine/tensor_check.hpp"

#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace shardcheck::report::html {

// Text for HTML element content or a quoted attribute: & < > " ' as character references.
std::string escape(const std::string& s);

// A number for a table cell: 3 significant digits, "inf" / "nan".
std::string num(double v);

// A number for the JSON data block: shortest round-trip text; non-finite numbers as null.
std::string json_num(double v);

// A JSON string (RFC 8259) that is also safe inside <script>: "<" written as \u003c.
std::string json_str(const std::string& s);

// The plot data of one page: figure id -> JSON object text.
class PlotData {
 public:
  // Adds figure `id` (unique in the page) with its JSON object `json`; returns the <figure>
  // for it: its canvas labelled `label` (what the plot shows, for screen readers) and
  // `caption` (escaped here). `height_px` sizes the canvas box.
  std::string figure(const std::string& id, const std::string& json, const std::string& label,
                     const std::string& caption, int height_px);
  // The <script type="application/json" id="plot-data"> block.
  std::string script() const;
  std::size_t size() const { return entries_.size(); }

 private:
  std::vector<std::pair<std::string, std::string>> entries_;
};

// A static table: <table> with <caption>, a <thead> row of <th scope="col"> and the rows
// (cells already HTML: escape text before passing it). A row's first cell is a
// <th scope="row">.
std::string table(const std::string& caption, const std::vector<std::string>& header,
                  const std::vector<std::vector<std::string>>& rows,
                  const std::string& css_class = "");

// A replay command: <code class="replay"> (report.js adds a Copy button beside it).
std::string replay(const std::string& command);

// The ratio-distribution and assert_close-contrast figures and their table, for rows of
// op x dtype x P (the collector's histogram bins, engine/collector.hpp).
struct RatioRow {
  std::string label;  // "column_parallel_linear float32 P=4"
  int cases = 0, failed = 0;
  double max_err = 0, max_ratio = 0;
  int false_alarms = 0, missed = 0;
  std::array<int, check::kRatioBins> histogram{};
};
std::string ratio_section(PlotData& plots, const std::string& id, const std::string& title,
                          const std::vector<RatioRow>& rows);

// One checked tensor, a candidate for the worst-cases section: `title` names it, `text` says
// what the case was, `profile` holds its per-element errors, `ratio` is its largest bound ratio,
// `failed` whether it failed. `group`: of the passing tensors, the section shows the worst of
// each group (e.g. each op's).
struct ProfileCase {
  std::string title, text;
  const check::ErrorProfile* profile = nullptr;
  double ratio = 0;
  bool failed = false;
  std::vector<std::string> group;
};

// The worst cases along the sharded axis: every failing tensor of `cases` (sharded ones first,
// then by ratio, largest first), then each group's passing tensor of the largest non-zero ratio
// (the first of equals; groups in order), at most 12 in all. Each is a figure of its per-element
// errors along the sharded axis (a line for a 1-D profile, a heatmap for 2-D) with the rank
// boundaries, and a static table of each rank's largest ratio and error. `intro` (HTML) opens the
// section; `none` (HTML) is the whole section when no tensor is shown.
std::string profiles_section(PlotData& plots, const std::vector<ProfileCase>& cases,
                             const std::string& intro, const std::string& none);

// The whole document: <!DOCTYPE html>, lang="en", the title as <title> and <h1>, `intro`
// (HTML) under it, a contents list of `sections` (id, heading), the body, the plot data,
// Chart.js and report.js inlined.
struct Section {
  std::string id, heading, body;  // body: HTML under the <h2>
};
std::string document(const std::string& title, const std::string& intro,
                     const std::vector<Section>& sections, const PlotData& plots);

}  // namespace shardcheck::report::html
