// What the measured-against-predicted tests of lib/budget share (properties/budget/measured_*,
// part of the program budget_tests): one rank's forward and backward measured under two
// live-bytes trackers with its ledger split between them (Probe), the comparison of a run with
// the model's prediction (the ledger's ordered entries and per-collective totals against
// budget/traffic.hpp, the tracker's kept bytes and peaks against budget/library_activations.hpp,
// every buffer freed), and the generators of splits (uneven and empty pieces included) and
// algorithms. Each op's case, run and prediction are in measured_<family>.hpp.
#pragma once

#include "budget/library_activations.hpp"
#include "budget/live_bytes.hpp"
#include "budget/traffic.hpp"
#include "layout/split_policy.hpp"
#include "runtime/communicator.hpp"
#include "runtime/launcher.hpp"
#include "runtime/ledger.hpp"
#include "tensor/tensor.hpp"

#include <rapidcheck.h>

#include <cstdint>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::budget::measured {

// ------------------------------------------------------------------ measuring one rank

struct Measured {
  std::vector<LedgerCall> fwd, bwd;
  std::map<Collective, CollectiveTotals> totals;
  std::uint64_t kept = 0, fwd_peak = 0, bwd_peak = 0, fwd_live = 0, bwd_live = 0;
};

struct Prediction {
  OpTraffic traffic;
  OpActivations act;
};

inline std::vector<LedgerCall> calls_of(const Ledger& l, std::size_t from, std::size_t to) {
  std::vector<LedgerCall> out;
  for (std::size_t i = from; i < to; ++i) {
    const auto& e = l.entries()[i];
    out.push_back({e.op, e.bytes_sent, e.bytes_recv});
  }
  return out;
}

// One rank's forward and backward under two trackers, and its ledger split between them.
class Probe {
 public:
  explicit Probe(Communicator& c) : c_(c), start_(c.ledger().size()) {}
  template <class F>
  auto forward(F&& f) {
    LiveBytesScope scope(fwd_);
    auto r = f();
    mid_ = c_.ledger().size();
    return r;
  }
  template <class F>
  void backward(F&& f) {
    LiveBytesScope scope(bwd_);
    f();
  }
  template <class Buffer>
  void keep(const Buffer& b) {
    fwd_.keep(b);
  }
  Measured result() const {
    Measured m;
    const auto& l = c_.ledger();
    m.fwd = calls_of(l, start_, mid_);
    m.bwd = calls_of(l, mid_, l.size());
    Ledger mine;
    for (std::size_t i = start_; i < l.size(); ++i) mine.record(l.entries()[i]);
    m.totals = totals(mine);
    m.kept = fwd_.kept();
    m.fwd_peak = fwd_.peak();
    m.bwd_peak = bwd_.peak();
    m.fwd_live = fwd_.live();
    m.bwd_live = bwd_.live();
    return m;
  }

 private:
  Communicator& c_;
  LiveBytes fwd_, bwd_;
  std::size_t start_, mid_ = 0;
};

// Runs `one_rank(c, probe)` on each of `p` ranks, where `one_rank` runs that rank's forward and
// backward through probe.forward / probe.keep / probe.backward (building its inputs first, which
// the trackers do not see). Returns each rank's Measured, indexed by the rank of `c`.
template <class OneRank>
std::vector<Measured> measure_ranks(int p, const OneRank& one_rank) {
  std::vector<Measured> ms(static_cast<std::size_t>(p));
  run(p, [&](Communicator& c) {
    Probe probe(c);
    one_rank(c, probe);
    ms[static_cast<std::size_t>(c.rank())] = probe.result();
  });
  return ms;
}

inline std::string str(const std::vector<LedgerCall>& v) {
  std::string s = "[";
  for (const auto& c : v) s += (s.size() > 1 ? "; " : "") + c.to_string();
  return s + "]";
}

// "" when the run equals the prediction, else what differs.
inline std::string compare(const Measured& m, const Prediction& p) {
  std::ostringstream o;
  if (m.fwd != p.traffic.forward) {
    o << "forward ledger " << str(m.fwd) << " != " << str(p.traffic.forward) << "; ";
  }
  if (m.bwd != p.traffic.backward) {
    o << "backward ledger " << str(m.bwd) << " != " << str(p.traffic.backward) << "; ";
  }
  auto all = p.traffic.forward;
  all.insert(all.end(), p.traffic.backward.begin(), p.traffic.backward.end());
  if (m.totals != totals(all)) o << "per-collective totals differ; ";
  if (m.kept != p.act.kept_bytes()) {
    o << "kept " << m.kept << " != model " << p.act.kept_bytes() << "; ";
  }
  if (m.fwd_peak != p.act.forward_peak_bytes()) {
    o << "forward peak " << m.fwd_peak << " != model " << p.act.forward_peak_bytes() << "; ";
  }
  if (m.bwd_peak != p.act.backward_peak_bytes()) {
    o << "backward peak " << m.bwd_peak << " != model " << p.act.backward_peak_bytes() << "; ";
  }
  if (m.fwd_live != 0 || m.bwd_live != 0) {
    o << "buffers not freed: " << m.fwd_live << " forward, " << m.bwd_live << " backward; ";
  }
  return o.str();
}

using Predict = std::function<Prediction(int rank)>;
using Mutant = std::function<void(Prediction&, int rank)>;

inline std::string compare_all(const std::vector<Measured>& ms, const Predict& predict,
                               const Mutant& mutate = nullptr) {
  std::string out;
  for (std::size_t r = 0; r < ms.size(); ++r) {
    auto p = predict(static_cast<int>(r));
    if (mutate) mutate(p, static_cast<int>(r));
    const auto d = compare(ms[r], p);
    if (!d.empty()) out += "rank " + std::to_string(r) + ": " + d + "\n";
  }
  return out;
}

template <class T>
ElementBytes eb() {
  return {sizeof(T), sizeof(acc_t<T>)};
}

template <class T>
Tensor<T> zeros(Shape s) {
  return Tensor<T>(std::move(s));
}

inline std::size_t piece_of(const SplitPolicy& s, std::size_t n, int p, int r) {
  return split_sizes(s, n, p)[static_cast<std::size_t>(r)];
}

// ------------------------------------------------------------------ generators

inline rc::Gen<SplitPolicy> gen_split(std::size_t n, int parts) {
  return rc::gen::exec([n, parts] {
    switch (*rc::gen::inRange(0, 3)) {
      case 0: return SplitPolicy::chunk();
      case 1: return SplitPolicy::balanced();
      default: break;
    }
    std::vector<std::size_t> sizes;
    std::size_t left = n;
    for (int k = 0; k + 1 < parts; ++k) {
      sizes.push_back(*rc::gen::inRange<std::size_t>(0, left + 1));
      left -= sizes.back();
    }
    sizes.push_back(left);
    return SplitPolicy::explicit_sizes(sizes);
  });
}

inline Algorithm gen_algorithm() {
  return *rc::gen::element(Algorithm::ring, Algorithm::sequential);
}

}  // namespace shardcheck::budget::measured
