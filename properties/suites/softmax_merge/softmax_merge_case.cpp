#include "suites/softmax_merge/softmax_merge_case.hpp"

#include "generators/layout_gen.hpp"
#include "generators/structure.hpp"
#include "generators/values.hpp"
#include "runtime/format_list.hpp"

#include <cmath>
#include <limits>

namespace shardcheck::check {
namespace {

// Sizes: a case is a few hundred high-precision exp/log; keep it small.
constexpr std::size_t max_rows = 6, max_width = 6, max_keys = 24, max_parts = 8;

const char* fill_name(EmptyFill f) {
  switch (f) {
    case EmptyFill::zero: return "0";
    case EmptyFill::nan: return "nan";
    case EmptyFill::inf: return "inf";
  }
  return "?";
}

// A value in [−1, 1] on a grid of 2^-16, signed.
rc::Gen<double> genUnit() {
  return rc::gen::map(rc::gen::inRange(-65536, 65537),
                      [](int k) { return std::ldexp(static_cast<double>(k), -16); });
}

}  // namespace

std::string MergeCase::describe() const {
  std::string s = std::string(name(dtype)) + " rows=" + std::to_string(rows) +
                  " width=" + std::to_string(width) + " keys=" + std::to_string(keys) +
                  " parts=" + std::to_string(parts) + " part_of_key=" + format_list(part_of_key) +
                  " empty_fill=[";
  for (std::size_t j = 0; j < empty_fill.size(); ++j)
    s += (j ? "," : "") + std::string(fill_name(empty_fill[j]));
  s += "] permutation=" + format_list(permutation) + " groups=" + std::to_string(groups) +
       " group_of_part=" + format_list(group_of_part) +
       " ring_start=" + std::to_string(ring_start) + (ring_from_empty ? " ring_from_empty" : "") +
       (huge ? " huge" : "");
  return s;
}

rc::Gen<MergeCase> gen_case(const RunConfig& config, const MergeCaseOptions& options) {
  return rc::gen::exec([config, options] {
    MergeCase c;
    std::vector<DType> types;
    for (const DType t : config.dtypes) {
      const DType a = acc_dtype(t);
      bool seen = false;
      for (const DType x : types) seen = seen || x == a;
      if (!seen && (t == DType::float64 || t == DType::float32 || t == DType::bfloat16 ||
                    t == DType::float16)) {
        types.push_back(a);
      }
    }
    if (types.empty()) types = {DType::float64, DType::float32};
    c.dtype = *gen::structureOf(types);
    c.huge = options.huge;
    c.rows = *gen::genDim(max_rows);
    c.width = *gen::genDim(max_width);
    c.keys = *rc::gen::weightedOneOf<std::size_t>(
        {{1, rc::gen::just<std::size_t>(0)}, {8, gen::genDim(max_keys)}});
    // The number of parts is structure (a merge's world size): unscaled, 1 one time in 9, 2 three
    // times, 3..8 the rest, every one from the first case; shrinks toward 1. (The scaled
    // inRange(3, 9) this replaced drew 8 parts only late in each block of 100 cases.)
    c.parts = *rc::gen::mapcat(gen::weightedStructure<int>({{1, 1}, {3, 2}, {5, 3}}), [](int k) {
      return k < 3 ? rc::gen::just(static_cast<std::size_t>(k))
                   : gen::structure<std::size_t>(3, max_parts);
    });
    // Contiguous chunks half of the time (a ring's blocks), any assignment otherwise (zigzag
    // and beyond): both are partitions, drawn unscaled (a scaled draw put every key in part 0
    // in the first cases). Raw choices reduced mod the count: RapidCheck redraws the picks after
    // one that shrinks, from the same random, so when `parts` shrinks from 5 to 2 the keys of
    // parts 3 and 4 land in parts 1 and 0, still two parts, and the smaller case still fails.
    if (*rc::gen::arbitrary<bool>()) {
      for (std::size_t k = 0; k < c.keys; ++k) {
        c.part_of_key.push_back(*gen::structure<std::size_t>(0, max_parts - 1) % c.parts);
      }
    } else {
      std::vector<std::size_t> cuts;
      for (std::size_t j = 0; j + 1 < c.parts; ++j)
        cuts.push_back(*gen::structure<std::size_t>(0, max_keys) % (c.keys + 1));
      std::sort(cuts.begin(), cuts.end());
      for (std::size_t k = 0; k < c.keys; ++k) {
        std::size_t j = 0;
        while (j < cuts.size() && cuts[j] <= k) ++j;
        c.part_of_key.push_back(j);
      }
    }
    for (std::size_t j = 0; j < c.parts; ++j) {
      c.empty_fill.push_back(*gen::weightedStructure<EmptyFill>(
          {{3, EmptyFill::zero}, {2, EmptyFill::nan}, {1, EmptyFill::inf}}));
      c.permutation.push_back(j);
    }
    for (std::size_t j = 0; j + 1 < c.parts; ++j) {
      std::swap(c.permutation[j], c.permutation[*gen::structure<std::size_t>(j, c.parts - 1)]);
    }
    // Groups, the permutation and the ring start: structure too (unscaled, shrinking toward
    // one group, the identity and rank 0).
    c.groups = *gen::structure<std::size_t>(1, c.parts + 1);  // one more: an empty group
    for (std::size_t j = 0; j < c.parts; ++j) {
      c.group_of_part.push_back(*gen::structure<std::size_t>(0, max_parts) % c.groups);
    }
    c.ring_start = *gen::structure<std::size_t>(0, max_parts - 1) % c.parts;
    c.ring_from_empty = *rc::gen::arbitrary<bool>();
    std::vector<std::size_t> sizes(c.parts, 0);
    for (const auto j : c.part_of_key) ++sizes[j];
    bool empty_part = false;
    for (const auto s : sizes) empty_part = empty_part || s == 0;
    RC_CLASSIFY(empty_part, "empty part");
    RC_CLASSIFY(c.keys == 0, "no keys");
    return c;
  });
}

template <class A>
rc::Gen<MergeData<A>> gen_data(const MergeCase& c) {
  return rc::gen::exec([c] {
    MergeData<A> d;
    d.scores = Tensor<A>(Shape{c.rows, c.keys});
    const double inf = std::numeric_limits<double>::infinity();
    bool masked_row = false;
    for (std::size_t i = 0; i < c.rows; ++i) {
      // Offset of the row's scores: 0, ±[0, 20], ±80, ±1000 (exp overflows in both types), and
      // ±1e30 where the property takes exact A inputs.
      const int kind =
          c.huge ? *rc::gen::weightedElement<int>({{4, 0}, {3, 1}, {2, 2}, {2, 3}, {2, 4}})
                 : *rc::gen::weightedElement<int>({{4, 0}, {3, 1}, {2, 2}, {2, 3}});
      const double magnitude = kind == 0   ? 0.0
                               : kind == 1 ? static_cast<double>(*rc::gen::inRange(0, 21))
                               : kind == 2 ? 80.0
                               : kind == 3 ? 1000.0
                                           : 1e30;
      const double offset = *rc::gen::arbitrary<bool>() ? -magnitude : magnitude;
      const double spread =
          *rc::gen::weightedElement<double>({{3, 1.0}, {2, 10.0}, {2, 80.0}, {1, 2000.0}});
      const int mask_pct = *rc::gen::weightedElement<int>({{3, 0}, {2, 30}, {1, 70}, {1, 100}});
      masked_row = masked_row || mask_pct == 100;
      for (std::size_t k = 0; k < c.keys; ++k) {
        if (*rc::gen::inRange(0, 100) < mask_pct) {
          d.scores(i, k) = static_cast<A>(-inf);
          continue;
        }
        double s = offset + spread * *genUnit();
        if (*rc::gen::inRange(0, 8) == 0) {
          s -= c.huge ? *rc::gen::element(200.0, 1e4, 1e30) : *rc::gen::element(200.0, 1e4);
        }
        d.scores(i, k) = static_cast<A>(s);
      }
    }
    RC_CLASSIFY(masked_row, "all-masked row");
    d.values = *gen::genTensor<A>({c.keys, c.width}, *gen::genProfile(), 20);
    return d;
  });
}

template <class A>
rc::Gen<SpecialPartials<A>> genSpecialPartials(const MergeCase& c) {
  return rc::gen::exec([c] {
    constexpr A inf = std::numeric_limits<A>::infinity();
    constexpr A qnan = std::numeric_limits<A>::quiet_NaN();
    SpecialPartials<A> s;
    const std::size_t parts = *rc::gen::weightedOneOf<std::size_t>(
        {{1, rc::gen::just<std::size_t>(0)}, {6, rc::gen::just(c.parts)}});
    for (std::size_t j = 0; j < parts; ++j) {
      Tensor<A> lse(Shape{c.rows});
      Tensor<A> out = *gen::genTensor<A>({c.rows, c.width}, gen::Profile::unit, 0);
      for (std::size_t i = 0; i < c.rows; ++i) {
        const int kind = *rc::gen::weightedElement<int>({{6, 0}, {4, 1}, {1, 2}, {1, 3}});
        lse[i] = kind == 0   ? static_cast<A>(1000.0 * *genUnit())
                 : kind == 1 ? -inf
                 : kind == 2 ? qnan
                             : inf;
        for (std::size_t e = 0; e < c.width; ++e) {
          const bool empty = kind == 1;
          const int v = *rc::gen::inRange(0, 10);
          if (empty && v < 4) out(i, e) = v < 2 ? qnan : (v == 2 ? inf : -inf);
          if (!empty && v == 0) out(i, e) = qnan;  // propagates
        }
      }
      s.out.push_back(std::move(out));
      s.lse.push_back(std::move(lse));
    }
    return s;
  });
}

// A is a type here: the check reads the `>>` closing two template argument lists as a shift.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define SHARDCHECK_INSTANTIATE(A)                               \
  template rc::Gen<MergeData<A>> gen_data<A>(const MergeCase&); \
  template rc::Gen<SpecialPartials<A>> genSpecialPartials<A>(const MergeCase&);
SHARDCHECK_INSTANTIATE(double)
SHARDCHECK_INSTANTIATE(float)
#undef SHARDCHECK_INSTANTIATE
// NOLINTEND(bugprone-macro-parentheses)

}  // namespace shardcheck::check
