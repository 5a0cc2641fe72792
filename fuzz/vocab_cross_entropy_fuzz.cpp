// libFuzzer harness for vocabulary-parallel cross-entropy (lib/ops/vocab/vocab_cross_entropy.hpp)
// on raw float bits: float32 or float64 logits of 1-4 tokens over a vocabulary of 1-8 split over
// 1-3 ranks (chunk, balanced, explicit with empty ranks), targets valid, ignored (−100) or out of
// range, label smoothing 0, 1/8, 1/2, 1, class and token weights, every reduction; values are raw
// bits, IEEE specials (NaN, ±inf, ±max, subnormals), small or large numbers (layout in
// vocab_cross_entropy_input.hpp). A custom mutator writes IEEE specials into the values.
//
// Invariant. A problem is refused when the dense reference
// (reference/vocab/vocab_cross_entropy.hpp, in binary128: binary128.hpp) refuses it
// (std::invalid_argument: an out-of-range target) or a class or token weight is not finite (the
// library's documented UsageError; the reference accepts them), and then the library must fail with
// RankFailure caused by UsageError. Otherwise the reference gives each value of the loss and of the
// gradient (for the decoded dloss) with a bound, and then the library must run, give every rank the
// same loss bits, and for every element:
//   reference NaN or ±inf                  the library's value is NaN or ±inf too (both
//                                          non-finite: which one is not specified);
//   reference finite, bound finite         the library's value is within the bound, or +inf
//                                          when reference + bound reaches T's overflow threshold
//                                          Ω (−inf when reference − bound reaches −Ω);
//   reference finite, bound not finite     nothing to check (the bound gives up, e.g. when D ≈ 0);
//   mean, D' may compute as 0 though D is   nothing to check, the reference finite or not (the
//   not (want.denominator_uncertain)       library's documented D' = 0 convention may apply).
// A violation prints the problem, the element, both values and the bound, and aborts.
#include "binary128.hpp"
#include "harness_support.hpp"
#include "vocab_cross_entropy_input.hpp"

#include "reference/vocab/vocab_cross_entropy.hpp"
#include "runtime/errors.hpp"
#include "runtime/launcher.hpp"

#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

namespace shardcheck::fuzz {
namespace {

using R = Binary128;
namespace ref = reference;

[[noreturn]] void violation(const VocabInput& in, const std::string& what) {
  report_violation("vocab_cross_entropy", describe(in), what);
}

template <class T>
struct Problem {
  const VocabInput& in;
  std::size_t V = in.cfg.vocab;
  std::vector<Piece> pieces = split(in.cfg.vocab_split, V, in.ranks);

  Tensor<T> shard(std::size_t r) const {
    Tensor<T> s(Shape{in.tokens, pieces[r].size});
    for (std::size_t t = 0; t < in.tokens; ++t)
      for (std::size_t v = 0; v < pieces[r].size; ++v)
        s(t, v) = static_cast<T>(in.logits[t * V + pieces[r].offset + v]);
    return s;
  }

  Tensor<T> dloss() const {
    Tensor<T> d(Shape{in.dloss.size()});
    for (std::size_t k = 0; k < in.dloss.size(); ++k) d[k] = static_cast<T>(in.dloss[k]);
    return d;
  }

  // One element: got against the reference value r and its bound b.
  void judge(const std::string& at, T got, const R& r, const R& b, const R& omega,
             bool undetermined) const {
    if (undetermined) return;
    const auto g = static_cast<double>(got);
    if (!isfinite(r)) {
      if (std::isfinite(g))
        violation(in, at + num(g) + " where the reference is " + num(static_cast<double>(r)));
      return;
    }
    if (!isfinite(b)) return;
    if (std::isnan(g))
      violation(in, at + "NaN where the reference is " + num(static_cast<double>(r)));
    if (std::isinf(g)) {
      // ±inf is right when the interval [r − b, r + b] reaches Ω on that side.
      if (!(g > 0 ? r + b >= omega : r - b <= -omega)) {
        violation(in, at + num(g) + " overflowed but the reference " + num(static_cast<double>(r)) +
                          " +- bound " + num(static_cast<double>(b)) + " cannot");
      }
      return;
    }
    if (abs(R(g) - r) > b) {
      violation(in, at + num(g) + " is outside the bound: reference " +
                        num(static_cast<double>(r)) + ", bound " + num(static_cast<double>(b)));
    }
  }

  void run_and_check() const {
    Tensor<R> logits(Shape{in.tokens, V});
    for (std::size_t k = 0; k < in.logits.size(); ++k) logits.values()[k] = R(in.logits[k]);
    Tensor<R> dl(Shape{in.dloss.size()});
    for (std::size_t k = 0; k < in.dloss.size(); ++k) dl[k] = R(in.dloss[k]);
    bool refused = false;
    std::string why;
    ref::CrossEntropyResult<R> want;
    try {
      want = ref::cross_entropy<R>(in.cfg, logits, in.targets, dl, ref::arithmetic_of<T>());
    } catch (const std::invalid_argument& e) {
      refused = true;
      why = e.what();
    }
    for (const auto* ws : {&in.cfg.class_weight, &in.cfg.token_weight}) {
      for (double w : *ws) {
        if (!std::isfinite(w)) {
          refused = true;
          why = "a weight is " + num(w) +
                " (vocab_cross_entropy.hpp: non-finite weights are a "
                "UsageError)";
        }
      }
    }
    std::vector<Tensor<T>> loss(static_cast<std::size_t>(in.ranks)), grad(loss.size());
    const Tensor<T> dloss_t = dloss();
    try {
      RunOptions opt;
      opt.timeout = std::chrono::milliseconds(2000);
      run(
          in.ranks,
          [&](Communicator& c) {
            const auto r = static_cast<std::size_t>(c.rank());
            const Tensor<T> z = shard(r);
            const auto out = vocab_parallel_cross_entropy<T>(c, in.cfg, z, in.targets);
            loss[r] = out.loss;
            grad[r] = vocab_parallel_cross_entropy_backward<T>(c, in.cfg, z, in.targets, out.saved,
                                                               dloss_t);
          },
          opt);
    } catch (const RankFailure& f) {
      bool usage = false;
      try {
        std::rethrow_exception(f.cause());
      } catch (const UsageError&) {
        usage = true;
      } catch (...) {
      }
      if (!refused)
        violation(in, std::string("the library failed where the reference did not: ") + f.what());
      if (!usage)
        violation(in, std::string("the library's refusal is not a UsageError: ") + f.what());
      return;
    }
    if (refused) violation(in, "the library accepted what the reference refuses: " + why);
    const R omega = ref::overflow_threshold<R>(ref::format_of<T>());
    for (std::size_t r = 1; r < loss.size(); ++r) {
      if (loss[r].shape() != loss[0].shape() ||
          std::memcmp(loss[r].data(), loss[0].data(), loss[0].size() * sizeof(T)) != 0)
        violation(in, "rank " + std::to_string(r) + "'s loss is not rank 0's bit for bit");
    }
    if (loss[0].size() != want.loss.size()) violation(in, "the loss has the wrong shape");
    for (std::size_t k = 0; k < want.loss.size(); ++k)
      judge("loss[" + std::to_string(k) + "] ", loss[0][k], want.loss[k], want.loss_bound[k], omega,
            want.denominator_uncertain);
    for (std::size_t r = 0; r < grad.size(); ++r) {
      if (grad[r].shape() != Shape({in.tokens, pieces[r].size}))
        violation(in, "rank " + std::to_string(r) + "'s gradient has the wrong shape");
      for (std::size_t t = 0; t < in.tokens; ++t) {
        for (std::size_t v = 0; v < pieces[r].size; ++v) {
          const std::size_t gv = pieces[r].offset + v;
          judge("grad[" + std::to_string(t) + ", " + std::to_string(gv) + "] (rank " +
                    std::to_string(r) + ") ",
                grad[r](t, v), want.grad(t, gv), want.grad_bound(t, gv), omega,
                want.denominator_uncertain);
        }
      }
    }
  }
};

}  // namespace
}  // namespace shardcheck::fuzz

// libomp's idle threads would spin 200 ms after each input's ranks (see collectives_fuzz.cpp).
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  kmp_set_blocktime(0);
  return 0;
}

// The custom mutator: half the time libFuzzer's own mutation; otherwise one value slot at a
// random offset rewritten as an IEEE special, either by the specials tag (1, index) or as raw
// bits (tag 0, the special's float64 or float32 bits, by the input's type bit).
extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);
extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size,
                                               std::size_t max_size, unsigned int seed) {
  std::minstd_rand rng(seed);
  if (size < 8 || rng() % 2 == 0) return LLVMFuzzerMutate(data, size, max_size);
  const auto specials = shardcheck::fuzz::vocab_specials();
  const double v = specials[rng() % specials.size()];
  const bool is_float = (data[0] & 1) != 0;
  const std::size_t width = is_float ? 4 : 8;
  const std::size_t at = 5 + rng() % (size - 5);
  if (rng() % 2 == 0 || at + 1 + width > max_size) {
    data[at] = 1;  // the specials tag
    if (at + 1 < size) data[at + 1] = static_cast<std::uint8_t>(rng() % specials.size());
    return size;
  }
  std::uint8_t bits[8];
  if (is_float) {
    const auto f = static_cast<float>(v);
    std::memcpy(bits, &f, 4);
  } else {
    std::memcpy(bits, &v, 8);
  }
  data[at] = 0;  // the raw-bits tag
  const std::size_t end = std::max(size, at + 1 + width);
  std::memcpy(data + at + 1, bits, width);
  return end;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardcheck::fuzz;
  const VocabInput in = decode_vocab_input({data, size});
  if (std::getenv("SHARDCHECK_FUZZ_VERBOSE") != nullptr)
    std::fprintf(stderr, "%s", describe(in).c_str());
  if (in.is_float) {
    Problem<float>{in}.run_and_check();
  } else {
    Problem<double>{in}.run_and_check();
  }
  return 0;
}
