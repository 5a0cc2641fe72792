#include "budget/model_activations.hpp"

#include <string>
#include <vector>

namespace shardcheck::budget {

namespace {

std::string num(std::size_t n) { return std::to_string(n); }

// The timeline: the kept bytes so far and the highest moment seen.
struct Timeline {
  std::vector<Term> kept;  // what is kept now
  ModelActivations out;

  std::uint64_t kept_bytes() const { return sum(kept); }
  // An op whose buffers at its peak are `buffers`, run now.
  void op(const std::string& where, const std::vector<Term>& buffers) {
    const std::uint64_t live = kept_bytes() + sum(buffers);
    if (live > out.peak) {
      out.peak = live;
      out.at = where;
      out.peak_terms = kept;
      out.peak_terms.insert(out.peak_terms.end(), buffers.begin(), buffers.end());
    }
  }
};

}  // namespace

ModelActivations model_step_activations(const ModelConfig& cfg, const ModelParallelConfig& par,
                                        std::size_t sequences, std::size_t seq_len, int world_rank,
                                        ElementBytes e) {
  const ModelCoordinates m = model_coordinates(cfg, par, world_rank);
  const Piece seqs = dp_sequences(par, sequences, m.dp);
  const std::vector<Piece> mbs = micro_batch_pieces(par, seqs.size);
  const std::size_t H = cfg.hidden, d = cfg.head_dim,
                    L = model_cp_positions(par, seq_len, m.cp).size();
  const bool first = m.first_stage(), last = m.last_stage(par), sp = par.sequence_parallel;
  const int tp = par.tp, t = m.tp;
  const HeadAssignment heads = head_assignment(model_attention_config(cfg, par, 0, 1), tp, t);
  const std::size_t f_r = split_sizes(par.ffn_split, cfg.ffn, tp)[static_cast<std::size_t>(t)];
  const std::size_t v_r = split_sizes(par.vocab_split, cfg.vocab, tp)[static_cast<std::size_t>(t)];
  const std::size_t k_up = up_rows_per_feature(cfg.activation);

  // Per micro-batch: its tokens, this rank's rows, and what one layer and the head keep.
  struct Micro {
    std::size_t b = 0, n = 0, rows = 0;
    std::vector<Term> layer, head;
  };
  std::vector<Micro> micro;
  for (const Piece& p : mbs) {
    Micro x;
    x.b = p.size;
    x.n = p.size * L;
    x.rows = sp ? split_sizes(par.token_split, x.n, tp)[static_cast<std::size_t>(t)] : x.n;
    const std::string rh = " [" + num(x.rows) + ", " + num(H) + "]";
    for (const char* name : {"x", "a (norm1)", "h", "b (norm2)"}) {
      x.layer.push_back({name + rh, x.rows * H * e.value});
    }
    const std::size_t bl = x.b * L;
    x.layer.push_back(
        {"q [" + num(bl) + ", " + num(heads.q_count) + "·d]", bl * heads.q_count * d * e.value});
    x.layer.push_back({"k, v [" + num(bl) + ", " + num(heads.kv_count) + "·d] each",
                       2 * bl * heads.kv_count * d * e.value});
    x.layer.push_back(
        {"out [" + num(bl) + ", " + num(heads.q_count) + "·d]", bl * heads.q_count * d * e.value});
    x.layer.push_back({"lse (acc_t<T>)", x.b * heads.q_count * L * e.acc});
    x.layer.push_back(
        {"mlp h [" + num(x.n) + ", " + num(k_up * f_r) + "]", x.n * k_up * f_r * e.value});
    x.head = {{"final x" + rh, x.rows * H * e.value},
              {"final f" + rh, x.rows * H * e.value},
              {"logits [" + num(x.n) + ", " + num(v_r) + "]", x.n * v_r * e.value},
              {"loss max, sum_exp (acc_t<T>)", 2 * x.n * e.acc}};
    micro.push_back(std::move(x));
  }

  Timeline tl;
  const std::size_t layers = m.layers.size;
  auto where = [](const char* pass, std::size_t k, const std::string& op) {
    return std::string(pass) + " of micro-batch " + num(k) + ", " + op;
  };
  auto layer_name = [&](std::size_t l, const char* op) {
    return "layer " + num(m.layers.offset + l) + " (" + op + ")";
  };
  auto tagged = [&](std::size_t k, std::vector<Term> terms) {
    for (auto& term : terms) term.name = "micro-batch " + num(k) + " " + term.name;
    return terms;
  };
  for (std::size_t k = 0; k < micro.size(); ++k) {  // forward
    const Micro& x = micro[k];
    if (first) {
      tl.op(where("forward", k, "embedding"),
            vocab_embedding_activations(model_embedding_config(cfg, par), x.n, H, tp, t, e)
                .forward_peak);
    }
    const auto att = head_layer_activations(model_attention_config(cfg, par, x.b, seq_len), x.b, tp,
                                            t, par.cp, m.cp, e);
    const auto mlp = parallel_mlp_activations(model_mlp_config(cfg, par, x.n), x.n, H,
                                              cfg.linear_bias, tp, t, e);
    for (std::size_t l = 0; l < layers; ++l) {
      tl.op(where("forward", k, layer_name(l, "attention")), att.forward_peak);
      tl.op(where("forward", k, layer_name(l, "mlp")), mlp.forward_peak);
      const auto kept = tagged(k, x.layer);
      tl.kept.insert(tl.kept.end(), kept.begin(), kept.end());
    }
    if (last) {
      tl.op(where("forward", k, "output projection"),
            column_parallel_activations(model_output_config(cfg, par, x.n), x.n, H, cfg.vocab, tp,
                                        t, e)
                .forward_peak);
      tl.op(
          where("forward", k, "loss"),
          vocab_cross_entropy_activations(model_loss_config(cfg, par), x.n, tp, t, e).forward_peak);
      const auto kept = tagged(k, x.head);
      tl.kept.insert(tl.kept.end(), kept.begin(), kept.end());
    }
  }
  tl.out.kept_after_forward = tl.kept_bytes();
  for (std::size_t k = micro.size(); k-- > 0;) {  // backward
    const Micro& x = micro[k];
    const auto norm =
        sp ? sp_norm_activations(model_norm_config(cfg, par, x.n), H, tp, t, e) : OpActivations{};
    if (last) {
      tl.op(where("backward", k, "loss"),
            vocab_cross_entropy_activations(model_loss_config(cfg, par), x.n, tp, t, e)
                .backward_peak);
      tl.op(where("backward", k, "output projection"),
            column_parallel_activations(model_output_config(cfg, par, x.n), x.n, H, cfg.vocab, tp,
                                        t, e)
                .backward_peak);
      tl.op(where("backward", k, "final norm"), norm.backward_peak);
    }
    const auto att = head_layer_activations(model_attention_config(cfg, par, x.b, seq_len), x.b, tp,
                                            t, par.cp, m.cp, e, /*grads_reduced_over_cp=*/false);
    const auto mlp = parallel_mlp_activations(model_mlp_config(cfg, par, x.n), x.n, H,
                                              cfg.linear_bias, tp, t, e);
    for (std::size_t l = layers; l-- > 0;) {
      tl.op(where("backward", k, layer_name(l, "mlp")), mlp.backward_peak);
      tl.op(where("backward", k, layer_name(l, "norm2")), norm.backward_peak);
      tl.op(where("backward", k, layer_name(l, "attention")), att.backward_peak);
      tl.op(where("backward", k, layer_name(l, "norm1")), norm.backward_peak);
    }
    // Micro-batch k's kept bytes are freed once its layers' backward is done.
    const std::string prefix = "micro-batch " + num(k) + " ";
    std::erase_if(tl.kept, [&](const Term& term) { return term.name.rfind(prefix, 0) == 0; });
    if (first) {
      tl.op(where("backward", k, "embedding"),
            vocab_embedding_activations(model_embedding_config(cfg, par), x.n, H, tp, t, e)
                .backward_peak);
    }
  }
  return tl.out;
}

}  // namespace shardcheck::budget
