// The texts report.html inlines, embedded when the library is built (reports/CMakeLists.txt
// generates their definitions): Chart.js from Debian's libjs-chart.js, and the page's own
// script and style from reports/html/. None of them holds "</script".
#pragma once

#include <string_view>

namespace shardcheck::report::html {

std::string_view chart_js();    // Chart.js 3 (UMD build: defines the global Chart)
std::string_view report_js();   // reports/html/report.js: draws every figure.plot
std::string_view report_css();  // reports/html/report.css

}  // namespace shardcheck::report::html
