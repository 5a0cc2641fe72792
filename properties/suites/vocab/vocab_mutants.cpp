// The mutant catalog of the vocab suite. One hand-written vocabulary-parallel embedding and
// cross-entropy, correct, with a switch per bug; each mutant turns one switch on. Every bug here
// has shipped somewhere (Megatron-LM's label smoothing) or is the obvious slip in code that
// handles uneven vocabulary shards; the description says which.
#include "suites/vocab/vocab_mutants.hpp"

#include "layout/split_policy.hpp"
#include "suites/vocab/vocab_impl.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace shardcheck::check {
namespace {

enum class Bug {
  mask_excludes_shard_end,
  index_masked_output_not_zeroed,
  global_padding_idx_on_every_shard,
  smoothing_local_vocab_size,
  smoothing_local_mean,
  smoothing_n_classes_of_shard,
  mean_by_local_count,
  local_max,
  max_not_all_reduced,
  gathered_logits_as_sharded,
  target_from_rank0_only,
  owner_grad_missing_onehot,
  weighted_mean_by_count,
  class_weight_local_index,
  smoothing_unweighted_with_class_weight,
  token_weight_missing_in_backward,
  padding_logits_in_softmax,
  smoothing_over_padded_vocab,
  padding_grad_not_zeroed,
  embedding_range_from_real_vocab,
};

template <Bug B>
struct MutantVocab {
  template <class T>
  VocabRankOutputs<T> embedding(Communicator& tp, const VocabEmbeddingConfig& cfg,
                                const VocabRankInputs<T>& in) const {
    using A = acc_t<T>;
    const int p = tp.size(), r = tp.rank();
    Piece mine = split(cfg.vocab_split, cfg.vocab, p)[static_cast<std::size_t>(r)];
    const std::size_t rows_held = mine.size;
    if constexpr (B == Bug::embedding_range_from_real_vocab) {
      // The rank's id range from the real vocabulary's split; explicit sizes have no such
      // second reading (they sum to V_pad), so only chunk and balanced splits go wrong.
      if (cfg.vocab_split.kind() != SplitPolicy::Kind::explicit_sizes) {
        mine = split(cfg.vocab_split, real_vocab_size(cfg), p)[static_cast<std::size_t>(r)];
      }
    }
    const std::size_t tokens = in.ids.size(), h = in.w_shard.dim(1);
    auto owns = [&](std::size_t id) {
      if constexpr (B == Bug::mask_excludes_shard_end) {
        return id >= mine.offset && mine.size > 0 && !(id >= mine.offset + mine.size - 1);
      }
      // (the second test only keeps the wrong range of embedding_range_from_real_vocab inside
      // the rows the rank holds)
      return id >= mine.offset && id < mine.offset + mine.size && id - mine.offset < rows_held;
    };
    Tensor<T> partial(Shape{tokens, h});
    for (std::size_t t = 0; t < tokens; ++t) {
      const auto id = static_cast<std::size_t>(in.ids[t]);
      std::size_t local = 0;
      if (owns(id)) {
        local = id - mine.offset;
      } else if constexpr (B != Bug::index_masked_output_not_zeroed) {
        continue;
      }
      if (rows_held == 0) continue;
      for (std::size_t j = 0; j < h; ++j) partial(t, j) = in.w_shard(local, j);
    }
    VocabRankOutputs<T> out;
    Tensor<T> full;
    const Tensor<T>* dy = &in.dy;
    if (cfg.sequence_parallel_output) {
      const auto tsz = split_sizes(cfg.token_split, tokens, p);
      std::vector<std::size_t> counts;
      counts.reserve(tsz.size());
      for (auto s : tsz) counts.push_back(s * h);
      out.y = Tensor<T>(Shape{tsz[static_cast<std::size_t>(r)], h});
      tp.reduce_scatter(std::span<const T>(partial.span()), out.y.span(), counts, ReduceOp::sum,
                        cfg.reduce_algorithm);
      full = Tensor<T>(Shape{tokens, h});
      tp.all_gather(in.dy.span(), full.span(), counts);
      dy = &full;
    } else {
      tp.all_reduce(partial.span(), ReduceOp::sum, cfg.reduce_algorithm);
      out.y = std::move(partial);
    }
    std::vector<A> acc(rows_held * h, A(0));
    for (std::size_t t = 0; t < tokens; ++t) {
      const auto id = static_cast<std::size_t>(in.ids[t]);
      if (!owns(id)) continue;
      const std::size_t local = id - mine.offset;
      if constexpr (B == Bug::global_padding_idx_on_every_shard) {
        if (cfg.padding_idx && static_cast<std::int64_t>(local) == *cfg.padding_idx) continue;
      } else {
        if (cfg.padding_idx && in.ids[t] == *cfg.padding_idx) continue;
      }
      for (std::size_t j = 0; j < h; ++j) acc[local * h + j] += static_cast<A>((*dy)(t, j));
    }
    out.dw = Tensor<T>(Shape{rows_held, h});
    for (std::size_t i = 0; i < acc.size(); ++i) out.dw[i] = static_cast<T>(acc[i]);
    return out;
  }

  template <class T>
  VocabRankOutputs<T> cross_entropy(Communicator& tp, const VocabCrossEntropyConfig& cfg,
                                    const VocabRankInputs<T>& in) const {
    using A = acc_t<T>;
    const int p = tp.size(), r = tp.rank();
    const auto ps = split(cfg.vocab_split, cfg.vocab, p);
    Piece mine = ps[static_cast<std::size_t>(r)];
    const std::size_t tokens = in.ids.size();
    Tensor<T> z = in.logits_shard;
    if constexpr (B == Bug::gathered_logits_as_sharded) {
      // All columns on every rank, treated as the local shard (the owner of each column is
      // still found from the real split, so the target is taken once).
      std::vector<std::size_t> counts;
      counts.reserve(ps.size());
      for (const auto& q : ps) counts.push_back(q.size);
      Tensor<T> full(Shape{tokens, cfg.vocab});
      std::vector<T> col_major(tokens * cfg.vocab);
      // Gather column blocks: send this rank's [tokens, V_r] block transposed ([V_r, tokens]).
      std::vector<T> mine_t(mine.size * tokens);
      for (std::size_t t = 0; t < tokens; ++t) {
        for (std::size_t v = 0; v < mine.size; ++v) mine_t[v * tokens + t] = z(t, v);
      }
      std::vector<std::size_t> counts_t;
      counts_t.reserve(counts.size());
      for (auto c : counts) counts_t.push_back(c * tokens);
      tp.all_gather(std::span<const T>(mine_t), std::span<T>(col_major), counts_t);
      for (std::size_t v = 0; v < cfg.vocab; ++v) {
        for (std::size_t t = 0; t < tokens; ++t) full(t, v) = col_major[v * tokens + t];
      }
      z = std::move(full);
    }
    const std::size_t width = z.dim(1);
    const std::size_t col0 = B == Bug::gathered_logits_as_sharded ? 0 : mine.offset;
    // The real vocabulary V and how many of z's columns are real (the padding [V, V_pad) is
    // the tail of the global columns): the columns the softmax and the smoothing see.
    const std::size_t classes = real_vocab_size(cfg);
    const std::size_t live = col0 >= classes ? 0 : std::min(width, classes - col0);
    constexpr bool pad_in_softmax = B == Bug::padding_logits_in_softmax;
    constexpr bool pad_in_smoothing = B == Bug::smoothing_over_padded_vocab;
    const std::size_t softmax_cols = pad_in_softmax ? width : live;
    auto ignored = [&](std::int64_t y) { return cfg.ignore_index && y == *cfg.ignore_index; };
    auto owner_has = [&](std::int64_t y) {
      const auto yu = static_cast<std::size_t>(y);
      return !ignored(y) && yu >= mine.offset && yu < mine.offset + mine.size;
    };
    const bool smooth = cfg.label_smoothing > 0;
    const std::size_t k = smooth ? 3 : 2;
    std::vector<A> m(tokens, -std::numeric_limits<A>::infinity());
    for (std::size_t t = 0; t < tokens; ++t) {
      for (std::size_t v = 0; v < softmax_cols; ++v) {
        m[t] = std::max(m[t], static_cast<A>(z(t, v)));
      }
    }
    std::vector<A> local_m = m;
    if constexpr (B != Bug::max_not_all_reduced) {  // there each rank keeps its local max
      tp.all_reduce(std::span<A>(m), ReduceOp::max, cfg.reduce_algorithm);
    }
    std::vector<A> sums(k * tokens, A(0));
    std::vector<A> local_z(tokens, A(0));
    const bool by_class = !cfg.class_weight.empty(), by_token = !cfg.token_weight.empty();
    auto cw = [&](std::size_t v) { return by_class ? static_cast<A>(cfg.class_weight[v]) : A(1); };
    auto tw = [&](std::size_t t) { return by_token ? static_cast<A>(cfg.token_weight[t]) : A(1); };
    // The class weight of column v of z (global column col0 + v).
    auto col_weight = [&](std::size_t v) {
      return B == Bug::class_weight_local_index ? cw(v) : cw(col0 + v);
    };
    constexpr bool unweighted_smoothing = B == Bug::smoothing_unweighted_with_class_weight;
    // PyTorch's form of the loss, (1 − ε)·c_y·(lse − z_y) + (ε/V)·(Σ_v c_v·lse − Σ_v c_v·z_v),
    // also without class weights (c_v = 1), where the library writes lse − Σ_v target_v·z_v:
    // the two agree while ε/V is right.
    constexpr bool pytorch_form = B == Bug::smoothing_n_classes_of_shard;
    const bool class_form = by_class || pytorch_form;
    A c_total(0);
    for (std::size_t v = 0; v < classes; ++v) c_total += cw(v);
    if (unweighted_smoothing) c_total = static_cast<A>(classes);
    for (std::size_t t = 0; t < tokens; ++t) {
      A s(0), zs(0);
      const A shift = B == Bug::local_max ? local_m[t] : m[t];
      for (std::size_t v = 0; v < width; ++v) {
        const bool pad = v >= live;
        const A zv = static_cast<A>(z(t, v));
        if (v < softmax_cols) s += std::exp(zv - shift);
        if (pad) {
          // smoothing_over_padded_vocab: a padding column joins Σ z (with class weights it has
          // none, so only ε/V_pad is wrong there).
          if (pad_in_smoothing && !by_class) zs += zv;
          continue;
        }
        zs += by_class && !unweighted_smoothing ? A(col_weight(v) * zv) : zv;
      }
      if constexpr (B == Bug::local_max) {
        s = softmax_cols == 0 ? A(0) : A(s * std::exp(local_m[t]));
      }
      sums[t] = s;
      local_z[t] = zs;
      if (owner_has(in.ids[t])) {
        sums[tokens + t] = static_cast<A>(z(t, static_cast<std::size_t>(in.ids[t]) - col0));
      }
      if constexpr (B == Bug::target_from_rank0_only) {
        if (r != 0) sums[tokens + t] = 0;
      }
      if (smooth) sums[2 * tokens + t] = zs;
    }
    tp.all_reduce(std::span<A>(sums), ReduceOp::sum, cfg.reduce_algorithm);
    const A eps = static_cast<A>(cfg.label_smoothing);
    const A one = A(1) - eps;
    const A vsize = static_cast<A>(B == Bug::smoothing_local_vocab_size ||
                                           B == Bug::smoothing_local_mean || pytorch_form
                                       ? mine.size
                                   : pad_in_smoothing ? cfg.vocab
                                                      : classes);
    const A q = eps / vsize;
    std::size_t count = 0;
    A den(0);
    std::vector<A> loss(tokens, A(0)), lse(tokens, A(0));
    for (std::size_t t = 0; t < tokens; ++t) {
      const std::int64_t y = in.ids[t];
      if (ignored(y)) continue;
      const auto yu = static_cast<std::size_t>(y);
      if constexpr (B == Bug::mean_by_local_count) {
        count += owner_has(y) ? 1 : 0;
        if (owner_has(y)) den += tw(t) * cw(yu);
      } else {
        ++count;
        den += tw(t) * cw(yu);
      }
      lse[t] = B == Bug::local_max ? A(std::log(sums[t])) : A(std::log(sums[t]) + m[t]);
      // (the Z slot exists only with smoothing: sums holds 2·tokens elements without it)
      const A zsum = !smooth                          ? A(0)
                     : B == Bug::smoothing_local_mean ? local_z[t]
                                                      : sums[2 * tokens + t];
      A l;
      if (class_form) {
        l = A(one * cw(yu)) * A(lse[t] - sums[tokens + t]);
        if (smooth) l += q * A(A(c_total * lse[t]) - zsum);
      } else {
        A w = one * sums[tokens + t];
        if (smooth) w += q * zsum;
        l = lse[t] - w;
      }
      loss[t] = by_token ? A(tw(t) * l) : l;
    }
    if (!(by_class || by_token) || B == Bug::weighted_mean_by_count) den = static_cast<A>(count);
    VocabRankOutputs<T> out;
    if (cfg.reduction == LossReduction::none) {
      out.loss = Tensor<T>(Shape{tokens});
      for (std::size_t t = 0; t < tokens; ++t) out.loss[t] = static_cast<T>(loss[t]);
    } else {
      A total(0);
      for (A l : loss) total += l;
      if (cfg.reduction == LossReduction::mean) total = den == A(0) ? A(0) : total / den;
      out.loss = Tensor<T>(Shape{1});
      out.loss[0] = static_cast<T>(total);
    }
    // Backward, on the real shard.
    const A qg = B == Bug::smoothing_local_vocab_size || pytorch_form || pad_in_smoothing
                     ? q
                     : eps / static_cast<A>(classes);
    A common(0);
    if (cfg.reduction != LossReduction::none) {
      common = static_cast<A>(in.dloss[0]);
      if (cfg.reduction == LossReduction::mean) common = den == A(0) ? A(0) : common / den;
    }
    out.dlogits = Tensor<T>(Shape{tokens, mine.size});
    for (std::size_t t = 0; t < tokens; ++t) {
      const std::int64_t y = in.ids[t];
      if (ignored(y)) continue;
      const A base = cfg.reduction == LossReduction::none ? static_cast<A>(in.dloss[t]) : common;
      const A s = by_token && B != Bug::token_weight_missing_in_backward ? A(base * tw(t)) : base;
      const A ky = by_class ? A(one * cw(static_cast<std::size_t>(y))) : one;
      const A kk = class_form && smooth ? A(ky + A(qg * c_total)) : ky;
      for (std::size_t v = 0; v < mine.size; ++v) {
        const A zv = static_cast<A>(in.logits_shard(t, v));
        const A pv =
            B == Bug::local_max ? A(std::exp(zv - lse[t])) : A(std::exp(zv - m[t]) / sums[t]);
        const bool is_target = static_cast<std::int64_t>(mine.offset + v) == y;
        const bool onehot = is_target && B != Bug::owner_grad_missing_onehot;
        A d;
        if (mine.offset + v >= classes) {  // a padding column: 0 unless a bug reaches it
          if constexpr (pad_in_softmax) {
            d = kk * pv;  // the softmax over every column, padding included
          } else if constexpr (B == Bug::padding_grad_not_zeroed) {
            d = kk * pv - qg;  // softmax − ε/V written for every column of the shard
          } else if constexpr (pad_in_smoothing) {
            d = by_class ? A(0) : A(-qg);  // the uniform smoothing target covers it
          } else {
            continue;
          }
        } else if (class_form) {
          const A cv = B == Bug::class_weight_local_index ? cw(v) : cw(mine.offset + v);
          A c = qg * (unweighted_smoothing ? A(1) : cv);
          if (onehot) c += ky;
          d = kk * pv - c;
        } else {
          d = pv - (onehot ? one + qg : qg);
        }
        out.dlogits(t, v) = static_cast<T>(d * s);
      }
    }
    return out;
  }
};

template <Bug B>
constexpr auto& make = make_mutant<VocabImplementation, VocabAdapter<MutantVocab<B>>>;

// The catalog: each bug's name (as "mutant:<name>") and its story.
constexpr Mutant<VocabImplementation> catalog[] = {
    {"mask-off-by-one-at-shard-end",
     "the embedding's ownership mask compares the id with the shard's last row using >= where > "
     "is meant (an inclusive/exclusive vocab_end_index mix-up), so the last row of every shard "
     "is owned by nobody: its tokens get a zero embedding and its row no gradient",
     &make<Bug::mask_excludes_shard_end>, false},
    {"index-masked-output-not-zeroed",
     "the embedding masks the index of ids it does not own to 0 but forgets to zero the output "
     "rows: every non-owning rank adds its real local row 0 to the token's embedding",
     &make<Bug::index_masked_output_not_zeroed>, false},
    {"global-padding-idx-on-every-shard",
     "the embedding backward applies the global padding_idx as a LOCAL row index on every shard "
     "(F.embedding(..., padding_idx) called on the shard): the owner's padding row still gets a "
     "gradient and the row at that local index on every other shard gets none",
     &make<Bug::global_padding_idx_on_every_shard>, false},
    {"smoothing-local-vocab-size",
     "label smoothing uses the local vocabulary size V_r instead of the global V for ε/V (in the "
     "loss and in the gradient), as Megatron-LM's vocab_parallel_cross_entropy does (issues "
     "#737, #7464)",
     &make<Bug::smoothing_local_vocab_size>, false},
    {"smoothing-local-mean",
     "label smoothing's mean of log-probabilities is taken over the local shard only (Σ z over "
     "the rank's columns divided by V_r, never all_reduced), as in Megatron-LM: the loss differs "
     "from rank to rank",
     &make<Bug::smoothing_local_mean>, false},
    {"smoothing-n-classes-of-shard",
     "label smoothing in PyTorch's form, (1 − ε)·nll + (ε/n)·Σ_v −log p_v, with the sum over "
     "the whole vocabulary (all_reduced) but n read from the shard's logits (aten's n_classes = "
     "input.size(class_dim) on the rank's [tokens, V_r]): ε/V_r where ε/V is meant, so log S "
     "weighs (1 − ε) + ε·V/V_r in the loss and the gradient's softmax term is scaled by the "
     "same; smoothing-local-vocab-size is the same slip in the form lse − Σ_v target_v·z_v, "
     "which keeps log S at weight 1 (with class weights the two coincide)",
     &make<Bug::smoothing_n_classes_of_shard>, false},
    {"mean-by-local-count",
     "the mean reduction divides by the number of non-ignored tokens whose target this rank "
     "owns (a count built from the ownership mask) instead of the global count",
     &make<Bug::mean_by_local_count>, false},
    {"local-max",
     "the sum of exponentials is shifted by the rank's local max and combined as Σ_r exp(m_r)·S_r "
     "(the all_reduced global max is computed but not used): right for ordinary logits, inf or "
     "0 once exp(m_r) overflows or underflows (|logits| ~ 1e4)",
     &make<Bug::local_max>, false},
    {"max-not-all-reduced",
     "the all_reduce(max) of the row maxima is left out: each rank shifts its exponentials by "
     "its own local max m_r and the shifted sums are all_reduced as if they shared one shift, so "
     "S = Σ_r Σ_{v of rank r} exp(z_v − m_r) mixes the ranks' scales; the loss (log S + m_r, "
     "different "
     "on every rank) and the softmax exp(z_v − m_r)/S of the gradient are wrong wherever the "
     "ranks' maxima differ",
     &make<Bug::max_not_all_reduced>, false},
    {"gathered-logits-as-sharded",
     "the logits are all_gathered first and the full rows are then fed to the sharded algorithm "
     "as if they were the rank's shard: the sum of exponentials counts every column P times, so "
     "the loss is off by log P (and the logits travel)",
     &make<Bug::gathered_logits_as_sharded>, false},
    {"target-from-rank0-only",
     "the target logit is taken from rank 0 (a broadcast of rank 0's masked value) instead of "
     "summed from its owner: 0 whenever rank 0 does not own the target",
     &make<Bug::target_from_rank0_only>, false},
    {"owner-grad-missing-onehot",
     "the backward computes softmax − ε/V on every shard but the owner forgets to subtract "
     "(1 − ε) at the target column",
     &make<Bug::owner_grad_missing_onehot>, false},
    {"weighted-mean-by-count",
     "with token or class weights, the mean reduction divides the weighted sum by N, the number "
     "of non-ignored tokens, instead of the sum of their weights Σ ω_t·c_{y_t} (the loss_mask "
     "sum / num_tokens slip; PyTorch divides by Σ weight[target])",
     &make<Bug::weighted_mean_by_count>, false},
    {"class-weight-local-index",
     "the per-class weight of a column is looked up with the rank's LOCAL column index "
     "(weight[v_local] instead of weight[offset + v_local]) in the smoothing sum Σ c_v·z_v and "
     "in the gradient's ε/V·c_v: right on rank 0 only",
     &make<Bug::class_weight_local_index>, false},
    {"smoothing-unweighted-with-class-weight",
     "with class weights and label smoothing, only the nll term is weighted: the smoothing term "
     "stays ε·(lse − mean z) (Σ z_v and V instead of PyTorch's Σ c_v·z_v and Σ c_v), in the loss "
     "and in the gradient",
     &make<Bug::smoothing_unweighted_with_class_weight>, false},
    {"token-weight-missing-in-backward",
     "the per-token weight (loss_mask) multiplies the forward's per-token losses but the "
     "backward scales the gradient by dloss only",
     &make<Bug::token_weight_missing_in_backward>, false},
    {"padding-logits-in-softmax",
     "with a padded vocabulary (real_vocab < vocab), the padding columns [V, V_pad) of the "
     "logits are not masked: they enter the max, the sum of exponentials and the softmax of the "
     "gradient, as in Megatron-LM's vocab_parallel_cross_entropy, which runs over all "
     "padded_vocab_size columns (_vocab_size_with_padding) and leaves the padding logits to be "
     "trained toward -inf: a different loss from the dense model's over V classes",
     &make<Bug::padding_logits_in_softmax>, false},
    {"smoothing-over-padded-vocab",
     "label smoothing spreads ε over the padded vocabulary: ε/V_pad instead of ε/V, the "
     "smoothing sum Σ z_v over the padding columns too, and a −ε/V_pad gradient in each "
     "padding column (the padded vocab_size passed where the real one is meant); the softmax "
     "itself is masked",
     &make<Bug::smoothing_over_padded_vocab>, false},
    {"padding-grad-not-zeroed",
     "the forward masks the padding columns but the backward writes softmax − ε/V for every "
     "column of the shard, padding included (the mask applied in the forward only): the padding "
     "columns get exp(z_v − m)/S, huge for a padding logit above the real max, where 0 is due",
     &make<Bug::padding_grad_not_zeroed>, false},
    {"embedding-range-from-real-vocab",
     "the embedding computes each rank's id range from the REAL vocabulary's split (vLLM's "
     "org_vocab_size where the padded num_embeddings_padded is meant) while the table is split "
     "by the padded count: under chunk and balanced splits a rank past the first maps ids to the "
     "wrong local rows, reading padding (garbage) rows in the forward and giving padding rows a "
     "gradient in the backward",
     &make<Bug::embedding_range_from_real_vocab>, false},
};

}  // namespace

std::span<const Mutant<VocabImplementation>> vocab_mutants() { return catalog; }

}  // namespace shardcheck::check
