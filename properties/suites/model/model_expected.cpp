#include "engine/instantiate.hpp"
#include "reference/model/model_bound.hpp"
#include "suites/model/model_case.hpp"

namespace shardcheck::check {

reference::ModelPartition model_partition(const ModelCase& c) {
  const auto& par = c.par;
  reference::ModelPartition p;
  for (int d = 0; d < par.dp; ++d) {
    const Piece seqs = dp_sequences(par, c.sequences, d);
    for (const Piece& mb : micro_batch_pieces(par, seqs.size)) {
      for (int k = 0; k < par.cp; ++k) {
        std::vector<std::size_t> rows;
        for (std::size_t s = 0; s < mb.size; ++s) {
          for (const std::size_t pos : model_cp_positions(par, c.seq_len, k)) {
            rows.push_back((seqs.offset + mb.offset + s) * c.seq_len + pos);
          }
        }
        if (par.sequence_parallel) {
          p.sp_rows.push_back(split_sizes(par.token_split, rows.size(), par.tp));
        }
        p.token_groups.push_back(std::move(rows));
      }
    }
  }
  const HeadParallelConfig hp = model_attention_config(c.cfg, par, 0, 1);
  for (int t = 0; t < par.tp; ++t) {
    const HeadAssignment a = head_assignment(hp, par.tp, t);
    p.heads.push_back({a.q_offset, a.q_count, a.kv_offset, a.kv_count});
  }
  p.ffn_parts = split_sizes(par.ffn_split, c.cfg.ffn, par.tp);
  p.vocab_parts = split_sizes(par.vocab_split, c.cfg.vocab, par.tp);
  // The key blocks a query row's partials merge from: at most cp (the ring's steps; the
  // all_gather core's blocks), as the attention family's suite bounds its core.
  p.attention_parts = static_cast<std::size_t>(par.cp);
  return p;
}

template <class T>
ModelExpected expected(const ModelCase& c, const ModelData<T>& d) {
  using R = reference::hp;
  ModelParams<R> p;
  p.layers.resize(c.cfg.layers);
  for_each_param(p, d.params, [](const std::string&, Tensor<R>& a, const Tensor<T>& b) {
    if (b.ndim() > 0) a = reference::to_hp<R>(b);
  });
  ModelExpected e;
  e.partition = model_partition(c);
  e.step = reference::model_train_step_bounds<R>(c.cfg, c.opt, p, d.batch, e.partition,
                                                 reference::arithmetic_of<T>());
  return e;
}

SHARDCHECK_INSTANTIATE_EXPECTED(ModelCase, ModelData, ModelExpected)

}  // namespace shardcheck::check
