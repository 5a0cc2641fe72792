// The runtime's limits that are not misuse (issue 2): 16 ranks on 2 cores run every kind of
// collective in bounded time (waiting ranks give their core to the rank being waited for), and
// one rank runs every collective as a copy with no traffic in its ledger.
#include "runtime/launcher.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace shardcheck {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// 16 ranks on 2 cores: waiting ranks must give their core to the rank being waited for.
TEST(limits, sixteen_ranks_run_every_kind_of_collective) {
  constexpr int p = 16;
  std::vector<std::int64_t> sums(p), gathered_ok(p);
  const auto start = Clock::now();
  run(p, [&](Communicator& c) {
    const auto r = static_cast<std::size_t>(c.rank());
    for (int round = 0; round < 5; ++round) {
      std::vector<std::int64_t> x(100, c.rank() + 1), y(100, c.rank() + 1);
      c.all_reduce(std::span<std::int64_t>(x), ReduceOp::sum, Algorithm::ring);
      c.all_reduce(std::span<std::int64_t>(y), ReduceOp::sum, Algorithm::sequential);
      std::vector<std::int64_t> mine(3, c.rank()), all(static_cast<std::size_t>(3 * p));
      c.all_gather(std::span<const std::int64_t>(mine), std::span<std::int64_t>(all));
      c.barrier();
      sums[r] = x[99] + y[0];
      gathered_ok[r] = all[3 * 7 + 1] == 7 && all[3 * 15 + 2] == 15;
    }
  });
  const auto elapsed = Clock::now() - start;
  for (int r = 0; r < p; ++r) {
    EXPECT_EQ(sums[static_cast<std::size_t>(r)], 2 * (p * (p + 1) / 2)) << r;
    EXPECT_TRUE(gathered_ok[static_cast<std::size_t>(r)]) << r;
  }
  EXPECT_LT(elapsed, 20s);
}

// P = 1: every collective is a copy (or nothing), and the ledger records no traffic.
TEST(limits, one_rank_runs_every_collective) {
  std::vector<std::string> failures;
  const auto result = run(1, [&](Communicator& c) {
    const std::vector<double> x = {1.5, -0.0, 3.0};
    const std::vector<std::size_t> counts = {3};
    auto check = [&](const char* what, const std::vector<double>& got) {
      if (got.size() != x.size() ||
          std::memcmp(got.data(), x.data(), x.size() * sizeof(double)) != 0)
        failures.emplace_back(what);
    };
    c.barrier();
    std::vector<double> b = x;
    c.broadcast(std::span<double>(b), 0);
    check("broadcast", b);
    std::vector<double> out(3);
    c.reduce(std::span<const double>(x), std::span<double>(out), ReduceOp::sum, 0);
    check("reduce", out);
    for (const auto algo : {Algorithm::ring, Algorithm::sequential}) {
      for (const auto op :
           {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min, ReduceOp::product}) {
        std::vector<double> a = x;
        c.all_reduce(std::span<double>(a), op, algo);
        check("all_reduce", a);
        std::vector<double> rs(3);
        c.reduce_scatter(std::span<const double>(x), std::span<double>(rs), counts, op, algo);
        check("reduce_scatter", rs);
      }
    }
    std::vector<double> ag(3), a2a(3), ga(3), sc(3), rs(3);
    c.all_gather(std::span<const double>(x), std::span<double>(ag), counts);
    check("all_gather", ag);
    c.all_to_all(std::span<const double>(x), counts, std::span<double>(a2a), counts);
    check("all_to_all", a2a);
    c.gather(std::span<const double>(x), std::span<double>(ga), counts, 0);
    check("gather", ga);
    c.scatter(std::span<const double>(x), std::span<double>(sc), counts, 0);
    check("scatter", sc);
    for (const int shift : {0, 1, -3}) {
      c.ring_shift(std::span<const double>(x), std::span<double>(rs), shift);
      check("ring_shift", rs);
    }
  });
  EXPECT_TRUE(failures.empty()) << failures.front();
  EXPECT_EQ(result.ledgers.at(0).bytes_sent(), 0u);
  EXPECT_EQ(result.ledgers.at(0).bytes_recv(), 0u);
  EXPECT_EQ(result.ledgers.at(0).size(), 1u + 1 + 1 + 20 + 4 + 3);
}

}  // namespace
}  // namespace shardcheck
