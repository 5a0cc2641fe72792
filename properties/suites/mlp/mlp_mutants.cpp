// The mutant catalog of the mlp suite. One ParallelMLP written from the library's public steps
// (column_parallel_linear, mlp_activation, row_parallel_linear, their backwards and the
// tp_transitions), correct, with a switch per bug; each mutant turns one switch on.
#include "suites/mlp/mlp_mutants.hpp"

#include "ops/tp_transitions.hpp"

namespace shardcheck::check {
namespace {

enum class Bug {
  fused_gate_up_contiguous_chunk,
  activation_on_partial_sum,
  tanh_where_erf_declared,
  down_bias_on_every_rank,
  sp_up_backward_all_reduce,
  gelu_grad_missing_x_phi,
  swiglu_silu_on_up_half,
};

template <Bug B>
struct MutantMlp {
  // fc1's rows of this rank: [Wg_r; Wu_r], or (the bug) the r-th contiguous chunk of [Wg; Wu],
  // as a checkpoint converter that torch.chunk()s the fused weight would cut it.
  template <class T>
  static Tensor<T> fc1_rows(const Tensor<T>& w, const MlpConfig& cfg, int p, int r) {
    if constexpr (B == Bug::fused_gate_up_contiguous_chunk) {
      if (cfg.activation == Activation::swiglu) {
        const auto pc = split(cfg.ffn_split, cfg.ffn_features, p).at(static_cast<std::size_t>(r));
        return rows(w, 2 * pc.offset, 2 * pc.size);
      }
    }
    return split_fused_up(w, cfg.activation, cfg.ffn_split, p, r);
  }

  template <class T>
  static Tensor<T> activation(const Tensor<T>& h, Activation act) {
    if constexpr (B == Bug::tanh_where_erf_declared) {
      if (act == Activation::gelu) return mlp_activation(h, Activation::gelu_tanh);
    }
    if constexpr (B == Bug::swiglu_silu_on_up_half) {
      if (act == Activation::swiglu) {  // silu(u)·g: the halves of the fused output swapped
        const std::size_t n = h.dim(1) / 2;
        Tensor<T> swapped(h.shape());
        for (std::size_t t = 0; t < h.dim(0); ++t) {
          for (std::size_t j = 0; j < n; ++j) {
            swapped(t, j) = h(t, n + j);
            swapped(t, n + j) = h(t, j);
          }
        }
        return mlp_activation(swapped, act);
      }
    }
    return mlp_activation(h, act);
  }

  template <class T>
  static Tensor<T> activation_backward(const Tensor<T>& h, Activation act, const Tensor<T>& da) {
    if constexpr (B == Bug::tanh_where_erf_declared) {
      if (act == Activation::gelu) return mlp_activation_backward(h, Activation::gelu_tanh, da);
    }
    if constexpr (B == Bug::gelu_grad_missing_x_phi) {
      if (act == Activation::gelu) {  // gelu'(x) taken as Φ(x): the x·φ(x) term dropped
        Tensor<T> dh(h.shape());
        for (std::size_t i = 0; i < h.size(); ++i) {
          const auto v = static_cast<float>(h[i]);
          dh[i] =
              static_cast<T>(0.5F * (1.0F + std::erf(v * 0.70710678F)) * static_cast<float>(da[i]));
        }
        return dh;
      }
    }
    return mlp_activation_backward(h, act, da);
  }

  template <class T>
  MlpRankOutputs<T> parallel_mlp(Communicator& tp, const MlpConfig& cfg,
                                 const MlpRankInputs<T>& in) const {
    const int p = tp.size(), r = tp.rank();
    const auto act = cfg.activation;
    const bool sp = cfg.sequence_parallel;
    const Tensor<T> wu = fc1_rows(in.w_up, cfg, p, r);
    const Tensor<T> bu = in.has_bias ? fc1_rows(in.b_up, cfg, p, r) : Tensor<T>();
    const Tensor<T> wd = split_weight_by_input_features(in.w_down, cfg.ffn_split, p, r);
    const ColumnParallelConfig up = fc1_config(cfg);
    const RowParallelConfig down = fc2_config(cfg);
    const auto token_sizes = split_sizes(cfg.token_split, cfg.tokens, p);

    const Tensor<T> h = column_parallel_linear(tp, up, in.x, wu, bu).y;
    Tensor<T> a = activation(h, act);
    if constexpr (B == Bug::activation_on_partial_sum) {
      // fc1 treated as row-parallel over the hidden features: each rank applies the activation
      // to its partial pre-activation x[:, H_r]·W[:, H_r]ᵀ, and the activations are summed.
      if (p > 1) {
        const auto cols =
            split(SplitPolicy::chunk(), in.w_up.dim(1), p).at(static_cast<std::size_t>(r));
        Tensor<T> x_full = sp ? all_gather_tokens(tp, in.x, token_sizes) : in.x;
        Tensor<T> partial =
            linear(slice(x_full, 1, cols), slice(wu, 1, cols), r == 0 ? bu : Tensor<T>());
        a = activation(partial, act);
        tp.all_reduce(a.span(), ReduceOp::sum);
      }
    }
    Tensor<T> y;
    if constexpr (B == Bug::down_bias_on_every_rank) {
      Tensor<T> partial = linear(a, wd, in.b_down);  // the bias joins every rank's partial
      if (sp) {
        y = reduce_scatter_tokens(tp, partial, token_sizes);
      } else {
        tp.all_reduce(partial.span(), ReduceOp::sum);
        y = std::move(partial);
      }
    } else {
      y = row_parallel_linear(tp, down, a, wd, in.b_down).y;
    }

    auto gd = row_parallel_linear_backward(tp, down, activation(h, act), wd, in.has_bias, in.dy);
    const Tensor<T> dh = activation_backward(h, act, gd.dx);
    LinearGrads<T> gu;
    if constexpr (B == Bug::sp_up_backward_all_reduce) {
      if (sp) {  // dx all_reduced over the full tokens, then this rank's rows sliced
        const Tensor<T> x_full = all_gather_tokens(tp, in.x, token_sizes);
        ColumnParallelConfig dense_in = up;
        dense_in.sequence_parallel_input = false;
        gu = column_parallel_linear_backward(tp, dense_in, x_full, wu, in.has_bias, dh);
        const auto pc = split(cfg.token_split, cfg.tokens, p).at(static_cast<std::size_t>(r));
        gu.dx = rows(gu.dx, pc.offset, pc.size);
      } else {
        gu = column_parallel_linear_backward(tp, up, in.x, wu, in.has_bias, dh);
      }
    } else {
      gu = column_parallel_linear_backward(tp, up, in.x, wu, in.has_bias, dh);
    }
    return mlp_outputs(std::move(y), std::move(gu.dx), gu.dw, gu.db, std::move(gd.dw),
                       std::move(gd.db), act);
  }
};

template <Bug B>
constexpr auto& make = make_mutant<MlpImplementation, MlpAdapter<MutantMlp<B>>>;

// The catalog: each bug's name (as "mutant:<name>") and its story.
constexpr Mutant<MlpImplementation> catalog[] = {
    {"fused-gate-up-contiguous-chunk",
     "swiglu's fused fc1 [Wg; Wu] is sharded as a contiguous chunk of the concatenation "
     "(torch.chunk of the fused weight in a checkpoint converter) instead of the concatenation "
     "[Wg_r; Wu_r] of per-rank chunks: rank 0 gets only gate rows, the last rank only up rows",
     &make<Bug::fused_gate_up_contiguous_chunk>},
    {"activation-on-partial-sum",
     "fc1 is split by its input (hidden) features, row-parallel, and each rank applies the "
     "activation to its partial pre-activation before the all_reduce: f(Σ partials) is not "
     "Σ f(partials) for a nonlinear f",
     &make<Bug::activation_on_partial_sum>},
    {"tanh-where-erf-declared",
     "the case declares GeLU's erf form (PyTorch's default) but the tanh approximation is "
     "computed, forward and backward (approximate='tanh' hard-coded in a fused kernel)",
     &make<Bug::tanh_where_erf_declared>},
    {"down-bias-on-every-rank",
     "fc2's bias is added to every rank's partial product before the all_reduce (or "
     "reduce_scatter), so y carries P copies of it",
     &make<Bug::down_bias_on_every_rank>},
    {"sp-up-backward-all-reduce",
     "with sequence parallelism fc1's backward all_reduces dx over all tokens and slices this "
     "rank's rows instead of a reduce_scatter: right values, twice the traffic",
     &make<Bug::sp_up_backward_all_reduce>},
    {"gelu-grad-missing-x-phi",
     "GeLU's derivative is taken as Φ(x), dropping the x·φ(x) term of d/dx x·Φ(x)",
     &make<Bug::gelu_grad_missing_x_phi>},
    {"swiglu-silu-on-up-half",
     "swiglu applies silu to the second half of the fused fc1 output and multiplies by the "
     "first, silu(u)·g: the halves' order of the fused weight misread",
     &make<Bug::swiglu_silu_on_up_half>},
};

}  // namespace

std::span<const Mutant<MlpImplementation>> mlp_mutants() { return catalog; }

}  // namespace shardcheck::check
