// LayerNorm and RMSNorm (ops/norm/norm.hpp): the dense op, its gradients, and the sequence-parallel
// forward and backward. Every operation is written out one step at a time in acc_t<T>, in the
// order and parenthesization the header's contract fixes, so the reference's error analysis
// (reference/norm/norm.hpp) follows the code step by step.
#include "ops/norm/norm.hpp"

#include "ops/linear/linear_internal.hpp"
#include "ops/workspace.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace shardcheck {
namespace {

using linear_detail::block_column_config;
using linear_detail::block_row_config;
using linear_detail::on_rank;
using linear_detail::require_2d;
using linear_detail::require_token_shard;
using linear_detail::str;

template <class T>
void require_norm_shapes(const std::string& where, const NormConfig& cfg, const Tensor<T>& x,
                         const Tensor<T>& gamma, const Tensor<T>* beta, const Tensor<T>* dy) {
  require_2d(where, "x", x, "[tokens, hidden]");
  const std::size_t h = x.dim(1);
  if (h == 0) {
    throw UsageError(where + "x is " + format_shape(x.shape()) +
                     ": the hidden dimension must have at least one feature to normalize over");
  }
  if (!(cfg.eps > 0)) {
    throw UsageError(where + "eps is " + std::to_string(cfg.eps) +
                     "; pass eps > 0 (torch's default is 1e-5)");
  }
  if (gamma.shape() != Shape({h})) {
    throw UsageError(where + "gamma is " + format_shape(gamma.shape()) + " but x is " +
                     format_shape(x.shape()) + "; gamma must be [hidden] = [" + str(h) + "]");
  }
  if (beta != nullptr) {
    if (has_beta(cfg.kind) && beta->shape() != Shape({h})) {
      throw UsageError(where + "beta is " + format_shape(beta->shape()) + " but x is " +
                       format_shape(x.shape()) + "; " + to_string(cfg.kind) +
                       " needs beta [hidden] = [" + str(h) + "]");
    }
    if (!has_beta(cfg.kind) && !beta->empty()) {
      throw UsageError(where + "beta is " + format_shape(beta->shape()) + " but " +
                       to_string(cfg.kind) +
                       " has no bias; pass an empty beta (or use NormKind::layer_norm)");
    }
  }
  if (dy != nullptr && dy->shape() != x.shape()) {
    throw UsageError(where + "dy is " + format_shape(dy->shape()) + " but x is " +
                     format_shape(x.shape()) + "; dy must have x's shape [tokens, hidden]");
  }
}

// One token's statistics and normalized values, in A.
template <class A>
struct TokenStats {
  A rstd{};
  std::vector<A> xhat;
};

// Token t's statistics: row t of x [tokens, n] under cfg's kind and eps, in acc_t<T>.
template <class T, class A = acc_t<T>>
TokenStats<A> token_stats(const NormConfig& cfg, const Tensor<T>& x, std::size_t t) {
  const std::size_t n = x.dim(1);
  const T* row = x.data() + t * n;
  const A eps = static_cast<A>(cfg.eps);
  const NormKind kind = cfg.kind;
  const A count = static_cast<A>(n);
  TokenStats<A> s;
  s.xhat.resize(n);
  if (kind == NormKind::rms_norm) {
    A sq = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const A xi = static_cast<A>(row[i]);
      const A p = xi * xi;
      sq = sq + p;
    }
    const A ms = sq / count;
    const A root = std::sqrt(ms + eps);
    s.rstd = A(1) / root;
    for (std::size_t i = 0; i < n; ++i) s.xhat[i] = static_cast<A>(row[i]) * s.rstd;
    return s;
  }
  A sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum = sum + static_cast<A>(row[i]);
  const A mean = sum / count;
  A sq = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const A d = static_cast<A>(row[i]) - mean;
    s.xhat[i] = d;
    const A p = d * d;
    sq = sq + p;
  }
  const A var = sq / count;
  const A root = std::sqrt(var + eps);
  s.rstd = A(1) / root;
  for (std::size_t i = 0; i < n; ++i) s.xhat[i] = s.xhat[i] * s.rstd;
  return s;
}

template <class T>
Tensor<T> forward_core(const NormConfig& cfg, const Tensor<T>& x, const Tensor<T>& gamma,
                       const Tensor<T>& beta) {
  using A = acc_t<T>;
  const std::size_t tokens = x.dim(0), n = x.dim(1);
  const bool bias = has_beta(cfg.kind);
  Tensor<T> y(Shape{tokens, n});
  for (std::size_t t = 0; t < tokens; ++t) {
    const auto s = token_stats(cfg, x, t);
    for (std::size_t i = 0; i < n; ++i) {
      A v = s.xhat[i] * static_cast<A>(gamma[i]);
      if (bias) v = v + static_cast<A>(beta[i]);
      y(t, i) = static_cast<T>(v);
    }
  }
  return y;
}

// dx, and the partial (this x's tokens only) dgamma/dbeta rounded to T.
template <class T>
NormGrads<T> backward_core(const NormConfig& cfg, const Tensor<T>& x, const Tensor<T>& gamma,
                           const Tensor<T>& dy) {
  using A = acc_t<T>;
  const std::size_t tokens = x.dim(0), n = x.dim(1);
  const A count = static_cast<A>(n);
  const bool bias = has_beta(cfg.kind);
  NormGrads<T> g;
  g.dx = Tensor<T>(Shape{tokens, n});
  std::vector<A> dgamma(n, A(0)), dbeta(n, A(0)), gi(n);
  for (std::size_t t = 0; t < tokens; ++t) {
    const auto s = token_stats(cfg, x, t);
    A sum_g = 0, sum_gx = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const A d = static_cast<A>(dy(t, i));
      gi[i] = d * static_cast<A>(gamma[i]);
      sum_g = sum_g + gi[i];
      const A p = gi[i] * s.xhat[i];
      sum_gx = sum_gx + p;
      const A q = d * s.xhat[i];
      dgamma[i] = dgamma[i] + q;
      dbeta[i] = dbeta[i] + d;
    }
    const A c2 = sum_gx / count;
    if (cfg.kind == NormKind::rms_norm) {
      for (std::size_t i = 0; i < n; ++i) {
        const A p = s.xhat[i] * c2;
        const A diff = gi[i] - p;
        g.dx(t, i) = static_cast<T>(diff * s.rstd);
      }
    } else {
      const A c1 = sum_g / count;
      for (std::size_t i = 0; i < n; ++i) {
        const A centered = gi[i] - c1;
        const A p = s.xhat[i] * c2;
        const A diff = centered - p;
        g.dx(t, i) = static_cast<T>(diff * s.rstd);
      }
    }
  }
  g.dgamma = Tensor<T>(Shape{n});
  for (std::size_t i = 0; i < n; ++i) g.dgamma[i] = static_cast<T>(dgamma[i]);
  if (bias) {
    g.dbeta = Tensor<T>(Shape{n});
    for (std::size_t i = 0; i < n; ++i) g.dbeta[i] = static_cast<T>(dbeta[i]);
  }
  return g;
}

}  // namespace

// ================================================================ dense

template <class T>
Tensor<T> norm_forward(const NormConfig& cfg, const Tensor<T>& x, const Tensor<T>& gamma,
                       const Tensor<T>& beta) {
  require_norm_shapes<T>("norm_forward (" + to_string(cfg.kind) + "): ", cfg, x, gamma, &beta,
                         nullptr);
  return forward_core(cfg, x, gamma, beta);
}

template <class T>
NormGrads<T> norm_backward(const NormConfig& cfg, const Tensor<T>& x, const Tensor<T>& gamma,
                           const Tensor<T>& dy) {
  require_norm_shapes<T>("norm_backward (" + to_string(cfg.kind) + "): ", cfg, x, gamma, nullptr,
                         &dy);
  return backward_core(cfg, x, gamma, dy);
}

// ================================================================ sequence-parallel

template <class T>
Tensor<T> sequence_parallel_norm(Communicator& sp, const SequenceParallelNormConfig& cfg,
                                 const Tensor<T>& x_shard, const Tensor<T>& gamma,
                                 const Tensor<T>& beta) {
  const std::string where = on_rank("sequence_parallel_norm", sp);
  require_norm_shapes<T>(where, cfg.norm, x_shard, gamma, &beta, nullptr);
  require_token_shard(where, sp, cfg.token_split, cfg.tokens, "x_shard", x_shard);
  return forward_core(cfg.norm, x_shard, gamma, beta);
}

template <class T>
NormGrads<T> sequence_parallel_norm_backward(Communicator& sp,
                                             const SequenceParallelNormConfig& cfg,
                                             const Tensor<T>& x_shard, const Tensor<T>& gamma,
                                             const Tensor<T>& dy_shard) {
  const std::string where = on_rank("sequence_parallel_norm_backward", sp);
  require_norm_shapes<T>(where, cfg.norm, x_shard, gamma, nullptr, &dy_shard);
  require_token_shard(where, sp, cfg.token_split, cfg.tokens, "x_shard", x_shard);
  NormGrads<T> g = backward_core(cfg.norm, x_shard, gamma, dy_shard);
  // One all_reduce(sum) of the partial parameter gradients: [dgamma] or [dgamma | dbeta].
  const std::size_t n = gamma.size();
  const bool bias = has_beta(cfg.norm.kind);
  auto held_buf = Workspace::of_this_rank().buffer<T>(bias ? 2 * n : n);  // the packed buffer
  std::vector<T>& buf = *held_buf;
  std::copy_n(g.dgamma.data(), n, buf.data());
  if (bias) std::copy_n(g.dbeta.data(), n, buf.data() + n);
  sp.all_reduce(std::span<T>(buf), ReduceOp::sum, cfg.reduce_algorithm);
  std::copy_n(buf.data(), n, g.dgamma.data());
  if (bias) std::copy_n(buf.data() + n, n, g.dbeta.data());
  return g;
}

ColumnParallelConfig sp_block_column_config(const SequenceParallelNormConfig& norm, std::size_t ffn,
                                            const SplitPolicy& ffn_split, Kernel kernel) {
  ColumnParallelConfig c =
      block_column_config(norm.tokens, true, norm.token_split, norm.reduce_algorithm, kernel);
  c.out_features = ffn;
  c.out_split = ffn_split;
  return c;
}

RowParallelConfig sp_block_row_config(const SequenceParallelNormConfig& norm,
                                      const SplitPolicy& ffn_split, Kernel kernel) {
  RowParallelConfig c = block_row_config(true, norm.token_split, norm.reduce_algorithm, kernel);
  c.in_split = ffn_split;
  return c;
}

#define SHARDCHECK_INSTANTIATE(T)                                                                \
  template Tensor<T> norm_forward<T>(const NormConfig&, const Tensor<T>&, const Tensor<T>&,      \
                                     const Tensor<T>&);                                          \
  template NormGrads<T> norm_backward<T>(const NormConfig&, const Tensor<T>&, const Tensor<T>&,  \
                                         const Tensor<T>&);                                      \
  template Tensor<T> sequence_parallel_norm<T>(Communicator&, const SequenceParallelNormConfig&, \
                                               const Tensor<T>&, const Tensor<T>&,               \
                                               const Tensor<T>&);                                \
  template NormGrads<T> sequence_parallel_norm_backward<T>(                                      \
      Communicator&, const SequenceParallelNormConfig&, const Tensor<T>&, const Tensor<T>&,      \
      const Tensor<T>&);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_INSTANTIATE)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck
