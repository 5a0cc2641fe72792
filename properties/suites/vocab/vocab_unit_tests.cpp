// Unit tests of ops/vocab/vocab_embedding.hpp and ops/vocab/vocab_cross_entropy.hpp: hand-checked
// values, uneven vocabulary splits with an empty shard, ids on shard boundaries, repeated ids,
// padding_idx, a padded vocabulary (V real of V_pad, a rank of padding only: both ops by hand),
// every token ignored, extreme logits, PyTorch's class weights and per-token weights
// (hand-computed), all-zero weights under mean, and the UsageErrors' messages. The property
// suite against the high-precision reference is properties/suites/vocab/.
#include "ops/vocab/vocab_cross_entropy.hpp"
#include "ops/vocab/vocab_embedding.hpp"
#include "suites/vocab/vocab_padded_example.hpp"
#include "testing/ops_test_util.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace shardcheck::vocab_unit_tests {
namespace {

using namespace test;  // the suites' test helpers (testing/ops_test_util.hpp)
using ::testing::HasSubstr;

const SplitPolicy uneven = SplitPolicy::explicit_sizes({2, 0, 3});  // V = 5 over 3 ranks

Tensor<double> table() {  // W[v, j] = 10·v + j
  Tensor<double> w(Shape{5, 2});
  for (std::size_t v = 0; v < 5; ++v) {
    for (std::size_t j = 0; j < 2; ++j)
      w(v, j) = 10.0 * static_cast<double>(v) + static_cast<double>(j);
  }
  return w;
}

Tensor<double> rows(const Tensor<double>& w, std::size_t off, std::size_t n) {
  Tensor<double> out(Shape{n, w.dim(1)});
  for (std::size_t i = 0; i < n * w.dim(1); ++i) out[i] = w[off * w.dim(1) + i];
  return out;
}

TEST(VocabEmbedding, uneven_split_with_an_empty_shard_looks_up_every_boundary_id) {
  const std::vector<std::int64_t> ids = {0, 1, 2, 4, 1, 0};
  VocabEmbeddingConfig cfg;
  cfg.vocab = 5;
  cfg.vocab_split = uneven;
  const auto w = table();
  const std::size_t off[] = {0, 2, 2}, n[] = {2, 0, 3};
  const auto ys = on_ranks<Tensor<double>>(3, [&](Communicator& c) {
    const auto r = static_cast<std::size_t>(c.rank());
    return vocab_parallel_embedding<double>(c, cfg, ids, rows(w, off[r], n[r]));
  });
  const auto dense = embedding<double>(ids, w);
  for (const auto& y : ys) EXPECT_TRUE(bit_equal(y, dense));
  EXPECT_EQ(dense(3, 1), 41.0);
}

TEST(VocabEmbedding, backward_accumulates_repeats_and_skips_padding_on_its_owner_only) {
  const std::vector<std::int64_t> ids = {2, 4, 2, 0, 2, 1};
  VocabEmbeddingConfig cfg;
  cfg.vocab = 5;
  cfg.vocab_split = uneven;
  cfg.padding_idx = 4;  // rank 2's local row 2
  Tensor<double> dy(Shape{6, 2});
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<double>(i + 1);
  const auto dws = on_ranks<Tensor<double>>(3, [&](Communicator& c) {
    return vocab_parallel_embedding_backward<double>(c, cfg, ids, dy);
  });
  EXPECT_EQ(dws[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(dws[1].shape(), (Shape{0, 2}));
  EXPECT_EQ(dws[2].shape(), (Shape{3, 2}));
  EXPECT_EQ(dws[0](0, 0), 7.0);              // token 3
  EXPECT_EQ(dws[0](1, 1), 12.0);             // token 5
  EXPECT_EQ(dws[2](0, 0), 1.0 + 5.0 + 9.0);  // id 2 three times
  EXPECT_EQ(dws[2](0, 1), 2.0 + 6.0 + 10.0);
  EXPECT_EQ(dws[2](2, 0), 0.0);  // padding row: no gradient
  EXPECT_EQ(dws[2](2, 1), 0.0);
  const auto dense = embedding_backward<double>(ids, dy, 5, 4);
  EXPECT_EQ(dense(2, 0), 15.0);
  EXPECT_EQ(dense(4, 0), 0.0);
}

TEST(VocabEmbedding, sequence_parallel_output_is_the_token_shard) {
  const std::vector<std::int64_t> ids = {4, 3, 2, 1, 0};
  VocabEmbeddingConfig cfg;
  cfg.vocab = 5;
  cfg.vocab_split = uneven;
  cfg.sequence_parallel_output = true;
  cfg.token_split = SplitPolicy::explicit_sizes({1, 4, 0});
  const auto w = table();
  const std::size_t off[] = {0, 2, 2}, n[] = {2, 0, 3};
  const auto ys = on_ranks<Tensor<double>>(3, [&](Communicator& c) {
    const auto r = static_cast<std::size_t>(c.rank());
    return vocab_parallel_embedding<double>(c, cfg, ids, rows(w, off[r], n[r]));
  });
  EXPECT_EQ(ys[0].shape(), (Shape{1, 2}));
  EXPECT_EQ(ys[0](0, 0), 40.0);
  EXPECT_EQ(ys[1].shape(), (Shape{4, 2}));
  EXPECT_EQ(ys[1](3, 1), 1.0);
  EXPECT_EQ(ys[2].shape(), (Shape{0, 2}));
}

TEST(VocabEmbedding, out_of_range_id_names_the_rank_the_id_and_V) {
  VocabEmbeddingConfig cfg;
  cfg.vocab = 5;
  cfg.vocab_split = uneven;
  const std::vector<std::int64_t> ids = {1, 7};
  const auto w = table();
  const auto f = usage_error_of(3, [&](Communicator& c) {
    const std::size_t off[] = {0, 2, 2}, n[] = {2, 0, 3};
    const auto r = static_cast<std::size_t>(c.rank());
    vocab_parallel_embedding<double>(c, cfg, ids, rows(w, off[r], n[r]));
  });
  EXPECT_THAT(f.message, HasSubstr("vocab_parallel_embedding on rank"));
  EXPECT_THAT(f.message, HasSubstr("id 7 at token 1"));
  EXPECT_THAT(f.message, HasSubstr("V = 5"));
  EXPECT_THAT(usage_error_of([&] { embedding<double>(std::vector<std::int64_t>{-1}, w); }),
              HasSubstr("id -1"));
}

// logits split [2, 0, 3] over 3 ranks.
template <class T>
std::vector<Tensor<T>> ce_grads(const VocabCrossEntropyConfig& cfg, const Tensor<double>& z,
                                const std::vector<std::int64_t>& y, Tensor<T>* loss) {
  const auto sizes = split(cfg.vocab_split, cfg.vocab, 3);
  std::vector<Tensor<T>> losses(3);
  auto grads = on_ranks<Tensor<T>>(3, [&](Communicator& c) {
    const Piece p = sizes[static_cast<std::size_t>(c.rank())];
    Tensor<T> shard(Shape{z.dim(0), p.size});
    for (std::size_t t = 0; t < z.dim(0); ++t) {
      for (std::size_t v = 0; v < p.size; ++v) shard(t, v) = static_cast<T>(z(t, p.offset + v));
    }
    auto f = vocab_parallel_cross_entropy<T>(c, cfg, shard, y);
    Tensor<T> dloss(Shape{cfg.reduction == LossReduction::none ? z.dim(0) : 1});
    for (auto& d : dloss.values()) d = T(1);
    losses[static_cast<std::size_t>(c.rank())] = f.loss;
    return vocab_parallel_cross_entropy_backward<T>(c, cfg, shard, y, f.saved, dloss);
  });
  EXPECT_TRUE(bit_equal(losses[0], losses[1]) && bit_equal(losses[0], losses[2]));
  *loss = losses[0];
  return grads;
}

TEST(VocabCrossEntropy, uniform_logits_give_log_V_and_softmax_minus_onehot) {
  VocabCrossEntropyConfig cfg;
  cfg.vocab = 5;
  cfg.vocab_split = uneven;
  cfg.reduction = LossReduction::none;
  Tensor<double> z(Shape{1, 5});  // zeros
  Tensor<double> loss;
  const auto g = ce_grads<double>(cfg, z, {3}, &loss);
  EXPECT_NEAR(loss[0], std::log(5.0), 1e-15);
  EXPECT_EQ(g[1].shape(), (Shape{1, 0}));
  EXPECT_NEAR(g[0](0, 0), 0.2, 1e-16);
  EXPECT_NEAR(g[2](0, 1), 0.2 - 1.0, 1e-16);  // column 3 on rank 2
}

TEST(VocabCrossEntropy, smoothing_uses_the_global_vocabulary) {
  VocabCrossEntropyConfig cfg;
  cfg.vocab = 5;
  cfg.vocab_split = uneven;
  cfg.reduction = LossReduction::sum;
  cfg.label_smoothing = 0.5;
  Tensor<double> z(Shape{1, 5});
  for (std::size_t v = 0; v < 5; ++v) z[v] = static_cast<double>(v);
  Tensor<double> loss;
  const auto g = ce_grads<double>(cfg, z, {0}, &loss);
  double lse = 0;
  for (std::size_t v = 0; v < 5; ++v) lse += std::exp(static_cast<double>(v));
  lse = std::log(lse);
  // (1 − ε)(lse − z_0) + ε(lse − mean z) with mean z = 2.
  EXPECT_NEAR(loss[0], 0.5 * lse + 0.5 * (lse - 2.0), 1e-14);
  EXPECT_NEAR(g[2](0, 2), std::exp(4.0 - lse) - 0.1, 1e-15);
}

TEST(VocabCrossEntropy, every_token_ignored_gives_zero_loss_and_zero_gradient) {
  for (auto red : {LossReduction::mean, LossReduction::sum, LossReduction::none}) {
    VocabCrossEntropyConfig cfg;
    cfg.vocab = 5;
    cfg.vocab_split = uneven;
    cfg.reduction = red;
    Tensor<double> z(Shape{2, 5});
    z[3] = 1.5;
    Tensor<float> loss;
    const auto g = ce_grads<float>(cfg, z, {-100, -100}, &loss);
    for (float l : loss.values()) EXPECT_EQ(l, 0.0f);  // PyTorch's mean gives NaN here
    for (const auto& gr : g) {
      for (float v : gr.values()) EXPECT_EQ(v, 0.0f);
    }
  }
}

TEST(VocabCrossEntropy, extreme_logits_stay_finite_in_float) {
  VocabCrossEntropyConfig cfg;
  cfg.vocab = 5;
  cfg.vocab_split = uneven;
  cfg.reduction = LossReduction::mean;
  Tensor<double> z(Shape{1, 5});
  for (std::size_t v = 0; v < 5; ++v) z[v] = v == 4 ? 1e4 : -1e4;
  Tensor<float> loss;
  const auto g = ce_grads<float>(cfg, z, {0}, &loss);
  EXPECT_EQ(loss[0], 2e4f);
  EXPECT_EQ(g[0](0, 0), -1.0f);
  EXPECT_EQ(g[2](0, 2), 1.0f);
}

// Two tokens, V = 5: z_0 = [0, 1, 2, 3, 4] with target 0, z_1 = [1, 0, 0, 0, 0] with target 3;
// class weights c = [2, 0.5, 1, 0, 3], token weights ω = [0.5, 2], ε = 0.5. The expected numbers
// are PyTorch's formula evaluated by hand in python3 (plain math, float64):
//   loss_t = ω_t·((1 − ε)·c_y·(−log p_y) + (ε/V)·Σ_v c_v·(−log p_v)),  D = Σ_t ω_t·c_{y_t} = 1
//   ∂loss_t/∂z_v = ω_t·(K·p_v − (ε/V)·c_v − [v = y]·(1 − ε)·c_y),  K = (1 − ε)c_y + (ε/V)Σc
// Token 1's target has class weight 0: it adds nothing to D, but its smoothing term counts.
Tensor<double> weighted_logits() {
  Tensor<double> z(Shape{2, 5});
  for (std::size_t v = 0; v < 5; ++v) z(0, v) = static_cast<double>(v);
  z(1, 0) = 1.0;
  return z;
}

VocabCrossEntropyConfig weighted_config(LossReduction red) {
  VocabCrossEntropyConfig cfg;
  cfg.vocab = 5;
  cfg.vocab_split = uneven;
  cfg.reduction = red;
  cfg.label_smoothing = 0.5;
  cfg.class_weight = {2, 0.5, 1, 0, 3};
  cfg.token_weight = {0.5, 2};
  return cfg;
}

TEST(VocabCrossEntropy, class_and_token_weights_follow_pytorchs_formula_per_token) {
  Tensor<double> loss;
  const auto g =
      ce_grads<double>(weighted_config(LossReduction::none), weighted_logits(), {0, 3}, &loss);
  EXPECT_NEAR(loss[0], 2.9478293766485146, 1e-14);
  EXPECT_NEAR(loss[1], 2.0762821740207826, 1e-14);
  EXPECT_NEAR(g[0](0, 0), -0.5903836094612673, 1e-15);  // the target column
  EXPECT_NEAR(g[0](0, 1), 0.0011400596568025174, 1e-15);
  EXPECT_NEAR(g[2](0, 2), 0.3750371334110354, 1e-15);   // column 4 on rank 2: c_4 = 3
  EXPECT_NEAR(g[2](1, 1), 0.19350185556270086, 1e-15);  // target 3, class weight 0
  EXPECT_NEAR(g[0](1, 0), 0.1259925777491966, 1e-15);
  EXPECT_NEAR(g[2](1, 2), -0.40649814443729926, 1e-15);
}

TEST(VocabCrossEntropy, weighted_mean_divides_by_the_sum_of_token_times_target_class_weights) {
  Tensor<double> loss;
  const auto g =
      ce_grads<double>(weighted_config(LossReduction::mean), weighted_logits(), {0, 3}, &loss);
  EXPECT_NEAR(loss[0], 5.024111550669297, 1e-14);  // (2.9478... + 2.0762...) / D, D = 1
  EXPECT_NEAR(g[2](0, 2), 0.3750371334110354, 1e-15);
  EXPECT_NEAR(g[2](1, 1), 0.19350185556270086, 1e-15);

  // Class weights alone, no smoothing (nll_loss with weight): Σ c_y·nll_t / Σ c_y, Σ c_y = 2.
  auto cfg = weighted_config(LossReduction::mean);
  cfg.label_smoothing = 0;
  cfg.token_weight.clear();
  ce_grads<double>(cfg, weighted_logits(), {0, 3}, &loss);
  EXPECT_NEAR(loss[0], 4.451914395937593, 1e-14);

  // Token weights alone (a loss mask with weights): Σ ω_t·nll_t / Σ ω_t, and the sum.
  cfg = weighted_config(LossReduction::mean);
  cfg.label_smoothing = 0;
  cfg.class_weight.clear();
  ce_grads<double>(cfg, weighted_logits(), {0, 3}, &loss);
  EXPECT_NEAR(loss[0], 2.4142488324310767, 1e-14);
  cfg.reduction = LossReduction::sum;
  ce_grads<double>(cfg, weighted_logits(), {0, 3}, &loss);
  EXPECT_NEAR(loss[0], 6.035622081077692, 1e-14);
}

TEST(VocabCrossEntropy, all_zero_weights_give_zero_mean_loss_and_zero_gradient) {
  // D = 0 under mean: PyTorch gives NaN (0/0); the library's convention, as for every token
  // ignored, is loss 0 and gradient 0.
  for (int which = 0; which < 3; ++which) {
    auto cfg = weighted_config(LossReduction::mean);
    if (which == 0) cfg.token_weight = {0, 0};
    if (which == 1) cfg.class_weight = {0, 0, 0, 0, 0};
    if (which == 2) cfg.class_weight = {0, 1, 1, 0, 1};  // both targets' classes weigh 0
    Tensor<float> loss;
    const auto g = ce_grads<float>(cfg, weighted_logits(), {0, 3}, &loss);
    EXPECT_EQ(loss[0], 0.0f) << which;
    for (const auto& gr : g) {
      for (float v : gr.values()) EXPECT_EQ(v, 0.0f) << which;
    }
  }
}

TEST(VocabCrossEntropy,
     weight_vector_of_the_wrong_length_names_the_rank_the_length_and_what_to_pass) {
  auto shard_of = [](const Communicator& c) {
    const std::size_t n[] = {2, 0, 3};
    return Tensor<double>(Shape{2, n[c.rank()]});
  };
  VocabCrossEntropyConfig cfg;
  cfg.vocab = 5;
  cfg.vocab_split = uneven;
  cfg.class_weight = {1, 1};  // rank 0's V_r columns, not V
  auto f = usage_error_of(3, [&](Communicator& c) {
    vocab_parallel_cross_entropy<double>(c, cfg, shard_of(c), std::vector<std::int64_t>{0, 4});
  });
  EXPECT_THAT(f.message, HasSubstr("vocab_parallel_cross_entropy on rank"));
  EXPECT_THAT(f.message, HasSubstr("class_weight has 2 values"));
  EXPECT_THAT(f.message, HasSubstr("V = 5"));
  EXPECT_THAT(f.message, HasSubstr("pass the full vector of V class weights on every rank"));

  cfg.class_weight.clear();
  cfg.token_weight = {1, 1, 1};
  f = usage_error_of(3, [&](Communicator& c) {
    vocab_parallel_cross_entropy<double>(c, cfg, shard_of(c), std::vector<std::int64_t>{0, 4});
  });
  EXPECT_THAT(f.message, HasSubstr("vocab_parallel_cross_entropy on rank"));
  EXPECT_THAT(f.message, HasSubstr("token_weight has 3 values but there are 2 tokens"));
  EXPECT_THAT(f.message, HasSubstr("pass one weight per token"));
}

TEST(VocabCrossEntropy, out_of_range_target_names_the_rank_the_target_and_V) {
  VocabCrossEntropyConfig cfg;
  cfg.vocab = 5;
  cfg.vocab_split = uneven;
  const auto f = usage_error_of(3, [&](Communicator& c) {
    const std::size_t n[] = {2, 0, 3};
    Tensor<double> shard(Shape{2, n[c.rank()]});
    vocab_parallel_cross_entropy<double>(c, cfg, shard, std::vector<std::int64_t>{0, 5});
  });
  EXPECT_THAT(f.message, HasSubstr("vocab_parallel_cross_entropy on rank"));
  EXPECT_THAT(f.message, HasSubstr("target 5 of token 1"));
  EXPECT_THAT(f.message, HasSubstr("V = 5"));
}

// ---------------------------------------------------------------- a padded vocabulary

TEST(VocabPadding, cross_entropy_is_the_dense_loss_over_the_real_classes_by_hand) {
  auto cfg = padded<VocabCrossEntropyConfig>();
  cfg.reduction = LossReduction::none;
  cfg.label_smoothing = 0.5;
  // Real logits [0, 1, 2] and [2, 0, -1]; the padding columns hold logits far above them (and
  // an infinity): any of them in the max, the sum of exp or the smoothing sum changes the loss.
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor<double> z({2, padded_v}, {0, 1, 2, 100, 50, inf, 2, 0, -1, 1e300, 30, 40});
  const std::vector<std::int64_t> targets = {1, 0};
  std::vector<Tensor<double>> losses(3);
  const auto grads = on_ranks<Tensor<double>>(3, [&](Communicator& c) {
    const Tensor<double> shard = columns_of(z, c);
    auto f = vocab_parallel_cross_entropy<double>(c, cfg, shard, targets);
    losses[static_cast<std::size_t>(c.rank())] = f.loss;
    return vocab_parallel_cross_entropy_backward<double>(c, cfg, shard, targets, f.saved,
                                                         Tensor<double>({2}, {1, 1}));
  });
  // By hand, over V = 3: loss = (1 − ε)(lse − z_y) + ε(lse − mean z), ε/V = 1/6;
  // ∂/∂z_v = softmax_v − 1/6 − [v = y]/2.
  const double real[2][3] = {{0, 1, 2}, {2, 0, -1}};
  for (std::size_t t = 0; t < 2; ++t) {
    double s = 0, mean = 0;
    for (double x : real[t]) {
      s += std::exp(x);
      mean += x / 3;
    }
    const double lse = std::log(s);
    const auto y = static_cast<std::size_t>(targets[t]);
    EXPECT_NEAR(losses[0][t], 0.5 * (lse - real[t][y]) + 0.5 * (lse - mean), 1e-14) << t;
    for (std::size_t v = 0; v < real_v; ++v) {
      const double want = std::exp(real[t][v] - lse) - 1.0 / 6 - (v == y ? 0.5 : 0.0);
      EXPECT_NEAR(grads[v / width](t, v % width), want, 1e-15) << t << ", " << v;
    }
    // The padding columns' gradient: exactly 0, on rank 1 (column 3) and all of rank 2.
    EXPECT_EQ(grads[1](t, 1), 0.0) << t;
    EXPECT_EQ(grads[2](t, 0), 0.0) << t;
    EXPECT_EQ(grads[2](t, 1), 0.0) << t;
  }
  EXPECT_TRUE(bit_equal(losses[0], losses[1]) && bit_equal(losses[0], losses[2]));
}

TEST(VocabPadding, class_weights_cover_the_real_classes_only_by_hand) {
  auto cfg = padded<VocabCrossEntropyConfig>();
  cfg.reduction = LossReduction::mean;
  cfg.class_weight = {1, 2, 0.5};  // [V], PyTorch's dense `weight`
  const Tensor<double> z({1, padded_v}, {0, 0, 0, 9, 9, 9});
  const auto losses = on_ranks<Tensor<double>>(3, [&](Communicator& c) {
    return vocab_parallel_cross_entropy<double>(c, cfg, columns_of(z, c),
                                                std::vector<std::int64_t>{2})
        .loss;
  });
  // Uniform over the 3 real classes: −log p_y = log 3, weighted by c_2 and divided by c_2.
  EXPECT_NEAR(losses[0][0], std::log(3.0), 1e-15);
}

TEST(VocabPadding, embedding_never_reads_a_padding_row_and_gives_it_no_gradient_by_hand) {
  const auto cfg = padded<VocabEmbeddingConfig>();
  Tensor<double> w(Shape{padded_v, 2});  // real rows W[v, j] = 10·v + j; padding rows garbage
  for (std::size_t v = 0; v < padded_v; ++v) {
    for (std::size_t j = 0; j < 2; ++j) {
      w(v, j) = v < real_v ? 10.0 * static_cast<double>(v) + static_cast<double>(j) : 1e300;
    }
  }
  const std::vector<std::int64_t> ids = {2, 0, 2};
  const Tensor<double> dy({3, 2}, {1, 2, 3, 4, 5, 6});
  struct Out {
    Tensor<double> y, dw;
  };
  const auto outs = on_ranks<Out>(3, [&](Communicator& c) {
    const auto off = width * static_cast<std::size_t>(c.rank());
    Tensor<double> shard(Shape{width, 2});
    for (std::size_t i = 0; i < width * 2; ++i) shard[i] = w[off * 2 + i];
    return Out{vocab_parallel_embedding<double>(c, cfg, ids, shard),
               vocab_parallel_embedding_backward<double>(c, cfg, ids, dy)};
  });
  EXPECT_TRUE(bit_equal(outs[0].y, Tensor<double>({3, 2}, {20, 21, 0, 1, 20, 21})));
  EXPECT_TRUE(bit_equal(outs[0].dw, Tensor<double>({2, 2}, {3, 4, 0, 0})));  // rows 0, 1
  EXPECT_TRUE(
      bit_equal(outs[1].dw, Tensor<double>({2, 2}, {6, 8, 0, 0})));  // row 2; row 3 is padding
  EXPECT_TRUE(bit_equal(outs[2].dw, Tensor<double>({2, 2}, {0, 0, 0, 0})));  // only padding
}

}  // namespace
}  // namespace shardcheck::vocab_unit_tests
