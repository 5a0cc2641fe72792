// The bounds of reference/bounds.hpp against the arithmetic they claim to cover.
//
// Soundness: for generated contractions (lengths 1..300, 1..8 parts with empty ones, bias or not,
// plain sums) with adversarial values (cancellation to a tiny residue, magnitudes over the whole
// range of T, products that underflow the accumulator, NaN/Inf), the contract's emulation
// (contract_emulation.hpp) in every order it allows passes judge(): a finite result is within
// the bound, a non-finite one only where overflow was possible or the reference is non-finite
// in the same way. The largest observed |err|/bound per type and value mix is printed at the end.
//
// Tightness: constructed cases where each term of the bound is (nearly) attained, so a bound
// loosened by more than a few percent fails here. Random data stays far below the worst case
// (errors grow like sqrt(k)·u, the bound like k·u), so these are where tightness shows.
#include "per_type_props.hpp"
#include "testing/contract_emulation.hpp"
#include "testing/ratio_summary.hpp"

#include "reference/bounds.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <string>

namespace shardcheck::props::ref::bounds_props {
namespace {

using reference::arithmetic_of;
using reference::BoundStatus;
using reference::hp;
using reference::Operands;
using reference::PartTerms;
using reference::to_hp;

// The documented contract (runtime/dtype.hpp, acc_t): float64 accumulates in float64, every
// other type in float32, as tensor cores do.
static_assert(arithmetic_of<double>().accumulate == reference::float64_format);
static_assert(arithmetic_of<float>().accumulate == reference::float32_format);
static_assert(arithmetic_of<bfloat16>().accumulate == reference::float32_format);
static_assert(arithmetic_of<float16>().accumulate == reference::float32_format);

// ---------------------------------------------------------------- observed ratios, reported

test::WorstRatios& ratio_stats() {
  static test::WorstRatios stats(
      "bound soundness: largest |err|/bound observed per element (pass <= 1; 1 = the bound "
      "attained)");
  return stats;
}

// ---------------------------------------------------------------- generators

enum class Mix { tame, cancellation, wide, tiny, mixed, special };
const char* mix_name(Mix m) {
  const char* names[] = {"tame", "cancellation", "wide", "tiny", "mixed", "special"};
  return names[static_cast<int>(m)];
}

template <class T>
rc::Gen<T> genTame() {
  return genLogUniform<T>(-6, 6);
}

// The bottom third of T's binades: bfloat16/float32/float64 products there underflow the
// accumulator; float16 sums there round into float16's subnormals.
template <class T>
rc::Gen<T> genTiny() {
  const int lo = lowest_binade<T>();
  return genLogUniform<T>(lo, lo + (highest_binade<T>() - lo) / 3);
}

template <class T>
rc::Gen<T> genWide() {
  return genLogUniform<T>(lowest_binade<T>(), highest_binade<T>());
}

template <class T>
rc::Gen<T> genSpecial() {
  const T inf = std::numeric_limits<T>::infinity();
  return rc::gen::elementOf(std::vector<T>{inf, -inf, std::numeric_limits<T>::quiet_NaN()});
}

template <class T>
rc::Gen<T> genOfMix(Mix m) {
  switch (m) {
    case Mix::wide: return genWide<T>();
    case Mix::tiny: return genTiny<T>();
    case Mix::mixed:
      return rc::gen::weightedOneOf<T>({{3, genTame<T>()}, {2, genTiny<T>()}, {1, genWide<T>()}});
    default: return genTame<T>();
  }
}

// p part lengths summing to k, zeros allowed (cut points drawn uniformly).
inline rc::Gen<std::vector<std::size_t>> genParts(std::size_t k) {
  return rc::gen::exec([k] {
    const int p = *rc::gen::weightedOneOf<int>({{2, rc::gen::just(1)}, {5, uniform(2, 8)}});
    return draw_parts(k, p);
  });
}

template <class T>
rc::Gen<DotCase<T>> genDotCase(Mix mix) {
  return rc::gen::exec([mix] {
    DotCase<T> c;
    const std::size_t k =
        *rc::gen::weightedOneOf<std::size_t>({{4, uniform<std::size_t>(1, 8)},
                                              {4, uniform<std::size_t>(1, 64)},
                                              {1, uniform<std::size_t>(65, 300)}});
    const bool unit = *uniform(0, 4) == 0;
    c.a = *rc::gen::container<std::vector<T>>(k, genOfMix<T>(mix));
    if (!unit) c.b = *rc::gen::container<std::vector<T>>(k, genOfMix<T>(mix));
    if (*uniform(0, 1) == 1) c.bias = *genOfMix<T>(mix);
    c.parts = *genParts(k);
    c.order_seed = *rc::gen::arbitrary<std::uint64_t>();
    c.order = *rc::gen::element(SumOrder::in_order, SumOrder::random_tree, SumOrder::fma_permuted,
                                SumOrder::fma_blocked);
    if (mix == Mix::cancellation && k >= 2) {
      // Make one product cancel the rest: the exact sum becomes a residue far below Σ|ab|.
      const std::size_t j = *uniform<std::size_t>(0, k - 1);
      hp rest(0);
      for (std::size_t i = 0; i < k; ++i) {
        if (i != j) rest += to_hp(c.a[i]) * (unit ? hp(1) : to_hp(c.b[i]));
      }
      if (unit) {
        c.a[j] = reference::round_to<T>(hp(-rest));
      } else {
        c.b[j] = reference::round_to<T>(hp(-rest / to_hp(c.a[j])));
      }
      if (c.bias && *uniform(0, 1) == 1) c.bias = static_cast<T>(0);
    }
    if (mix == Mix::special) {
      const std::size_t n = *uniform<std::size_t>(1, 2);
      for (std::size_t i = 0; i < n; ++i) {
        std::vector<T>& v = (c.b.empty() || *uniform(0, 1) == 0) ? c.a : c.b;
        v[*uniform<std::size_t>(0, k - 1)] = *genSpecial<T>();
      }
    }
    return c;
  });
}

// ---------------------------------------------------------------- the property

template <class T>
reference::ElementBound<hp> bound_of(const DotCase<T>& c, hp& reference_value) {
  std::vector<hp> a, b;
  for (T v : c.a) a.push_back(to_hp(v));
  for (T v : c.b) b.push_back(to_hp(v));
  std::vector<PartTerms<hp>> parts(c.parts.size());
  reference::contract_parts<hp>(a.data(), 1, b.empty() ? nullptr : b.data(), 1, c.parts,
                                parts.data());
  const hp bias = c.bias ? to_hp(*c.bias) : hp(0);
  reference_value = 0;
  for (const auto& pt : parts) reference_value += pt.partial;
  if (c.bias) reference_value += bias;
  return reference::element_bound<hp>(parts, c.bias ? &bias : nullptr, arithmetic_of<T>(),
                                      b.empty() ? Operands::unit : Operands::general);
}

template <class T>
std::string describe(const DotCase<T>& c) {
  std::string s = std::string(type_name(T{})) + ", k = " + std::to_string(c.a.size()) + ", parts [";
  for (std::size_t i = 0; i < c.parts.size(); ++i)
    s += (i ? ", " : "") + std::to_string(c.parts[i]);
  s += "], order " + std::string(order_name(c.order)) + (c.b.empty() ? ", plain sum" : "") +
       (c.bias ? ", bias " + show(*c.bias) : ", no bias");
  return s;
}

template <class T>
void bound_covers_contract_case() {
  const Mix mix = *rc::gen::weightedElement<Mix>({{4, Mix::tame},
                                                  {3, Mix::cancellation},
                                                  {2, Mix::wide},
                                                  {2, Mix::tiny},
                                                  {3, Mix::mixed},
                                                  {1, Mix::special}});
  const DotCase<T> c = *genDotCase<T>(mix);
  RC_TAG(type_name(T{}), mix_name(mix), order_name(c.order));
  hp exact(0);
  const auto b = bound_of(c, exact);
  const T got = emulate(c);
  const auto v = reference::judge(got, exact, b);
  ratio_stats().add(std::string(type_name(T{})) + " " + mix_name(mix),
                    v.pass && boost::multiprecision::isfinite(v.ratio)
                        ? std::optional<double>(static_cast<double>(v.ratio))
                        : std::nullopt,
                    b.status == BoundStatus::may_overflow      ? "may overflow"
                    : b.status == BoundStatus::nonfinite_input ? "non-finite inputs"
                                                               : nullptr);
  if (!v.pass) {
    RC_FAIL(describe(c) + ": emulated " + show(got) + ", reference " + show_hp(exact) + ", |err| " +
            show_hp(v.error) + " > bound " + show_hp(b.bound) + " (ratio " + show_hp(v.ratio) +
            ", status " + std::to_string(static_cast<int>(b.status)) + ")");
  }
}

SHARDCHECK_PROP_PER_TYPE(bounds, cover_every_order_of_the_contract, bound_covers_contract_case)

// ---------------------------------------------------------------- tightness: each term attained

template <class T>
double ratio_of(const DotCase<T>& c) {
  hp exact(0);
  const auto b = bound_of(c, exact);
  const auto v = reference::judge(emulate(c), exact, b);
  EXPECT_TRUE(v.pass) << describe(c);
  EXPECT_EQ(b.status, BoundStatus::holds);
  return static_cast<double>(v.ratio);
}

// (b) the output rounding: 1 + 2^-p − 2^-(2p−1) sits just below the midpoint of 1 and
// 1 + 2^(1−p), so rounding to T loses almost u_T/(1 + u_T)·|y|, which is what the bound allows.
template <class T>
void output_rounding_is_attained() {
  const int p = reference::format_of<T>().precision;
  DotCase<T> c;
  c.a = {T(1.0F), static_cast<T>(std::ldexp(1.0, -p) - std::ldexp(1.0, 1 - 2 * p))};
  c.b = {T(1.0F), T(1.0F)};
  c.parts = {2};
  c.order = SumOrder::in_order;
  EXPECT_GE(ratio_of(c), 0.99) << type_name(T{});
}

TEST(bounds_tightness, output_rounding_bfloat16) { output_rounding_is_attained<bfloat16>(); }
TEST(bounds_tightness, output_rounding_float16) { output_rounding_is_attained<float16>(); }

// (a) accumulation: 1 followed by k−1 values just below half an ulp of 1, summed left to right:
// every addition rounds back to 1, losing (k−1)·δ ≈ (k−1)·u; the bound is gamma_{k−1}(u)·Σ
// for a plain sum, gamma_k(u)·Σ when the products may round (ratio ≈ (k−1)/k).
template <class T>
DotCase<T> staircase(std::size_t k, bool plain_sum) {
  const int p = reference::format_of<T>().precision;
  DotCase<T> c;
  c.a.assign(
      k, static_cast<T>(std::ldexp(1.0, -p) * (1 - std::ldexp(1.0, 1 - p))));  // p−1 bits: exact
  c.a[0] = T(1.0F);
  if (!plain_sum) c.b.assign(k, T(1.0F));
  c.parts = {k};
  c.order = SumOrder::in_order;
  return c;
}

TEST(bounds_tightness, accumulation_float32_plain_sum) {
  EXPECT_GE(ratio_of(staircase<float>(64, true)), 0.99);
}
TEST(bounds_tightness, accumulation_float64_products) {
  EXPECT_GE(ratio_of(staircase<double>(64, false)), 0.98);  // (k−1)/k = 0.984
}

// (d) the cross-part sum in T: 8 parts of one product each (exact partials), 1 then 7 values
// just below half an ulp of 1, reduced left to right in bfloat16: 7 roundings each losing ~u.
// The bound also charges each partial's rounding u_T·|s_r| (it cannot know they are exact) and
// gamma_7's second-order terms (7u = 2.7% for bfloat16), so the attained fraction is
// (p−1)/p / (1 + O(p·u)) ≈ 0.82.
TEST(bounds_tightness, reduction_bfloat16) {
  DotCase<bfloat16> c = staircase<bfloat16>(8, false);
  c.parts.assign(8, 1);
  hp exact(0);
  const auto b = bound_of(c, exact);
  bfloat16 s = c.a[0];
  for (std::size_t i = 1; i < 8; ++i) s = static_cast<bfloat16>(s + c.a[i]);
  const auto v = reference::judge(s, exact, b);
  EXPECT_TRUE(v.pass);
  EXPECT_GE(static_cast<double>(v.ratio), 0.8);
}

// The underflow term: products of 2^-75·2^-75 = 2^-150 are exact ties between 0 and float32's
// smallest subnormal 2^-149 and round to 0: each loses eta/2, all of which the bound allows.
TEST(bounds_tightness, accumulator_underflow_float32) {
  DotCase<float> c;
  c.a.assign(16, std::ldexp(1.0F, -75));
  c.b = c.a;
  c.parts = {16};
  c.order = SumOrder::in_order;
  EXPECT_GE(ratio_of(c), 0.99);
}

// ---------------------------------------------------------------- statuses

TEST(bounds_status, overflow_is_flagged_and_a_nonfinite_result_accepted_only_then) {
  DotCase<bfloat16> c;
  c.a = {static_cast<bfloat16>(std::ldexp(1.0F, 100)),
         static_cast<bfloat16>(-std::ldexp(1.0F, 100))};
  c.b = c.a;  // products 2^200 overflow float32
  c.parts = {2};
  hp exact(0);
  const auto b = bound_of(c, exact);
  EXPECT_EQ(b.status, BoundStatus::may_overflow);
  EXPECT_TRUE(reference::judge(std::numeric_limits<bfloat16>::infinity(), exact, b).pass);
  auto safe = b;
  safe.status = BoundStatus::holds;
  EXPECT_FALSE(reference::judge(std::numeric_limits<bfloat16>::infinity(), exact, safe).pass);
}

TEST(bounds_status, nan_input_needs_nan) {
  DotCase<float> c;
  c.a = {1.0F, std::numeric_limits<float>::quiet_NaN()};
  c.b = {1.0F, 1.0F};
  c.parts = {2};
  hp exact(0);
  const auto b = bound_of(c, exact);
  EXPECT_EQ(b.status, BoundStatus::nonfinite_input);
  EXPECT_TRUE(reference::judge(std::numeric_limits<float>::quiet_NaN(), exact, b).pass);
  EXPECT_FALSE(reference::judge(1.0F, exact, b).pass);
  EXPECT_FALSE(reference::judge(std::numeric_limits<float>::infinity(), exact, b).pass);
}

TEST(bounds_errors, gamma_refuses_vacuous_bounds) {
  EXPECT_THROW((void)reference::gamma<double>(256, std::ldexp(1.0, -8)), std::domain_error);
  EXPECT_NO_THROW((void)reference::gamma<double>(255, std::ldexp(1.0, -8)));
  EXPECT_THROW((void)reference::format_of(DType::int32), std::invalid_argument);
}

}  // namespace
}  // namespace shardcheck::props::ref::bounds_props
