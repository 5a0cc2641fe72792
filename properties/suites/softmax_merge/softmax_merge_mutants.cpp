// The mutant catalog of the softmax_merge suite. One hand-written merge (n-way and two-way),
// correct, with a switch per bug; each mutant turns one on. Every bug here has shipped in an
// attention combine somewhere or is the obvious slip when writing one.
#include "suites/softmax_merge/softmax_merge_mutants.hpp"

#include "suites/softmax_merge/softmax_merge_impl.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

namespace shardcheck::check {
namespace {

enum class Bug {
  average_outputs,
  local_lse_weights,
  no_max_shift,
  te_log1p_two_way,
  sigmoid_two_way,
  no_normalization,
  empty_out_leaks,
  unguarded_all_empty,
  fa2_empty_lse_plus_inf,
  lse_missing_max,
  chain_lse_not_updated,
};

template <class A>
constexpr A kInf = std::numeric_limits<A>::infinity();
template <class A>
constexpr A kNaN = std::numeric_limits<A>::quiet_NaN();

template <Bug B>
constexpr bool two_way_bug =
    B == Bug::te_log1p_two_way || B == Bug::sigmoid_two_way || B == Bug::chain_lse_not_updated;

// One row of the n-way merge with bug B; parts' outs are rows of `width` values.
template <Bug B, class A>
void nway_row(const std::vector<const A*>& outs, const std::vector<A>& lses, std::size_t width,
              A* dst, A& dst_lse) {
  const std::size_t n = lses.size();
  bool nan = false, pinf = false;
  A m = -kInf<A>;
  for (const A l : lses) {
    if (std::isnan(l)) nan = true;
    else if (l == kInf<A>) pinf = true;
    else if (l > m) m = l;
  }
  if (nan || pinf) {
    std::fill(dst, dst + width, kNaN<A>);
    dst_lse = nan ? kNaN<A> : kInf<A>;
    return;
  }
  if (m == -kInf<A>) {
    if constexpr (B == Bug::unguarded_all_empty) {
      std::fill(dst, dst + width, kNaN<A>);  // exp(-inf - (-inf)) = exp(NaN)
      dst_lse = kNaN<A>;
    } else {
      std::fill(dst, dst + width, A(0));
      dst_lse = B == Bug::fa2_empty_lse_plus_inf ? kInf<A> : -kInf<A>;
    }
    return;
  }
  const A shift = B == Bug::no_max_shift ? A(0) : m;
  std::vector<A> w(n, A(0));
  std::vector<bool> use(n, false);
  A l = 0;
  std::size_t count = 0;
  for (std::size_t j = 0; j < n; ++j) {
    use[j] = lses[j] != -kInf<A> || B == Bug::empty_out_leaks;
    if (!use[j]) continue;
    w[j] = std::exp(lses[j] - shift);
    l += w[j];
    if (lses[j] != -kInf<A>) ++count;
  }
  dst_lse = B == Bug::lse_missing_max ? std::log(l) : A(shift + std::log(l));
  std::vector<A> coef(n, A(0));
  for (std::size_t j = 0; j < n; ++j) {
    if (!use[j]) continue;
    if constexpr (B == Bug::average_outputs) {
      coef[j] = lses[j] == -kInf<A> ? A(0) : A(1) / static_cast<A>(count);
    } else if constexpr (B == Bug::no_normalization) {
      coef[j] = w[j];
    } else if constexpr (B == Bug::local_lse_weights) {
      coef[j] = std::exp(lses[j] - lses[0]);
    } else {
      coef[j] = w[j] / l;
    }
  }
  for (std::size_t e = 0; e < width; ++e) {
    A acc = 0;
    for (std::size_t j = 0; j < n; ++j) {
      if (use[j]) acc += coef[j] * outs[j][e];
    }
    dst[e] = acc;
  }
}

// One two-way step acc <- (acc, part) with bug B (two-way bugs only).
template <Bug B, class A>
void two_way_row(A* acc, A& acc_lse, const A* part, A part_lse, std::size_t width) {
  const A la = acc_lse, lb = part_lse;
  if constexpr (B == Bug::te_log1p_two_way) {
    const A mx = std::max(la, lb), mn = std::min(la, lb);
    const A lse = mx + std::log1p(std::exp(mn - mx));
    for (std::size_t e = 0; e < width; ++e) {
      acc[e] = acc[e] * std::exp(la - lse) + part[e] * std::exp(lb - lse);
    }
    acc_lse = lse;
  } else if constexpr (B == Bug::sigmoid_two_way) {
    const A s = A(1) / (A(1) + std::exp(-(lb - la)));  // sigmoid(lb - la)
    const A x = la - lb;                               // logsigmoid(x), stable form
    const A logsig = std::min(x, A(0)) - std::log1p(std::exp(-std::fabs(x)));
    for (std::size_t e = 0; e < width; ++e) acc[e] = acc[e] - s * (acc[e] - part[e]);
    acc_lse = la - logsig;
  } else {
    // chain_lse_not_updated: the correct n-way row of the two, lse kept.
    std::vector<const A*> outs{acc, part};
    std::vector<A> lses{la, lb};
    std::vector<A> out(width);
    A lse = 0;
    nway_row<B, A>(outs, lses, width, out.data(), lse);  // no switch of nway_row is B
    std::copy(out.begin(), out.end(), acc);
  }
}

template <Bug B>
struct MutantMerge {
  template <class A>
  void merge_into(SoftmaxPartial<A>& acc, const SoftmaxPartial<A>& part) const {
    const std::size_t rows = acc.lse.size(), width = acc.out.ndim() == 2 ? acc.out.dim(1) : 0;
    for (std::size_t i = 0; i < rows; ++i) {
      A* a = acc.out.data() + i * width;
      const A* p = part.out.data() + i * width;
      if constexpr (two_way_bug<B>) {
        two_way_row<B, A>(a, acc.lse[i], p, part.lse[i], width);
      } else {
        std::vector<A> out(width);
        A lse = 0;
        nway_row<B, A>({a, p}, {acc.lse[i], part.lse[i]}, width, out.data(), lse);
        std::copy(out.begin(), out.end(), a);
        acc.lse[i] = lse;
      }
    }
  }

  template <class A>
  SoftmaxPartial<A> merge(std::span<const SoftmaxPartial<A>> parts, std::size_t rows,
                          std::size_t width) const {
    if constexpr (two_way_bug<B>) {
      // As the ring implementations do: start from the first block, fold the rest in.
      if (parts.empty()) return empty_softmax_partial<A>(rows, width);
      SoftmaxPartial<A> acc = parts[0];
      for (std::size_t j = 1; j < parts.size(); ++j) merge_into(acc, parts[j]);
      return acc;
    } else {
      SoftmaxPartial<A> dst = empty_softmax_partial<A>(rows, width);
      std::vector<const A*> outs(parts.size());
      std::vector<A> lses(parts.size());
      for (std::size_t i = 0; i < rows; ++i) {
        for (std::size_t j = 0; j < parts.size(); ++j) {
          outs[j] = parts[j].out.data() + i * width;
          lses[j] = parts[j].lse[i];
        }
        nway_row<B, A>(outs, lses, width, dst.out.data() + i * width, dst.lse[i]);
      }
      return dst;
    }
  }
};

template <Bug B>
constexpr auto& make = make_mutant<SoftmaxMergeImplementation, SoftmaxMergeAdapter<MutantMerge<B>>>;

// The catalog: each bug's name (as "mutant:<name>") and its story.
constexpr Mutant<SoftmaxMergeImplementation> catalog[] = {
    {"average-outputs",
     "the partial outputs are averaged (out = mean_j out_j over the non-empty parts) instead of "
     "weighted by exp(lse_j - lse): right only when every part holds the same softmax mass",
     &make<Bug::average_outputs>, false},
    {"local-lse-weights",
     "each partial is rescaled by exp(lse_j - lse_local) relative to the first (local) "
     "partial's lse and summed, never renormalized to the global lse: the local block's "
     "normalization leaks into the result (and an empty local block gives exp(+inf))",
     &make<Bug::local_lse_weights>, false},
    {"no-max-shift",
     "w_j = exp(lse_j) without subtracting the max: overflows to inf (inf/inf = NaN) once an "
     "lse exceeds 88.7 in float32 or 709.8 in float64, and underflows to 0/0 for very "
     "negative rows",
     &make<Bug::no_max_shift>, false},
    {"te-log1p-two-way",
     "Transformer Engine's two-way form, chained from the first partial: lse = max + "
     "log1p(exp(min - max)), out = out_a*exp(lse_a - lse) + out_b*exp(lse_b - lse); "
     "min - max is NaN when both are -inf (an empty accumulator meets an empty block), and an "
     "empty block's NaN out leaks through 0*NaN",
     &make<Bug::te_log1p_two_way>, false, /*two_way_tree=*/true},
    {"ring-flash-sigmoid",
     "ring-flash-attention's form, chained from the first partial: out = out - sigmoid(lse_b - "
     "lse)*(out - out_b), lse = lse - logsigmoid(lse - lse_b): NaN as soon as the "
     "accumulator's lse is -inf (-inf - logsigmoid(-inf) = -inf + inf)",
     &make<Bug::sigmoid_two_way>, false, /*two_way_tree=*/true},
    {"no-normalization",
     "out = sum_j w_j*out_j with w_j = exp(lse_j - m): the division by l = sum_j w_j is "
     "forgotten (right only when one part holds all the mass)",
     &make<Bug::no_normalization>, false},
    {"empty-out-leaks",
     "empty partials are not skipped: their weight exp(-inf - m) = 0 multiplies their out, so "
     "a NaN or inf an empty block left there becomes NaN in the result",
     &make<Bug::empty_out_leaks>, false},
    {"unguarded-all-empty",
     "no guard for m = -inf: a row whose every part is empty computes exp(-inf - (-inf)) = "
     "exp(NaN) and returns NaN instead of out 0, lse -inf",
     &make<Bug::unguarded_all_empty>, false},
    {"fa2-empty-lse-plus-inf",
     "FlashAttention 2's convention for an empty row, lse = +inf, where ours (FlashAttention "
     "3's) is -inf, the identity of log-sum-exp: a later merge with +inf gives NaN",
     &make<Bug::fa2_empty_lse_plus_inf>, false},
    {"lse-missing-max",
     "lse = log(l) without adding the max back (the shift m is forgotten in the lse while out "
     "is right)",
     &make<Bug::lse_missing_max>, false},
    {"chain-lse-not-updated",
     "the two-way step updates the accumulator's out but leaves its lse as it was, so every "
     "later ring step weights the accumulator with a stale lse (the n-way merge is the chain)",
     &make<Bug::chain_lse_not_updated>, false, /*two_way_tree=*/true},
};

}  // namespace

std::span<const Mutant<SoftmaxMergeImplementation>> softmax_merge_mutants() { return catalog; }

}  // namespace shardcheck::check
