// The worst |err|/bound the tests of a bound observed, printed when the program exits (the
// figures docs/tolerances.md quotes):
//   WorstRatios   per row (a dtype, a value mix, a tensor): the largest ratio, how many cases
//                 the row saw, and how many carried each note ("may overflow");
//   RatioSummary  per row, an emulated kernel's worst ratio under the bound of its own contract
//                 and under another contract's: the first must stay ≤ 1 (the property asserts
//                 it); the second, when it goes above 1 in some cases, shows the contract matters.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace shardcheck::test {

class WorstRatios {
 public:
  explicit WorstRatios(std::string title) : title_(std::move(title)) {}
  WorstRatios(const WorstRatios&) = delete;
  WorstRatios& operator=(const WorstRatios&) = delete;
  WorstRatios(WorstRatios&&) = delete;
  WorstRatios& operator=(WorstRatios&&) = delete;
  ~WorstRatios() {
    if (rows_.empty()) return;
    std::printf("\n%s\n", title_.c_str());
    for (const auto& [key, r] : rows_) {
      std::printf("  %-34s worst %.4g over %zu cases", key.c_str(), r.worst, r.cases);
      for (const auto& [note, n] : r.notes) std::printf(", %zu %s", n, note.c_str());
      std::printf("\n");
    }
  }
  // One case of `row`: its ratio (not counted in the worst when nullopt: a case the bound gives
  // up on) and the note it carries, if any.
  void add(const std::string& row, std::optional<double> ratio, const char* note = nullptr) {
    Row& r = rows_[row];
    ++r.cases;
    if (ratio) r.worst = std::max(r.worst, *ratio);
    if (note != nullptr) ++r.notes[note];
  }

 private:
  struct Row {
    double worst = 0;
    std::size_t cases = 0;
    std::map<std::string, std::size_t> notes;
  };
  std::string title_;
  std::map<std::string, Row> rows_;
};

class RatioSummary {
 public:
  // `name`: the kernel and its contract ("mlp 16-bit accumulation"); `own`, `other`: the two
  // contracts' names.
  RatioSummary(std::string name, std::string own, std::string other)
      : name_(std::move(name)), own_(std::move(own)), other_(std::move(other)) {}
  RatioSummary(const RatioSummary&) = delete;
  RatioSummary& operator=(const RatioSummary&) = delete;
  RatioSummary(RatioSummary&&) = delete;
  RatioSummary& operator=(RatioSummary&&) = delete;
  ~RatioSummary() {
    for (const auto& [key, r] : rows_) {
      std::printf(
          "%s, %s: worst |err|/bound %.4f (%s), %.4f (%s); %zu of %zu cases above 1 "
          "under %s\n",
          name_.c_str(), key.c_str(), r.own, own_.c_str(), r.other, other_.c_str(), r.above,
          r.cases, other_.c_str());
    }
  }
  // One case of the row `key` (a dtype): its worst ratios under the two contracts.
  void add(const std::string& key, double own, double other) {
    Row& r = rows_[key];
    r.own = std::max(r.own, own);
    r.other = std::max(r.other, other);
    ++r.cases;
    if (other > 1) ++r.above;
  }

 private:
  struct Row {
    double own = 0, other = 0;
    std::size_t cases = 0, above = 0;
  };
  std::string name_, own_, other_;
  std::map<std::string, Row> rows_;
};

}  // namespace shardcheck::test
