// The mutant catalog of the norm suite. One hand-written sequence-parallel norm and SP block,
// correct, with a switch per bug; each mutant turns one switch on. Every bug here has shipped
// somewhere or is the obvious slip in code that handles sequence-parallel shards.
#include "suites/norm/norm_mutants.hpp"

#include "engine/slicing.hpp"
#include "layout/split_policy.hpp"
#include "ops/tp_transitions.hpp"
#include "suites/norm/norm_impl.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace shardcheck::check {
namespace {

enum class Bug {
  param_grads_not_reduced,
  param_grads_averaged,
  normalized_over_token_axis,
  eps_outside_sqrt,
  variance_n_minus_1,
  gather_sized_by_local_count,
  g_backward_all_gather,
  g_backward_split_without_reduce,
};

template <Bug B>
struct MutantNorm {
  // Forward on this rank's tokens, with the forward bugs.
  template <class T>
  Tensor<T> forward(const SequenceParallelNormConfig& cfg, const Tensor<T>& x,
                    const Tensor<T>& gamma, const Tensor<T>& beta) const {
    using A = acc_t<T>;
    if constexpr (B != Bug::normalized_over_token_axis && B != Bug::eps_outside_sqrt &&
                  B != Bug::variance_n_minus_1) {
      return norm_forward(cfg.norm, x, gamma, beta);
    }
    const std::size_t tokens = x.dim(0), n = x.dim(1);
    const A eps = static_cast<A>(cfg.norm.eps);
    const bool rms = cfg.norm.kind == NormKind::rms_norm;
    const bool bias = has_beta(cfg.norm.kind);
    Tensor<T> y(Shape{tokens, n});
    // Statistics of a line of `len` values x(at(k)).
    auto normalize = [&](std::size_t len, auto at) {
      A mean = 0, sq = 0;
      if (!rms) {
        for (std::size_t k = 0; k < len; ++k) mean += static_cast<A>(x[at(k)]);
        mean /= static_cast<A>(len);
      }
      for (std::size_t k = 0; k < len; ++k) {
        const A d = static_cast<A>(x[at(k)]) - mean;
        sq += d * d;
      }
      const A var = sq / static_cast<A>(B == Bug::variance_n_minus_1 && !rms ? len - 1 : len);
      const A rstd =
          B == Bug::eps_outside_sqrt ? A(1) / (std::sqrt(var) + eps) : A(1) / std::sqrt(var + eps);
      for (std::size_t k = 0; k < len; ++k) {
        const std::size_t flat = at(k);
        const std::size_t i = flat % n;
        A v = (static_cast<A>(x[flat]) - mean) * rstd * static_cast<A>(gamma[i]);
        if (bias) v += static_cast<A>(beta[i]);
        y[flat] = static_cast<T>(v);
      }
    };
    if constexpr (B == Bug::normalized_over_token_axis) {
      for (std::size_t i = 0; i < n; ++i)
        normalize(tokens, [&](std::size_t k) { return k * n + i; });
    } else {
      for (std::size_t t = 0; t < tokens; ++t)
        normalize(n, [&](std::size_t k) { return t * n + k; });
    }
    return y;
  }

  // The hand-written LayerNorm backward of a port whose forward used the N − 1 variance: the
  // usual formula dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), g = dy·γ, on that forward's rstd and
  // x̂ (what a NumPy or CUDA port that saves its statistics computes); partial dgamma, dbeta.
  template <class T>
  static NormGrads<T> backward_n_minus_1(const SequenceParallelNormConfig& cfg, const Tensor<T>& x,
                                         const Tensor<T>& gamma, const Tensor<T>& dy) {
    if (cfg.norm.kind == NormKind::rms_norm) return norm_backward(cfg.norm, x, gamma, dy);
    using A = acc_t<T>;
    const std::size_t tokens = x.dim(0), n = x.dim(1);
    const bool bias = has_beta(cfg.norm.kind);
    NormGrads<T> g{Tensor<T>(Shape{tokens, n}), Tensor<T>(Shape{n}),
                   bias ? Tensor<T>(Shape{n}) : Tensor<T>()};
    std::vector<A> dgamma(n, A(0)), dbeta(n, A(0)), xhat(n), gy(n);
    for (std::size_t t = 0; t < tokens; ++t) {
      A mean = 0, sq = 0;
      for (std::size_t i = 0; i < n; ++i) mean += static_cast<A>(x[t * n + i]);
      mean /= static_cast<A>(n);
      for (std::size_t i = 0; i < n; ++i) {
        const A d = static_cast<A>(x[t * n + i]) - mean;
        sq += d * d;
      }
      const A rstd = A(1) / std::sqrt(sq / static_cast<A>(n - 1) + static_cast<A>(cfg.norm.eps));
      A c1 = 0, c2 = 0;
      for (std::size_t i = 0; i < n; ++i) {
        xhat[i] = (static_cast<A>(x[t * n + i]) - mean) * rstd;
        gy[i] = static_cast<A>(dy[t * n + i]) * static_cast<A>(gamma[i]);
        c1 += gy[i];
        c2 += gy[i] * xhat[i];
        dgamma[i] += static_cast<A>(dy[t * n + i]) * xhat[i];
        dbeta[i] += static_cast<A>(dy[t * n + i]);
      }
      c1 /= static_cast<A>(n);
      c2 /= static_cast<A>(n);
      for (std::size_t i = 0; i < n; ++i) {
        g.dx[t * n + i] = static_cast<T>((gy[i] - c1 - xhat[i] * c2) * rstd);
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      g.dgamma[i] = static_cast<T>(dgamma[i]);
      if (bias) g.dbeta[i] = static_cast<T>(dbeta[i]);
    }
    return g;
  }

  template <class T>
  NormGrads<T> backward(Communicator& sp, const SequenceParallelNormConfig& cfg, const Tensor<T>& x,
                        const Tensor<T>& gamma, const Tensor<T>& dy) const {
    if constexpr (B != Bug::param_grads_not_reduced && B != Bug::param_grads_averaged &&
                  B != Bug::variance_n_minus_1) {
      return sequence_parallel_norm_backward(sp, cfg, x, gamma, dy);
    }
    // Partial dgamma/dbeta (a sum over this rank's tokens).
    NormGrads<T> g = B == Bug::variance_n_minus_1 ? backward_n_minus_1(cfg, x, gamma, dy)
                                                  : norm_backward(cfg.norm, x, gamma, dy);
    if constexpr (B != Bug::param_grads_not_reduced) {
      const std::size_t n = gamma.size();
      const bool bias = has_beta(cfg.norm.kind);
      std::vector<T> buf(bias ? 2 * n : n);
      std::copy_n(g.dgamma.data(), n, buf.data());
      if (bias) std::copy_n(g.dbeta.data(), n, buf.data() + n);
      sp.all_reduce(std::span<T>(buf),
                    B == Bug::param_grads_averaged ? ReduceOp::avg : ReduceOp::sum,
                    cfg.reduce_algorithm);
      std::copy_n(buf.data(), n, g.dgamma.data());
      if (bias) std::copy_n(buf.data() + n, n, g.dbeta.data());
    }
    return g;
  }

  template <class T>
  NormRankOutputs<T> norm(Communicator& sp, const SequenceParallelNormConfig& cfg,
                          const NormRankInputs<T>& in) const {
    return norm_outputs(forward(cfg, in.x, in.gamma, in.beta),
                        backward(sp, cfg, in.x, in.gamma, in.dy));
  }

  template <class T>
  BlockRankOutputs<T> block(Communicator& tp, const BlockConfig& cfg,
                            const BlockRankInputs<T>& in) const {
    const int p = tp.size();
    const auto r = static_cast<std::size_t>(tp.rank());
    const auto& ncfg = cfg.norm;
    auto counts = split_sizes(ncfg.token_split, ncfg.tokens, p);
    std::size_t offset = 0;
    for (std::size_t k = 0; k < r; ++k) offset += counts[k];
    const std::size_t mine = counts[r];
    if constexpr (B == Bug::gather_sized_by_local_count) {
      counts.assign(static_cast<std::size_t>(p), in.x.dim(0));
    }
    const auto row = block_row_config(cfg);
    const Tensor<T> none;
    const Tensor<T> z = forward(ncfg, in.x, in.gamma, in.beta);
    // g forward, then the column-parallel product on the gathered tokens.
    const Tensor<T> zf = all_gather_tokens(tp, z, std::span<const std::size_t>(counts));
    const Tensor<T> a = linear(zf, in.w1_shard, none, cfg.kernel);
    Tensor<T> y = row_parallel_linear(tp, row, a, in.w2_shard, none).y;
    auto gr = row_parallel_linear_backward(tp, row, a, in.w2_shard, false, in.dy);
    // Column-parallel backward: z re-gathered for dW1, the partial dz, and g's backward.
    const Tensor<T> zf2 = all_gather_tokens(tp, z, std::span<const std::size_t>(counts));
    auto gl = linear_backward(zf2, in.w1_shard, false, gr.dx, cfg.kernel);
    Tensor<T> dz;
    if constexpr (B == Bug::g_backward_all_gather) {
      const Tensor<T> own = rows(gl.dx, offset, mine);
      const Tensor<T> full = all_gather_tokens(tp, own, std::span<const std::size_t>(counts));
      dz = rows(full, offset, mine);
    } else if constexpr (B == Bug::g_backward_split_without_reduce) {
      dz = rows(gl.dx, offset, mine);
    } else {
      dz = reduce_scatter_tokens(tp, gl.dx, std::span<const std::size_t>(counts),
                                 ncfg.reduce_algorithm);
    }
    return block_outputs(std::move(y), backward(tp, ncfg, in.x, in.gamma, dz), std::move(gl.dw),
                         std::move(gr.dw));
  }
};

template <Bug B>
constexpr auto& make = make_mutant<NormImplementation, NormAdapter<MutantNorm<B>>>;

// The catalog: each bug's name (as "mutant:<name>") and its story.
constexpr Mutant<NormImplementation> catalog[] = {
    {"param-grads-not-reduced",
     "the sequence-parallel norm returns each rank's partial dgamma/dbeta (a sum over its own "
     "tokens only) without the all_reduce over the sequence-parallel group: Megatron-LM needs "
     "an explicit all-reduce of the 'sequence_parallel' LayerNorm gradients for this, and "
     "forgetting it leaves the replicated parameters drifting apart",
     &make<Bug::param_grads_not_reduced>},
    {"param-grads-averaged",
     "dgamma/dbeta are all_reduced with avg instead of sum, as if they were data-parallel "
     "gradients: LN weights then learn P times slower (gpt-neox #1259)",
     &make<Bug::param_grads_averaged>},
    {"normalized-over-token-axis",
     "the statistics are taken over the (local) token axis per feature, BatchNorm-style, "
     "instead of over the hidden axis per token: a transposed reduction axis",
     &make<Bug::normalized_over_token_axis>},
    {"eps-outside-sqrt",
     "rstd = 1/(sqrt(var) + eps) instead of 1/sqrt(var + eps) (the TF-style epsilon placement "
     "that differs from torch.nn.LayerNorm)",
     &make<Bug::eps_outside_sqrt>},
    {"variance-n-minus-1",
     "LayerNorm's variance computed with N − 1 (torch.var's default, unbiased=True, in a "
     "hand-written LayerNorm) instead of torch.nn.LayerNorm's biased N, in the forward and in "
     "the saved statistics its backward uses; undefined at hidden = 1",
     &make<Bug::variance_n_minus_1>},
    {"gather-sized-by-local-count",
     "the block's sequence-parallel all_gather sizes every rank's piece with this rank's own "
     "token count (Megatron's _gather_along_first_dim: dim_size[0] * world_size), the local "
     "count where the global split is needed: wrong as soon as the token split is uneven",
     &make<Bug::gather_sized_by_local_count>},
    {"g-backward-all-gather",
     "the backward of g (all_gather forward) is implemented with an all_gather of each rank's "
     "own rows of its partial dz instead of a reduce_scatter: the wrong conjugate, so the "
     "tensor-parallel partial gradients are never summed",
     &make<Bug::g_backward_all_gather>},
    {"g-backward-split-without-reduce",
     "the backward of g takes this rank's rows of the partial dz without any reduction "
     "(Megatron's gather_from_sequence_parallel_region with tensor_parallel_output_grad=False "
     "used where the output gradient is a tensor-parallel partial)",
     &make<Bug::g_backward_split_without_reduce>},
};

}  // namespace

std::span<const Mutant<NormImplementation>> norm_mutants() { return catalog; }

}  // namespace shardcheck::check
