// The fast contraction (reference/contraction/fast_contraction.hpp) against a second, independent
// oracle: GNU MPFR through Boost.Multiprecision's mpfr_float_backend at 60 decimal digits (201
// bits), on the same generated products and claims as fast_contraction_props.cpp's 256-bit
// cpp_bin_float oracle (fast_contraction_check.hpp). An error shared by the fast path and Boost's
// binary-float emulation would pass the first oracle; it cannot pass both.
//   meets_its_claim_mpfr_float64     double operands, float64 values in every mix
//   meets_its_claim_mpfr_r_values    one or both operands in R (113-bit values)
// mutant_is_caught_mpfr: the dropped-slice mutant fails against this oracle too.
#include "reference/fast_contraction_check.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <boost/multiprecision/mpfr.hpp>

#include <limits>

namespace shardcheck::props::ref::fast_contraction_mpfr_props {
namespace {

using Mpfr = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<60>,
                                           boost::multiprecision::et_off>;

TEST(fast_contraction, mpfr_oracle_has_200_bits) {
  // hp×hp products have 226 bits: rounded once here, which the check's slack
  // (k + 1)·2^(1−digits)·Σ|ab| covers; sums of exact products in 201 bits err by far less than
  // the 2^-113 claims asserted.
  EXPECT_GE(std::numeric_limits<Mpfr>::digits, 200);
}

RC_GTEST_PROP(fast_contraction, meets_its_claim_mpfr_float64, ()) {
  fast_meets_its_claim<double, Mpfr>(false, Valued::doubles);
}
RC_GTEST_PROP(fast_contraction, meets_its_claim_mpfr_r_values, ()) {
  fast_meets_its_claim<float, Mpfr>(false, draw_r_valued());
}

TEST(fast_contraction, mutant_is_caught_mpfr) {
  const bool passed = rc::check("fast path with a's last slice dropped, MPFR oracle",
                                [] { fast_meets_its_claim<double, Mpfr>(true, Valued::doubles); });
  EXPECT_FALSE(passed) << "the MPFR-checked property did not notice a dropped slice";
}

}  // namespace
}  // namespace shardcheck::props::ref::fast_contraction_mpfr_props
