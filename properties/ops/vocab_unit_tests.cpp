// Unit tests of ops/vocab_embedding.hpp and ops/vocab_cross_entropy.hpp: hand-checked values,
// uneven vocabulary splits with an empty shard, ids on shard boundaries, repeated ids,
// padding_idx, every token ignored, extreme logits, and the UsageErrors' messages. The property
// suite against the high-precision reference is properties/vocab/.
#include "ops/vocab_cross_entropy.hpp"
#include "ops/vocab_embedding.hpp"
#include "ops_test_util.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace shardcheck {
namespace {

using test::on_ranks;
using test::usage_error_of;
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

}  // namespace
}  // namespace shardcheck
