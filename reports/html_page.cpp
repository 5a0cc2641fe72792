#include "reports/html_page.hpp"

#include "ops/op_spec.hpp"
#include "reports/html_assets.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace shardcheck::report::html {

std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string json_num(double v) { return spec::json_number(v); }

std::string json_str(const std::string& s) {
  const std::string quoted = spec::json_string(s);
  std::string out;
  out.reserve(quoted.size());
  for (const char c : quoted) {
    if (c == '<') out += "\\u003c";
    else out += c;
  }
  return out;
}

std::string PlotData::figure(const std::string& id, const std::string& json,
                             const std::string& label, const std::string& caption, int height_px) {
  entries_.emplace_back(id, json);
  return R"(<figure class="plot" id=")" + escape(id) +
         R"("><div class="canvas-box" style="height:)" + std::to_string(height_px) +
         R"(px"><canvas role="img" aria-label=")" + escape(label) +
         R"("></canvas></div><figcaption>)" + escape(caption) + "</figcaption></figure>\n";
}

std::string PlotData::script() const {
  std::string s = R"(<script type="application/json" id="plot-data">{)";
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    s += (i ? ",\n" : "\n") + json_str(entries_[i].first) + ": " + entries_[i].second;
  }
  return s + "\n}</script>\n";
}

std::string table(const std::string& caption, const std::vector<std::string>& header,
                  const std::vector<std::vector<std::string>>& rows, const std::string& css_class) {
  std::string s = R"(<div class="table-box"><table)" +
                  (css_class.empty() ? std::string() : R"( class=")" + css_class + R"(")") +
                  "><caption>" + escape(caption) + "</caption>\n<thead><tr>";
  for (const auto& h : header) s += R"(<th scope="col">)" + escape(h) + "</th>";
  s += "</tr></thead>\n<tbody>\n";
  for (const auto& row : rows) {
    s += "<tr>";
    for (std::size_t i = 0; i < row.size(); ++i) {
      s += i == 0 ? R"(<th scope="row">)" + row[i] + "</th>" : "<td>" + row[i] + "</td>";
    }
    s += "</tr>\n";
  }
  return s + "</tbody></table></div>\n";
}

std::string replay(const std::string& command) {
  return R"(<p class="replay-line">Replay: <code class="replay">)" + escape(command) +
         "</code></p>\n";
}

namespace {

template <class T, class F>
std::string json_array(const std::vector<T>& v, F&& to_text) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + to_text(v[i]);
  return s + "]";
}

std::string bin_labels() {
  std::vector<std::size_t> bins(check::kRatioBins);
  for (std::size_t b = 0; b < bins.size(); ++b) bins[b] = b;
  return json_array(bins, [](std::size_t b) { return json_str(check::ratio_bin_label(b)); });
}

}  // namespace

std::string ratio_section(PlotData& plots, const std::string& id, const std::string& title,
                          const std::vector<RatioRow>& rows) {
  if (rows.empty()) return "";
  auto labels = json_array(rows, [](const RatioRow& r) { return json_str(r.label); });
  const std::string dist =
      R"({"type": "ratio-distribution", "rows": )" + labels + R"(, "bins": )" + bin_labels() +
      R"(, "counts": )" +
      json_array(rows,
                 [](const RatioRow& r) {
                   return json_array(std::vector<int>(r.histogram.begin(), r.histogram.end()),
                                     [](int n) { return std::to_string(n); });
                 }) +
      "}";
  const std::string contrast =
      R"({"type": "assert-close", "rows": )" + labels + R"(, "cases": )" +
      json_array(rows, [](const RatioRow& r) { return std::to_string(r.cases); }) +
      R"(, "false_alarms": )" +
      json_array(rows, [](const RatioRow& r) { return std::to_string(r.false_alarms); }) +
      R"(, "missed": )" +
      json_array(rows, [](const RatioRow& r) { return std::to_string(r.missed); }) + "}";
  const int height = 90 + 26 * static_cast<int>(rows.size());
  std::string s = "<div class=\"pair\">\n";
  s += plots.figure(id + "-ratios", dist,
                    "Stacked bars: for each op, dtype and world size of " + title +
                        ", the share of tensor checks per bound-ratio bin; the table below "
                        "holds the counts.",
                    "Distribution of bound ratios (share of tensor checks per bin; > 1 fails).",
                    height);
  s += plots.figure(id + "-assert-close", contrast,
                    "Bars: for each op, dtype and world size of " + title +
                        ", the tensor checks where assert_close's default tolerance disagrees "
                        "with the bound; the table below holds the counts.",
                    "assert_close with its default rtol/atol, for contrast: false alarms "
                    "(bound passes, assert_close fails) and misses (bound fails, assert_close "
                    "passes).",
                    height);
  s += "</div>\n";
  std::vector<std::string> header = {
      "op / dtype / P",     "tensor checks",   "failed",
      "max error",          "max bound ratio", "assert_close false alarms",
      "assert_close misses"};
  for (std::size_t b = 0; b < check::kRatioBins; ++b) {
    header.push_back("ratio " + check::ratio_bin_label(b));
  }
  std::vector<std::vector<std::string>> body;
  for (const auto& r : rows) {
    std::vector<std::string> cells = {
        escape(r.label),
        std::to_string(r.cases),
        r.failed ? "<strong>" + std::to_string(r.failed) + "</strong>" : "0",
        num(r.max_err),
        num(r.max_ratio),
        std::to_string(r.false_alarms),
        std::to_string(r.missed)};
    for (const int n : r.histogram) cells.push_back(std::to_string(n));
    body.push_back(std::move(cells));
  }
  return s + table("Bound ratios of " + title + " per op, dtype and world size", header, body,
                   "numbers");
}

namespace {

// One tensor's figure and table of profiles_section (html_page.hpp), as figure `id`.
std::string profile_section(PlotData& plots, const std::string& id, const std::string& title,
                            const std::string& text, const check::ErrorProfile& p,
                            double max_ratio) {
  std::string s = "<h3>" + escape(title) + "</h3>\n<p class=\"case\">" + escape(text) + "</p>\n";
  if (p.rows == 0) return s + "<p>No element was compared (see the case above).</p>\n";
  auto floats = [](const std::vector<double>& v) {
    // 4 significant digits: a plot needs no more, and a profile has up to 4096 x 2 numbers.
    return json_array(v, [](double x) {
      if (!std::isfinite(x)) return std::string("null");
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.4g", x);
      return std::string(buf);
    });
  };
  const std::string json =
      R"({"type": "profile", "axis": )" + std::to_string(p.axis) + R"(, "length": )" +
      std::to_string(p.length) + R"(, "rest": )" + std::to_string(p.rest) + R"(, "rows": )" +
      std::to_string(p.rows) + R"(, "cols": )" + std::to_string(p.cols) + R"(, "row_block": )" +
      std::to_string(p.row_block) + R"(, "col_block": )" + std::to_string(p.col_block) +
      R"(, "boundaries": )" +
      json_array(p.boundaries, [](std::size_t b) { return std::to_string(b); }) + R"(, "ratio": )" +
      floats(p.ratio) + R"(, "error": )" + floats(p.error) + "}";
  const std::string along =
      p.axis < 0 ? "dimension 0 (every rank holds every element)"
                 : "the sharded dimension " + std::to_string(p.axis) + " (rank boundaries drawn)";
  const bool heat = p.cols > 1;
  s += plots.figure(id, json,
                    std::string(heat ? "Heatmap" : "Line") +
                        " of err/bound for every element along " + along + "; largest ratio " +
                        num(max_ratio) + "; the table below holds each rank's maxima.",
                    "err/bound per element: x along " + along +
                        (heat ? ", y the other dimensions (row-major)" : "") +
                        (p.row_block * p.col_block > 1
                             ? "; each cell is the largest of " + std::to_string(p.row_block) +
                                   " x " + std::to_string(p.col_block) + " elements"
                             : "") +
                        ". Ratio > 1 fails.",
                    heat ? 360 : 260);
  // Each rank's piece [begin, end) along the axis; a pooled row counts for the rank holding
  // its first element.
  std::vector<std::size_t> starts = {0};
  starts.insert(starts.end(), p.boundaries.begin(), p.boundaries.end());
  std::vector<std::vector<std::string>> body;
  for (std::size_t r = 0; r < starts.size(); ++r) {
    const std::size_t end = r + 1 < starts.size() ? starts[r + 1] : p.length;
    double ratio = 0, err = 0;
    for (std::size_t row = 0; row < p.rows; ++row) {
      const std::size_t first = row * p.row_block;
      if (first < starts[r] || first >= end) continue;
      for (std::size_t c = 0; c < p.cols; ++c) {
        ratio = std::max(ratio, p.ratio[row * p.cols + c]);
        err = std::max(err, p.error[row * p.cols + c]);
      }
    }
    body.push_back({p.axis < 0 ? std::string("every rank") : "rank " + std::to_string(r),
                    "[" + std::to_string(starts[r]) + ", " + std::to_string(end) + ")", num(err),
                    num(ratio)});
  }
  return s + table("Largest error per rank along " + along,
                   {"rank", "elements", "max error", "max err/bound"}, body, "numbers");
}

}  // namespace

std::string profiles_section(PlotData& plots, const std::vector<ProfileCase>& cases,
                             const std::string& intro, const std::string& none) {
  constexpr std::size_t max_shown = 12;  // so that the page stays small
  std::vector<ProfileCase> shown;
  std::map<std::vector<std::string>, const ProfileCase*> worst;  // per group, passing
  for (const ProfileCase& c : cases) {
    if (c.failed) {
      shown.push_back(c);
    } else if (c.ratio > 0) {
      const ProfileCase*& w = worst[c.group];
      if (w == nullptr || c.ratio > w->ratio) w = &c;
    }
  }
  // Sharded tensors first (where a boundary bug shows), then by ratio.
  std::stable_sort(shown.begin(), shown.end(), [](const ProfileCase& a, const ProfileCase& b) {
    const bool sa = a.profile->axis >= 0, sb = b.profile->axis >= 0;
    return sa != sb ? sa : a.ratio > b.ratio;
  });
  for (const auto& [group, c] : worst) shown.push_back(*c);
  if (shown.size() > max_shown) shown.resize(max_shown);
  if (shown.empty()) return none;
  std::string s = intro;
  for (std::size_t n = 0; n < shown.size(); ++n) {
    const ProfileCase& c = shown[n];
    s += profile_section(plots, "profile-" + std::to_string(n), c.title, c.text, *c.profile,
                         c.ratio);
  }
  return s;
}

std::string document(const std::string& title, const std::string& intro,
                     const std::vector<Section>& sections, const PlotData& plots) {
  std::string s =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>" +
      escape(title) + "</title>\n<style>\n" + std::string(report_css()) +
      "</style>\n</head>\n<body>\n<header>\n<h1>" + escape(title) + "</h1>\n" + intro +
      R"(<noscript><p class="note">The plots need JavaScript; every number they show )"
      "is in the table under them.</p></noscript>\n<nav aria-label=\"Contents\"><ul>";
  for (const auto& sec : sections) {
    s += R"(<li><a href="#)" + escape(sec.id) + R"(">)" + escape(sec.heading) + "</a></li>";
  }
  s += "</ul></nav>\n</header>\n<main>\n";
  for (const auto& sec : sections) {
    s += R"(<section id=")" + escape(sec.id) + "\">\n<h2>" + escape(sec.heading) + "</h2>\n" +
         sec.body + "</section>\n";
  }
  s += "</main>\n" + plots.script() + "<script>\n" + std::string(chart_js()) +
       "\n</script>\n<script>\n" + std::string(report_js()) + "\n</script>\n</body>\n</html>\n";
  return s;
}

}  // namespace shardcheck::report::html
