// Vocabulary-parallel cross-entropy (ops/vocab_cross_entropy.hpp).
//
// Arithmetic decisions the header leaves to the implementation (all in A = acc_t<T>; the bound
// in reference/cross_entropy.hpp follows these steps one by one):
//   - local max over the shard (−inf on a rank with no columns), all_reduce(max): exact;
//   - d_v = z_v − m (one rounding), e_v = exp(d_v) (the C library's exp in A), S_r = Σ e_v in
//     column order, then all_reduce(sum) (any order);
//   - Z_r = Σ z_v in column order (ε > 0 only), summed by the same all_reduce;
//   - lse = log(S) + m; w = (1 − ε)·z_y [+ (ε/V)·Z]; loss_t = lse − w (each op one rounding);
//   - sum: Σ_t loss_t in token order; mean: that sum / N; rounded once to T;
//   - backward: p = exp(z_v − m) / S; c = ε/V (+ (1 − ε) at the target); g = (p − c)·s_t.
#include "ops/vocab_cross_entropy.hpp"

#include "ops/linear_internal.hpp"

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

void check_targets(const std::string& where, const VocabCrossEntropyConfig& cfg,
                   std::span<const std::int64_t> targets) {
  for (std::size_t t = 0; t < targets.size(); ++t) {
    const std::int64_t y = targets[t];
    if (ignored(cfg, y)) continue;
    if (y < 0 || static_cast<std::uint64_t>(y) >= cfg.vocab) {
      throw UsageError(where + "target " + std::to_string(y) + " of token " + str(t) +
                       " is out of range for a vocabulary of V = " + str(cfg.vocab) +
                       " (and is not ignore_index" +
                       (cfg.ignore_index ? " = " + std::to_string(*cfg.ignore_index) : "") + ")");
    }
  }
  if (!(cfg.label_smoothing >= 0 && cfg.label_smoothing <= 1)) {
    throw UsageError(where + "label_smoothing must be in [0, 1] but is " +
                     std::to_string(cfg.label_smoothing));
  }
}

template <class T>
Piece my_piece(const std::string& where, const Communicator& tp, const VocabCrossEntropyConfig& cfg,
               const Tensor<T>& z) {
  if (z.ndim() != 2) {
    throw UsageError(where + "logits_shard must be 2-D [tokens, V_r] but is " +
                     format_shape(z.shape()));
  }
  const auto ps = pieces(where, "the V = " + str(cfg.vocab) + " columns of the logits",
                         cfg.vocab_split, cfg.vocab, tp.size());
  const Piece mine = ps[static_cast<std::size_t>(tp.rank())];
  if (z.dim(1) != mine.size) {
    throw UsageError(where + "logits_shard is " + format_shape(z.shape()) + " but rank " +
                     std::to_string(tp.rank()) + " owns " + str(mine.size) +
                     " columns of V = " + str(cfg.vocab) + " under " + cfg.vocab_split.to_string());
  }
  return mine;
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
                     format_shape(logits_shard.shape()) + "; one target per token");
  }
  check_targets(where, cfg, targets);
  const bool smooth = cfg.label_smoothing > 0;
  const std::size_t k = smooth ? 3 : 2;

  VocabCrossEntropyOutput<T> out;
  auto& m = out.saved.max;
  m.assign(tokens, -std::numeric_limits<A>::infinity());
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t v = 0; v < vr; ++v) m[t] = std::max(m[t], static_cast<A>(logits_shard(t, v)));
  }
  tp.all_reduce(std::span<A>(m), ReduceOp::max, cfg.reduce_algorithm);

  std::vector<A> sums(k * tokens, A(0));  // [S_r | z_y on its owner | Z_r]
  for (std::size_t t = 0; t < tokens; ++t) {
    A s(0), zs(0);
    for (std::size_t v = 0; v < vr; ++v) {
      const A z = static_cast<A>(logits_shard(t, v));
      s += std::exp(z - m[t]);
      zs += z;
    }
    sums[t] = s;
    const std::int64_t y = targets[t];
    if (!ignored(cfg, y)) {
      const auto yu = static_cast<std::size_t>(y);
      if (yu >= mine.offset && yu < mine.offset + vr) {
        sums[tokens + t] = static_cast<A>(logits_shard(t, yu - mine.offset));
      }
    }
    if (smooth) sums[2 * tokens + t] = zs;
  }
  tp.all_reduce(std::span<A>(sums), ReduceOp::sum, cfg.reduce_algorithm);

  const A eps = static_cast<A>(cfg.label_smoothing);
  const A one = A(1) - eps;
  const A q = eps / static_cast<A>(cfg.vocab);
  std::vector<A> loss(tokens, A(0));
  std::size_t count = 0;
  for (std::size_t t = 0; t < tokens; ++t) {
    if (ignored(cfg, targets[t])) continue;
    ++count;
    const A lse = std::log(sums[t]) + m[t];
    A w = one * sums[tokens + t];
    if (smooth) w += q * sums[2 * tokens + t];
    loss[t] = lse - w;
  }
  out.saved.sum_exp.assign(sums.begin(), sums.begin() + static_cast<std::ptrdiff_t>(tokens));
  out.saved.count = count;

  if (cfg.reduction == LossReduction::none) {
    out.loss = Tensor<T>(Shape{tokens});
    for (std::size_t t = 0; t < tokens; ++t) out.loss[t] = static_cast<T>(loss[t]);
    return out;
  }
  A total(0);
  for (std::size_t t = 0; t < tokens; ++t) total += loss[t];
  if (cfg.reduction == LossReduction::mean)
    total = count == 0 ? A(0) : total / static_cast<A>(count);
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
  const std::size_t tokens = logits_shard.dim(0), vr = mine.size;
  check_targets(where, cfg, targets);
  const std::size_t want = cfg.reduction == LossReduction::none ? tokens : 1;
  if (targets.size() != tokens || saved.max.size() != tokens || saved.sum_exp.size() != tokens ||
      dloss.shape() != Shape{want}) {
    throw UsageError(where + "logits_shard " + format_shape(logits_shard.shape()) + ", " +
                     str(targets.size()) + " targets, saved state of " + str(saved.max.size()) +
                     " tokens and dloss " + format_shape(dloss.shape()) +
                     " disagree; dloss must be [" + str(want) + "]");
  }
  const A eps = static_cast<A>(cfg.label_smoothing);
  const A one = A(1) - eps;
  const A q = eps / static_cast<A>(cfg.vocab);
  A common(0);
  if (cfg.reduction != LossReduction::none) {
    common = static_cast<A>(dloss[0]);
    if (cfg.reduction == LossReduction::mean) {
      common = saved.count == 0 ? A(0) : common / static_cast<A>(saved.count);
    }
  }
  Tensor<T> g(Shape{tokens, vr});
  for (std::size_t t = 0; t < tokens; ++t) {
    const std::int64_t y = targets[t];
    if (ignored(cfg, y)) continue;  // stays 0
    const A s = cfg.reduction == LossReduction::none ? static_cast<A>(dloss[t]) : common;
    for (std::size_t v = 0; v < vr; ++v) {
      const A p = std::exp(static_cast<A>(logits_shard(t, v)) - saved.max[t]) / saved.sum_exp[t];
      const bool is_target = static_cast<std::int64_t>(mine.offset + v) == y;
      const A c = is_target ? one + q : q;
      g(t, v) = static_cast<T>((p - c) * s);
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
SHARDCHECK_INSTANTIATE(double)
SHARDCHECK_INSTANTIATE(float)
SHARDCHECK_INSTANTIATE(bfloat16)
SHARDCHECK_INSTANTIATE(float16)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck
