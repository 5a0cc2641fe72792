// The padded vocabulary's checks, shared by the vocabulary-parallel embedding and cross-entropy
// (ops/vocab/vocab_embedding.hpp, ops/vocab/vocab_cross_entropy.hpp: "Padded vocabulary"): the
// config's real_vocab V against the padded count V_pad = vocab, and the text of an index that
// falls in the padding [V, V_pad). Internal to the ops layer.
#pragma once

#include "runtime/errors.hpp"

#include <cstddef>
#include <optional>
#include <string>

namespace shardcheck::vocab_detail {

// V = real_vocab (vocab when not given), after checking 1 ≤ V ≤ vocab. `what` names the split
// dimension ("columns of the logits", "rows of the embedding table").
// @throws UsageError naming `where` (the op and the rank), real_vocab, vocab and what to set.
inline std::size_t checked_real_vocab(const std::string& where, std::optional<std::size_t> real,
                                      std::size_t vocab, const char* what) {
  if (!real) return vocab;
  if (*real == 0 || *real > vocab) {
    throw UsageError(where + "real_vocab = " + std::to_string(*real) + " is outside [1, vocab = " +
                     std::to_string(vocab) + "]; set vocab to the padded count V_pad (the " + what +
                     ", split over the ranks) and real_vocab to the real vocabulary V ≤ " +
                     "V_pad (vLLM's org_vocab_size), or leave real_vocab unset for no padding");
  }
  return *real;
}

// "the vocabulary has V = 5 real <unit> padded to V_pad = 8, and [5, 8) are padding".
inline std::string padding_text(std::size_t v, std::size_t v_pad, const char* unit) {
  return "the vocabulary has V = " + std::to_string(v) + " real " + unit +
         " padded to V_pad = " + std::to_string(v_pad) + ", and [" + std::to_string(v) + ", " +
         std::to_string(v_pad) + ") are padding";
}

}  // namespace shardcheck::vocab_detail
