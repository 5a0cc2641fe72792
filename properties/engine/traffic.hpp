// Traffic checks: the collectives a rank's ledger shows against the ones the op declares.
// Compared as a multiset of (collective, element type, element count) per rank, barriers
// ignored (they move nothing); the bytes of each call follow from the runtime's documented
// algorithms, which properties/runtime checks exactly.
#pragma once

#include "ops/op_spec.hpp"
#include "runtime/dtype.hpp"
#include "runtime/ledger.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace shardcheck::check {

struct DeclaredCall {
  Collective op;
  DType dtype;
  std::uint64_t count;
  auto tie() const { return std::tie(op, dtype, count); }
  friend bool operator<(const DeclaredCall& a, const DeclaredCall& b) { return a.tie() < b.tie(); }
  friend bool operator==(const DeclaredCall& a, const DeclaredCall& b) {
    return a.tie() == b.tie();
  }
  std::string to_string() const {
    return std::string(name(op)) + " " + std::string(name(dtype)) + " x" + std::to_string(count);
  }
};

// What every rank of an op's spec declares (ops/op_spec.hpp) for an op run in `t`: each call's
// collective, element type (T or acc_t<T>) and the ledger's element count.
inline std::vector<std::vector<DeclaredCall>> declared_calls(const spec::OpSpec& s, DType t) {
  std::vector<std::vector<DeclaredCall>> out;
  for (const auto& rank : s.calls) {
    auto& calls = out.emplace_back();
    for (const auto& c : rank) calls.push_back({c.op, spec::dtype_of(c.elem, t), c.elements()});
  }
  return out;
}

// Empty when every rank's ledger matches its own declared list (declared[r] for rank r; ops
// whose traffic differs per rank, e.g. ring attention with uneven chunks); otherwise a sentence
// naming the first rank that differs, what it did and what the op declares.
inline std::string check_traffic_per_rank(const std::vector<std::vector<DeclaredCall>>& declared,
                                          const std::vector<Ledger>& ledgers) {
  auto list = [](const std::vector<DeclaredCall>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i].to_string();
    return s + "]";
  };
  for (std::size_t r = 0; r < ledgers.size(); ++r) {
    auto want = declared.at(r);
    std::sort(want.begin(), want.end());
    std::vector<DeclaredCall> got;
    for (const auto& e : ledgers[r].entries()) {
      if (e.op != Collective::barrier) got.push_back({e.op, e.dtype, e.count});
    }
    std::sort(got.begin(), got.end());
    if (got != want) {
      return "traffic: rank " + std::to_string(r) + " made the collectives " + list(got) +
             " but the op declares " + list(want) +
             " (a missing reduction, an extra gather or "
             "a gather of the wrong tensor)";
    }
  }
  return {};
}

}  // namespace shardcheck::check
