// Measured against predicted (issue 6): real sharded runs of every partitioned op of lib/ops, on
// generated shapes, splits (uneven and empty pieces included), world sizes and element types.
//   (a) every rank's ledger equals the calculator's traffic (budget/traffic.hpp) exactly: the
//       ordered entries (collective, bytes sent, bytes received) of the forward and of the
//       backward, and the per-collective totals (Ledger::calls/bytes_sent/bytes_recv);
//   (b) the tracker (budget/live_bytes.hpp) measures exactly the library's own model
//       (budget/library_activations.hpp): the bytes kept for the backward and the peak of the
//       collective buffers in the forward and in the backward; and every buffer is freed.
// Mutants: a deliberately wrong model value for each op must make the comparison fail.
#include "budget/library_activations.hpp"
#include "budget/live_bytes.hpp"
#include "budget/traffic.hpp"
#include "ops/attention/context_parallel_attention.hpp"
#include "ops/attention/head_parallel_attention.hpp"
#include "ops/linear/linear.hpp"
#include "ops/norm/norm.hpp"
#include "ops/vocab/vocab_cross_entropy.hpp"
#include "ops/vocab/vocab_embedding.hpp"
#include "runtime/launcher.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

namespace shardcheck::budget {
namespace {

// ------------------------------------------------------------------ measuring one rank

struct Measured {
  std::vector<LedgerCall> fwd, bwd;
  std::map<Collective, CollectiveTotals> totals;
  std::uint64_t kept = 0, fwd_peak = 0, bwd_peak = 0, fwd_live = 0, bwd_live = 0;
};

struct Prediction {
  OpTraffic traffic;
  OpActivations act;
};

std::vector<LedgerCall> calls_of(const Ledger& l, std::size_t from, std::size_t to) {
  std::vector<LedgerCall> out;
  for (std::size_t i = from; i < to; ++i) {
    const auto& e = l.entries()[i];
    out.push_back({e.op, e.bytes_sent, e.bytes_recv});
  }
  return out;
}

// One rank's forward and backward under two trackers, and its ledger split between them.
class Probe {
 public:
  explicit Probe(Communicator& c) : c_(c), start_(c.ledger().size()) {}
  template <class F>
  auto forward(F&& f) {
    LiveBytesScope scope(fwd_);
    auto r = f();
    mid_ = c_.ledger().size();
    return r;
  }
  template <class F>
  void backward(F&& f) {
    LiveBytesScope scope(bwd_);
    f();
  }
  template <class Buffer>
  void keep(const Buffer& b) {
    fwd_.keep(b);
  }
  Measured result() const {
    Measured m;
    const auto& l = c_.ledger();
    m.fwd = calls_of(l, start_, mid_);
    m.bwd = calls_of(l, mid_, l.size());
    Ledger mine;
    for (std::size_t i = start_; i < l.size(); ++i) mine.record(l.entries()[i]);
    m.totals = totals(mine);
    m.kept = fwd_.kept();
    m.fwd_peak = fwd_.peak();
    m.bwd_peak = bwd_.peak();
    m.fwd_live = fwd_.live();
    m.bwd_live = bwd_.live();
    return m;
  }

 private:
  Communicator& c_;
  LiveBytes fwd_, bwd_;
  std::size_t start_, mid_ = 0;
};

std::string str(const std::vector<LedgerCall>& v) {
  std::string s = "[";
  for (const auto& c : v) s += (s.size() > 1 ? "; " : "") + c.to_string();
  return s + "]";
}

// "" when the run equals the prediction, else what differs.
std::string compare(const Measured& m, const Prediction& p) {
  std::ostringstream o;
  if (m.fwd != p.traffic.forward) {
    o << "forward ledger " << str(m.fwd) << " != " << str(p.traffic.forward) << "; ";
  }
  if (m.bwd != p.traffic.backward) {
    o << "backward ledger " << str(m.bwd) << " != " << str(p.traffic.backward) << "; ";
  }
  auto all = p.traffic.forward;
  all.insert(all.end(), p.traffic.backward.begin(), p.traffic.backward.end());
  if (m.totals != totals(all)) o << "per-collective totals differ; ";
  if (m.kept != p.act.kept_bytes()) {
    o << "kept " << m.kept << " != model " << p.act.kept_bytes() << "; ";
  }
  if (m.fwd_peak != p.act.forward_peak_bytes()) {
    o << "forward peak " << m.fwd_peak << " != model " << p.act.forward_peak_bytes() << "; ";
  }
  if (m.bwd_peak != p.act.backward_peak_bytes()) {
    o << "backward peak " << m.bwd_peak << " != model " << p.act.backward_peak_bytes() << "; ";
  }
  if (m.fwd_live != 0 || m.bwd_live != 0) {
    o << "buffers not freed: " << m.fwd_live << " forward, " << m.bwd_live << " backward; ";
  }
  return o.str();
}

using Predict = std::function<Prediction(int rank)>;
using Mutant = std::function<void(Prediction&, int rank)>;

std::string compare_all(const std::vector<Measured>& ms, const Predict& predict,
                        const Mutant& mutate = nullptr) {
  std::string out;
  for (std::size_t r = 0; r < ms.size(); ++r) {
    auto p = predict(static_cast<int>(r));
    if (mutate) mutate(p, static_cast<int>(r));
    const auto d = compare(ms[r], p);
    if (!d.empty()) out += "rank " + std::to_string(r) + ": " + d + "\n";
  }
  return out;
}

template <class T>
ElementBytes eb() {
  return {sizeof(T), sizeof(acc_t<T>)};
}

template <class T>
Tensor<T> zeros(Shape s) {
  return Tensor<T>(std::move(s));
}

std::size_t piece_of(const SplitPolicy& s, std::size_t n, int p, int r) {
  return split_sizes(s, n, p)[static_cast<std::size_t>(r)];
}

// ------------------------------------------------------------------ generators

rc::Gen<SplitPolicy> gen_split(std::size_t n, int parts) {
  return rc::gen::exec([n, parts] {
    switch (*rc::gen::inRange(0, 3)) {
      case 0: return SplitPolicy::chunk();
      case 1: return SplitPolicy::balanced();
      default: break;
    }
    std::vector<std::size_t> sizes;
    std::size_t left = n;
    for (int k = 0; k + 1 < parts; ++k) {
      sizes.push_back(*rc::gen::inRange<std::size_t>(0, left + 1));
      left -= sizes.back();
    }
    sizes.push_back(left);
    return SplitPolicy::explicit_sizes(sizes);
  });
}

Algorithm gen_algorithm() { return *rc::gen::element(Algorithm::ring, Algorithm::sequential); }

#define SHARDCHECK_BY_TYPE(fn, type, ...)     \
  switch (type) {                             \
    case 0: fn<double>(__VA_ARGS__); break;   \
    case 1: fn<float>(__VA_ARGS__); break;    \
    case 2: fn<bfloat16>(__VA_ARGS__); break; \
    default: fn<float16>(__VA_ARGS__); break; \
  }

// ------------------------------------------------------------------ column / row parallel

struct LinearCase {
  int p = 1;
  std::size_t tokens = 1, in = 1, out = 1;
  ColumnParallelConfig col;
  RowParallelConfig row;
};

template <class T>
std::vector<Measured> run_column(const LinearCase& k) {
  std::vector<Measured> ms(static_cast<std::size_t>(k.p));
  run(k.p, [&](Communicator& c) {
    const int r = c.rank();
    const auto& cfg = k.col;
    const std::size_t tr =
        cfg.sequence_parallel_input ? piece_of(cfg.token_split, k.tokens, k.p, r) : k.tokens;
    const std::size_t outr = piece_of(cfg.out_split, k.out, k.p, r);
    const auto x = zeros<T>({tr, k.in});
    const auto w = zeros<T>({outr, k.in});
    Probe probe(c);
    probe.forward([&] { return column_parallel_linear(c, cfg, x, w, Tensor<T>()); });
    probe.keep(x);
    const auto dy = zeros<T>({k.tokens, cfg.gather_output ? k.out : outr});
    probe.backward([&] { (void)column_parallel_linear_backward(c, cfg, x, w, false, dy); });
    ms[static_cast<std::size_t>(r)] = probe.result();
  });
  return ms;
}

Predict predict_column(const LinearCase& k, ElementBytes e) {
  return [k, e](int r) {
    return Prediction{column_parallel_traffic(k.col, k.tokens, k.in, k.out, k.p, r, e),
                      column_parallel_activations(k.col, k.tokens, k.in, k.out, k.p, r, e)};
  };
}

template <class T>
std::vector<Measured> run_row(const LinearCase& k) {
  std::vector<Measured> ms(static_cast<std::size_t>(k.p));
  run(k.p, [&](Communicator& c) {
    const int r = c.rank();
    const auto& cfg = k.row;
    const std::size_t inr = piece_of(cfg.in_split, k.in, k.p, r);
    const auto x = zeros<T>({k.tokens, cfg.input_is_parallel ? inr : k.in});
    const auto w = zeros<T>({k.out, inr});
    Probe probe(c);
    probe.forward([&] { return row_parallel_linear(c, cfg, x, w, Tensor<T>()); });
    probe.keep(x);
    const std::size_t tr =
        cfg.sequence_parallel_output ? piece_of(cfg.token_split, k.tokens, k.p, r) : k.tokens;
    const auto dy = zeros<T>({tr, k.out});
    probe.backward([&] { (void)row_parallel_linear_backward(c, cfg, x, w, false, dy); });
    ms[static_cast<std::size_t>(r)] = probe.result();
  });
  return ms;
}

Predict predict_row(const LinearCase& k, ElementBytes e) {
  return [k, e](int r) {
    return Prediction{row_parallel_traffic(k.row, k.tokens, k.in, k.out, k.p, r, e),
                      row_parallel_activations(k.row, k.tokens, k.in, k.out, k.p, r, e)};
  };
}

LinearCase gen_linear_case() {
  LinearCase k;
  k.p = *rc::gen::inRange(1, 5);
  k.tokens = *rc::gen::inRange<std::size_t>(1, 8);
  k.in = *rc::gen::inRange<std::size_t>(1, 6);
  k.out = *rc::gen::inRange<std::size_t>(1, 7);
  k.col.tokens = k.tokens;
  k.col.out_features = k.out;
  k.col.sequence_parallel_input = *rc::gen::arbitrary<bool>();
  k.col.gather_output = *rc::gen::arbitrary<bool>();
  k.col.token_split = *gen_split(k.tokens, k.p);
  k.col.out_split = *gen_split(k.out, k.p);
  k.col.all_reduce_algorithm = gen_algorithm();
  k.row.input_is_parallel = *rc::gen::arbitrary<bool>();
  k.row.sequence_parallel_output = *rc::gen::arbitrary<bool>();
  k.row.in_split = *gen_split(k.in, k.p);
  k.row.token_split = k.col.token_split;
  k.row.reduce_algorithm = gen_algorithm();
  return k;
}

template <class T>
void check_column(const LinearCase& k) {
  const auto d = compare_all(run_column<T>(k), predict_column(k, eb<T>()));
  RC_ASSERT(d == std::string());
}
template <class T>
void check_row(const LinearCase& k) {
  const auto d = compare_all(run_row<T>(k), predict_row(k, eb<T>()));
  RC_ASSERT(d == std::string());
}

RC_GTEST_PROP(measured, column_parallel_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_linear_case();
  RC_TAG(k.col.sequence_parallel_input ? "sp" : "full x", k.col.gather_output ? "gather" : "");
  SHARDCHECK_BY_TYPE(check_column, *rc::gen::inRange(0, 4), k)
}

RC_GTEST_PROP(measured, row_parallel_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_linear_case();
  RC_TAG(k.row.sequence_parallel_output ? "sp" : "all_reduce",
         k.row.input_is_parallel ? "parallel input" : "full input");
  SHARDCHECK_BY_TYPE(check_row, *rc::gen::inRange(0, 4), k)
}

// ------------------------------------------------------------------ SP norm and SP block

struct NormCase {
  int p = 1;
  std::size_t hidden = 1, ffn = 1;
  SequenceParallelNormConfig cfg;
  SplitPolicy ffn_split = SplitPolicy::chunk();
};

NormCase gen_norm_case() {
  NormCase k;
  k.p = *rc::gen::inRange(1, 5);
  k.hidden = *rc::gen::inRange<std::size_t>(1, 6);
  k.ffn = *rc::gen::inRange<std::size_t>(1, 7);
  k.cfg.tokens = *rc::gen::inRange<std::size_t>(1, 8);
  k.cfg.token_split = *gen_split(k.cfg.tokens, k.p);
  k.cfg.norm.kind =
      *rc::gen::element(NormKind::layer_norm, NormKind::layer_norm_no_bias, NormKind::rms_norm);
  k.cfg.reduce_algorithm = gen_algorithm();
  k.ffn_split = *gen_split(k.ffn, k.p);
  return k;
}

template <class T>
std::vector<Measured> run_norm(const NormCase& k) {
  std::vector<Measured> ms(static_cast<std::size_t>(k.p));
  run(k.p, [&](Communicator& c) {
    const int r = c.rank();
    const std::size_t tr = piece_of(k.cfg.token_split, k.cfg.tokens, k.p, r);
    const auto x = zeros<T>({tr, k.hidden});
    const auto gamma = zeros<T>({k.hidden});
    const auto beta = has_beta(k.cfg.norm.kind) ? zeros<T>({k.hidden}) : Tensor<T>();
    Probe probe(c);
    probe.forward([&] { return sequence_parallel_norm(c, k.cfg, x, gamma, beta); });
    probe.keep(x);
    probe.backward([&] { (void)sequence_parallel_norm_backward(c, k.cfg, x, gamma, x); });
    ms[static_cast<std::size_t>(r)] = probe.result();
  });
  return ms;
}

Predict predict_norm(const NormCase& k, ElementBytes e) {
  return [k, e](int r) {
    return Prediction{sp_norm_traffic(k.cfg, k.hidden, k.p, r, e),
                      sp_norm_activations(k.cfg, k.hidden, k.p, r, e)};
  };
}

// Megatron's sequence-parallel block as properties/suites/norm/norm_impl.hpp's LibraryNorm runs it.
template <class T>
std::vector<Measured> run_block(const NormCase& k) {
  std::vector<Measured> ms(static_cast<std::size_t>(k.p));
  ColumnParallelConfig col;
  col.out_features = k.ffn;
  col.tokens = k.cfg.tokens;
  col.out_split = k.ffn_split;
  col.sequence_parallel_input = true;
  col.token_split = k.cfg.token_split;
  col.all_reduce_algorithm = k.cfg.reduce_algorithm;
  RowParallelConfig row;
  row.in_split = k.ffn_split;
  row.input_is_parallel = true;
  row.sequence_parallel_output = true;
  row.token_split = k.cfg.token_split;
  row.reduce_algorithm = k.cfg.reduce_algorithm;
  run(k.p, [&](Communicator& c) {
    const int r = c.rank();
    const std::size_t tr = piece_of(k.cfg.token_split, k.cfg.tokens, k.p, r);
    const std::size_t fr = piece_of(k.ffn_split, k.ffn, k.p, r);
    const auto x = zeros<T>({tr, k.hidden});
    const auto gamma = zeros<T>({k.hidden});
    const auto beta = has_beta(k.cfg.norm.kind) ? zeros<T>({k.hidden}) : Tensor<T>();
    const auto w1 = zeros<T>({fr, k.hidden});
    const auto w2 = zeros<T>({k.hidden, fr});
    const Tensor<T> none;
    Probe probe(c);
    struct Fwd {
      Tensor<T> z, a, y;
    };
    const Fwd f = probe.forward([&] {
      Fwd o;
      o.z = sequence_parallel_norm(c, k.cfg, x, gamma, beta);
      o.a = column_parallel_linear(c, col, o.z, w1, none).y;
      o.y = row_parallel_linear(c, row, o.a, w2, none).y;
      return o;
    });
    probe.keep(x);
    probe.keep(f.z);
    probe.keep(f.a);
    probe.backward([&] {
      auto gr = row_parallel_linear_backward(c, row, f.a, w2, false, f.y);
      auto gc = column_parallel_linear_backward(c, col, f.z, w1, false, gr.dx);
      (void)sequence_parallel_norm_backward(c, k.cfg, x, gamma, gc.dx);
    });
    ms[static_cast<std::size_t>(r)] = probe.result();
  });
  return ms;
}

Predict predict_block(const NormCase& k, ElementBytes e) {
  return [k, e](int r) {
    return Prediction{sp_block_traffic(k.cfg, k.hidden, k.ffn, k.ffn_split, k.p, r, e),
                      sp_block_activations(k.cfg, k.hidden, k.ffn, k.ffn_split, k.p, r, e)};
  };
}

template <class T>
void check_norm(const NormCase& k) {
  const auto d = compare_all(run_norm<T>(k), predict_norm(k, eb<T>()));
  RC_ASSERT(d == std::string());
}
template <class T>
void check_block(const NormCase& k) {
  const auto d = compare_all(run_block<T>(k), predict_block(k, eb<T>()));
  RC_ASSERT(d == std::string());
}

RC_GTEST_PROP(measured, sp_norm_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_norm_case();
  SHARDCHECK_BY_TYPE(check_norm, *rc::gen::inRange(0, 4), k)
}

RC_GTEST_PROP(measured, sp_block_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_norm_case();
  SHARDCHECK_BY_TYPE(check_block, *rc::gen::inRange(0, 4), k)
}

// ------------------------------------------------------------------ vocabulary-parallel

struct VocabCase {
  int p = 1;
  std::size_t tokens = 1, hidden = 1;
  std::vector<std::int64_t> ids;
  VocabEmbeddingConfig emb;
  VocabCrossEntropyConfig ce;
};

VocabCase gen_vocab_case() {
  VocabCase k;
  k.p = *rc::gen::inRange(1, 5);
  k.tokens = *rc::gen::inRange<std::size_t>(1, 8);
  k.hidden = *rc::gen::inRange<std::size_t>(1, 5);
  const auto vocab = *rc::gen::inRange<std::size_t>(1, 10);
  for (std::size_t t = 0; t < k.tokens; ++t) {
    k.ids.push_back(*rc::gen::inRange<std::int64_t>(0, static_cast<std::int64_t>(vocab)));
  }
  k.emb.vocab = vocab;
  k.emb.vocab_split = *gen_split(vocab, k.p);
  k.emb.sequence_parallel_output = *rc::gen::arbitrary<bool>();
  k.emb.token_split = *gen_split(k.tokens, k.p);
  k.emb.reduce_algorithm = gen_algorithm();
  k.ce.vocab = vocab;
  k.ce.vocab_split = k.emb.vocab_split;
  k.ce.label_smoothing = *rc::gen::element(0.0, 0.25);
  k.ce.reduction = *rc::gen::element(LossReduction::none, LossReduction::sum, LossReduction::mean);
  k.ce.reduce_algorithm = gen_algorithm();
  return k;
}

template <class T>
std::vector<Measured> run_embedding(const VocabCase& k) {
  std::vector<Measured> ms(static_cast<std::size_t>(k.p));
  run(k.p, [&](Communicator& c) {
    const int r = c.rank();
    const auto& cfg = k.emb;
    const auto w = zeros<T>({piece_of(cfg.vocab_split, cfg.vocab, k.p, r), k.hidden});
    Probe probe(c);
    probe.forward([&] { return vocab_parallel_embedding(c, cfg, std::span(k.ids), w); });
    probe.keep(k.ids);
    const std::size_t tr =
        cfg.sequence_parallel_output ? piece_of(cfg.token_split, k.tokens, k.p, r) : k.tokens;
    const auto dy = zeros<T>({tr, k.hidden});
    probe.backward([&] { (void)vocab_parallel_embedding_backward(c, cfg, std::span(k.ids), dy); });
    ms[static_cast<std::size_t>(r)] = probe.result();
  });
  return ms;
}

Predict predict_embedding(const VocabCase& k, ElementBytes e) {
  return [k, e](int r) {
    return Prediction{vocab_embedding_traffic(k.emb, k.tokens, k.hidden, k.p, r, e),
                      vocab_embedding_activations(k.emb, k.tokens, k.hidden, k.p, r, e)};
  };
}

template <class T>
std::vector<Measured> run_cross_entropy(const VocabCase& k) {
  std::vector<Measured> ms(static_cast<std::size_t>(k.p));
  run(k.p, [&](Communicator& c) {
    const int r = c.rank();
    const auto& cfg = k.ce;
    const auto logits = zeros<T>({k.tokens, piece_of(cfg.vocab_split, cfg.vocab, k.p, r)});
    Probe probe(c);
    const auto out = probe.forward(
        [&] { return vocab_parallel_cross_entropy(c, cfg, logits, std::span(k.ids)); });
    probe.keep(logits);
    probe.keep(k.ids);
    probe.keep(out.saved.max);
    probe.keep(out.saved.sum_exp);
    const auto dloss = zeros<T>({cfg.reduction == LossReduction::none ? k.tokens : std::size_t{1}});
    probe.backward([&] {
      (void)vocab_parallel_cross_entropy_backward(c, cfg, logits, std::span(k.ids), out.saved,
                                                  dloss);
    });
    ms[static_cast<std::size_t>(r)] = probe.result();
  });
  return ms;
}

Predict predict_cross_entropy(const VocabCase& k, ElementBytes e) {
  return [k, e](int r) {
    return Prediction{vocab_cross_entropy_traffic(k.ce, k.tokens, k.p, r, e),
                      vocab_cross_entropy_activations(k.ce, k.tokens, k.p, r, e)};
  };
}

template <class T>
void check_embedding(const VocabCase& k) {
  const auto d = compare_all(run_embedding<T>(k), predict_embedding(k, eb<T>()));
  RC_ASSERT(d == std::string());
}
template <class T>
void check_cross_entropy(const VocabCase& k) {
  const auto d = compare_all(run_cross_entropy<T>(k), predict_cross_entropy(k, eb<T>()));
  RC_ASSERT(d == std::string());
}

RC_GTEST_PROP(measured, vocab_embedding_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_vocab_case();
  SHARDCHECK_BY_TYPE(check_embedding, *rc::gen::inRange(0, 4), k)
}

RC_GTEST_PROP(measured, vocab_cross_entropy_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_vocab_case();
  SHARDCHECK_BY_TYPE(check_cross_entropy, *rc::gen::inRange(0, 4), k)
}

// ------------------------------------------------------------------ context-parallel attention

struct CpCase {
  int p = 1;
  std::size_t batch = 1;
  AttentionConfig att;
  ContextParallelConfig cc;
};

CpCase gen_cp_case() {
  CpCase k;
  k.p = *rc::gen::inRange(1, 5);
  k.batch = *rc::gen::inRange<std::size_t>(1, 3);
  k.att.kv_heads = *rc::gen::inRange<std::size_t>(1, 3);
  k.att.q_heads = k.att.kv_heads * *rc::gen::inRange<std::size_t>(1, 3);
  k.att.head_dim = *rc::gen::inRange<std::size_t>(1, 4);
  k.cc.seq_len = *rc::gen::inRange<std::size_t>(1, 10);
  k.att.mask.kind = *rc::gen::element(MaskKind::none, MaskKind::causal);
  k.att.mask.q_len = k.att.mask.k_len = k.cc.seq_len;
  k.cc.layout = *rc::gen::element(CpLayout::contiguous, CpLayout::zigzag);
  k.cc.split = *gen_split(k.cc.seq_len, k.cc.layout == CpLayout::zigzag ? 2 * k.p : k.p);
  k.cc.algorithm = *rc::gen::element(CpAlgorithm::ring, CpAlgorithm::all_gather);
  return k;
}

template <class T>
std::vector<Measured> run_cp(const CpCase& k) {
  std::vector<Measured> ms(static_cast<std::size_t>(k.p));
  const auto lens = cp_lengths(k.cc, k.p);
  run(k.p, [&](Communicator& c) {
    const int r = c.rank();
    const std::size_t len = lens[static_cast<std::size_t>(r)];
    const auto& a = k.att;
    const auto q = zeros<T>({k.batch, len, a.q_heads, a.head_dim});
    const auto kk = zeros<T>({k.batch, len, a.kv_heads, a.head_dim});
    const auto v = zeros<T>({k.batch, len, a.kv_heads, a.head_dim});
    Probe probe(c);
    const auto out =
        probe.forward([&] { return context_parallel_attention(c, a, k.cc, q, kk, v); });
    probe.keep(q);
    probe.keep(kk);
    probe.keep(v);
    probe.keep(out.out);
    probe.keep(out.lse);
    probe.backward(
        [&] { (void)context_parallel_attention_backward(c, a, k.cc, q, kk, v, out, q); });
    ms[static_cast<std::size_t>(r)] = probe.result();
  });
  return ms;
}

Predict predict_cp(const CpCase& k, ElementBytes e) {
  return [k, e](int r) {
    return Prediction{cp_attention_traffic(k.att, k.cc, k.batch, k.p, r, e),
                      cp_attention_activations(k.att, k.cc, k.batch, k.p, r, e)};
  };
}

template <class T>
void check_cp(const CpCase& k) {
  const auto d = compare_all(run_cp<T>(k), predict_cp(k, eb<T>()));
  RC_ASSERT(d == std::string());
}

RC_GTEST_PROP(measured, cp_attention_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_cp_case();
  RC_TAG(to_string(k.cc.algorithm), to_string(k.cc.layout));
  SHARDCHECK_BY_TYPE(check_cp, *rc::gen::inRange(0, 4), k)
}

// ------------------------------------------------------------------ head-parallel layer

struct HeadCase {
  int tp = 1, cp = 1;
  std::size_t batch = 1;
  HeadParallelConfig cfg;
};

HeadCase gen_head_case() {
  HeadCase k;
  const auto g = *rc::gen::inRange<std::size_t>(1, 5);
  const auto group = *rc::gen::inRange<std::size_t>(1, 3);
  k.cfg.attention.kv_heads = g;
  k.cfg.attention.q_heads = g * group;
  k.cfg.attention.head_dim = *rc::gen::inRange<std::size_t>(1, 3);
  k.cfg.hidden = *rc::gen::inRange<std::size_t>(1, 5);
  k.cfg.has_bias = *rc::gen::arbitrary<bool>();
  k.tp = *rc::gen::inRange(1, 5);
  // g < tp replicates kv heads: tp must be a multiple of g whose share divides the group.
  if (g < static_cast<std::size_t>(k.tp) &&
      (k.tp % static_cast<int>(g) != 0 || group % (static_cast<std::size_t>(k.tp) / g) != 0)) {
    k.tp = static_cast<int>(g);
  }
  k.cfg.kv_head_split = *gen_split(g, k.tp);
  k.cfg.reduce_algorithm = gen_algorithm();
  k.batch = *rc::gen::inRange<std::size_t>(1, 3);
  const auto seq = *rc::gen::inRange<std::size_t>(1, 7);
  k.cfg.attention.mask.kind = *rc::gen::element(MaskKind::none, MaskKind::causal);
  k.cfg.attention.mask.q_len = k.cfg.attention.mask.k_len = seq;
  k.cp = *rc::gen::inRange(1, 4);
  if (k.tp * k.cp > 8) k.cp = 2;  // at most 8 ranks (threads) per run
  if (k.cp > 1 || *rc::gen::arbitrary<bool>()) {
    ContextParallelConfig cc;
    cc.seq_len = seq;
    cc.layout = *rc::gen::element(CpLayout::contiguous, CpLayout::zigzag);
    cc.split = *gen_split(seq, cc.layout == CpLayout::zigzag ? 2 * k.cp : k.cp);
    cc.algorithm = *rc::gen::element(CpAlgorithm::ring, CpAlgorithm::all_gather);
    k.cfg.context_parallel = cc;
  }
  return k;
}

// World rank w = cp_rank·tp + tp_rank on a (cp, tp) mesh.
template <class T>
std::vector<Measured> run_head(const HeadCase& k) {
  const int world = k.tp * k.cp;
  std::vector<Measured> ms(static_cast<std::size_t>(world));
  const auto& c = k.cfg;
  const std::size_t h = c.attention.q_heads, g = c.attention.kv_heads, d = c.attention.head_dim;
  AttentionLayerWeights<T> dense;
  dense.wq = zeros<T>({h * d, c.hidden});
  dense.wk = zeros<T>({g * d, c.hidden});
  dense.wv = zeros<T>({g * d, c.hidden});
  dense.wo = zeros<T>({c.hidden, h * d});
  if (c.has_bias) {
    dense.bq = zeros<T>({h * d});
    dense.bk = zeros<T>({g * d});
    dense.bv = zeros<T>({g * d});
    dense.bo = zeros<T>({c.hidden});
  }
  run(world, [&](Communicator& w) {
    const int cp_rank = w.rank() / k.tp, tp_rank = w.rank() % k.tp;
    std::vector<int> tp_ranks, cp_ranks;
    for (int i = 0; i < k.tp; ++i) tp_ranks.push_back(cp_rank * k.tp + i);
    for (int j = 0; j < k.cp; ++j) cp_ranks.push_back(j * k.tp + tp_rank);
    auto tp = w.group(tp_ranks);
    auto cp = w.group(cp_ranks);
    const std::size_t len = c.context_parallel ? cp_lengths(*c.context_parallel,
                                                            k.cp)[static_cast<std::size_t>(cp_rank)]
                                               : c.attention.mask.q_len;
    const auto ws = shard_attention_weights(dense, c, head_assignment(c, k.tp, tp_rank));
    const auto x = zeros<T>({k.batch, len, c.hidden});
    Probe probe(w);
    const auto f = probe.forward([&] { return attention_layer(*tp, *cp, c, x, ws); });
    probe.keep(x);
    probe.keep(f.q);
    probe.keep(f.k);
    probe.keep(f.v);
    probe.keep(f.attn.out);
    probe.keep(f.attn.lse);
    probe.backward([&] { (void)attention_layer_backward(*tp, *cp, c, x, ws, f, x); });
    ms[static_cast<std::size_t>(w.rank())] = probe.result();
  });
  return ms;
}

Predict predict_head(const HeadCase& k, ElementBytes e) {
  return [k, e](int w) {
    const int cp_rank = w / k.tp, tp_rank = w % k.tp;
    return Prediction{head_layer_traffic(k.cfg, k.batch, k.tp, tp_rank, k.cp, cp_rank, e),
                      head_layer_activations(k.cfg, k.batch, k.tp, tp_rank, k.cp, cp_rank, e)};
  };
}

template <class T>
void check_head(const HeadCase& k) {
  const auto d = compare_all(run_head<T>(k), predict_head(k, eb<T>()));
  RC_ASSERT(d == std::string());
}

RC_GTEST_PROP(measured, head_parallel_layer_ledger_and_tracker_equal_the_model, ()) {
  const auto k = gen_head_case();
  RC_TAG(k.cfg.context_parallel ? "cp" : "no cp");
  SHARDCHECK_BY_TYPE(check_head, *rc::gen::inRange(0, 4), k)
}

// ------------------------------------------------------------------ reference figures

// Measured figures of fixed uneven configurations (docs/budget.md quotes them): per rank, the
// tracker's kept bytes and peaks and the ledger's bytes sent, each equal to the model's.
void print_figures(const char* what, const std::vector<Measured>& ms, const Predict& predict) {
  EXPECT_EQ(compare_all(ms, predict), "") << what;
  std::printf("%s\n", what);
  for (std::size_t r = 0; r < ms.size(); ++r) {
    std::uint64_t sent = 0;
    for (const auto& [op, t] : ms[r].totals) sent += t.sent;
    const auto p = predict(static_cast<int>(r));
    std::printf("  rank %zu: kept %llu B, forward peak %llu B, backward peak %llu B, sent %llu B",
                r, static_cast<unsigned long long>(ms[r].kept),
                static_cast<unsigned long long>(ms[r].fwd_peak),
                static_cast<unsigned long long>(ms[r].bwd_peak),
                static_cast<unsigned long long>(sent));
    std::printf("; backward peak terms:");
    for (const auto& t : p.act.backward_peak) {
      std::printf(" [%s %llu]", t.name.c_str(), static_cast<unsigned long long>(t.bytes));
    }
    std::printf("\n");
  }
}

TEST(measured, reference_figures) {
  LinearCase lin;  // 10 tokens over 4 ranks by chunk: 3, 3, 3, 1
  lin.p = 4;
  lin.tokens = 10;
  lin.in = 8;
  lin.out = 12;
  lin.col.tokens = 10;
  lin.col.out_features = 12;
  lin.col.sequence_parallel_input = true;
  lin.col.gather_output = true;
  print_figures("column-parallel float32, SP input + gather_output, tokens 10, in 8, out 12",
                run_column<float>(lin), predict_column(lin, eb<float>()));
  CpCase cp;
  cp.p = 4;
  cp.att.q_heads = 4;
  cp.att.kv_heads = 2;
  cp.att.head_dim = 8;
  cp.cc.seq_len = 10;
  cp.att.mask.kind = MaskKind::causal;
  cp.att.mask.q_len = cp.att.mask.k_len = 10;
  print_figures("CP ring bfloat16, seq 10 contiguous by chunk (3, 3, 3, 1), h 4, g 2, d 8",
                run_cp<bfloat16>(cp), predict_cp(cp, eb<bfloat16>()));
  cp.cc.algorithm = CpAlgorithm::all_gather;
  print_figures("CP all-gather bfloat16, the same shapes", run_cp<bfloat16>(cp),
                predict_cp(cp, eb<bfloat16>()));
}

// ------------------------------------------------------------------ the tracker itself

TEST(live_bytes, notes_go_to_the_rank_that_makes_them_and_nothing_without_a_tracker) {
  note_alloc(100);  // no tracker: nothing happens
  std::vector<std::uint64_t> peaks(4);
  run(4, [&](Communicator& c) {
    LiveBytes t;
    {
      LiveBytesScope scope(t);
      HeldBytes a(10 * static_cast<std::uint64_t>(c.rank() + 1));
      HeldBytes b(1);
      c.barrier();  // every rank's notes are live at once: none may reach another's tracker
      a = std::move(b);
    }
    peaks[static_cast<std::size_t>(c.rank())] = t.peak() * 1000 + t.live();
  });
  for (std::size_t r = 0; r < 4; ++r) EXPECT_EQ(peaks[r], (10 * (r + 1) + 1) * 1000) << r;
}

// ------------------------------------------------------------------ mutants

// A fixed uneven case per op, and wrong models: each must make the comparison fail (and the
// right model must pass on the same case).
void expect_mutants_fail(const std::vector<Measured>& ms, const Predict& predict,
                         const std::vector<std::pair<std::string, Mutant>>& mutants) {
  EXPECT_EQ(compare_all(ms, predict), "");
  for (const auto& [name, m] : mutants) {
    EXPECT_NE(compare_all(ms, predict, m), "") << "mutant survived: " << name;
  }
}

Term& term(std::vector<Term>& v, std::size_t i) { return v.at(i); }

TEST(measured_mutants, column_and_row_parallel) {
  LinearCase k;
  k.p = 3;
  k.tokens = 7;
  k.in = 3;
  k.out = 5;
  k.col.tokens = 7;
  k.col.out_features = 5;
  k.col.sequence_parallel_input = true;
  k.col.gather_output = true;
  k.col.token_split = SplitPolicy::explicit_sizes({4, 0, 3});
  k.col.out_split = SplitPolicy::chunk();  // 2, 2, 1
  k.row.input_is_parallel = false;
  k.row.sequence_parallel_output = true;
  k.row.in_split = SplitPolicy::explicit_sizes({0, 1, 2});
  k.row.token_split = k.col.token_split;
  const ElementBytes e = eb<float>();
  expect_mutants_fail(
      run_column<float>(k), predict_column(k, e),
      {{"SP all_gather bytes from the even ring factor (n-1)/n·S",
        [&](Prediction& p, int) {
          p.traffic.forward.at(0).sent = p.traffic.forward.at(0).recv = static_cast<std::uint64_t>(
              collective_bytes(Collective::all_gather, 3, 7.0 * 3 * 4).per_rank);
        }},
       {"backward peak without the full dx (only the re-gathered x)",
        [](Prediction& p, int) { p.act.backward_peak.pop_back(); }},
       {"forward peak without the gathered x (gather_output blocks only)",
        [](Prediction& p, int) { p.act.forward_peak.erase(p.act.forward_peak.begin()); }},
       {"kept x counted as the full [tokens, in]",
        [&](Prediction& p, int) { term(p.act.kept, 0).bytes = 7 * 3 * 4; }}});
  expect_mutants_fail(run_row<float>(k), predict_row(k, e),
                      {{"reduce_scatter recv taken as S - c_r (the sent formula)",
                        [&](Prediction& p, int r) {
                          const auto counts = split_sizes(k.row.token_split, 7, 3);
                          p.traffic.forward.at(0).recv =
                              (7 - counts[static_cast<std::size_t>(r)]) * 5 * 4;
                        }},
                       {"forward peak 0: the full partial y forgotten",
                        [](Prediction& p, int) { p.act.forward_peak.clear(); }},
                       {"backward without dx's all_gather_last_axis",
                        [](Prediction& p, int) { p.traffic.backward.pop_back(); }}});
}

TEST(measured_mutants, sp_norm_and_block) {
  NormCase k;
  k.p = 3;
  k.hidden = 4;
  k.ffn = 5;
  k.cfg.tokens = 5;
  k.cfg.token_split = SplitPolicy::explicit_sizes({3, 2, 0});
  k.cfg.norm.kind = NormKind::layer_norm;
  k.ffn_split = SplitPolicy::explicit_sizes({1, 0, 4});
  const ElementBytes e = eb<bfloat16>();
  expect_mutants_fail(
      run_norm<bfloat16>(k), predict_norm(k, e),
      {{"dbeta not in the all_reduce",
        [&](Prediction& p, int r) { p.traffic.backward.at(0) = all_reduce_call(4, 2, 3, r); }},
       {"kept x counted over all tokens",
        [](Prediction& p, int) { term(p.act.kept, 0).bytes = 5 * 4 * 2; }}});
  expect_mutants_fail(run_block<bfloat16>(k), predict_block(k, e),
                      {{"backward collectives in forward order (column before row)",
                        [](Prediction& p, int) {
                          // [row all_gather, column all_gather, column reduce_scatter, norm
                          // all_reduce] -> [column all_gather, column reduce_scatter, row
                          // all_gather, norm all_reduce]
                          auto& b = p.traffic.backward;
                          std::rotate(b.begin(), b.begin() + 1, b.begin() + 3);
                        }},
                       {"backward peak of one gather (x not re-gathered for dW1)",
                        [](Prediction& p, int) { p.act.backward_peak.pop_back(); }},
                       {"a kept for backward counted as a token shard", [&](Prediction& p, int r) {
                          term(p.act.kept, 2).bytes =
                              split_sizes(k.cfg.token_split, 5, 3)[static_cast<std::size_t>(r)] *
                              split_sizes(k.ffn_split, 5, 3)[static_cast<std::size_t>(r)] * 2;
                        }}});
}

TEST(measured_mutants, vocab_embedding_and_cross_entropy) {
  VocabCase k;
  k.p = 3;
  k.tokens = 5;
  k.hidden = 3;
  k.ids = {0, 6, 2, 6, 1};
  k.emb.vocab = 7;
  k.emb.vocab_split = SplitPolicy::explicit_sizes({0, 5, 2});
  k.emb.sequence_parallel_output = true;
  k.emb.token_split = SplitPolicy::explicit_sizes({2, 3, 0});
  k.ce.vocab = 7;
  k.ce.vocab_split = k.emb.vocab_split;
  k.ce.label_smoothing = 0;
  const ElementBytes e = eb<bfloat16>();
  expect_mutants_fail(
      run_embedding<bfloat16>(k), predict_embedding(k, e),
      {{"forward all_reduce instead of reduce_scatter",
        [](Prediction& p, int r) { p.traffic.forward.at(0) = all_reduce_call(15, 2, 3, r); }},
       {"the ids not kept", [](Prediction& p, int) { p.act.kept.clear(); }},
       {"forward peak without the full partial rows",
        [](Prediction& p, int) { p.act.forward_peak.clear(); }}});
  expect_mutants_fail(
      run_cross_entropy<bfloat16>(k), predict_cross_entropy(k, e),
      {{"3 all_reduces of one float32 per token (the even, smoothing figure)",
        [&](Prediction& p, int) {
          p.traffic.forward.at(1).sent = p.traffic.forward.at(1).recv =
              static_cast<std::uint64_t>(vocab_cross_entropy_bytes(5, 3).per_rank * 2 / 3);
        }},
       {"max and sum_exp kept in T instead of acc_t<T>",
        [](Prediction& p, int) {
          term(p.act.kept, 2).bytes = 5 * 2;
          term(p.act.kept, 3).bytes = 5 * 2;
        }},
       {"sums buffer with the smoothing slot",
        [](Prediction& p, int) { term(p.act.forward_peak, 0).bytes = 3 * 5 * 4; }}});
}

TEST(measured_mutants, cp_attention_ring_and_all_gather) {
  CpCase k;
  k.p = 3;
  k.batch = 2;
  k.att.q_heads = 2;
  k.att.kv_heads = 1;
  k.att.head_dim = 2;
  k.cc.seq_len = 7;
  k.att.mask.kind = MaskKind::causal;
  k.att.mask.q_len = k.att.mask.k_len = 7;
  k.cc.layout = CpLayout::contiguous;
  k.cc.split = SplitPolicy::explicit_sizes({4, 0, 3});
  k.cc.algorithm = CpAlgorithm::ring;
  const ElementBytes e = eb<float16>();
  expect_mutants_fail(
      run_cp<float16>(k), predict_cp(k, e),
      {{"every ring step moves the even chunk 2·b·(s/cp)·g·d",
        [&](Prediction& p, int) {
          const auto even = static_cast<std::uint64_t>(cp_ring_step_bytes(2, 7, 3, 1, 2, 2));
          for (auto& c : p.traffic.forward) c.sent = c.recv = even;
        }},
       {"dK/dV travel in T, not in acc_t<T>",
        [&](Prediction& p, int) {
          for (std::size_t i = 1; i < p.traffic.backward.size(); i += 2) {
            p.traffic.backward[i].sent /= 2;
            p.traffic.backward[i].recv /= 2;
          }
        }},
       {"ring backward peak without the dK/dV buffers",
        [&](Prediction& p, int r) {
          p.act.backward_peak = cp_attention_activations(k.att, k.cc, 2, 3, r, e).forward_peak;
        }},
       {"lse kept in T", [](Prediction& p, int) { term(p.act.kept, 4).bytes /= 2; }}});
  k.cc.algorithm = CpAlgorithm::all_gather;
  k.cc.layout = CpLayout::zigzag;
  k.cc.split = SplitPolicy::explicit_sizes({1, 2, 0, 1, 3, 0});
  expect_mutants_fail(run_cp<float16>(k), predict_cp(k, e),
                      {{"forward peak without the reordered copy (2·N·e)",
                        [](Prediction& p, int) { p.act.forward_peak.pop_back(); }},
                       {"dK/dV reduce_scatter in T",
                        [&](Prediction& p, int r) {
                          auto counts = cp_lengths(k.cc, 3);
                          for (auto& c : counts) c *= 2 * 1 * 2;  // b·g·d
                          p.traffic.backward.at(2) = reduce_scatter_call(counts, 2, r);
                        }},
                       {"backward peak without the per-rank reordering",
                        [](Prediction& p, int) { p.act.backward_peak.resize(4); }}});
}

TEST(measured_mutants, head_parallel_layer) {
  HeadCase k;
  k.tp = 4;
  k.cp = 2;
  k.batch = 1;
  k.cfg.attention.q_heads = 4;
  k.cfg.attention.kv_heads = 2;  // g < tp: kv heads shared by pairs
  k.cfg.attention.head_dim = 2;
  k.cfg.hidden = 3;
  k.cfg.attention.mask.q_len = k.cfg.attention.mask.k_len = 5;
  ContextParallelConfig cc;
  cc.seq_len = 5;
  cc.split = SplitPolicy::explicit_sizes({4, 1});
  k.cfg.context_parallel = cc;
  const ElementBytes e = eb<double>();
  expect_mutants_fail(
      run_head<double>(k), predict_head(k, e),
      {{"no kv-group gradient sum",
        [](Prediction& p, int) { p.traffic.backward.erase(p.traffic.backward.end() - 2); }},
       {"cp gradient sum without the biases",
        [&](Prediction& p, int w) {
          const auto a = head_assignment(k.cfg, 4, w % 4);
          const std::size_t hq = a.q_count * 2, hkv = a.kv_count * 2;
          p.traffic.backward.back() = all_reduce_call(hq * 3 + 2 * hkv * 3 + 3 * hq, 8, 2, w / 4);
        }},
       {"lse not kept", [](Prediction& p, int) { p.act.kept.pop_back(); }},
       {"backward peak: the kv pack only", [&](Prediction& p, int) {
          p.act.backward_peak = {{"kv", (2 * 2 * 3 + 2 * 2) * 8}};
        }}});
}

}  // namespace
}  // namespace shardcheck::budget
