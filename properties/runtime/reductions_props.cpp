// Properties of the reductions (reduce, all_reduce, reduce_scatter) against the sequential
// model (collective_model.hpp), which folds in the orders communicator.hpp documents:
// ring chunks start after their owner, sequential folds in group order, reduce's chain starts
// after the root and ends at it, avg divides once at the end. Generated: P 1..16, sub-groups
// and groups of groups, every element type and reduce op, both algorithms, in place and out
// of place, lengths shorter than P (empty chunks) and uneven counts with zeros.
//
// Results must equal the model bit for bit; the one relaxation, for sum/product/avg only, is
// that two NaNs are equal whatever their payloads (IEEE 754 leaves it unspecified; see
// Match in runtime_gen.hpp). max/min return an operand, so their NaN payloads are pinned.
#include "runtime_gen.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace shardcheck::props::reductions {
namespace {

// Every property draws its element type here.
template <class F>
void for_generated_dtype(F&& f) {
  props::for_generated_dtype(std::forward<F>(f), /*tag_dtype=*/false);
}

void tag_case(DType t, ReduceOp op, int p) { RC_TAG(name(t), name(op), p_bucket(p)); }

// ---------------------------------------------------------------- reduce

template <class T>
void reduce_case(const Topology& topo) {
  const int p = topo.size();
  const int root = *uniform(0, p - 1);
  const ReduceOp op = *genReduceOp(dtype_of<T>);
  const std::size_t n = *genLength(p);
  const bool in_place = *rc::gen::arbitrary<bool>();
  const bool empty_off_root = *rc::gen::arbitrary<bool>();
  const auto send =
      *genBuffers<T>(std::vector<std::size_t>(static_cast<std::size_t>(p), n), *genValues());
  tag_case(dtype_of<T>, op, p);
  RC_CLASSIFY(in_place, "in place");
  Bufs<T> out(static_cast<std::size_t>(p)), send_after(static_cast<std::size_t>(p));
  const auto run = run_on_group(topo, [&](Communicator& g) {
    const auto r = rank_of(g);
    std::vector<T> s = send[r];
    if (in_place) {
      g.reduce(std::span<const T>(s), std::span<T>(s), op, root);
      out[r] = s;
    } else {
      // recv is unused off the root: empty, or full-size and expected back untouched.
      std::vector<T> recv(g.rank() == root || !empty_off_root ? n : 0, sentinel<T>());
      g.reduce(std::span<const T>(s), std::span<T>(recv), op, root);
      out[r] = recv;
      send_after[r] = s;
    }
  });
  assert_group_seen(topo, run.seen);
  const auto ur = static_cast<std::size_t>(root);
  Bufs<T> expected(static_cast<std::size_t>(p));
  for (std::size_t r = 0; r < expected.size(); ++r) {
    if (r == ur) continue;
    expected[r] = in_place ? send[r] : std::vector<T>(empty_off_root ? 0 : n, sentinel<T>());
  }
  expected[ur] = out[ur];  // compared on its own below, under the op's match
  assert_ranks_equal(expected, out, Match::bits, "reduce recv off the root (must be untouched)");
  const auto diff = first_difference(model::reduce(send, to_model(op), root), out[ur],
                                     match_for(op, dtype_of<T>));
  if (!diff.empty()) RC_FAIL("reduce result on root " + std::to_string(root) + ": " + diff);
  if (!in_place) assert_ranks_equal(send, send_after, Match::bits, "reduce send (const)");
}

RC_GTEST_PROP(reduce, the_root_holds_the_chain_fold_starting_after_it, ()) {
  const auto topo = *genTopology();
  for_generated_dtype([&](auto tag) { reduce_case<decltype(tag)>(topo); });
}

// ---------------------------------------------------------------- all_reduce

template <class T>
void all_reduce_case(const Topology& topo) {
  const int p = topo.size();
  const ReduceOp op = *genReduceOp(dtype_of<T>);
  const Algorithm algo = *genAlgorithm();
  const std::size_t n = *genLength(p);
  const bool in_place = *rc::gen::arbitrary<bool>();
  const auto send =
      *genBuffers<T>(std::vector<std::size_t>(static_cast<std::size_t>(p), n), *genValues());
  tag_case(dtype_of<T>, op, p);
  RC_CLASSIFY(n < static_cast<std::size_t>(p), "empty chunks (n < P)");
  Bufs<T> out(static_cast<std::size_t>(p)), send_after(static_cast<std::size_t>(p));
  const auto run = run_on_group(topo, [&](Communicator& g) {
    const auto r = rank_of(g);
    std::vector<T> s = send[r];
    if (in_place) {
      g.all_reduce(std::span<T>(s), op, algo);
      out[r] = s;
    } else {
      std::vector<T> recv(n, sentinel<T>());
      g.all_reduce(std::span<const T>(s), std::span<T>(recv), op, algo);
      out[r] = recv;
      send_after[r] = s;
    }
  });
  assert_group_seen(topo, run.seen);
  assert_ranks_equal(model::all_reduce(send, to_model(op), to_model(algo)), out,
                     match_for(op, dtype_of<T>), "all_reduce result");
  if (!in_place) assert_ranks_equal(send, send_after, Match::bits, "all_reduce send (const)");
}

RC_GTEST_PROP(all_reduce, every_rank_holds_the_documented_fold_bit_for_bit, ()) {
  const auto topo = *genTopology();
  for_generated_dtype([&](auto tag) { all_reduce_case<decltype(tag)>(topo); });
}

// max/min return one of their operands, so which one is observable bit for bit: on a tie
// (+0 against -0) the left operand, with NaNs the first NaN in fold order. The general
// property meets these cases rarely; here every value comes from a few colliding ones.
RC_GTEST_PROP(all_reduce, max_and_min_pick_the_documented_operand_on_ties_and_nans, ()) {
  const auto topo = *genTopology();
  const DType dtype =
      *rc::gen::element(DType::float64, DType::float32, DType::bfloat16, DType::float16);
  const ReduceOp op = *rc::gen::element(ReduceOp::max, ReduceOp::min);
  const Algorithm algo = *genAlgorithm();
  const int p = topo.size();
  const int root = *uniform(0, p - 1);
  const std::size_t n = *genLength(p);
  tag_case(dtype, op, p);
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto send =
        *genBuffers<T>(std::vector<std::size_t>(static_cast<std::size_t>(p), n), Values::few);
    Bufs<T> all(static_cast<std::size_t>(p)), rooted(static_cast<std::size_t>(p));
    const auto run = run_on_group(topo, [&](Communicator& g) {
      const auto r = rank_of(g);
      all[r] = send[r];
      g.all_reduce(std::span<T>(all[r]), op, algo);
      rooted[r].assign(n, sentinel<T>());
      g.reduce(std::span<const T>(send[r]), std::span<T>(rooted[r]), op, root);
    });
    assert_group_seen(topo, run.seen);
    assert_ranks_equal(model::all_reduce(send, to_model(op), to_model(algo)), all,
                       match_for(op, dtype_of<T>), "all_reduce result");
    const auto diff =
        first_difference(model::reduce(send, to_model(op), root),
                         rooted[static_cast<std::size_t>(root)], match_for(op, dtype_of<T>));
    if (!diff.empty()) RC_FAIL("reduce result on root " + std::to_string(root) + ": " + diff);
  });
}

// Integer sum/product wrap around (a ring), and max/min are exact, so the two algorithms'
// orders must agree: a check of both that needs no model.
RC_GTEST_PROP(all_reduce, ring_and_sequential_agree_on_integers, ()) {
  const auto topo = *genTopology();
  const DType dtype = *rc::gen::element(DType::int32, DType::int64);
  const ReduceOp op = *genReduceOp(dtype);
  const int p = topo.size();
  const std::size_t n = *genLength(p);
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      const auto send =
          *genBuffers<T>(std::vector<std::size_t>(static_cast<std::size_t>(p), n), Values::wide);
      Bufs<T> ring(static_cast<std::size_t>(p)), seq(static_cast<std::size_t>(p));
      run_on_group(topo, [&](Communicator& g) {
        const auto r = rank_of(g);
        ring[r] = seq[r] = send[r];
        g.all_reduce(std::span<T>(ring[r]), op, Algorithm::ring);
        g.all_reduce(std::span<T>(seq[r]), op, Algorithm::sequential);
      });
      assert_ranks_equal(ring, seq, Match::bits, "ring vs sequential");
    }
  });
}

// A constructed input on which the two algorithms must round differently: p = 3, one element
// (chunk 0, owned by rank 0), x = (1, B, -B) with B = 2^(mantissa bits + 1), where 1 + B is a
// tie that rounds to B. Sequential: (1 + B) - B = 0. Ring (starts after the owner): (B - B) + 1
// = 1. Every rank must hold the same bits.
template <class T>
void ring_and_sequential_differ() {
  const float big = std::is_same_v<T, double>     ? 0x1p53f
                    : std::is_same_v<T, float>    ? 0x1p24f
                    : std::is_same_v<T, bfloat16> ? 0x1p8f
                                                  : 0x1p11f;
  const std::vector<T> x = {T(1.0f), T(big), T(-big)};
  std::vector<T> ring(3), seq(3);
  run(3, [&](Communicator& c) {
    const auto r = rank_of(c);
    std::vector<T> a = {x[r]}, b = {x[r]};
    c.all_reduce(std::span<T>(a), ReduceOp::sum, Algorithm::ring);
    c.all_reduce(std::span<T>(b), ReduceOp::sum, Algorithm::sequential);
    ring[r] = a[0];
    seq[r] = b[0];
  });
  for (std::size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(model::bits_of(ring[r]), model::bits_of(T(1.0f)))
        << name(dtype_of<T>) << " ring, rank " << r;
    EXPECT_EQ(model::bits_of(seq[r]), model::bits_of(T(0.0f)))
        << name(dtype_of<T>) << " sequential, rank " << r;
  }
}

TEST(all_reduce, ring_and_sequential_round_differently_on_a_constructed_sum) {
  ring_and_sequential_differ<double>();
  ring_and_sequential_differ<float>();
  ring_and_sequential_differ<bfloat16>();
  ring_and_sequential_differ<float16>();
}

// ---------------------------------------------------------------- reduce_scatter

template <class T>
void reduce_scatter_case(const Topology& topo) {
  const int p = topo.size();
  const auto up = static_cast<std::size_t>(p);
  const ReduceOp op = *genReduceOp(dtype_of<T>);
  const Algorithm algo = *genAlgorithm();
  const bool even = *rc::gen::arbitrary<bool>();
  const auto counts = even ? std::vector<std::size_t>(up, *genCount()) : *genCounts(p);
  const bool in_place = *rc::gen::arbitrary<bool>();
  const auto off = model::offsets_of(counts);
  const auto send = *genBuffers<T>(std::vector<std::size_t>(up, off.back()), *genValues());
  tag_case(dtype_of<T>, op, p);
  RC_CLASSIFY(std::count(counts.begin(), counts.end(), 0u) > 0, "a rank with zero elements");
  Bufs<T> out(up), rest_after(up), rest_before(up);
  const auto run = run_on_group(topo, [&](Communicator& g) {
    const auto r = rank_of(g);
    std::vector<T> s = send[r];
    const auto first = static_cast<std::ptrdiff_t>(off[r]),
               last = static_cast<std::ptrdiff_t>(off[r + 1]);
    if (in_place) {
      g.reduce_scatter(std::span<const T>(s), std::span<T>(s.data() + off[r], counts[r]), counts,
                       op, algo);
      out[r].assign(s.begin() + first, s.begin() + last);
      s.erase(s.begin() + first, s.begin() + last);  // what the call must not touch
    } else {
      std::vector<T> recv(counts[r], sentinel<T>());
      if (even) g.reduce_scatter(std::span<const T>(s), std::span<T>(recv), op, algo);
      else g.reduce_scatter(std::span<const T>(s), std::span<T>(recv), counts, op, algo);
      out[r] = recv;
    }
    rest_after[r] = s;
  });
  assert_group_seen(topo, run.seen);
  for (std::size_t r = 0; r < up; ++r) {
    rest_before[r] = send[r];
    if (in_place) {
      rest_before[r].erase(rest_before[r].begin() + static_cast<std::ptrdiff_t>(off[r]),
                           rest_before[r].begin() + static_cast<std::ptrdiff_t>(off[r + 1]));
    }
  }
  assert_ranks_equal(model::reduce_scatter(send, counts, to_model(op), to_model(algo)), out,
                     match_for(op, dtype_of<T>), "reduce_scatter chunk");
  assert_ranks_equal(rest_before, rest_after, Match::bits,
                     "reduce_scatter send outside recv (const)");
}

RC_GTEST_PROP(reduce_scatter, rank_k_holds_chunk_k_of_the_documented_fold, ()) {
  const auto topo = *genTopology();
  for_generated_dtype([&](auto tag) { reduce_scatter_case<decltype(tag)>(topo); });
}

}  // namespace
}  // namespace shardcheck::props::reductions
