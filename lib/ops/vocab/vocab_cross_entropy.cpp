// Vocabulary-parallel cross-entropy (ops/vocab/vocab_cross_entropy.hpp).
//
// Arithmetic decisions the header leaves to the implementation (all in A = acc_t<T>; the bound
// in reference/vocab/vocab_cross_entropy_bound.hpp follows these steps one by one). The loss is
// PyTorch's (1 − ε)·c_y·(−log p_y) + (ε/V)·Σ_v c_v·(−log p_v) with −log p_v = log S + (m − z_v)
// and log S gathered: l = K·log S + k·(m − z_y) + Σ_v w_v·(m − z_v), K = k + Σ_v w_v. Each
// product with m − z_v is formed as fl(fl(x·m) − fl(x·z_v)), never from m − z_v itself (which
// overflows for logits ±max), and without class weights every term is ≥ 0, so no intermediate
// or partial sum exceeds the loss:
//   - local max over the shard (−inf on a rank with no columns), all_reduce(max): exact;
//   - d_v = z_v − m (one rounding), e_v = exp(d_v) (the C library's exp in A), S_r = Σ e_v in
//     column order;
//   - q = fl(ε/V); w_v = q without class weights, fl(q·c_v) with; k = 1 − ε (exact) without,
//     fl((1 − ε)·c_y) with; the difference r(x, z) = fl(fl(x·m) − fl(x·z)) (x·m exact for
//     x = 1 or 0);
//   - T = r(k, z_y) on the target's owner (0 elsewhere); Q_r = Σ r(w_v, z_v) in column order
//     (ε > 0 only);
//   - one all_reduce(sum) of [S_r | T | Q_r] (any order);
//   - L = log(S); without class weights P = fl(L + T); with, C_q = Σ_v w_v in index order
//     (every rank, the same order; ε > 0 only, else C_q = 0), K = fl(k + C_q), P =
//     fl(fl(K·L) + T); l = fl(P + Q) (ε > 0), else l = P;
//   - reduction none: loss_t = fl(ω_t·l) with token weights, else l;
//   - sum and mean with token weights: the weights are scaled by 2^−e, e = the exponent of
//     max |ω_t| over the non-ignored tokens (frexp: max |ω_t|·2^−e ∈ [1/2, 1)), ω'_t =
//     ldexp(ω_t, −e) (exact unless subnormal), loss'_t = fl(ω'_t·l); without token weights
//     ω'_t = 1, e = 0, loss'_t = l;
//   - N' = Σ_t loss'_t in token order; sum: ldexp(N', e); mean: N'/D', D' = Σ_t fl(ω'_t·c_{y_t})
//     in token order over non-ignored tokens (D' = N, exact, without weights; 0 when D' = 0);
//     rounded once to T;
//   - backward: p = exp(z_v − m) / S; without class weights c = ε/V (+ (1 − ε) at the target),
//     d = p − c; with class weights K = fl(k + C_q) (as the forward), c = fl(q·c_v) (+ k at
//     the target), d = K·p − c; b = dloss[t] (none), dloss[0] (sum), fl(dloss[0]/D') (mean);
//     g = fl(fl(d·b)·ω̃_t), ω̃_t = ω_t (none, sum) or ω'_t (mean), g = fl(d·b) without token
//     weights (each op one rounding; d·b before the weight, so a weight ±max does not overflow
//     where g is finite); mean with D' = 0: g = 0 exactly;
//   - padded vocabulary: a rank's real columns are its first R_r = clamp(V − offset_r, 0, V_r)
//     (the padding [V, V_pad) is the tail of the global columns); every loop above runs over
//     them only, and the gradient's remaining columns stay the zeros they were allocated as.
#include "ops/vocab/vocab_cross_entropy.hpp"

#include "ops/linear/linear_internal.hpp"
#include "ops/vocab/vocab_padding.hpp"
#include "ops/workspace.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace shardcheck {
namespace {

using linear_detail::on_rank;
using linear_detail::pieces;
using linear_detail::str;

bool ignored(const VocabCrossEntropyConfig& cfg, std::int64_t y) {
  return cfg.ignore_index && y == *cfg.ignore_index;
}

// V, the real vocabulary (real_vocab_size, checked against V_pad = cfg.vocab).
std::size_t real_classes(const std::string& where, const VocabCrossEntropyConfig& cfg) {
  return vocab_detail::checked_real_vocab(where, cfg.real_vocab, cfg.vocab,
                                          "columns of the logits");
}

void check_targets(const std::string& where, const VocabCrossEntropyConfig& cfg,
                   std::span<const std::int64_t> targets) {
  const std::size_t classes = real_classes(where, cfg);
  for (std::size_t t = 0; t < targets.size(); ++t) {
    const std::int64_t y = targets[t];
    if (ignored(cfg, y)) continue;
    if (y >= 0 && static_cast<std::uint64_t>(y) >= classes &&
        static_cast<std::uint64_t>(y) < cfg.vocab) {
      throw UsageError(
          where + "target " + std::to_string(y) + " of token " + str(t) +
          " is a padding column: " + vocab_detail::padding_text(classes, cfg.vocab, "classes") +
          " (no class); pass targets in [0, V), or ignore_index for tokens "
          "without a target");
    }
    if (y < 0 || static_cast<std::uint64_t>(y) >= classes) {
      throw UsageError(where + "target " + std::to_string(y) + " of token " + str(t) +
                       " is out of range for a vocabulary of V = " + str(classes) +
                       (classes != cfg.vocab ? " (padded to V_pad = " + str(cfg.vocab) + ")" : "") +
                       " (and is not ignore_index" +
                       (cfg.ignore_index ? " = " + std::to_string(*cfg.ignore_index) : "") +
                       "); pass targets in [0, V), or ignore_index for tokens without a target");
    }
  }
  if (!(cfg.label_smoothing >= 0 && cfg.label_smoothing <= 1)) {
    throw UsageError(where + "label_smoothing must be in [0, 1] but is " +
                     std::to_string(cfg.label_smoothing) + "; pass 0 for none, 0.1 is typical");
  }
}

void check_weights(const std::string& where, const VocabCrossEntropyConfig& cfg,
                   std::size_t tokens) {
  const std::size_t classes = real_classes(where, cfg);
  if (!cfg.class_weight.empty() && cfg.class_weight.size() != classes) {
    throw UsageError(where + "class_weight has " + str(cfg.class_weight.size()) +
                     " values but the vocabulary has V = " + str(classes) + " classes" +
                     (classes != cfg.vocab ? " (padded to V_pad = " + str(cfg.vocab) +
                                                 " columns; padding columns have no weight)"
                                           : "") +
                     "; pass the full vector of V class weights on every rank (indexed "
                     "by the global column, not the rank's shard), or an empty vector for none");
  }
  if (!cfg.token_weight.empty() && cfg.token_weight.size() != tokens) {
    throw UsageError(where + "token_weight has " + str(cfg.token_weight.size()) +
                     " values but there are " + str(tokens) +
                     " tokens; pass one weight per token (every rank holds all, like the "
                     "targets), or an empty vector for none");
  }
  for (const auto* ws : {&cfg.class_weight, &cfg.token_weight}) {
    for (std::size_t i = 0; i < ws->size(); ++i) {
      if (!std::isfinite((*ws)[i])) {
        throw UsageError(where + (ws == &cfg.class_weight ? "class_weight[" : "token_weight[") +
                         str(i) + "] = " + std::to_string((*ws)[i]) +
                         " is not finite; pass finite weights (0 drops a class or token)");
      }
    }
  }
}

// The weights in A: c_v (class, by global column) and ω_t (token), 1 when not given; w_v =
// fl(q·c_v) (q without class weights) and C_q = Σ_v w_v in index order (the same on every rank
// and in the backward); the token weights' scale exponent e and ω'_t = ldexp(ω_t, −e).
template <class A>
struct Weights {
  Weights(const VocabCrossEntropyConfig& config, std::span<const std::int64_t> targets)
      : cfg(config),
        by_class(!config.class_weight.empty()),
        by_token(!config.token_weight.empty()),
        q(static_cast<A>(config.label_smoothing) / static_cast<A>(real_vocab_size(config))),
        smoothing_total(smoothing_class_total()),
        exponent(scale_exponent(targets)) {}
  const VocabCrossEntropyConfig& cfg;
  bool by_class, by_token;
  A q;                // fl(ε/V)
  A smoothing_total;  // C_q = Σ_v w_v (0 without smoothing or without class weights)
  int exponent;       // e: ω'_t = ω_t·2^−e

  A c(std::size_t v) const { return by_class ? static_cast<A>(cfg.class_weight[v]) : A(1); }
  A omega(std::size_t t) const { return by_token ? static_cast<A>(cfg.token_weight[t]) : A(1); }
  // ω'_t = ldexp(ω_t, −e): |ω'_t| < 1, exact unless subnormal.
  A scaled_omega(std::size_t t) const {
    return by_token ? A(std::ldexp(omega(t), -exponent)) : A(1);
  }
  // w_v: the smoothing weight of column v.
  A w(std::size_t v) const { return by_class ? A(q * c(v)) : q; }
  A smoothing_class_total() const {
    A s(0);
    if (!by_class || !(q > 0)) return s;
    for (std::size_t v = 0; v < cfg.class_weight.size(); ++v) s += w(v);
    return s;
  }
  int scale_exponent(std::span<const std::int64_t> targets) const {
    if (!by_token) return 0;
    A top(0);
    for (std::size_t t = 0; t < targets.size() && t < cfg.token_weight.size(); ++t) {
      if (cfg.ignore_index && targets[t] == *cfg.ignore_index) continue;
      top = std::max(top, A(std::fabs(omega(t))));
    }
    int e = 0;
    if (top > A(0)) std::frexp(top, &e);
    return e;
  }
  // The term of D' for a non-ignored token: fl(ω'_t·c_y).
  A denominator_term(std::size_t t, std::size_t y) const { return scaled_omega(t) * c(y); }
};

// r(x, z) = fl(fl(x·m) − fl(x·z)): x·(m − z) without forming m − z.
template <class A>
A scaled_gap(A x, A m, A z) {
  return A(x * m) - A(x * z);
}

template <class T>
Piece my_piece(const std::string& where, const Communicator& tp, const VocabCrossEntropyConfig& cfg,
               const Tensor<T>& z) {
  if (z.ndim() != 2) {
    throw UsageError(where + "logits_shard must be 2-D [tokens, V_r] but is " +
                     format_shape(z.shape()) +
                     "; pass this rank's columns of the [tokens, V] logits");
  }
  // "V = 5", or "V_pad = 8" when padded (the split divides the padded columns).
  const std::string columns = (cfg.real_vocab ? "V_pad = " : "V = ") + str(cfg.vocab);
  const auto ps = pieces(where, "the " + columns + " columns of the logits", cfg.vocab_split,
                         cfg.vocab, tp.size());
  const Piece mine = ps[static_cast<std::size_t>(tp.rank())];
  if (z.dim(1) != mine.size) {
    throw UsageError(where + "logits_shard is " + format_shape(z.shape()) + " but rank " +
                     std::to_string(tp.rank()) + " owns " + str(mine.size) + " columns of " +
                     columns + " under " + cfg.vocab_split.to_string() +
                     "; pass this rank's columns of the logits under cfg.vocab_split and set "
                     "cfg.vocab to the global (padded) vocabulary size");
  }
  return mine;
}

// How many of a rank's columns are real classes: its first R_r = clamp(V − offset_r, 0, V_r)
// (the padding [V, V_pad) is the tail of the global columns, on whichever ranks hold it).
std::size_t real_columns(const Piece& mine, std::size_t classes) {
  return mine.offset >= classes ? 0 : std::min(mine.size, classes - mine.offset);
}

}  // namespace

template <class T>
VocabCrossEntropyOutput<T> vocab_parallel_cross_entropy(Communicator& tp,
                                                        const VocabCrossEntropyConfig& cfg,
                                                        const Tensor<T>& logits_shard,
                                                        std::span<const std::int64_t> targets) {
  using A = acc_t<T>;
  const std::string where = on_rank("vocab_parallel_cross_entropy", tp);
  const Piece mine = my_piece(where, tp, cfg, logits_shard);
  const std::size_t tokens = logits_shard.dim(0), vr = mine.size;
  if (targets.size() != tokens) {
    throw UsageError(where + "there are " + str(targets.size()) + " targets but logits_shard is " +
                     format_shape(logits_shard.shape()) +
                     "; pass one target per token (every rank holds all the targets)");
  }
  check_targets(where, cfg, targets);
  check_weights(where, cfg, tokens);
  const Weights<A> wt(cfg, targets);
  const bool smooth = cfg.label_smoothing > 0;
  const std::size_t k = smooth ? 3 : 2;
  const std::size_t classes = real_vocab_size(cfg), real = real_columns(mine, classes);

  VocabCrossEntropyOutput<T> out;
  auto& m = out.saved.max;
  m.assign(tokens, -std::numeric_limits<A>::infinity());
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t v = 0; v < real; ++v) {
      m[t] = std::max(m[t], static_cast<A>(logits_shard(t, v)));
    }
  }
  tp.all_reduce(std::span<A>(m), ReduceOp::max, cfg.reduce_algorithm);

  const A one = A(1) - static_cast<A>(cfg.label_smoothing);  // 1 − ε
  // k = 1 − ε, or fl((1 − ε)·c_y) with class weights.
  auto target_factor = [&](std::size_t y) { return wt.by_class ? A(one * wt.c(y)) : one; };

  // The all_reduce buffer [S_r | T on the target's owner | Q_r], zeros, from the workspace.
  auto held_sums = Workspace::of_this_rank().buffer<A>(k * tokens);
  std::vector<A>& sums = *held_sums;
  for (std::size_t t = 0; t < tokens; ++t) {
    A s(0), qs(0);
    for (std::size_t v = 0; v < real; ++v) {
      const A z = static_cast<A>(logits_shard(t, v));
      s += std::exp(z - m[t]);
      if (smooth) qs += scaled_gap(wt.w(mine.offset + v), m[t], z);
    }
    sums[t] = s;
    const std::int64_t y = targets[t];
    if (!ignored(cfg, y)) {
      const auto yu = static_cast<std::size_t>(y);
      if (yu >= mine.offset && yu < mine.offset + vr) {
        sums[tokens + t] =
            scaled_gap(target_factor(yu), m[t], static_cast<A>(logits_shard(t, yu - mine.offset)));
      }
    }
    if (smooth) sums[2 * tokens + t] = qs;
  }
  tp.all_reduce(std::span<A>(sums), ReduceOp::sum, cfg.reduce_algorithm);

  const bool reduced = cfg.reduction != LossReduction::none;
  std::vector<A> loss(tokens, A(0));
  std::size_t count = 0;
  A denominator(0);
  for (std::size_t t = 0; t < tokens; ++t) {
    if (ignored(cfg, targets[t])) continue;
    const auto y = static_cast<std::size_t>(targets[t]);
    ++count;
    if (wt.by_class || wt.by_token) denominator += wt.denominator_term(t, y);
    const A log_s = std::log(sums[t]);
    A l = wt.by_class ? A(A(target_factor(y) + wt.smoothing_total) * log_s) : log_s;
    l += sums[tokens + t];
    if (smooth) l += sums[2 * tokens + t];
    if (wt.by_token) l = reduced ? A(wt.scaled_omega(t) * l) : A(wt.omega(t) * l);
    loss[t] = l;
  }
  if (!wt.by_class && !wt.by_token) denominator = static_cast<A>(count);
  out.saved.sum_exp.assign(sums.begin(), sums.begin() + static_cast<std::ptrdiff_t>(tokens));
  out.saved.count = count;
  out.saved.weight_sum = denominator;

  if (cfg.reduction == LossReduction::none) {
    out.loss = Tensor<T>(Shape{tokens});
    for (std::size_t t = 0; t < tokens; ++t) out.loss[t] = static_cast<T>(loss[t]);
    return out;
  }
  A total(0);  // N' = Σ_t loss'_t
  for (std::size_t t = 0; t < tokens; ++t) total += loss[t];
  if (cfg.reduction == LossReduction::mean) {
    total = denominator == A(0) ? A(0) : total / denominator;
  } else {
    total = std::ldexp(total, wt.exponent);
  }
  out.loss = Tensor<T>(Shape{1});
  out.loss[0] = static_cast<T>(total);
  return out;
}

template <class T>
Tensor<T> vocab_parallel_cross_entropy_backward(Communicator& tp,
                                                const VocabCrossEntropyConfig& cfg,
                                                const Tensor<T>& logits_shard,
                                                std::span<const std::int64_t> targets,
                                                const VocabCrossEntropySaved<T>& saved,
                                                const Tensor<T>& dloss) {
  using A = acc_t<T>;
  const std::string where = on_rank("vocab_parallel_cross_entropy_backward", tp);
  const Piece mine = my_piece(where, tp, cfg, logits_shard);
  const std::size_t tokens = logits_shard.dim(0);
  check_targets(where, cfg, targets);
  const std::size_t real = real_columns(mine, real_vocab_size(cfg));
  const std::size_t want = cfg.reduction == LossReduction::none ? tokens : 1;
  if (targets.size() != tokens || saved.max.size() != tokens || saved.sum_exp.size() != tokens ||
      dloss.shape() != Shape({want})) {
    throw UsageError(where + "logits_shard " + format_shape(logits_shard.shape()) + ", " +
                     str(targets.size()) + " targets, saved state of " + str(saved.max.size()) +
                     " tokens and dloss " + format_shape(dloss.shape()) +
                     " disagree; pass the forward's logits_shard, targets and saved state, and "
                     "dloss [" +
                     str(want) + "] ([tokens] for reduction none, [1] otherwise)");
  }
  check_weights(where, cfg, tokens);
  const Weights<A> wt(cfg, targets);
  const A one = A(1) - static_cast<A>(cfg.label_smoothing);
  const A q = wt.q;
  const bool mean = cfg.reduction == LossReduction::mean;
  A common(0);
  if (cfg.reduction != LossReduction::none) {
    common = static_cast<A>(dloss[0]);
    if (mean) common = saved.weight_sum == A(0) ? A(0) : common / saved.weight_sum;
  }
  Tensor<T> g(Shape{tokens, mine.size});  // zeros: ignored tokens and padding columns stay 0
  // mean with D' = 0: the gradient is 0 (the documented convention), not 0·d, which is NaN for a
  // NaN or infinite logit (found by fuzz/vocab_cross_entropy).
  if (mean && saved.weight_sum == A(0)) return g;
  for (std::size_t t = 0; t < tokens; ++t) {
    const std::int64_t y = targets[t];
    if (ignored(cfg, y)) continue;  // stays 0
    const A base = cfg.reduction == LossReduction::none ? static_cast<A>(dloss[t]) : common;
    const A om = mean ? wt.scaled_omega(t) : wt.omega(t);
    const A ky = wt.by_class ? A(one * wt.c(static_cast<std::size_t>(y))) : one;
    const A kk = wt.by_class && q > 0 ? A(ky + wt.smoothing_total) : ky;
    for (std::size_t v = 0; v < real; ++v) {
      const A p = std::exp(static_cast<A>(logits_shard(t, v)) - saved.max[t]) / saved.sum_exp[t];
      const bool is_target = static_cast<std::int64_t>(mine.offset + v) == y;
      A d;
      if (wt.by_class) {
        A c = wt.w(mine.offset + v);
        if (is_target) c += ky;
        d = kk * p - c;
      } else {
        d = p - (is_target ? one + q : q);
      }
      g(t, v) = static_cast<T>(wt.by_token ? A(A(d * base) * om) : A(d * base));
    }
  }
  return g;
}

#define SHARDCHECK_INSTANTIATE(T)                                      \
  template VocabCrossEntropyOutput<T> vocab_parallel_cross_entropy<T>( \
      Communicator&, const VocabCrossEntropyConfig&, const Tensor<T>&, \
      std::span<const std::int64_t>);                                  \
  template Tensor<T> vocab_parallel_cross_entropy_backward<T>(         \
      Communicator&, const VocabCrossEntropyConfig&, const Tensor<T>&, \
      std::span<const std::int64_t>, const VocabCrossEntropySaved<T>&, const Tensor<T>&);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_INSTANTIATE)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck
