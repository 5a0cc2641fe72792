// softmax_merge_reference_check: the softmax merge harness's fast reference scalar (Binary128,
// binary128.hpp) against the reference's own 113-bit portable type (cpp_bin_float_quad,
// reference/portable_hp.hpp), on the same merge problems:
//
//   softmax_merge_reference_check <corpus dir> [random inputs]          (default 3000)
//   softmax_merge_reference_check --scalar double <corpus dir> [...]    the same with a 53-bit
//                                     scalar in Binary128's place: must fail (the check's mutant)
//
// Problems: every file of the corpus dir, then random byte strings (fixed-seed splitmix64), each
// decoded by decode_merge_input (softmax_merge_input.hpp), as float32 and as float64. Per
// problem, reference::softmax_merge of every partial, exact (arith null) and bounded (arith =
// A's format), and of the first two alone (a ring step), in both scalars. The stated bound:
//   values   NaN / ±inf classified alike; finite ones |x − y| ≤ err_x + err_y (each result's
//            own err, which charges R's rounding at 2^−100 relative: both scalars must meet the
//            contract the reference states for R)
//   bounds   err fields equal to 2^−40 relative (or both infinite): a bound is itself computed
//            with cancellation (hi_j − W_j is about 3u·W_j, so R's 2^−113 becomes up to 2^−60
//            relative for float64 and more where exp's argument is large); its gap is printed
// Exit 0 when every comparison holds, 1 (with the first ten differences) otherwise.
#include "binary128.hpp"
#include "corpus_seeds.hpp"
#include "softmax_merge_input.hpp"

#include "reference/portable_hp.hpp"
#include "reference/softmax_merge/softmax_merge.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace {

using shardcheck::Shape;
using shardcheck::Tensor;
using shardcheck::fuzz::MergeInput;
namespace ref = shardcheck::reference;
using Slow = ref::portable_hp;

template <class R>
std::vector<ref::SoftmaxRows<R>> leaves(const MergeInput& in, bool as_float) {
  std::vector<ref::SoftmaxRows<R>> out;
  for (std::size_t j = 0; j < in.parts; ++j) {
    Tensor<double> o(Shape{in.rows, in.width}), l(Shape{in.rows});
    for (std::size_t i = 0; i < in.rows; ++i) {
      const auto narrow = [&](double v) {
        return as_float ? static_cast<double>(static_cast<float>(v)) : v;
      };
      l[i] = narrow(in.lse_at(j, i));
      for (std::size_t e = 0; e < in.width; ++e) o(i, e) = narrow(in.out_at(j, i, e));
    }
    out.push_back(ref::rows_of<R>(o, l));
  }
  return out;
}

struct Tally {
  long compared = 0, bad = 0;
  double worst_value = 0, worst_bound = 0;  // |x − y| / (err_x + err_y); relative bound gap
  void fail(const std::string& what) {
    if (++bad <= 10) std::fprintf(stderr, "difference: %s\n", what.c_str());
  }
};

template <class X>
double d(const X& x) {
  return static_cast<double>(x);
}

// x in cpp_bin_float_quad, exactly: a binary128 value from its sign, biased exponent and 112-bit
// fraction (both types have 113 bits and binary128's exponent range).
Slow slow(const shardcheck::fuzz::ScalarOf<double>& x) { return Slow(x.v); }
Slow slow(const shardcheck::fuzz::Binary128& x) {
  if (isnan(x) || isinf(x)) return Slow(d(x));
  std::uint64_t w[2];
  static_assert(sizeof w == sizeof x.v);
  std::memcpy(w, &x.v, sizeof w);  // little-endian x86-64: w[1] holds sign, exponent, fraction top
  const bool neg = (w[1] >> 63) != 0;
  const int biased = static_cast<int>((w[1] >> 48) & 0x7fff);
  std::uint64_t top = w[1] & ((std::uint64_t{1} << 48) - 1);
  if (biased != 0) top |= std::uint64_t{1} << 48;  // the implicit bit of a normal number
  const Slow mant = ldexp(Slow(top), 64) + Slow(w[0]);
  const Slow v = ldexp(mant, (biased == 0 ? 1 : biased) - 16383 - 112);
  return neg ? Slow(-v) : v;
}

// x (fast) and y (slow), each with its err.
template <class F>
void value(Tally& t, const std::string& at, const F& x, const F& ex, const Slow& y,
           const Slow& ey) {
  ++t.compared;
  const bool xn = isnan(x), yn = boost::multiprecision::isnan(y);
  if (xn || yn || isinf(x) || boost::multiprecision::isinf(y)) {
    if (xn != yn || (!xn && d(x) != d(y)))
      t.fail(at + ": " + std::to_string(d(x)) + " vs " + std::to_string(d(y)));
    return;
  }
  const Slow diff = abs(slow(x) - y);
  if (diff != 0) t.worst_value = std::max(t.worst_value, d(diff / (slow(ex) + ey)));
  if (diff > slow(ex) + ey) {
    t.fail(at + ": values differ by " + std::to_string(d(diff)) + " > err " +
           std::to_string(d(ex) + d(ey)));
  }
}

template <class F>
void bound(Tally& t, const std::string& at, const F& x, const Slow& y) {
  ++t.compared;
  if (isinf(x) || boost::multiprecision::isinf(y)) {
    if (d(x) != d(y))
      t.fail(at + ": bound " + std::to_string(d(x)) + " vs " + std::to_string(d(y)));
    return;
  }
  const Slow hi = slow(x);
  const Slow scale = abs(hi) > abs(y) ? abs(hi) : abs(y);
  if (scale != 0) t.worst_bound = std::max(t.worst_bound, d(abs(hi - y) / scale));
  if (abs(hi - y) > ldexp(Slow(1), -40) * scale) {
    t.fail(at + ": bounds " + std::to_string(d(x)) + " vs " + std::to_string(d(y)));
  }
}

template <class F>
void compare(Tally& t, const std::string& at, const ref::SoftmaxRows<F>& x,
             const ref::SoftmaxRows<Slow>& y) {
  for (std::size_t i = 0; i < y.rows(); ++i) {
    const std::string r = at + " row " + std::to_string(i);
    value(t, r + " lse", x.lse[i], x.lerr(i), y.lse[i], y.lerr(i));
    bound(t, r + " lse err", x.lerr(i), y.lerr(i));
    for (std::size_t e = 0; e < y.width(); ++e) {
      value(t, r + " out", x.out(i, e), x.oerr(i, e), y.out(i, e), y.oerr(i, e));
      bound(t, r + " out err", x.oerr(i, e), y.oerr(i, e));
    }
  }
}

template <class F>
void problem(Tally& t, const std::string& name, const MergeInput& in) {
  for (const bool as_float : {true, false}) {
    const ref::Format f = as_float ? ref::float32_format : ref::float64_format;
    const auto lf = leaves<F>(in, as_float);
    const auto ls = leaves<Slow>(in, as_float);
    const std::string at = name + (as_float ? " float32" : " float64");
    for (const ref::Format* arith : {static_cast<const ref::Format*>(nullptr), &f}) {
      const std::string how = at + (arith ? " bounded" : " exact");
      compare(t, how, ref::softmax_merge<F>(lf, in.rows, in.width, arith),
              ref::softmax_merge<Slow>(ls, in.rows, in.width, arith));
      if (in.parts >= 2) {
        const std::vector<ref::SoftmaxRows<F>> f2(lf.begin(), lf.begin() + 2);
        const std::vector<ref::SoftmaxRows<Slow>> s2(ls.begin(), ls.begin() + 2);
        compare(t, how + " first two", ref::softmax_merge<F>(f2, in.rows, in.width, arith),
                ref::softmax_merge<Slow>(s2, in.rows, in.width, arith));
      }
    }
  }
}

template <class F>
int run(const std::filesystem::path& dir, long randoms) {
  Tally t;
  long problems = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const auto bytes = shardcheck::fuzz::read_seed(e.path());
    if (!bytes) return 2;
    problem<F>(t, e.path().filename().string(),
               shardcheck::fuzz::decode_merge_input(bytes->data(), bytes->size()));
    ++problems;
  }
  shardcheck::fuzz::SplitMix64 r{16};
  for (long k = 0; k < randoms; ++k, ++problems) {
    std::vector<std::uint8_t> b(16 + r.next() % 200);
    for (auto& c : b) c = static_cast<std::uint8_t>(r.next());
    problem<F>(t, "random " + std::to_string(k),
               shardcheck::fuzz::decode_merge_input(b.data(), b.size()));
  }
  std::printf(
      "%ld problems, %ld comparisons, %ld differences; worst value gap %.3g of the errs, "
      "worst relative bound gap %.3g\n",
      problems, t.compared, t.bad, t.worst_value, t.worst_bound);
  return t.bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) try {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  bool as_double = false;
  if (args.size() >= 2 && args[0] == "--scalar" && args[1] == "double") {
    as_double = true;
    args.erase(args.begin(), args.begin() + 2);
  }
  if (args.empty() || args.size() > 2) {
    std::fprintf(stderr, "usage: %s [--scalar double] <corpus dir> [random inputs]\n", argv[0]);
    return 2;
  }
  const long randoms = args.size() == 2 ? std::stol(std::string(args[1])) : 3000;
  const std::filesystem::path dir(args[0]);
  return as_double ? run<shardcheck::fuzz::ScalarOf<double>>(dir, randoms)
                   : run<shardcheck::fuzz::Binary128>(dir, randoms);
} catch (const std::exception& e) {
  std::fprintf(stderr, "softmax_merge_reference_check: %s\n", e.what());
  return 2;
}
