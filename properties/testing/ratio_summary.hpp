// The worst |err|/bound an emulated kernel reached over a property's cases, under the bound of
// its own contract and under another contract's, printed when the program exits: the first must
// stay ≤ 1 (the property asserts it); the second, when it goes above 1 in some cases, shows the
// contract matters.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <map>
#include <string>
#include <utility>

namespace shardcheck::test {

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
