// Unit tests of the column- and row-parallel linear layers (ops/linear/linear.hpp), forward and
// backward, against the dense op in the same type: the relations that hold bit for bit.
//   column forward      rank r's y = the dense y's columns of r (all of them with gather_output)
//   column backward     dw, db = the dense rows of r; dx = the ranks' partial dx summed in the
//                       all_reduce's order, bit-identical on every rank
//   row forward         P = 1: the dense y; P > 1: the partials summed in the reduction's order,
//                       then the bias once
//   row backward        dx, dw = the dense columns of r; db = the dense db on every rank
// Swept: every element type, P = 1..5, chunk / balanced / explicit splits with empty shards,
// out smaller than P, bias on and off, gather_output, sequence parallelism in and out.
// Models of the orders are plain loops (the fold of Algorithm::sequential); the ring order is
// checked through its cross-rank identity.
#include "ops/linear/linear.hpp"
#include "runtime/reduce_op.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace shardcheck::linear_parallel_tests {
namespace {

using namespace test;  // the suites' test helpers (testing/ops_test_util.hpp)

// Algorithm::sequential's order: ((p_0 + p_1) + ...) + p_{P-1}, each step rounded in T.
template <class T>
Tensor<T> fold_model(const std::vector<Tensor<T>>& partials) {
  Tensor<T> sum = partials.at(0);
  for (std::size_t k = 1; k < partials.size(); ++k) {
    for (std::size_t i = 0; i < sum.size(); ++i) {
      sum[i] = combine(ReduceOp::sum, sum[i], partials[k][i]);
    }
  }
  return sum;
}

template <class T>
Tensor<T> slice(const Tensor<T>& v, Piece p) {
  return Tensor<T>(
      Shape{p.size},
      std::vector<T>(v.values().begin() + static_cast<std::ptrdiff_t>(p.offset),
                     v.values().begin() + static_cast<std::ptrdiff_t>(p.offset + p.size)));
}

template <class T>
struct Layer {
  Tensor<T> x, w, b, dy;
};

struct Dims {
  std::size_t tokens, in, out;
};
// out = 3 < P for P = 4, 5: empty output shards under every policy; 4 tokens over 5 ranks:
// empty token shards.
const Dims layer_dims[] = {{5, 6, 7}, {4, 5, 3}};

template <class T>
Layer<T> make_layer(const Dims& d, std::uint64_t seed) {
  return {random_tensor<T>({d.tokens, d.in}, seed), random_tensor<T>({d.out, d.in}, seed + 1),
          random_tensor<T>({d.out}, seed + 2), random_tensor<T>({d.tokens, d.out}, seed + 3)};
}

std::string label(const Dims& d, int p, const SplitPolicy& policy, const std::string& more) {
  return "tokens " + std::to_string(d.tokens) + " in " + std::to_string(d.in) + " out " +
         std::to_string(d.out) + " P " + std::to_string(p) + " " + policy.to_string() + " " + more;
}

std::size_t at(int r) { return static_cast<std::size_t>(r); }

// The column-parallel configuration of a layer shape, everything else at its default.
ColumnParallelConfig column_config(const Dims& d) {
  ColumnParallelConfig cfg;
  cfg.out_features = d.out;
  cfg.tokens = d.tokens;
  return cfg;
}

// Every rank's forward y: the dense y with gather_output, else its columns pieces[r].
template <class T>
void expect_column_outputs(const std::vector<Tensor<T>>& ys, const Tensor<T>& dense, bool gather,
                           const std::vector<Piece>& pieces) {
  for (std::size_t r = 0; r < ys.size(); ++r) {
    EXPECT_TRUE(bit_equal(ys[r], gather ? dense : cols_of(dense, pieces[r]))) << "rank " << r;
  }
}

// One point of a sweep: a layer shape and its tensors, P, and the split of the sharded feature
// dimension (out for column, in for row) with the token split of the same index, both cut.
template <class T>
struct SplitPoint {
  const Dims& d;
  const Layer<T>& L;
  int p = 1;
  const SplitPolicy& policy;
  const SplitPolicy& token_policy;
  std::vector<Piece> pieces, token_pieces;
};

// fn(point) for every layer shape (its tensors drawn from seed + d.out), P = first_p..5 and every
// split policy of the feature dimension d.*features.
template <class T, class Fn>
void for_each_split(std::uint64_t seed, std::size_t Dims::*features, int first_p, Fn&& fn) {
  for (const Dims& d : layer_dims) {
    const auto L = make_layer<T>(d, seed + d.out);
    for (int p = first_p; p <= 5; ++p) {
      const auto policies = policies_for(d.*features, p);
      const auto token_policies = policies_for(d.tokens, p);
      for (std::size_t i = 0; i < policies.size(); ++i) {
        fn(SplitPoint<T>{d, L, p, policies[i], token_policies[i],
                         split(policies[i], d.*features, p),
                         split(token_policies[i], d.tokens, p)});
      }
    }
  }
}

// fn(cfg) for the row-parallel configurations of a point: the input split or whole, the output
// whole or over the tokens, each under a trace naming it.
template <class T, class Fn>
void for_each_row_config(const SplitPoint<T>& s, Fn&& fn) {
  for (const bool parallel_in : {true, false}) {
    for (const bool sp : {false, true}) {
      SCOPED_TRACE(label(s.d, s.p, s.policy,
                         std::string(parallel_in ? "input_is_parallel " : "") +
                             (sp ? "sequence_parallel_output " : "") + s.token_policy.to_string()));
      RowParallelConfig cfg;
      cfg.in_split = s.policy;
      cfg.token_split = s.token_policy;
      cfg.input_is_parallel = parallel_in;
      cfg.sequence_parallel_output = sp;
      fn(cfg);
    }
  }
}

template <class T>
class ParallelLinearTest : public ::testing::Test {};
TYPED_TEST_SUITE(ParallelLinearTest, test::AllTypes);

// ---------------------------------------------------------------- column-parallel

TYPED_TEST(ParallelLinearTest, column_forward_is_bit_identical_to_dense) {
  using T = TypeParam;
  for (const Dims& d : layer_dims) {
    const auto L = make_layer<T>(d, 1000 + d.out);
    for (int p = 1; p <= 5; ++p) {
      for (const auto& policy : policies_for(d.out, p)) {
        const auto pieces = split(policy, d.out, p);
        for (const bool bias : {true, false}) {
          const auto dense = linear(L.x, L.w, bias ? L.b : Tensor<T>());
          for (const bool gather : {false, true}) {
            SCOPED_TRACE(
                label(d, p, policy,
                      std::string(bias ? "bias" : "no bias") + (gather ? " gather_output" : "")));
            ColumnParallelConfig cfg = column_config(d);
            cfg.out_split = policy;
            cfg.gather_output = gather;
            const auto ys = on_ranks<Tensor<T>>(p, [&](Communicator& tp) {
              const int r = tp.rank();
              const auto b_r = bias ? split_bias(L.b, policy, p, r) : Tensor<T>();
              return column_parallel_linear(tp, cfg, L.x,
                                            split_weight_by_output_features(L.w, policy, p, r), b_r)
                  .y;
            });
            expect_column_outputs(ys, dense, gather, pieces);
          }
        }
      }
    }
  }
}

TYPED_TEST(ParallelLinearTest, column_forward_with_sequence_parallel_input_gathers_tokens) {
  using T = TypeParam;
  for (const Dims& d : layer_dims) {
    const auto L = make_layer<T>(d, 2000 + d.out);
    const auto dense = linear(L.x, L.w, L.b);
    for (int p = 1; p <= 5; ++p) {
      for (const auto& token_policy : policies_for(d.tokens, p)) {
        for (const bool gather : {false, true}) {
          SCOPED_TRACE(label(d, p, token_policy, gather ? "tokens, gather_output" : "tokens"));
          ColumnParallelConfig cfg = column_config(d);
          cfg.out_split = SplitPolicy::balanced();
          cfg.sequence_parallel_input = true;
          cfg.token_split = token_policy;
          cfg.gather_output = gather;
          const auto out_pieces = split(cfg.out_split, d.out, p);
          const auto ys = on_ranks<Tensor<T>>(p, [&](Communicator& tp) {
            const int r = tp.rank();
            return column_parallel_linear(tp, cfg, split_by_tokens(L.x, token_policy, p, r),
                                          split_weight_by_output_features(L.w, cfg.out_split, p, r),
                                          split_bias(L.b, cfg.out_split, p, r))
                .y;
          });
          expect_column_outputs(ys, dense, gather, out_pieces);
        }
      }
    }
  }
}

TYPED_TEST(ParallelLinearTest, column_backward_sums_dx_and_keeps_dw_db_local) {
  using T = TypeParam;
  for_each_split<T>(3000, &Dims::out, 1, [](const SplitPoint<T>& s) {
    const auto& L = s.L;
    const int p = s.p;
    const auto dense = linear_backward(L.x, L.w, true, L.dy);
    // The model of dx: each rank's partial dy_r·W_r, folded in group order.
    std::vector<Tensor<T>> partials;
    partials.reserve(static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r) {
      partials.push_back(
          linear_backward(L.x, rows_of(L.w, s.pieces[at(r)]), false, cols_of(L.dy, s.pieces[at(r)]))
              .dx);
    }
    const auto dx_model = fold_model(partials);
    for (const bool sp : {false, true}) {
      for (const bool gather : {false, true}) {
        SCOPED_TRACE(label(
            s.d, p, s.policy,
            std::string(sp ? "sequence_parallel_input " : "") + (gather ? "gather_output" : "")));
        ColumnParallelConfig cfg = column_config(s.d);
        cfg.out_split = s.policy;
        cfg.token_split = s.token_policy;
        cfg.sequence_parallel_input = sp;
        cfg.gather_output = gather;
        cfg.all_reduce_algorithm = Algorithm::sequential;
        const auto gs = on_ranks<LinearGrads<T>>(p, [&](Communicator& tp) {
          const int r = tp.rank();
          const auto x = sp ? split_by_tokens(L.x, cfg.token_split, p, r) : L.x;
          const auto dy = gather ? L.dy : cols_of(L.dy, s.pieces[at(r)]);
          return column_parallel_linear_backward(
              tp, cfg, x, split_weight_by_output_features(L.w, cfg.out_split, p, r), true, dy);
        });
        for (int r = 0; r < p; ++r) {
          SCOPED_TRACE("rank " + std::to_string(r));
          EXPECT_TRUE(
              bit_equal(gs[at(r)].dx, sp ? rows_of(dx_model, s.token_pieces[at(r)]) : dx_model));
          EXPECT_TRUE(bit_equal(gs[at(r)].dw, rows_of(dense.dw, s.pieces[at(r)])));
          EXPECT_TRUE(bit_equal(gs[at(r)].db, slice(dense.db, s.pieces[at(r)])));
        }
      }
    }
  });
}

// The ring all_reduce has its own order; what it promises is one result on every rank, and
// with one rank, the dense dx itself.
TYPED_TEST(ParallelLinearTest, column_backward_dx_is_bit_identical_across_ranks_with_ring) {
  using T = TypeParam;
  const Dims d{5, 6, 7};
  const auto L = make_layer<T>(d, 4000);
  for (int p = 1; p <= 5; ++p) {
    for (const auto& policy : policies_for(d.out, p)) {
      SCOPED_TRACE(label(d, p, policy, "ring"));
      ColumnParallelConfig cfg = column_config(d);
      cfg.out_split = policy;
      cfg.gather_output = true;
      const auto gs = on_ranks<LinearGrads<T>>(p, [&](Communicator& tp) {
        return column_parallel_linear_backward(
            tp, cfg, L.x, split_weight_by_output_features(L.w, policy, p, tp.rank()), false, L.dy);
      });
      for (int r = 0; r < p; ++r) EXPECT_TRUE(bit_equal(gs[at(r)].dx, gs[0].dx)) << "rank " << r;
      if (p == 1) {
        EXPECT_TRUE(bit_equal(gs[0].dx, linear_backward(L.x, L.w, false, L.dy).dx));
      }
      for (const auto& g : gs) EXPECT_TRUE(g.db.empty());
    }
  }
}

// ---------------------------------------------------------------- row-parallel

TYPED_TEST(ParallelLinearTest, row_forward_with_one_rank_is_bit_identical_to_dense) {
  using T = TypeParam;
  for (const Dims& d : layer_dims) {
    const auto L = make_layer<T>(d, 5000 + d.out);
    for (const Kernel kernel : {Kernel::deterministic, Kernel::fast}) {
      for (const bool bias : {true, false}) {
        const auto b = bias ? L.b : Tensor<T>();
        const auto dense = linear(L.x, L.w, b, kernel);
        for (const bool parallel_in : {true, false}) {
          for (const bool sp : {false, true}) {
            RowParallelConfig cfg;
            cfg.kernel = kernel;
            cfg.input_is_parallel = parallel_in;
            cfg.sequence_parallel_output = sp;
            const auto ys = on_ranks<Tensor<T>>(
                1, [&](Communicator& tp) { return row_parallel_linear(tp, cfg, L.x, L.w, b).y; });
            EXPECT_TRUE(bit_equal(ys[0], dense))
                << "bias " << bias << " input_is_parallel " << parallel_in << " sp " << sp
                << " fast " << (kernel == Kernel::fast);
          }
        }
      }
    }
  }
}

TYPED_TEST(ParallelLinearTest, row_forward_reduces_partials_then_adds_the_bias_once) {
  using T = TypeParam;
  for_each_split<T>(6000, &Dims::in, 2, [](const SplitPoint<T>& s) {
    const auto& L = s.L;
    const int p = s.p;
    std::vector<Tensor<T>> partials;
    partials.reserve(static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r) {
      partials.push_back(
          linear(cols_of(L.x, s.pieces[at(r)]), cols_of(L.w, s.pieces[at(r)]), Tensor<T>()));
    }
    auto model = fold_model(partials);
    for (std::size_t t = 0; t < s.d.tokens; ++t) {
      for (std::size_t j = 0; j < s.d.out; ++j) {
        model(t, j) = combine(ReduceOp::sum, model(t, j), L.b[j]);
      }
    }
    for_each_row_config(s, [&](RowParallelConfig cfg) {
      cfg.reduce_algorithm = Algorithm::sequential;
      const auto ys = on_ranks<Tensor<T>>(p, [&](Communicator& tp) {
        const int r = tp.rank();
        const auto x =
            cfg.input_is_parallel ? split_input_by_features(L.x, cfg.in_split, p, r) : L.x;
        return row_parallel_linear(tp, cfg, x,
                                   split_weight_by_input_features(L.w, cfg.in_split, p, r), L.b)
            .y;
      });
      for (int r = 0; r < p; ++r) {
        EXPECT_TRUE(bit_equal(ys[at(r)], cfg.sequence_parallel_output
                                             ? rows_of(model, s.token_pieces[at(r)])
                                             : model))
            << "rank " << r;
      }
    });
  });
}

TYPED_TEST(ParallelLinearTest, row_backward_matches_the_dense_gradients_on_every_rank) {
  using T = TypeParam;
  for_each_split<T>(7000, &Dims::in, 1, [](const SplitPoint<T>& s) {
    const auto& L = s.L;
    const int p = s.p;
    const auto dense = linear_backward(L.x, L.w, true, L.dy);
    for_each_row_config(s, [&](const RowParallelConfig& cfg) {
      const auto gs = on_ranks<LinearGrads<T>>(p, [&](Communicator& tp) {
        const int r = tp.rank();
        const auto x =
            cfg.input_is_parallel ? split_input_by_features(L.x, cfg.in_split, p, r) : L.x;
        const auto dy =
            cfg.sequence_parallel_output ? split_by_tokens(L.dy, cfg.token_split, p, r) : L.dy;
        return row_parallel_linear_backward(
            tp, cfg, x, split_weight_by_input_features(L.w, cfg.in_split, p, r), true, dy);
      });
      for (int r = 0; r < p; ++r) {
        SCOPED_TRACE("rank " + std::to_string(r));
        EXPECT_TRUE(bit_equal(
            gs[at(r)].dx, cfg.input_is_parallel ? cols_of(dense.dx, s.pieces[at(r)]) : dense.dx));
        EXPECT_TRUE(bit_equal(gs[at(r)].dw, cols_of(dense.dw, s.pieces[at(r)])));
        EXPECT_TRUE(bit_equal(gs[at(r)].db, dense.db));
      }
    });
  });
}

}  // namespace
}  // namespace shardcheck::linear_parallel_tests
