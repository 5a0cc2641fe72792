// Value mixes for the reference's product properties (fast_contraction_props.cpp,
// fast_linear_props.cpp): entries of a storage type T drawn so the fast contraction's slicing,
// rest elements and plain-path fallbacks are all exercised.
//   tame          log-uniform magnitudes 2^-6..2^6, both signs
//   wide          T's whole range, subnormals included
//   tiny          the 40 lowest binades of T (subnormals and the smallest normals)
//   cancellation  tame entries, arranged by the caller so sums cancel (Σ a·b ≪ Σ|a·b|)
//   zeros         mostly ±0, some tame values
//   special       tame, with one or two ±inf/NaN placed by the caller
#pragma once

#include "testing/reference_gen.hpp"

#include <rapidcheck.h>

namespace shardcheck::props::ref {

enum class Mix { tame, wide, tiny, cancellation, zeros, special };

inline const char* mix_name(Mix m) {
  const char* names[] = {"tame", "wide", "tiny", "cancellation", "zeros", "special"};
  return names[static_cast<int>(m)];
}

template <class T>
rc::Gen<T> genEntry(Mix mix) {
  const int lo = lowest_binade<T>(), hi = highest_binade<T>();
  switch (mix) {
    case Mix::wide: return genLogUniform<T>(lo, hi);
    case Mix::tiny: return genLogUniform<T>(lo, lo + 40);
    case Mix::zeros:
      return rc::gen::weightedOneOf<T>(
          {{2, rc::gen::element(T(0.0F), T(-0.0F))}, {1, genLogUniform<T>(-6, 6)}});
    default: return genLogUniform<T>(-6, 6);
  }
}

// A contracted length: 0 (rarely), short, medium, or beyond one 256-long chunk's worth of slices.
inline rc::Gen<std::size_t> genInnerLength() {
  return rc::gen::weightedOneOf<std::size_t>({{1, rc::gen::just(std::size_t{0})},
                                              {4, uniform<std::size_t>(1, 8)},
                                              {4, uniform<std::size_t>(1, 64)},
                                              {2, uniform<std::size_t>(65, 300)}});
}

inline Mix draw_mix() {
  return *rc::gen::weightedElement<Mix>({{4, Mix::tame},
                                         {2, Mix::wide},
                                         {2, Mix::tiny},
                                         {3, Mix::cancellation},
                                         {2, Mix::zeros},
                                         {1, Mix::special}});
}

}  // namespace shardcheck::props::ref
