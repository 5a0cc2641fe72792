// The softmax merge (ops/softmax_merge/softmax_merge.hpp). One row kernel, written one IEEE
// operation per step in the order the header fixes, so that
// reference/softmax_merge/softmax_merge.hpp's bound follows it; the layouts only say where a row's
// out and lse live.
#include "ops/softmax_merge/softmax_merge.hpp"

#include "runtime/errors.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace shardcheck {
namespace {

// Where one row lives: out[out_offset .. out_offset + width), lse[lse_index].
struct RowPlace {
  std::size_t out_offset;
  std::size_t lse_index;
};

// A layout: the number of rows, the row width and each row's place (the same for every
// partial of a merge, whose shapes have been checked to be equal).
struct Layout {
  std::size_t rows = 0;
  std::size_t width = 0;
  // Attention layout [batch, L, h, d] / [batch, h, L]; rows = batch·L·h.
  bool attention = false;
  std::size_t len = 0, heads = 0;

  RowPlace place(std::size_t r) const {
    if (!attention) return {r * width, r};
    // r enumerates (b, t, i) in out's order: r = (b·L + t)·h + i.
    const std::size_t i = r % heads;
    const std::size_t bt = r / heads;
    const std::size_t t = bt % len;
    const std::size_t b = bt / len;
    return {r * width, (b * heads + i) * len + t};
  }
};

template <class A>
struct RowIn {
  const A* out;
  A lse;
};

// An out_e that overflowed: ±M (M = max |out_je| over the non-empty parts) when every part's
// out_je is finite, so the exact convex combination lies in [−M, M] (header: "Arithmetic");
// else the overflow stands (an infinite input).
template <class A>
A clamp_overflow(const std::vector<RowIn<A>>& parts, std::size_t e, A acc) {
  constexpr A inf = std::numeric_limits<A>::infinity();
  A big = 0;
  for (const auto& p : parts) {
    if (p.lse == -inf) continue;
    const A v = std::abs(p.out[e]);
    if (!std::isfinite(v)) return acc;
    big = std::max(big, v);
  }
  return std::copysign(big, acc);
}

// The merge of one row (header: "Arithmetic"). dst_out may alias a part's out (merge_into):
// element e of every part is read before dst_out[e] is written.
template <class A>
void merge_row(const std::vector<RowIn<A>>& parts, std::size_t width, A* dst_out, A* dst_lse,
               std::vector<A>& coef) {
  constexpr A inf = std::numeric_limits<A>::infinity();
  bool nan = false, plus_inf = false;
  A m = -inf;
  for (const auto& p : parts) {
    if (std::isnan(p.lse)) {
      nan = true;
    } else if (p.lse == inf) {
      plus_inf = true;
    } else if (p.lse > m) {
      m = p.lse;
    }
  }
  if (nan || plus_inf) {
    for (std::size_t e = 0; e < width; ++e) dst_out[e] = std::numeric_limits<A>::quiet_NaN();
    *dst_lse = nan ? std::numeric_limits<A>::quiet_NaN() : inf;
    return;
  }
  if (m == -inf) {  // every part empty (or none): the empty row
    for (std::size_t e = 0; e < width; ++e) dst_out[e] = A(0);
    *dst_lse = -inf;
    return;
  }
  // Weights of the non-empty parts (empty ones are skipped: 0·NaN would leak their out).
  coef.assign(parts.size(), A(0));
  A l = 0;
  bool first = true;
  for (std::size_t j = 0; j < parts.size(); ++j) {
    if (parts[j].lse == -inf) continue;
    const A d = parts[j].lse - m;
    const A w = std::exp(d);
    coef[j] = w;
    l = first ? w : A(l + w);
    first = false;
  }
  const A lse = m + std::log(l);
  for (std::size_t j = 0; j < parts.size(); ++j) {
    if (parts[j].lse != -inf) coef[j] = coef[j] / l;
  }
  for (std::size_t e = 0; e < width; ++e) {
    A acc = 0;
    bool started = false;
    for (std::size_t j = 0; j < parts.size(); ++j) {
      if (parts[j].lse == -inf) continue;
      const A term = coef[j] * parts[j].out[e];
      acc = started ? A(acc + term) : term;
      started = true;
    }
    if (std::isinf(acc)) acc = clamp_overflow(parts, e, acc);
    dst_out[e] = acc;
  }
  *dst_lse = lse;
}

// Merges parts[k] (all of `layout`) into dst (already shaped; may alias parts[0]).
template <class A>
void merge_all(const Layout& layout, std::span<const SoftmaxPartial<A>* const> parts,
               SoftmaxPartial<A>& dst) {
  std::vector<RowIn<A>> row(parts.size());
  std::vector<A> coef;
  for (std::size_t r = 0; r < layout.rows; ++r) {
    const RowPlace at = layout.place(r);
    for (std::size_t k = 0; k < parts.size(); ++k) {
      row[k] = {parts[k]->out.data() + at.out_offset, parts[k]->lse[at.lse_index]};
    }
    merge_row(row, layout.width, dst.out.data() + at.out_offset, &dst.lse[at.lse_index], coef);
  }
}

std::string describe(const char* what, const Shape& out, const Shape& lse) {
  return std::string(what) + " has out " + format_shape(out) + " and lse " + format_shape(lse);
}

template <class A>
Layout row_layout(const std::string& where, const SoftmaxPartial<A>& p, const char* what) {
  if (p.out.ndim() != 2 || p.lse.ndim() != 1 || p.lse.dim(0) != p.out.dim(0)) {
    throw UsageError(where + describe(what, p.out.shape(), p.lse.shape()) +
                     "; the row layout needs out [rows, width] and lse [rows] (for attention's "
                     "out [batch, L, h, d] and lse [batch, h, L] use the _attention functions)");
  }
  Layout l;
  l.rows = p.out.dim(0);
  l.width = p.out.dim(1);
  return l;
}

Layout attention_layout(const std::string& where, const Shape& out, const Shape& lse,
                        const char* what) {
  if (out.size() != 4 || lse != Shape({out[0], out[2], out[1]})) {
    std::string want = "[batch, h, L]";
    if (out.size() == 4) {
      want += " = " + format_shape(Shape{out[0], out[2], out[1]});
    }
    throw UsageError(where + describe(what, out, lse) +
                     "; the attention layout needs out [batch, L, h, d] and lse " + want);
  }
  Layout l;
  l.attention = true;
  l.rows = out[0] * out[1] * out[2];
  l.width = out[3];
  l.len = out[1];
  l.heads = out[2];
  return l;
}

template <class A>
void require_same(const std::string& where, const SoftmaxPartial<A>& first, const char* first_name,
                  const SoftmaxPartial<A>& p, const std::string& name) {
  if (p.out.shape() != first.out.shape() || p.lse.shape() != first.lse.shape()) {
    throw UsageError(where + describe(name.c_str(), p.out.shape(), p.lse.shape()) + " but " +
                     describe(first_name, first.out.shape(), first.lse.shape()) +
                     "; every partial of a merge must have the same shape");
  }
}

// A merge without partials has no shape to give its result: refused, with `what_instead`.
template <class A>
void require_partials(const std::string& where, std::span<const SoftmaxPartial<A>> parts,
                      const char* what_instead) {
  if (parts.empty()) {
    throw UsageError(where + "no partials, so the shape of the result is unknown; " + what_instead);
  }
}

template <class A>
std::vector<const SoftmaxPartial<A>*> pointers(std::span<const SoftmaxPartial<A>> parts) {
  std::vector<const SoftmaxPartial<A>*> ptrs;
  ptrs.reserve(parts.size());
  for (const auto& p : parts) ptrs.push_back(&p);
  return ptrs;
}

}  // namespace

template <class A>
SoftmaxPartial<A> empty_softmax_partial(std::size_t rows, std::size_t width) {
  SoftmaxPartial<A> p{Tensor<A>(Shape{rows, width}), Tensor<A>(Shape{rows})};
  for (auto& v : p.lse.values()) v = -std::numeric_limits<A>::infinity();
  return p;
}

template <class A>
SoftmaxPartial<A> softmax_merge(std::span<const SoftmaxPartial<A>> parts) {
  const std::string where = "softmax_merge: ";
  require_partials(where, parts,
                   "call softmax_merge(parts, rows, width) to get the empty result out [rows, "
                   "width] = 0, lse [rows] = -inf");
  const Layout layout = row_layout(where, parts[0], "partial 0");
  return softmax_merge(parts, layout.rows, layout.width);
}

template <class A>
SoftmaxPartial<A> softmax_merge(std::span<const SoftmaxPartial<A>> parts, std::size_t rows,
                                std::size_t width) {
  const std::string where = "softmax_merge: ";
  SoftmaxPartial<A> dst = empty_softmax_partial<A>(rows, width);
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const std::string name = "partial " + std::to_string(k);
    (void)row_layout(where, parts[k], name.c_str());
    require_same(where, dst, "the result (rows and width as given)", parts[k], name);
  }
  Layout layout;
  layout.rows = rows;
  layout.width = width;
  const auto ptrs = pointers(parts);
  merge_all<A>(layout, ptrs, dst);
  return dst;
}

template <class A>
void merge_into(SoftmaxPartial<A>& acc, const SoftmaxPartial<A>& part) {
  const std::string where = "merge_into: ";
  const Layout layout = row_layout(where, acc, "the accumulator");
  (void)row_layout(where, part, "the partial");
  require_same(where, acc, "the accumulator", part, "the partial");
  const SoftmaxPartial<A>* ptrs[2] = {&acc, &part};
  merge_all<A>(layout, ptrs, acc);
}

template <class A>
SoftmaxPartial<A> softmax_merge_attention(std::span<const SoftmaxPartial<A>> parts) {
  const std::string where = "softmax_merge_attention: ";
  require_partials(where, parts, "pass at least one (an empty partial is out = 0, lse = -inf)");
  const Layout layout =
      attention_layout(where, parts[0].out.shape(), parts[0].lse.shape(), "partial 0");
  for (std::size_t k = 1; k < parts.size(); ++k) {
    require_same(where, parts[0], "partial 0", parts[k], "partial " + std::to_string(k));
  }
  SoftmaxPartial<A> dst{Tensor<A>(parts[0].out.shape()), Tensor<A>(parts[0].lse.shape())};
  const auto ptrs = pointers(parts);
  merge_all<A>(layout, ptrs, dst);
  return dst;
}

template <class A>
void merge_attention_into(Tensor<A>& acc_out, Tensor<A>& acc_lse, const Tensor<A>& out,
                          const Tensor<A>& lse) {
  const std::string where = "merge_attention_into: ";
  const Layout layout =
      attention_layout(where, acc_out.shape(), acc_lse.shape(), "the accumulator");
  (void)attention_layout(where, out.shape(), lse.shape(), "the partial");
  if (out.shape() != acc_out.shape()) {
    throw UsageError(where + describe("the partial", out.shape(), lse.shape()) + " but " +
                     describe("the accumulator", acc_out.shape(), acc_lse.shape()) +
                     "; both must have the same shape");
  }
  // The accumulator is written in place; out/lse may be acc_out/acc_lse themselves (the row
  // kernel reads element e of both parts before writing it, and both lse before writing).
  std::vector<RowIn<A>> row(2);
  std::vector<A> coef;
  for (std::size_t r = 0; r < layout.rows; ++r) {
    const RowPlace at = layout.place(r);
    row[0] = {acc_out.data() + at.out_offset, acc_lse[at.lse_index]};
    row[1] = {out.data() + at.out_offset, lse[at.lse_index]};
    merge_row(row, layout.width, acc_out.data() + at.out_offset, &acc_lse[at.lse_index], coef);
  }
}

// A is a type here; clang-tidy reads the `>>` that closes two template argument lists after it as
// a shift and asks for parentheses, which a type cannot take.
// NOLINTBEGIN(bugprone-macro-parentheses): false positive on `<A>>`, A is a type
#define SHARDCHECK_INSTANTIATE(A)                                                              \
  template SoftmaxPartial<A> empty_softmax_partial<A>(std::size_t, std::size_t);               \
  template SoftmaxPartial<A> softmax_merge<A>(std::span<const SoftmaxPartial<A>>);             \
  template SoftmaxPartial<A> softmax_merge<A>(std::span<const SoftmaxPartial<A>>, std::size_t, \
                                              std::size_t);                                    \
  template void merge_into<A>(SoftmaxPartial<A>&, const SoftmaxPartial<A>&);                   \
  template SoftmaxPartial<A> softmax_merge_attention<A>(std::span<const SoftmaxPartial<A>>);   \
  template void merge_attention_into<A>(Tensor<A>&, Tensor<A>&, const Tensor<A>&, const Tensor<A>&);
SHARDCHECK_INSTANTIATE(double)
SHARDCHECK_INSTANTIATE(float)
// NOLINTEND(bugprone-macro-parentheses)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck
