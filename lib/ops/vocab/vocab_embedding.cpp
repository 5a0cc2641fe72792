// Vocabulary-parallel embedding (ops/vocab/vocab_embedding.hpp).
//
// Arithmetic decisions the header leaves to the implementation:
//   - forward: no arithmetic on values; the reduction adds a value to exact zeros (x + 0 = x in
//     every type; only −0 becomes +0), so y is W's rows bit for bit.
//   - backward: dW[v, j] = Σ_{t: ids[t] = v} dy[t, j] accumulated in acc_t<T>, t ascending,
//     rounded once to T (a plain sum: Operands::unit in reference/bounds.hpp).
//   - padded vocabulary: ids are checked against the real V, so no padding row is read, and
//     the padding rows of dW stay the zeros they were allocated as.
#include "ops/vocab/vocab_embedding.hpp"

#include "ops/linear/linear_internal.hpp"
#include "ops/vocab/vocab_padding.hpp"
#include "ops/workspace.hpp"

#include <string>
#include <vector>

namespace shardcheck {
namespace {

using linear_detail::on_rank;
using linear_detail::pieces;
using linear_detail::str;

std::string rank_of(const Communicator& c) { return std::to_string(c.rank()); }

// ids in [0, vocab) (the real V); `padded` is V_pad, the table's rows (vocab when unpadded).
void check_ids(const std::string& where, std::span<const std::int64_t> ids, std::size_t vocab,
               std::size_t padded) {
  for (std::size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] >= 0 && static_cast<std::uint64_t>(ids[t]) >= vocab &&
        static_cast<std::uint64_t>(ids[t]) < padded) {
      throw UsageError(where + "id " + std::to_string(ids[t]) + " at token " + str(t) +
                       " is a padding row: " + vocab_detail::padding_text(vocab, padded, "rows") +
                       " (never trained); ids must be in [0, V): check the tokenizer's "
                       "vocabulary size against real_vocab");
    }
    if (ids[t] < 0 || static_cast<std::uint64_t>(ids[t]) >= vocab) {
      throw UsageError(where + "id " + std::to_string(ids[t]) + " at token " + str(t) +
                       " is out of range for a vocabulary of V = " + str(vocab) + " rows" +
                       (padded != vocab ? " (padded to V_pad = " + str(padded) + ")" : "") +
                       "; ids must be in [0, V)");
    }
  }
}

void check_padding(const std::string& where, std::optional<std::int64_t> pad, std::size_t vocab) {
  if (pad && (*pad < 0 || static_cast<std::uint64_t>(*pad) >= vocab)) {
    throw UsageError(where + "padding_idx " + std::to_string(*pad) +
                     " is outside the vocabulary [0, V = " + str(vocab) +
                     "); pass a global row id in [0, V), or no padding_idx");
  }
}

// "V = 5", or "V_pad = 8" when padded (the split divides the padded rows).
std::string rows_text(const VocabEmbeddingConfig& cfg) {
  return (cfg.real_vocab ? "V_pad = " : "V = ") + str(cfg.vocab);
}

// V, the real vocabulary (real_vocab_size, checked against V_pad = cfg.vocab).
std::size_t real_rows(const std::string& where, const VocabEmbeddingConfig& cfg) {
  return vocab_detail::checked_real_vocab(where, cfg.real_vocab, cfg.vocab,
                                          "rows of the embedding table");
}

template <class T>
void accumulate_rows(std::span<const std::int64_t> ids, const Tensor<T>& dy, Piece mine,
                     std::optional<std::int64_t> pad, Tensor<T>& dw) {
  using A = acc_t<T>;
  const std::size_t h = dy.dim(1);
  std::vector<A> acc(mine.size * h, A(0));
  for (std::size_t t = 0; t < ids.size(); ++t) {
    const auto id = static_cast<std::size_t>(ids[t]);
    if (id < mine.offset || id >= mine.offset + mine.size) continue;
    if (pad && ids[t] == *pad) continue;  // the global padding id, on its owner only
    const std::size_t local = id - mine.offset;
    for (std::size_t j = 0; j < h; ++j) acc[local * h + j] += static_cast<A>(dy(t, j));
  }
  for (std::size_t i = 0; i < acc.size(); ++i) dw[i] = static_cast<T>(acc[i]);
}

}  // namespace

template <class T>
Tensor<T> vocab_parallel_embedding(Communicator& tp, const VocabEmbeddingConfig& cfg,
                                   std::span<const std::int64_t> ids, const Tensor<T>& w_shard) {
  const std::string where = on_rank("vocab_parallel_embedding", tp);
  const int p = tp.size(), r = tp.rank();
  if (w_shard.ndim() != 2) {
    throw UsageError(where + "w_shard must be 2-D [V_r, h] but is " +
                     format_shape(w_shard.shape()) +
                     "; pass this rank's rows of the [V, h] embedding table");
  }
  const std::string rows = rows_text(cfg);
  const auto ps =
      pieces(where, "the " + rows + " rows of the embedding table", cfg.vocab_split, cfg.vocab, p);
  const Piece mine = ps[static_cast<std::size_t>(r)];
  if (w_shard.dim(0) != mine.size) {
    throw UsageError(where + "w_shard is " + format_shape(w_shard.shape()) + " but rank " +
                     rank_of(tp) + " owns " + str(mine.size) + " rows of " + rows + " under " +
                     cfg.vocab_split.to_string() +
                     "; pass this rank's rows of the table under cfg.vocab_split and set "
                     "cfg.vocab to the global (padded) vocabulary size");
  }
  const std::size_t real = real_rows(where, cfg);
  check_ids(where, ids, real, cfg.vocab);
  check_padding(where, cfg.padding_idx, real);
  const std::size_t tokens = ids.size(), h = w_shard.dim(1);
  Tensor<T> partial(Shape{tokens, h});  // zero-initialized: rows this rank does not own stay 0
  for (std::size_t t = 0; t < tokens; ++t) {
    const auto id = static_cast<std::size_t>(ids[t]);
    if (id < mine.offset || id >= mine.offset + mine.size) continue;  // output row stays zero
    const std::size_t local = id - mine.offset;
    for (std::size_t j = 0; j < h; ++j) partial(t, j) = w_shard(local, j);
  }
  if (!cfg.sequence_parallel_output) {
    tp.all_reduce(partial.span(), ReduceOp::sum, cfg.reduce_algorithm);
    return partial;
  }
  const auto held_partial =
      Workspace::of_this_rank().hold(std::move(partial));  // to reduce_scatter
  const auto tps = pieces(where, "the " + str(tokens) + " tokens", cfg.token_split, tokens, p);
  std::vector<std::size_t> counts;
  counts.reserve(tps.size());
  for (const auto& q : tps) counts.push_back(q.size * h);
  Tensor<T> y(Shape{tps[static_cast<std::size_t>(r)].size, h});
  tp.reduce_scatter(std::span<const T>(held_partial->span()), y.span(), counts, ReduceOp::sum,
                    cfg.reduce_algorithm);
  return y;
}

template <class T>
Tensor<T> vocab_parallel_embedding_backward(Communicator& tp, const VocabEmbeddingConfig& cfg,
                                            std::span<const std::int64_t> ids,
                                            const Tensor<T>& dy) {
  const std::string where = on_rank("vocab_parallel_embedding_backward", tp);
  const int p = tp.size(), r = tp.rank();
  if (dy.ndim() != 2) {
    throw UsageError(where + "dy must be 2-D [tokens, h] but is " + format_shape(dy.shape()) +
                     "; pass the gradient of the forward's y");
  }
  const auto ps = pieces(where, "the " + rows_text(cfg) + " rows of the embedding table",
                         cfg.vocab_split, cfg.vocab, p);
  const std::size_t real = real_rows(where, cfg);
  check_ids(where, ids, real, cfg.vocab);
  check_padding(where, cfg.padding_idx, real);
  const std::size_t tokens = ids.size(), h = dy.dim(1);
  Held<Tensor<T>> full;  // the all_gathered dy, live until the end (a workspace buffer)
  const Tensor<T>* d = &dy;
  if (cfg.sequence_parallel_output) {
    const auto tps = pieces(where, "the " + str(tokens) + " tokens", cfg.token_split, tokens, p);
    if (dy.dim(0) != tps[static_cast<std::size_t>(r)].size) {
      throw UsageError(where + "dy is " + format_shape(dy.shape()) + " but rank " + rank_of(tp) +
                       " holds " + str(tps[static_cast<std::size_t>(r)].size) + " of the " +
                       str(tokens) + " tokens under " + cfg.token_split.to_string() +
                       "; with sequence_parallel_output dy is the gradient of this rank's token "
                       "rows of y");
    }
    std::vector<std::size_t> counts;
    counts.reserve(tps.size());
    for (const auto& q : tps) counts.push_back(q.size * h);
    full = Workspace::of_this_rank().hold(Tensor<T>(Shape{tokens, h}));
    tp.all_gather(dy.span(), full->span(), counts);
    d = &*full;
  } else if (dy.dim(0) != tokens) {
    throw UsageError(where + "dy is " + format_shape(dy.shape()) + " but there are " + str(tokens) +
                     " ids; dy must be [tokens, h]");
  }
  const Piece mine = ps[static_cast<std::size_t>(r)];
  Tensor<T> dw(Shape{mine.size, h});
  accumulate_rows(ids, *d, mine, cfg.padding_idx, dw);
  return dw;
}

template <class T>
Tensor<T> embedding(std::span<const std::int64_t> ids, const Tensor<T>& w) {
  const std::string where = "embedding: ";
  if (w.ndim() != 2) {
    throw UsageError(where + "w must be 2-D [V, h] but is " + format_shape(w.shape()) +
                     "; pass the whole embedding table");
  }
  check_ids(where, ids, w.dim(0), w.dim(0));
  const std::size_t h = w.dim(1);
  Tensor<T> y(Shape{ids.size(), h});
  for (std::size_t t = 0; t < ids.size(); ++t) {
    for (std::size_t j = 0; j < h; ++j) y(t, j) = w(static_cast<std::size_t>(ids[t]), j);
  }
  return y;
}

template <class T>
Tensor<T> embedding_backward(std::span<const std::int64_t> ids, const Tensor<T>& dy,
                             std::size_t vocab, std::optional<std::int64_t> padding_idx) {
  const std::string where = "embedding_backward: ";
  if (dy.ndim() != 2 || dy.dim(0) != ids.size()) {
    throw UsageError(where + "dy must be [tokens, h] with tokens = " + str(ids.size()) +
                     " but is " + format_shape(dy.shape()) +
                     "; pass one gradient row per id (the gradient of embedding's y)");
  }
  check_ids(where, ids, vocab, vocab);
  check_padding(where, padding_idx, vocab);
  Tensor<T> dw(Shape{vocab, dy.dim(1)});
  accumulate_rows(ids, dy, Piece{0, vocab}, padding_idx, dw);
  return dw;
}

#define SHARDCHECK_INSTANTIATE(T)                                                                  \
  template Tensor<T> vocab_parallel_embedding<T>(Communicator&, const VocabEmbeddingConfig&,       \
                                                 std::span<const std::int64_t>, const Tensor<T>&); \
  template Tensor<T> vocab_parallel_embedding_backward<T>(                                         \
      Communicator&, const VocabEmbeddingConfig&, std::span<const std::int64_t>,                   \
      const Tensor<T>&);                                                                           \
  template Tensor<T> embedding<T>(std::span<const std::int64_t>, const Tensor<T>&);                \
  template Tensor<T> embedding_backward<T>(std::span<const std::int64_t>, const Tensor<T>&,        \
                                           std::size_t, std::optional<std::int64_t>);
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_INSTANTIATE)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck
