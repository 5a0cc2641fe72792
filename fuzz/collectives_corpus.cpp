// Writes the seed corpus of collectives_fuzz: one small input per target below (every
// collective matched, the features that matter to it, and every deviation kind with each
// outcome it can have, and data on which the reduction order shows). Inputs are random byte
// strings from a fixed-seed splitmix64, kept when their decoded program meets the target, so
// the corpus is reproducible:
//   collectives_corpus <dir>            writes the seeds (fuzz/corpus/collectives)
//   collectives_corpus --check <dir>    fails when a seed no longer meets its target (ctest)
// Only the decoder, the predictor and the model are used: nothing runs on ranks here.
#include "collectives_outcome.hpp"
#include "collectives_program.hpp"
#include "corpus_seeds.hpp"

#include "properties/runtime/collective_model.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace shardcheck;
using namespace shardcheck::fuzz;

// The corpus's fixed seed: the same seeds on every machine (splitmix64 and FNV-1a of the
// target's name are the only sources of randomness).
constexpr std::uint64_t seed = 20240601;

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

using Pred = std::function<bool(const Program&, const Prediction&)>;

struct Target {
  std::string name;
  Pred ok;
};

std::size_t group_size(const Program& p, const Call& c) {
  return p.groups[static_cast<std::size_t>(c.group)].members.size();
}

// A matched program with at most `max_calls` calls containing `k` on a group of >= min_p.
Pred matched(Kind k, std::size_t min_p,
             const std::function<bool(const Program&, const Call&)>& extra = {}) {
  return [=](const Program& p, const Prediction& pr) {
    if (p.deviation != Deviation::none || pr.expect != Expect::success) return false;
    if (p.calls.size() > 3) return false;
    for (const Call& c : p.calls) {
      if (c.kind == k && group_size(p, c) >= min_p && (!extra || extra(p, c))) return true;
    }
    return false;
  };
}

Pred deviating(Deviation d, Expect e, const std::function<bool(const Program&)>& extra = {}) {
  return [=](const Program& p, const Prediction& pr) {
    return p.deviation == d && pr.expect == e && p.calls.size() <= 4 && (!extra || extra(p));
  };
}

Pred deviating_kind(Deviation d, Kind k) {
  return [=](const Program& p, const Prediction& pr) {
    return p.deviation == d && pr.expect == Expect::mismatch && p.calls.size() <= 3 &&
           p.calls[static_cast<std::size_t>(p.deviant_call)].kind == k;
  };
}

model::Op model_op(ReduceOp op) {
  constexpr model::Op ops[] = {model::Op::sum, model::Op::avg, model::Op::max, model::Op::min,
                               model::Op::product};
  return ops[static_cast<int>(op)];
}

// Does call i's result change with the reduction order (ring vs sequential, or reduce's chain vs
// group order) in an element that is not NaN in both? Seeds where it does make a reduction done
// in the wrong order fail the bitwise comparison; most random data cannot tell orders apart.
bool order_visible(const Program& p, std::size_t i) {
  const Call& c = p.calls[i];
  if (!is_floating(c.dtype)) return false;
  return visit_dtype(c.dtype, [&](auto t) -> bool {
    using T = decltype(t);
    model::Bufs<T> in;
    for (const auto& b : p.inputs[i]) {
      std::vector<T> v(b.size() / sizeof(T));
      if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
      in.push_back(std::move(v));
    }
    auto differ = [](const std::vector<T>& a, const std::vector<T>& b) {
      for (std::size_t k = 0; k < a.size(); ++k) {
        if (model::is_nan(a[k]) && model::is_nan(b[k])) continue;
        if (model::bits_of(a[k]) != model::bits_of(b[k])) return true;
      }
      return false;
    };
    const model::Op op = model_op(c.op);
    const int n = static_cast<int>(in.size());
    switch (c.kind) {
      case Kind::all_reduce:
        return differ(model::all_reduce(in, op, model::Order::ring)[0],
                      model::all_reduce(in, op, model::Order::sequential)[0]);
      case Kind::reduce_scatter: {
        const auto a = model::reduce_scatter(in, c.counts, op, model::Order::ring);
        const auto b = model::reduce_scatter(in, c.counts, op, model::Order::sequential);
        for (std::size_t k = 0; k < a.size(); ++k) {
          if (differ(a[k], b[k])) return true;
        }
        return false;
      }
      case Kind::reduce:
        return c.root != n - 1 &&
               differ(model::reduce(in, op, c.root), model::reduce(in, op, n - 1));
      default: return false;
    }
  });
}

Pred order_sensitive(Kind k, ReduceOp op, DType t) {
  return [=](const Program& p, const Prediction& pr) {
    if (p.deviation != Deviation::none || pr.expect != Expect::success || p.calls.size() > 3) {
      return false;
    }
    for (std::size_t i = 0; i < p.calls.size(); ++i) {
      const Call& c = p.calls[i];
      if (c.kind == k && c.op == op && c.dtype == t && order_visible(p, i)) return true;
    }
    return false;
  };
}

bool has_zero(const std::vector<std::size_t>& v) {
  return std::find(v.begin(), v.end(), 0) != v.end();
}

std::vector<Target> targets() {
  std::vector<Target> t;
  t.push_back({"ok-barrier", matched(Kind::barrier, 3)});
  t.push_back({"ok-broadcast", matched(Kind::broadcast, 3)});
  t.push_back({"ok-reduce", matched(Kind::reduce, 3)});
  t.push_back(
      {"ok-reduce-in-place", matched(Kind::reduce, 2, [](auto&, auto& c) { return c.in_place; })});
  for (ReduceOp op : all_reduce_ops) {
    for (Algorithm a : {Algorithm::ring, Algorithm::sequential}) {
      t.push_back({"ok-all_reduce-" + std::string(name(a)) + "-" + std::string(name(op)),
                   matched(Kind::all_reduce, 3, [=](auto&, auto& c) {
                     return c.op == op && c.algo == a && c.count >= 3 &&
                            (c.dtype == DType::float32 || c.dtype == DType::bfloat16 ||
                             c.dtype == DType::float16 || c.dtype == DType::float64 ||
                             op != ReduceOp::avg);
                   })});
    }
  }
  t.push_back({"ok-all_reduce-in-place-float16", matched(Kind::all_reduce, 2, [](auto&, auto& c) {
                 return c.in_place && c.dtype == DType::float16;
               })});
  t.push_back({"ok-all_gather-uneven-zero",
               matched(Kind::all_gather, 3, [](auto&, auto& c) { return has_zero(c.counts); })});
  t.push_back({"ok-all_gather-in-place",
               matched(Kind::all_gather, 2, [](auto&, auto& c) { return c.in_place; })});
  t.push_back(
      {"ok-reduce_scatter-uneven-zero",
       matched(Kind::reduce_scatter, 3, [](auto&, auto& c) { return has_zero(c.counts); })});
  t.push_back({"ok-reduce_scatter-in-place",
               matched(Kind::reduce_scatter, 2, [](auto&, auto& c) { return c.in_place; })});
  t.push_back({"ok-all_to_all", matched(Kind::all_to_all, 3)});
  t.push_back({"ok-gather", matched(Kind::gather, 3)});
  t.push_back({"ok-scatter", matched(Kind::scatter, 3)});
  t.push_back(
      {"ok-ring_shift", matched(Kind::ring_shift, 3, [](auto&, auto& c) { return c.shift > 0; })});
  t.push_back({"ok-ring_shift-negative",
               matched(Kind::ring_shift, 3, [](auto&, auto& c) { return c.shift < 0; })});
  t.push_back({"ok-send_recv", matched(Kind::send_recv, 2)});
  t.push_back({"ok-nested-group", matched(Kind::all_reduce, 2, [](auto& p, auto& c) {
                 return p.groups[static_cast<std::size_t>(c.group)].parent > 0;
               })});
  t.push_back({"ok-special-values", matched(Kind::all_reduce, 2, [](auto&, auto& c) {
                 return c.values == Values::special && c.count >= 8;
               })});
  t.push_back({"ok-one-rank", [](const Program& p, const Prediction& pr) {
                 return p.world == 1 && pr.expect == Expect::success && p.calls.size() >= 4;
               }});
  t.push_back({"ok-eight-ranks-eight-calls", [](const Program& p, const Prediction& pr) {
                 return p.world == 8 && pr.expect == Expect::success && p.calls.size() == 8 &&
                        p.groups.size() >= 3;
               }});

  // Data on which the documented reduction order is visible in the result's bits.
  for (DType d : {DType::float64, DType::float32, DType::bfloat16, DType::float16}) {
    t.push_back({"order-all_reduce-sum-" + std::string(name(d)),
                 order_sensitive(Kind::all_reduce, ReduceOp::sum, d)});
  }
  t.push_back({"order-all_reduce-avg-float32",
               order_sensitive(Kind::all_reduce, ReduceOp::avg, DType::float32)});
  t.push_back({"order-all_reduce-product-float16",
               order_sensitive(Kind::all_reduce, ReduceOp::product, DType::float16)});
  t.push_back({"order-all_reduce-max-bfloat16",
               order_sensitive(Kind::all_reduce, ReduceOp::max, DType::bfloat16)});
  t.push_back({"order-all_reduce-min-float64",
               order_sensitive(Kind::all_reduce, ReduceOp::min, DType::float64)});
  t.push_back({"order-reduce_scatter-sum-float32",
               order_sensitive(Kind::reduce_scatter, ReduceOp::sum, DType::float32)});
  t.push_back(
      {"order-reduce-sum-float64", order_sensitive(Kind::reduce, ReduceOp::sum, DType::float64)});

  t.push_back({"bad-kind", deviating_kind(Deviation::kind, Kind::all_reduce)});
  t.push_back({"bad-kind-barrier", deviating_kind(Deviation::kind, Kind::barrier)});
  t.push_back({"bad-count-all_gather", deviating_kind(Deviation::count, Kind::all_gather)});
  t.push_back({"bad-count-all_to_all", deviating_kind(Deviation::count, Kind::all_to_all)});
  t.push_back({"bad-count-ring_shift", deviating_kind(Deviation::count, Kind::ring_shift)});
  t.push_back({"bad-count-send_recv", deviating_kind(Deviation::count, Kind::send_recv)});
  t.push_back({"bad-root", deviating_kind(Deviation::root, Kind::gather)});
  t.push_back({"bad-dtype", deviating_kind(Deviation::dtype, Kind::broadcast)});
  t.push_back({"bad-reduce_op", deviating_kind(Deviation::reduce_op, Kind::reduce_scatter)});
  t.push_back({"bad-algorithm", deviating_kind(Deviation::algorithm, Kind::all_reduce)});
  t.push_back({"bad-tag", deviating_kind(Deviation::tag, Kind::send_recv)});
  t.push_back({"bad-early_return-deadlock", deviating(Deviation::early_return, Expect::deadlock)});
  t.push_back(
      {"bad-early_return-harmless", deviating(Deviation::early_return, Expect::success,
                                              [](const Program& p) { return p.world >= 2; })});
  t.push_back({"bad-throws", deviating(Deviation::throws, Expect::injected)});
  t.push_back({"bad-usage_local-send_recv", [](const Program& p, const Prediction& pr) {
                 return p.deviation == Deviation::usage_local && pr.expect == Expect::usage &&
                        p.calls[static_cast<std::size_t>(p.deviant_call)].kind == Kind::send_recv;
               }});
  t.push_back({"bad-usage_local", deviating(Deviation::usage_local, Expect::usage)});
  t.push_back(
      {"bad-usage_all-root", deviating(Deviation::usage_all, Expect::usage, [](const Program& p) {
         return p.deviation_text.find("root") != std::string::npos;
       })});
  t.push_back({"bad-usage_all-avg-int",
               deviating(Deviation::usage_all, Expect::usage, [](const Program& p) {
                 return p.deviation_text.find("avg") != std::string::npos;
               })});
  t.push_back(
      {"bad-usage_all-counts", deviating(Deviation::usage_all, Expect::usage, [](const Program& p) {
         return p.deviation_text.find("p + 1") != std::string::npos;
       })});
  t.push_back({"bad-usage_group", deviating(Deviation::usage_group, Expect::usage)});
  t.push_back({"bad-wrong_group-mismatch", deviating(Deviation::wrong_group, Expect::mismatch)});
  t.push_back({"bad-wrong_group-deadlock", deviating(Deviation::wrong_group, Expect::deadlock)});
  return t;
}

// --check: every target's checked-in seed still decodes to a program that meets the target.
int check(const std::filesystem::path& dir) {
  int stale = 0;
  for (const Target& target : targets()) {
    const auto f = dir / target.name;
    const auto bytes = read_seed(f);
    if (!bytes) {
      ++stale;
      continue;
    }
    const Program prog = decode(*bytes);
    if (!target.ok(prog, predict(prog))) {
      std::fprintf(stderr, "seed %s no longer decodes to what its name says:\n%s", f.c_str(),
                   describe(prog).c_str());
      ++stale;
    }
  }
  if (stale != 0) {
    std::fprintf(stderr,
                 "%d stale seeds. After a decoder change regenerate them: collectives_corpus %s "
                 "(keeps regression-* files), and review the listing.\n",
                 stale, dir.c_str());
    return 1;
  }
  std::printf("all %zu seeds in %s meet their targets\n", targets().size(), dir.c_str());
  return 0;
}

int write(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  int missing = 0;
  for (const Target& target : targets()) {
    // Each target draws from its own stream, so adding a target leaves the others' seeds alone.
    SplitMix64 rng{seed ^ fnv1a(target.name)};
    bool found = false;
    for (int attempt = 0; attempt < 2'000'000 && !found; ++attempt) {
      // Short inputs keep the corpus small; the decoder fills missing values itself.
      std::vector<std::uint8_t> bytes(16 + rng.next() % 112);
      for (auto& b : bytes) b = static_cast<std::uint8_t>(rng.next());
      const Program prog = decode(bytes);
      if (!target.ok(prog, predict(prog))) continue;
      write_seed(dir / target.name, bytes);
      std::printf("%-40s %3zu bytes  %s", target.name.c_str(), bytes.size(),
                  describe(prog).c_str());
      found = true;
    }
    if (!found) {
      std::fprintf(stderr, "no input found for target %s\n", target.name.c_str());
      ++missing;
    }
  }
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  return missing == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return shardcheck::fuzz::corpus_main(argc, argv, write, check); }
