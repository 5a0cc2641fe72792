// Unit tests of lib/ops/norm/norm.hpp: hand-checked values, the sequence-parallel forward and dx
// reproducing the dense op's bits for every rank's tokens (empty ranks included), the
// parameter gradients summed (not averaged) and bit-identical on every rank, the traffic (one
// all_reduce), and the usage errors. The property suite against the reference is properties/norm.
#include "ops/norm/norm.hpp"

#include "runtime/ledger.hpp"
#include "testing/ops_test_util.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace shardcheck::test {
namespace {

using ::testing::HasSubstr;

template <class T>
bool same_bits(const Tensor<T>& a, const Tensor<T>& b) {
  return a.shape() == b.shape() &&
         (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

TEST(norm, layer_norm_of_a_known_row) {
  // x = [1, 2, 3]: mean 2, var 2/3, y = (x − 2)/sqrt(2/3 + eps)·gamma + beta.
  const NormConfig cfg{NormKind::layer_norm, 1e-5};
  const auto x = tensor_of<double>({1, 3}, {1, 2, 3});
  const auto g = tensor_of<double>({3}, {1, 2, 0.5});
  const auto b = tensor_of<double>({3}, {0, 1, -1});
  const auto y = norm_forward(cfg, x, g, b);
  const double r = 1 / std::sqrt(2.0 / 3 + 1e-5);
  EXPECT_NEAR(y[0], -r, 1e-15);
  EXPECT_NEAR(y[1], 1.0, 1e-15);
  EXPECT_NEAR(y[2], 0.5 * r - 1, 1e-15);
}

TEST(norm, rms_norm_of_a_known_row) {
  const NormConfig cfg{NormKind::rms_norm, 1e-6};
  const auto x = tensor_of<double>({1, 2}, {3, 4});
  const auto g = tensor_of<double>({2}, {1, -1});
  const auto y = norm_forward(cfg, x, g, Tensor<double>());
  const double r = 1 / std::sqrt(12.5 + 1e-6);
  EXPECT_NEAR(y[0], 3 * r, 1e-15);
  EXPECT_NEAR(y[1], -4 * r, 1e-15);
}

TEST(norm, parameter_gradients_are_the_token_sums) {
  const NormConfig cfg{NormKind::layer_norm, 1e-5};
  const auto x = random_tensor<double>({5, 4}, 1);
  const auto g = random_tensor<double>({4}, 2);
  const auto dy = random_tensor<double>({5, 4}, 3);
  const auto grads = norm_backward(cfg, x, g, dy);
  // dbeta = Σ_t dy; dgamma = Σ_t dy·xhat with xhat = (y − beta)/gamma for beta = 0.
  const auto y = norm_forward(cfg, x, g, Tensor<double>({4}, std::vector<double>(4, 0.0)));
  for (std::size_t j = 0; j < 4; ++j) {
    double db = 0, dg = 0;
    for (std::size_t t = 0; t < 5; ++t) {
      db += dy(t, j);
      dg += dy(t, j) * y(t, j) / g[j];
    }
    EXPECT_NEAR(grads.dbeta[j], db, 1e-13);
    EXPECT_NEAR(grads.dgamma[j], dg, 1e-12);
  }
}

template <class T>
class SequenceParallelNorm : public ::testing::Test {};
TYPED_TEST_SUITE(SequenceParallelNorm, AllTypes);

TYPED_TEST(SequenceParallelNorm, is_local_per_token_and_sums_parameter_gradients) {
  using T = TypeParam;
  const std::size_t tokens = 7, h = 5;
  const auto x = random_tensor<T>({tokens, h}, 11);
  const auto g = random_tensor<T>({h}, 12);
  const auto b = random_tensor<T>({h}, 13);
  const auto dy = random_tensor<T>({tokens, h}, 14);
  for (const NormKind kind :
       {NormKind::layer_norm, NormKind::layer_norm_no_bias, NormKind::rms_norm}) {
    const Tensor<T> beta = has_beta(kind) ? b : Tensor<T>();
    const NormConfig ncfg{kind, 1e-5};
    for (const int p : {1, 3, 4}) {
      for (const auto& policy : policies_for(tokens, p)) {
        SequenceParallelNormConfig cfg{ncfg, tokens, policy, Algorithm::ring};
        const auto ps = split(policy, tokens, p);
        struct Out {
          Tensor<T> y;
          NormGrads<T> g;
          std::size_t collectives = 0;
        };
        const auto outs = on_ranks<Out>(p, [&](Communicator& comm) {
          const auto piece = ps[static_cast<std::size_t>(comm.rank())];
          const auto xr = rows_of(x, piece);
          Out o{sequence_parallel_norm(comm, cfg, xr, g, beta),
                sequence_parallel_norm_backward(comm, cfg, xr, g, rows_of(dy, piece)), 0};
          return o;
        });
        double dg_sum_dense = 0, dg_sp = 0;
        for (int r = 0; r < p; ++r) {
          const auto piece = ps[static_cast<std::size_t>(r)];
          const auto& o = outs[static_cast<std::size_t>(r)];
          EXPECT_TRUE(same_bits(o.y, norm_forward(ncfg, rows_of(x, piece), g, beta)))
              << to_string(kind) << " P=" << p << " " << policy.to_string() << " rank " << r;
          const auto local = norm_backward(ncfg, rows_of(x, piece), g, rows_of(dy, piece));
          EXPECT_TRUE(same_bits(o.g.dx, local.dx)) << "rank " << r;
          EXPECT_TRUE(same_bits(o.g.dgamma, outs[0].g.dgamma)) << "dgamma differs on rank " << r;
          EXPECT_TRUE(same_bits(o.g.dbeta, outs[0].g.dbeta)) << "dbeta differs on rank " << r;
          dg_sum_dense += static_cast<double>(local.dgamma[0]);
        }
        dg_sp = static_cast<double>(outs[0].g.dgamma[0]);
        // Summed, not averaged: close to the sum of the ranks' partials (T-rounded steps).
        EXPECT_NEAR(dg_sp, dg_sum_dense, 0.05 * (1 + std::fabs(dg_sum_dense)))
            << to_string(kind) << " P=" << p;
        if (p == 1) {
          const auto dense = norm_backward(ncfg, x, g, dy);
          EXPECT_TRUE(same_bits(outs[0].g.dgamma, dense.dgamma));
        }
      }
    }
  }
}

TEST(SequenceParallelNormTraffic, one_all_reduce_of_the_parameter_gradients) {
  const std::size_t tokens = 5, h = 3;
  const auto x = random_tensor<float>({tokens, h}, 21);
  const auto g = random_tensor<float>({h}, 22);
  const auto b = random_tensor<float>({h}, 23);
  SequenceParallelNormConfig cfg{{NormKind::layer_norm, 1e-5},
                                 tokens,
                                 SplitPolicy::explicit_sizes({0, 5, 0}),
                                 Algorithm::ring};
  const auto ps = split(cfg.token_split, tokens, 3);
  auto result = run(3, [&](Communicator& comm) {
    const auto xr = rows_of(x, ps[static_cast<std::size_t>(comm.rank())]);
    (void)sequence_parallel_norm(comm, cfg, xr, g, b);
    (void)sequence_parallel_norm_backward(comm, cfg, xr, g, xr);
  });
  for (const auto& ledger : result.ledgers) {
    std::size_t reduces = 0;
    for (const auto& e : ledger.entries()) {
      if (e.op == Collective::barrier) continue;
      EXPECT_EQ(e.op, Collective::all_reduce);
      EXPECT_EQ(e.count, 2 * h);
      ++reduces;
    }
    EXPECT_EQ(reduces, 1U);
  }
}

TEST(NormUsageErrors, name_the_shapes_and_what_to_do) {
  const NormConfig ln{NormKind::layer_norm, 1e-5};
  const auto x = random_tensor<float>({2, 3}, 31);
  const auto g = random_tensor<float>({3}, 32);
  EXPECT_THAT(usage_error_of([&] { (void)norm_forward(ln, x, random_tensor<float>({4}, 1), g); }),
              HasSubstr("gamma must be [hidden] = [3]"));
  EXPECT_THAT(usage_error_of([&] { (void)norm_forward(ln, x, g, Tensor<float>()); }),
              HasSubstr("needs beta [hidden]"));
  EXPECT_THAT(usage_error_of([&] {
                (void)norm_forward(NormConfig{NormKind::rms_norm, 1e-5}, x, g, g);
              }),
              HasSubstr("has no bias; pass an empty beta"));
  EXPECT_THAT(usage_error_of([&] {
                (void)norm_forward(NormConfig{NormKind::rms_norm, 0}, x, g, Tensor<float>());
              }),
              HasSubstr("pass eps > 0"));
  EXPECT_THAT(usage_error_of([&] {
                (void)norm_backward(ln, x, g, random_tensor<float>({3, 3}, 1));
              }),
              HasSubstr("dy must have x's shape"));
  SequenceParallelNormConfig bad{ln, 5, SplitPolicy::chunk(), Algorithm::ring};
  const auto f2 = usage_error_of(
      2, [&](Communicator& comm) { (void)sequence_parallel_norm(comm, bad, x, g, g); });
  EXPECT_THAT(f2.message, HasSubstr("on rank"));
  EXPECT_THAT(f2.message, HasSubstr("gives this rank"));
}

}  // namespace
}  // namespace shardcheck::test
