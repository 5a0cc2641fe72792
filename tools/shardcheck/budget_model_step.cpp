#include "tools/shardcheck/budget_model_step.hpp"

#include "budget/model_activations.hpp"
#include "budget/model_traffic.hpp"
#include "ops/model/model.hpp"
#include "runtime/errors.hpp"

#include <cmath>

namespace shardcheck::cli {

namespace {

bool whole(double v) { return v >= 1 && v == std::floor(v) && v < 1e15; }

std::string count_text(double v) { return std::to_string(static_cast<std::uint64_t>(v)); }

}  // namespace

StepFigures model_step_figures(const StepShape& s, budget::ElementBytes e) {
  StepFigures f;
  for (const double v : {s.seq, s.micro_batch, s.hidden, s.heads, s.kv_heads, s.layers, s.vocab}) {
    if (!whole(v)) {
      f.skipped =
          "the step needs whole sizes (--seq, --batch, --hidden, --heads, --kv-heads, "
          "--layers, --vocab)";
      return f;
    }
  }
  const auto u = [](double v) { return static_cast<std::size_t>(v); };
  if (u(s.hidden) % u(s.heads) != 0) {
    f.skipped = "the step takes head_dim = hidden/heads whole (" + count_text(s.hidden) + "/" +
                count_text(s.heads) + " is not)";
    return f;
  }
  f.ranks = s.pp * s.dp * s.cp * s.tp;
  if (f.ranks > max_step_ranks) {
    f.skipped = "the step is modelled rank by rank, at most " + std::to_string(max_step_ranks) +
                " ranks (this mesh has " + std::to_string(f.ranks) + ")";
    return f;
  }
  ModelConfig cfg;  // GPT: LayerNorm, GELU, biases, untied
  cfg.vocab = u(s.vocab);
  cfg.hidden = u(s.hidden);
  cfg.heads = u(s.heads);
  cfg.kv_heads = u(s.kv_heads);
  cfg.head_dim = cfg.hidden / cfg.heads;
  cfg.ffn = 4 * cfg.hidden;
  cfg.layers = u(s.layers);
  cfg.linear_bias = true;
  ModelParallelConfig par;
  par.pp = s.pp;
  par.dp = s.dp;
  par.cp = s.cp;
  par.tp = s.tp;
  par.micro_batches = s.micro_batches;
  par.sequence_parallel = s.sequence_parallel && s.tp > 1;
  const std::size_t seq_len = u(s.seq);
  const std::size_t sequences =
      u(s.micro_batch) * static_cast<std::size_t>(s.dp) * static_cast<std::size_t>(s.micro_batches);
  f.model = "LayerNorm, GELU MLP [4h], biases, untied embedding; " + std::to_string(sequences) +
            " sequences of " + std::to_string(seq_len) +
            " tokens: " + std::to_string(s.micro_batches) + " micro-batch(es) of " +
            count_text(s.micro_batch) + " per dp rank, GPipe; ring context parallelism" +
            (par.sequence_parallel ? "; sequence parallel" : "");
  try {
    for (int r = 0; r < f.ranks; ++r) {
      const auto a = budget::model_step_activations(cfg, par, sequences, seq_len, r, e);
      if (r == 0 || a.peak > f.peak) {
        const ModelCoordinates m = model_coordinates(cfg, par, r);
        f.peak = a.peak;
        f.peak_rank = r;
        f.peak_at = a.at;
        f.kept_after_forward = a.kept_after_forward;
        f.peak_coordinates = "pp=" + std::to_string(m.pp) + " dp=" + std::to_string(m.dp) +
                             " cp=" + std::to_string(m.cp) + " tp=" + std::to_string(m.tp);
      }
      std::uint64_t sent = 0;
      for (const auto& [axis, t] : budget::model_step_traffic(cfg, par, sequences, seq_len, r, e)) {
        sent += t.sent;
        budget::CollectiveTotals& most = f.sent_per_axis[axis];
        if (t.sent >= most.sent) most = t;
      }
      f.sent_most = std::max(f.sent_most, sent);
    }
  } catch (const UsageError& x) {
    f = StepFigures{};
    f.skipped = x.what();
  }
  return f;
}

}  // namespace shardcheck::cli
