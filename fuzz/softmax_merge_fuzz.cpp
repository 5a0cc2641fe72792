// libFuzzer harness for the softmax merge (lib/ops/softmax_merge/softmax_merge.hpp).
//
// Each input decodes (softmax_merge_input.hpp) into float32 or float64 partials whose values
// are RAW BITS (NaN payloads, ±inf, subnormals, ±max, gaps far beyond exp's range), small
// integers or comparable lse, 0–6 partials of 1–4 rows and width 0–4, a grouping and a ring
// start. The harness merges them five ways and checks each against the high-precision merge
// (reference/softmax_merge/softmax_merge.hpp, in binary128: Binary128, binary128.hpp, the
// reference's own 113-bit format at 30-70x the speed of its clang fallback) and its a-priori
// bound:
//   n-way          softmax_merge(parts)
//   reversed       softmax_merge(parts in reverse order)
//   ring chain     merge_into around the ring from the start rank (start, start−1, ...), the
//                  accumulator starting as the local partial (out 0 on its empty rows, as the
//                  attention kernel returns it) or empty (the identity); each step
//                  bounded as a nested merge of the previous result and the next partial
//   nested         softmax_merge of the groups' softmax_merge results (empty groups included)
//   attention      merge_attention_into / softmax_merge_attention on the same data laid out as
//                  [1, rows, 1, width] / [1, 1, rows]: bit-identical to the row layout
// Per row, with the reference's value: NaN → lse and out NaN; +inf → lse +inf, out NaN; −inf
// (every part empty) → lse −inf, out +0.0 exactly; finite → lse finite and within bound. Per out
// element: reference finite → never NaN, within bound (±inf only if |exact| + bound reaches A's
// overflow threshold); reference NaN → NaN; reference ±inf (an inf in a non-empty out) → the
// same inf or NaN (the documented convention).
// A violation prints the input, the merge, the element, the value, the reference and the bound,
// then aborts, so libFuzzer keeps the input. SHARDCHECK_FUZZ_VERBOSE=1 prints every input.
#include "binary128.hpp"
#include "harness_support.hpp"
#include "softmax_merge_input.hpp"

#include "ops/softmax_merge/softmax_merge.hpp"
#include "reference/softmax_merge/softmax_merge.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace shardcheck::fuzz {
namespace {

using hp = Binary128;
using Rows = reference::SoftmaxRows<hp>;

bool verbose() {
  static const bool v = [] {
    const char* e = std::getenv("SHARDCHECK_FUZZ_VERBOSE");
    return e != nullptr && *e != '\0' && *e != '0';
  }();
  return v;
}

[[noreturn]] void violation(const MergeInput& in, const std::string& what) {
  report_violation("softmax_merge", describe(in), what);
}

template <class A>
struct Harness {
  const MergeInput& in;
  std::vector<SoftmaxPartial<A>> parts;
  std::vector<Rows> leaves;  // the same values in hp, exact
  reference::Format f = reference::format_of<A>();
  double omega = static_cast<double>(reference::overflow_threshold<hp>(reference::format_of<A>()));

  explicit Harness(const MergeInput& input) : in(input) {
    for (std::size_t j = 0; j < in.parts; ++j) {
      SoftmaxPartial<A> p{Tensor<A>(Shape{in.rows, in.width}), Tensor<A>(Shape{in.rows})};
      for (std::size_t i = 0; i < in.rows; ++i) {
        p.lse[i] = static_cast<A>(in.lse_at(j, i));
        for (std::size_t e = 0; e < in.width; ++e) p.out(i, e) = static_cast<A>(in.out_at(j, i, e));
      }
      leaves.push_back(reference::rows_of<hp>(p.out, p.lse));
      parts.push_back(std::move(p));
    }
  }

  Rows bounded(const std::vector<Rows>& inputs) const {
    return reference::softmax_merge<hp>(inputs, in.rows, in.width, &f);
  }
  Rows exact(const std::vector<Rows>& inputs) const {
    return reference::softmax_merge<hp>(inputs, in.rows, in.width, nullptr);
  }

  // got against value (the exact merge, with its own error in err) under bound.err.
  void judge(const std::string& how, const SoftmaxPartial<A>& got, const Rows& value,
             const Rows& bound) const {
    if (got.out.shape() != Shape({in.rows, in.width}) || got.lse.shape() != Shape({in.rows})) {
      violation(in, how + ": result has out " + format_shape(got.out.shape()) + " and lse " +
                        format_shape(got.lse.shape()));
    }
    constexpr double inf = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < in.rows; ++i) {
      const auto rl = static_cast<double>(value.lse[i]);
      const auto gl = static_cast<double>(got.lse[i]);
      // Built only for a violation: a string per row and element costs more than the check
      // under ASan (each allocation records its stack).
      const auto at = [&] { return how + ", row " + std::to_string(i) + ": "; };
      if (std::isnan(rl)) {
        if (!std::isnan(gl))
          violation(in, at() + "lse " + num(gl) + " where the reference is NaN (a NaN lse)");
        for (std::size_t e = 0; e < in.width; ++e) {
          if (!std::isnan(static_cast<double>(got.out(i, e))))
            violation(in, at() + "out not NaN for a NaN lse");
        }
        continue;
      }
      if (rl == inf) {
        if (gl != inf) violation(in, at() + "lse " + num(gl) + " where an input lse is +inf");
        for (std::size_t e = 0; e < in.width; ++e) {
          if (!std::isnan(static_cast<double>(got.out(i, e))))
            violation(in, at() + "out not NaN for a +inf lse");
        }
        continue;
      }
      if (rl == -inf) {
        if (gl != -inf)
          violation(in, at() + "lse " + num(gl) + " for an all-empty row (want -inf)");
        for (std::size_t e = 0; e < in.width; ++e) {
          const A v = got.out(i, e);
          if (!(v == A(0) && !std::signbit(v))) {
            violation(in, at() + "out " + num(static_cast<double>(v)) +
                              " for an all-empty row (want +0)");
          }
        }
        continue;
      }
      // Finite reference lse.
      const hp lb = bound.lerr(i) + value.lerr(i);
      if (!std::isfinite(gl)) {
        violation(in, at() + "lse " + num(gl) + " but the reference is finite " + num(rl));
      }
      if (abs(hp(gl) - value.lse[i]) > lb) {
        violation(in, at() + "lse " + num(gl) + " is outside the bound: reference " + num(rl) +
                          ", bound " + num(static_cast<double>(lb)));
      }
      for (std::size_t e = 0; e < in.width; ++e) {
        const auto g = static_cast<double>(got.out(i, e));
        const auto r = static_cast<double>(value.out(i, e));
        const auto el = [&] { return at() + "out[" + std::to_string(e) + "] "; };
        if (std::isnan(r)) {
          if (!std::isnan(g)) violation(in, el() + num(g) + " where the reference is NaN");
          continue;
        }
        if (std::isinf(r)) {
          if (!(std::isnan(g) || g == r))
            violation(in, el() + num(g) + " where the reference is " + num(r));
          continue;
        }
        const hp ob = bound.oerr(i, e) + value.oerr(i, e);
        if (std::isnan(g)) violation(in, el() + "is NaN but the reference is finite " + num(r));
        if (std::isinf(g)) {
          if (!(abs(value.out(i, e)) + ob >= hp(omega) && (g > 0) == (r > 0))) {
            violation(in, el() + num(g) + " overflowed but the reference " + num(r) + " +- bound " +
                              num(static_cast<double>(ob)) + " cannot");
          }
          continue;
        }
        if (abs(hp(g) - value.out(i, e)) > ob) {
          violation(in, el() + num(g) + " is outside the bound: reference " + num(r) + ", bound " +
                            num(static_cast<double>(ob)) + ", error " +
                            num(static_cast<double>(abs(hp(g) - value.out(i, e)))));
        }
      }
    }
  }

  void bit_identical(const std::string& how, const A* a, const A* b, std::size_t n) const {
    if (n != 0 && std::memcmp(a, b, n * sizeof(A)) != 0) {
      violation(in, how + ": not bit-identical to the row layout's result");
    }
  }

  void run() const {
    const std::size_t rows = in.rows, width = in.width, n = in.parts;
    const Rows all = exact(leaves);
    // n-way, and reversed.
    const auto nway = softmax_merge<A>(parts, rows, width);
    judge("n-way", nway, all, bounded(leaves));
    std::vector<SoftmaxPartial<A>> rev(parts.rbegin(), parts.rend());
    std::vector<Rows> rev_rows(leaves.rbegin(), leaves.rend());
    judge("reversed n-way", softmax_merge<A>(rev, rows, width), all, bounded(rev_rows));
    // Ring chain from the start rank.
    SoftmaxPartial<A> acc;
    Rows acc_rows;
    std::size_t first = 0;
    if (in.ring_from_empty || n == 0) {
      acc = empty_softmax_partial<A>(rows, width);
      acc_rows = reference::rows_of<hp>(acc.out, acc.lse);
    } else {
      // The local partial as the attention kernel returns it: out 0 on its empty rows (the
      // partials merged into it keep whatever the input holds there).
      acc = parts[in.ring_start];
      for (std::size_t i = 0; i < rows; ++i) {
        if (acc.lse[i] != -std::numeric_limits<A>::infinity()) continue;
        for (std::size_t e = 0; e < width; ++e) acc.out(i, e) = A(0);
      }
      acc_rows = reference::rows_of<hp>(acc.out, acc.lse);
      first = 1;
    }
    // The same chain on the attention layout [1, rows, 1, width] / [1, 1, rows].
    Tensor<A> att_out(Shape{1, rows, 1, width}), att_lse(Shape{1, 1, rows});
    std::copy(acc.out.values().begin(), acc.out.values().end(), att_out.values().begin());
    std::copy(acc.lse.values().begin(), acc.lse.values().end(), att_lse.values().begin());
    for (std::size_t k = first; k < n; ++k) {
      const std::size_t j = (in.ring_start + n - k) % n;
      const Rows step = bounded({acc_rows, leaves[j]});
      merge_into(acc, parts[j]);
      judge("ring chain step " + std::to_string(k) + " (part " + std::to_string(j) + ")", acc,
            exact({acc_rows, leaves[j]}), step);
      acc_rows = reference::rows_of<hp>(acc.out, acc.lse, &step);
      const Tensor<A> o(Shape{1, rows, 1, width}, parts[j].out.values());
      const Tensor<A> l(Shape{1, 1, rows}, parts[j].lse.values());
      merge_attention_into(att_out, att_lse, o, l);
    }
    // A ring of one rank that starts from its local partial merges nothing: its result is that
    // partial as given (no convention applies); every other chain is a merge.
    if (first == 0 || n > 1) judge("ring chain", acc, all, acc_rows);
    bit_identical("merge_attention_into chain (out)", att_out.data(), acc.out.data(),
                  acc.out.size());
    bit_identical("merge_attention_into chain (lse)", att_lse.data(), acc.lse.data(),
                  acc.lse.size());
    // Nested: groups 0..3 (some empty), each merged, then the results.
    std::vector<SoftmaxPartial<A>> group_results;
    std::vector<Rows> group_rows;
    for (std::size_t g = 0; g < 4; ++g) {
      std::vector<SoftmaxPartial<A>> sub;
      std::vector<Rows> sub_rows;
      for (std::size_t j = 0; j < n; ++j) {
        if (in.group_of_part[j] != g) continue;
        sub.push_back(parts[j]);
        sub_rows.push_back(leaves[j]);
      }
      auto r = softmax_merge<A>(sub, rows, width);
      const Rows b = bounded(sub_rows);
      judge("group " + std::to_string(g), r, exact(sub_rows), b);
      group_rows.push_back(reference::rows_of<hp>(r.out, r.lse, &b));
      group_results.push_back(std::move(r));
    }
    judge("nested", softmax_merge<A>(group_results, rows, width), all, bounded(group_rows));
    // softmax_merge_attention on the attention layout.
    if (n != 0) {
      std::vector<SoftmaxPartial<A>> att;
      for (const auto& p : parts) {
        att.push_back({Tensor<A>(Shape{1, rows, 1, width}, p.out.values()),
                       Tensor<A>(Shape{1, 1, rows}, p.lse.values())});
      }
      const auto m = softmax_merge_attention<A>(att);
      bit_identical("softmax_merge_attention (out)", m.out.data(), nway.out.data(),
                    nway.out.size());
      bit_identical("softmax_merge_attention (lse)", m.lse.data(), nway.lse.data(),
                    nway.lse.size());
    }
  }
};

}  // namespace
}  // namespace shardcheck::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardcheck::fuzz;
  const MergeInput in = decode_merge_input(data, size);
  if (verbose()) std::fprintf(stderr, "%s", describe(in).c_str());
  if (in.is_float) {
    Harness<float>(in).run();
  } else {
    Harness<double>(in).run();
  }
  return 0;
}
