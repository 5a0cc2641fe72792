// Helpers of the ops' unit tests: reproducible data, the split policies to sweep, running a
// function on P ranks and collecting each rank's result, and the failure of a run.
#pragma once

#include "layout/split_policy.hpp"
#include "runtime/errors.hpp"
#include "runtime/exception_holds.hpp"
#include "runtime/launcher.hpp"
#include "tensor/tensor.hpp"
#include "testing/usage_cases.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace shardcheck::test {

using AllTypes = ::testing::Types<double, float, bfloat16, float16>;

// splitmix64 (Steele, Lea, Flood 2014): the same numbers on every platform, unlike std::
// distributions.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }

 private:
  std::uint64_t s_;
};

// Values ±(1 + f)·2^e, e in [-5, 2], f with 20 random bits, rounded to T: magnitudes spread
// over 8 binades so that the order of a sum shows in its bits, small enough that no sum of up
// to a few hundred products overflows float16.
template <class T>
Tensor<T> random_tensor(Shape shape, std::uint64_t seed) {
  Rng rng(seed);
  Tensor<T> t(std::move(shape));
  for (auto& v : t.values()) {
    const double f = static_cast<double>(rng.next() >> 44) / 1048576.0;
    const int e = static_cast<int>(rng.below(8)) - 5;
    const double sign = (rng.next() & 1U) != 0 ? -1.0 : 1.0;
    v = static_cast<T>(static_cast<float>(sign * std::ldexp(1.0 + f, e)));
  }
  return t;
}

// A tensor of zeros: the shape is what a usage-error test is about, not the values.
template <class T = double>
Tensor<T> zeros(Shape shape) {
  return Tensor<T>(std::move(shape));
}

template <class T>
Tensor<T> tensor_of(Shape shape, const std::vector<double>& values) {
  Tensor<T> t(std::move(shape));
  for (std::size_t i = 0; i < values.size(); ++i) t[i] = static_cast<T>(values.at(i));
  return t;
}

// chunk, balanced, and explicit sizes with empty shards: every even rank empty (P >= 2), the
// n elements dealt to the odd ranks, the first ones one larger.
inline std::vector<SplitPolicy> policies_for(std::size_t n, int p) {
  std::vector<std::size_t> sizes(static_cast<std::size_t>(p), 0);
  if (p == 1) {
    sizes[0] = n;
  } else {
    const std::size_t odd = static_cast<std::size_t>(p) / 2;
    for (std::size_t k = 0; k < odd; ++k) sizes[2 * k + 1] = n / odd + (k < n % odd ? 1 : 0);
  }
  return {SplitPolicy::chunk(), SplitPolicy::balanced(), SplitPolicy::explicit_sizes(sizes)};
}

template <class T>
Tensor<T> cols_of(const Tensor<T>& t, Piece p) {
  Tensor<T> out(Shape{t.dim(0), p.size});
  for (std::size_t i = 0; i < t.dim(0); ++i) {
    for (std::size_t j = 0; j < p.size; ++j) out(i, j) = t(i, p.offset + j);
  }
  return out;
}

template <class T>
Tensor<T> rows_of(const Tensor<T>& t, Piece p) {
  Tensor<T> out(Shape{p.size, t.dim(1)});
  for (std::size_t i = 0; i < p.size; ++i) {
    for (std::size_t j = 0; j < t.dim(1); ++j) out(i, j) = t(p.offset + i, j);
  }
  return out;
}

// fn(comm) on p ranks; element r of the result is rank r's return value.
template <class Out>
std::vector<Out> on_ranks(int p, const std::function<Out(Communicator&)>& fn) {
  std::vector<Out> outs(static_cast<std::size_t>(p));
  run(p, [&](Communicator& comm) { outs[static_cast<std::size_t>(comm.rank())] = fn(comm); });
  return outs;
}

// The primary failure of a run whose ranks are expected to throw UsageError.
struct Failure {
  int rank = -1;
  std::string message;
};

inline Failure usage_error_of(int p, const std::function<void(Communicator&)>& fn) {
  try {
    run(p, fn);
  } catch (const RankFailure& f) {
    try {
      f.rethrow_cause();
    } catch (const UsageError& e) {
      return {f.rank(), e.what()};
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << f.rank()
                    << " threw something other than UsageError: " << e.what();
      return {};
    }
  }
  ADD_FAILURE() << "no rank threw";
  return {};
}

// The message of a call expected to throw UsageError.
inline std::string usage_error_of(const std::function<void()>& fn) {
  return test_support::message_of<UsageError>(fn);
}

// Each of `parts` occurs in `message` (find rather than HasSubstr: some programs that include
// this header link Google Test without Google Mock).
inline void expect_parts(const std::string& message, const std::vector<std::string>& parts) {
  for (const auto& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "lacks \"" << part << "\":\n" << message;
  }
}

// Table-driven usage-error tests: their cases (UsageCase, RankUsageCase) are in usage_cases.hpp.
inline void expect_usage_errors(const std::vector<UsageCase>& cases) {
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    expect_parts(usage_error_of(c.call), c.parts);
  }
}

inline void expect_usage_errors(const std::vector<RankUsageCase>& cases) {
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const Failure f = usage_error_of(c.p, c.call);
    EXPECT_EQ(f.rank, c.rank);
    expect_parts(f.message, c.parts);
  }
}

}  // namespace shardcheck::test
