#include "tools/shardcheck/budget_command.hpp"

#include "budget/activation_memory.hpp"
#include "budget/library_activations.hpp"
#include "budget/parameter_memory.hpp"
#include "budget/traffic.hpp"
#include "engine/format_number.hpp"
#include "layout/device_mesh.hpp"
#include "ops/attention/context_parallel_attention.hpp"
#include "ops/attention/head_parallel_attention.hpp"
#include "ops/linear/linear.hpp"
#include "ops/mlp/mlp.hpp"
#include "ops/norm/norm.hpp"
#include "ops/vocab/vocab_cross_entropy.hpp"
#include "ops/vocab/vocab_embedding.hpp"
#include "runtime/errors.hpp"
#include "tools/shardcheck/budget_model_step.hpp"
#include "tools/shardcheck/command_line.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>

namespace shardcheck::cli {
namespace {

using namespace shardcheck::budget;

constexpr int max_world_size = 1 << 20;  // DeviceMesh's limit

// What the options set; the defaults are GPT-3 175B on tp = 8 with 2-byte values.
struct BudgetArgs {
  TransformerShape m;
  std::optional<double> kv_heads;  // default: m.a (multi-head attention)
  double layers = 96;
  double vocab = 51200;
  double bytes = 2;
  DeviceMesh mesh = DeviceMesh({{"tp", 8}});
  ActivationOptions o;    // o.tp is the mesh's
  int micro_batches = 1;  // the whole step's, per dp rank
  bool json = false;
};

double parse_positive(const std::string& opt, const std::string& text) {
  double v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size() || !(v > 0) || !std::isfinite(v)) {
    throw UsageError(opt + " takes a positive number, not '" + text + "'");
  }
  return v;
}

// "pp=2,dp=4,tp=8"
DeviceMesh parse_mesh(const std::string& text) {
  std::vector<MeshDim> dims;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      throw UsageError("--mesh: '" + item + "' is not name=size (e.g. --mesh pp=2,dp=4,tp=8)");
    }
    const int size =
        parse_whole<int>("--mesh " + item.substr(0, eq), item.substr(eq + 1), 1, max_world_size);
    dims.push_back({item.substr(0, eq), size});
  }
  return DeviceMesh(dims);
}

int dim_size(const DeviceMesh& m, const std::string& name) {
  for (const auto& d : m.dims()) {
    if (d.name == name) return d.size;
  }
  return 1;
}

std::string num(double v) { return check::format_number(v); }

// JSON: every digit (a figure other tools compute with).
std::string exact(double v) { return check::format_number(v, 17); }

// s with '"' and '\\' escaped, for a JSON string.
std::string json_escape(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

// bytes in the largest binary unit that keeps the number at least 1: "8 B", "1.5 KiB", "22.6 GiB".
std::string size_text(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  auto v = static_cast<double>(bytes);
  std::size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  return num(v) + " " + units[u];
}

std::string gib(double bytes) { return num(bytes / (1024.0 * 1024 * 1024)) + " GiB"; }

// One row of the library's own model (budget/library_activations.hpp): the fullest rank's kept
// bytes and collective-buffer peaks, and the most bytes one rank sends forward + backward (the
// op spec's calls priced by budget/traffic.hpp), each the maximum over the ranks; or why it
// does not apply.
struct LibraryRow {
  std::string op;
  std::uint64_t kept = 0, forward_peak = 0, backward_peak = 0, sent = 0;
  std::string skipped;  // non-empty: the reason there are no figures
};

// What the model says of rank r of one op.
struct RankModel {
  OpActivations activations;
  OpTraffic traffic;
};

LibraryRow fullest(std::string op, int ranks, const std::function<RankModel(int)>& model) {
  LibraryRow row{std::move(op), 0, 0, 0, 0, {}};
  try {
    for (int r = 0; r < ranks; ++r) {
      const auto m = model(r);
      const auto& a = m.activations;
      row.kept = std::max(row.kept, a.kept_bytes());
      row.forward_peak = std::max(row.forward_peak, a.forward_peak_bytes());
      row.backward_peak = std::max(row.backward_peak, a.backward_peak_bytes());
      std::uint64_t sent = 0;
      for (const auto* pass : {&m.traffic.forward, &m.traffic.backward}) {
        for (const auto& c : *pass) sent += c.sent;
      }
      row.sent = std::max(row.sent, sent);
    }
  } catch (const UsageError& e) {
    row.skipped = e.what();
  }
  return row;
}

// The library's ops for one layer and the vocabulary ends, on the configuration's mesh: the
// head-parallel attention layer (heads over tp, the sequence over cp by the ring, causal), the
// tensor-parallel MLP (parallel_mlp, gelu: fc1 [4h, h], fc2 [h, 4h]), both sequence parallel
// with --sp, the two sequence-parallel LayerNorms (--sp), the vocabulary-parallel embedding and
// cross-entropy. Default (chunk) splits; tokens = b·(this cp rank's s/cp).
std::vector<LibraryRow> library_rows(const TransformerShape& m, double g, double vocab_size, int tp,
                                     int cp, bool sp, ElementBytes e) {
  using U = std::size_t;
  const auto s = static_cast<U>(m.s), b = static_cast<U>(m.b), h = static_cast<U>(m.h);
  const auto heads = static_cast<U>(m.a), kv = static_cast<U>(g);
  const auto vocab = static_cast<U>(vocab_size);
  const U tokens = b * split_sizes(SplitPolicy::chunk(), s, cp).front();  // the largest piece
  std::vector<LibraryRow> rows;

  HeadParallelConfig att;
  att.attention.q_heads = heads;
  att.attention.kv_heads = kv;
  att.attention.head_dim = heads > 0 ? h / heads : 0;
  att.attention.mask.kind = MaskKind::causal;
  att.attention.mask.q_len = att.attention.mask.k_len = s;
  att.hidden = h;
  if (cp > 1) {
    ContextParallelConfig cc;
    cc.seq_len = s;
    att.context_parallel = cc;
  }
  att.sequence_parallel = sp;
  att.batch = b;
  rows.push_back(
      fullest("attention layer (heads over tp, ring CP over cp" + std::string(sp ? ", SP)" : ")"),
              tp * cp, [&](int w) {
                return RankModel{head_layer_activations(att, b, tp, w % tp, cp, w / tp, e),
                                 head_layer_traffic(att, b, tp, w % tp, cp, w / tp, e)};
              }));

  MlpConfig mlp;  // gelu: fc1 [4h, h], fc2 [h, 4h]
  mlp.ffn_features = 4 * h;
  mlp.tokens = tokens;
  mlp.sequence_parallel = sp;
  rows.push_back(
      fullest("MLP (parallel_mlp: fc1 column-parallel [4h, h], fc2 row-parallel [h, 4h]" +
                  std::string(sp ? ", SP)" : ")"),
              tp, [&](int r) {
                return RankModel{parallel_mlp_activations(mlp, tokens, h, true, tp, r, e),
                                 parallel_mlp_traffic(mlp, tokens, h, true, tp, r, e)};
              }));
  if (sp) {
    SequenceParallelNormConfig ln;
    ln.tokens = tokens;
    rows.push_back(fullest("SP LayerNorm (one of two)", tp, [&](int r) {
      return RankModel{sp_norm_activations(ln, h, tp, r, e), sp_norm_traffic(ln, h, tp, r, e)};
    }));
  }
  VocabEmbeddingConfig emb;
  emb.vocab = vocab;
  emb.sequence_parallel_output = sp;
  rows.push_back(fullest("vocab-parallel embedding (once per model)", tp, [&](int r) {
    return RankModel{vocab_embedding_activations(emb, tokens, h, tp, r, e),
                     vocab_embedding_traffic(emb, tokens, h, tp, r, e)};
  }));
  VocabCrossEntropyConfig ce;
  ce.vocab = vocab;
  rows.push_back(fullest("vocab-parallel cross-entropy (once per model)", tp, [&](int r) {
    return RankModel{vocab_cross_entropy_activations(ce, tokens, tp, r, e),
                     vocab_cross_entropy_traffic(ce, tokens, tp, r, e)};
  }));
  return rows;
}

// An option that parses a positive number into *field, a member of *a (which the option keeps
// alive); its default is the field's value now.
Option positive(const std::shared_ptr<BudgetArgs>& a, const std::string& name, std::string value,
                std::string help, double* field) {
  return {name, std::move(value), std::move(help), num(*field),
          [a, name, field](const std::string& v) { *field = parse_positive(name, v); }};
}

Recompute parse_recompute(const std::string& v) {
  if (const auto r = enum_from_name<Recompute>(v)) return *r;
  throw UsageError("--recompute takes " + names_or<Recompute>() + ", not '" + v + "'");
}

// The figures of one configuration on out: text, or JSON with --json.
int print_budget(const BudgetArgs& args, std::ostream& out) {
  const TransformerShape& m = args.m;
  const double g = args.kv_heads.value_or(m.a);
  const double layers = args.layers;
  const double vocab = args.vocab;
  const double bytes = args.bytes;
  const DeviceMesh& mesh = args.mesh;
  const bool json = args.json;
  ActivationOptions o = args.o;
  o.tp = dim_size(mesh, "tp");
  const int cp = dim_size(mesh, "cp");
  const int pp = dim_size(mesh, "pp");
  const double d = m.h / m.a;
  // Context parallelism shards the sequence: each rank's activations cover s/cp tokens.
  TransformerShape local = m;
  local.s = m.s / cp;
  const double act = korthikanti_activation_bytes(local, o);
  const auto params =
      gpt_parameters(static_cast<std::uint64_t>(layers), static_cast<std::uint64_t>(m.h),
                     static_cast<std::uint64_t>(vocab), pp);
  const auto account = account_parameters(params, mesh, static_cast<std::uint64_t>(bytes));
  const auto most = *std::max_element(account.bytes_per_rank.begin(), account.bytes_per_rank.end());
  const auto tp_traffic =
      tensor_parallel_layer_traffic(local.s, m.b, m.h, o.tp, o.sequence_parallel, bytes);
  const double cp_fwd = cp_ring_forward_bytes(m.b, m.s, cp, g, d, bytes);
  const auto ce = vocab_cross_entropy_bytes(local.s * m.b, o.tp);

  struct Row {
    std::string name;
    double value;
  };
  std::vector<Row> table2;
  for (const bool sp : {false, true}) {
    for (const auto rc : {Recompute::none, Recompute::selective}) {
      const ActivationOptions x{o.tp, sp, rc};
      table2.push_back({table2_row(x), korthikanti_activation_bytes(local, x)});
    }
  }
  table2.push_back(
      {"full recomputation", korthikanti_activation_bytes(local, {o.tp, false, Recompute::full})});

  // The library's own model needs whole element bytes: 2 (16-bit values, float32 accumulators),
  // 4 or 8; the accumulator is float32 below 4 bytes, as acc_t<T>.
  std::vector<LibraryRow> library;
  const bool whole = bytes == std::floor(bytes) && bytes <= 64;
  const ElementBytes eb{static_cast<std::uint64_t>(bytes),
                        static_cast<std::uint64_t>(std::max(bytes, 4.0))};
  if (whole) library = library_rows(m, g, vocab, o.tp, cp, o.sequence_parallel, eb);
  StepFigures step;
  if (whole) {
    step = model_step_figures({m.s, m.b, m.h, m.a, g, layers, vocab, pp, dim_size(mesh, "dp"), cp,
                               o.tp, args.micro_batches, o.sequence_parallel},
                              eb);
  }

  if (json) {
    out << "{\n  \"mesh\": \"" << mesh.to_string() << "\",\n"
        << R"(  "model": {"seq": )" << exact(m.s) << ", \"batch\": " << exact(m.b)
        << ", \"hidden\": " << exact(m.h) << ", \"heads\": " << exact(m.a)
        << ", \"kv_heads\": " << exact(g) << ", \"layers\": " << exact(layers)
        << ", \"vocab\": " << exact(vocab) << ", \"bytes\": " << exact(bytes) << "},\n"
        << R"(  "activation_bytes_per_layer": {"selected": ")" << table2_row(o) << R"(", "bytes": )"
        << exact(act) << ", \"table2\": {";
    for (std::size_t k = 0; k < table2.size(); ++k) {
      out << (k ? ", " : "") << '"' << table2[k].name << "\": " << exact(table2[k].value);
    }
    out << "}},\n  \"parameters\": {\"model_bytes\": " << account.model_bytes
        << ", \"max_bytes_per_rank\": " << most << "},\n"
        << R"(  "traffic_per_layer": {"tensor_parallel": {"all_reduces": )"
        << tp_traffic.all_reduces << ", \"all_gathers\": " << tp_traffic.all_gathers
        << ", \"reduce_scatters\": " << tp_traffic.reduce_scatters
        << ", \"per_rank_bytes\": " << exact(tp_traffic.bytes.per_rank)
        << ", \"aggregate_bytes\": " << exact(tp_traffic.bytes.aggregate) << "},\n"
        << "    \"context_parallel_ring_forward_bytes_per_rank\": " << exact(cp_fwd) << ",\n"
        << R"(    "vocab_cross_entropy": {"per_rank_bytes": )" << exact(ce.per_rank)
        << ", \"aggregate_bytes\": " << exact(ce.aggregate) << "}},\n"
        << R"(  "library_activation_bytes_per_rank": {"element_bytes": )" << eb.value
        << ", \"accumulator_bytes\": " << eb.acc << ", \"ops\": [";
    for (std::size_t k = 0; k < library.size(); ++k) {
      const auto& r = library[k];
      out << (k ? ",\n    " : "\n    ") << R"({"op": ")" << r.op << '"';
      if (r.skipped.empty()) {
        out << ", \"kept\": " << r.kept << ", \"forward_peak\": " << r.forward_peak
            << ", \"backward_peak\": " << r.backward_peak << ", \"sent\": " << r.sent << "}";
      } else {
        out << R"(, "skipped": ")" << json_escape(r.skipped) << "\"}";
      }
    }
    out << "]}";
    if (whole) {
      out << ",\n  \"model_step\": {\"micro_batches\": " << args.micro_batches;
      if (step.skipped.empty()) {
        out << R"(, "model": ")" << json_escape(step.model) << R"(", "ranks": )" << step.ranks
            << R"(, "activation_peak": {"bytes": )" << step.peak << ", \"rank\": " << step.peak_rank
            << R"(, "coordinates": ")" << step.peak_coordinates << R"(", "at": ")"
            << json_escape(step.peak_at) << R"("}, "kept_after_forward": )"
            << step.kept_after_forward << ", \"sent_most\": " << step.sent_most
            << ", \"sent_per_axis\": {";
        bool first = true;
        for (const auto& [axis, t] : step.sent_per_axis) {
          out << (first ? "" : ", ") << '"' << axis << R"(": {"bytes": )" << t.sent
              << ", \"calls\": " << t.calls << "}";
          first = false;
        }
        out << "}}";
      } else {
        out << R"(, "skipped": ")" << json_escape(step.skipped) << "\"}";
      }
    }
    out << "\n}\n";
    return 0;
  }
  out << "budget on mesh " << mesh.to_string() << ": s=" << num(m.s) << " b=" << num(m.b)
      << " h=" << num(m.h) << " a=" << num(m.a) << " g=" << num(g) << " layers=" << num(layers)
      << " vocab=" << num(vocab) << ", " << num(bytes) << "-byte values\n\n"
      << "activation bytes per layer and rank (Korthikanti et al. 2022, Table 2; s/cp tokens):\n";
  for (const auto& r : table2) {
    out << "  " << (r.name == table2_row(o) ? "* " : "  ") << r.name << ": " << gib(r.value)
        << "\n";
  }
  out << "  5as/h = " << num(attention_term(m)) << "\n\n"
      << "parameters: " << gib(static_cast<double>(account.model_bytes)) << " in the model, "
      << gib(static_cast<double>(most))
      << " on the fullest rank (replicated over dp x cp = " << dim_size(mesh, "dp") * cp
      << ", sharded over tp = " << o.tp << " and pp = " << pp << ")\n\n"
      << "traffic per layer, forward + backward:\n"
      << "  tensor parallel: " << tp_traffic.all_reduces << " all_reduce, "
      << tp_traffic.all_gathers << " all_gather, " << tp_traffic.reduce_scatters
      << " reduce_scatter; " << gib(tp_traffic.bytes.per_rank) << " per rank, "
      << gib(tp_traffic.bytes.aggregate) << " aggregate\n"
      << "  context-parallel ring (forward, K and V): " << gib(cp_fwd) << " per rank over "
      << cp - 1 << " steps\n"
      << "  vocabulary-parallel cross-entropy: 3 all_reduce of one float32 per token, "
      << num(ce.per_rank) << " B per rank\n";
  if (!whole) {
    out << "\nlibrary model: needs a whole number of bytes per value (--bytes 2, 4 or 8)\n";
    return 0;
  }
  out << "\nlibrary model (shardcheck's own ops; fullest rank; " << eb.value << "-byte values, "
      << eb.acc << "-byte accumulators):\n"
      << "  kept for backward / forward peak / backward peak of collective buffers; bytes one "
         "rank sends (forward + backward, the op's spec)\n";
  for (const auto& r : library) {
    out << "  " << r.op << ": ";
    if (r.skipped.empty()) {
      out << gib(static_cast<double>(r.kept)) << " / " << gib(static_cast<double>(r.forward_peak))
          << " / " << gib(static_cast<double>(r.backward_peak)) << "; sends "
          << gib(static_cast<double>(r.sent)) << "\n";
    } else {
      out << "n/a (" << r.skipped << ")\n";
    }
  }
  out << "\nwhole training step (model_train_step; " << eb.value << "-byte values, " << eb.acc
      << "-byte accumulators; no recomputation):\n";
  if (!step.skipped.empty()) {
    out << "  n/a (" << step.skipped << ")\n";
    return 0;
  }
  out << "  " << step.model << "; " << step.ranks << " ranks\n"
      << "  activation peak: " << size_text(step.peak) << " on rank " << step.peak_rank << " ("
      << step.peak_coordinates << "), " << step.peak_at
      << "; kept after the forward there: " << size_text(step.kept_after_forward)
      << "\n  bytes one rank sends, the fullest per mesh axis: ";
  bool first = true;
  for (const auto& [axis, t] : step.sent_per_axis) {
    out << (first ? "" : "; ") << axis << " " << size_text(t.sent) << " in " << t.calls << " calls";
    first = false;
  }
  out << "\n  the most one rank sends in the step: " << size_text(step.sent_most) << "\n";
  return 0;
}

}  // namespace

Command budget_command() {
  const auto a = std::make_shared<BudgetArgs>();
  Command c;
  c.name = "budget";
  c.summary = "print the memory and traffic budget of one model on one device mesh";
  c.description =
      "Prints, for one transformer configuration on a device mesh, the activation bytes per "
      "layer and rank (Korthikanti et al. 2022, Table 2, every row, the selected one starred), "
      "the parameter bytes per rank, the traffic per layer of tensor, sequence and context "
      "parallelism and of the vocabulary-parallel cross-entropy, the library's own model "
      "of its ops, and of one whole training step of its model on the mesh's pp, dp, cp and tp "
      "(the peak activation bytes of the fullest rank and the bytes one rank sends per mesh "
      "axis, which the model suite measures exactly). The defaults are GPT-3 175B on tp = 8. Every "
      "number is positive and may have "
      "a fraction, except the --mesh sizes (whole numbers).";
  c.options = {
      positive(a, "--seq", "S", "sequence length", &a->m.s),
      positive(a, "--batch", "B", "micro-batch size", &a->m.b),
      positive(a, "--hidden", "H", "hidden size", &a->m.h),
      positive(a, "--heads", "A", "attention heads", &a->m.a),
      {"--kv-heads", "G", "key/value heads (grouped-query attention when fewer than A)",
       "A, multi-head attention",
       [a](const std::string& v) { a->kv_heads = parse_positive("--kv-heads", v); }},
      positive(a, "--layers", "L", "transformer layers", &a->layers),
      positive(a, "--vocab", "V", "vocabulary size", &a->vocab),
      {"--mesh", "LIST",
       "the device mesh as name=size pairs, comma-separated, e.g. pp=2,dp=4,cp=2,tp=8; tp, cp, "
       "dp and pp are read, a missing one is 1",
       "tp=8", [a](const std::string& v) { a->mesh = parse_mesh(v); }},
      positive(a, "--bytes", "N",
               "bytes per value; the library model's rows need a whole number of them", &a->bytes),
      {"--sp", "", "sequence parallelism (with tensor parallelism)", "off",
       [a](const std::string&) { a->o.sequence_parallel = true; }},
      {"--recompute", "MODE", "activation recomputation: none, selective or full",
       std::string(name(a->o.recompute)),
       [a](const std::string& v) { a->o.recompute = parse_recompute(v); }},
      {"--micro-batches", "M",
       "micro-batches per dp rank in the whole step's rows (GPipe; the step's batch is "
       "B·dp·M sequences)",
       "1",
       [a](const std::string& v) {
         a->micro_batches = parse_whole<int>("--micro-batches", v, 1, 1 << 20);
       }},
      {"--json", "", "print the figures as one JSON object, every digit", "off",
       [a](const std::string&) { a->json = true; }},
  };
  c.exit_status = "0 the budget was printed; 2 a usage error (on stderr).";
  c.examples = {"shardcheck budget",
                "shardcheck budget --mesh pp=2,dp=2,cp=2,tp=4 --sp --recompute selective",
                "shardcheck budget --mesh pp=4,dp=2,tp=8 --micro-batches 8",
                "shardcheck budget --seq 4096 --hidden 4096 --heads 32 --kv-heads 8 --layers 32 "
                "--vocab 32000 --json"};
  c.run = [a](std::ostream& out, const std::string&) { return print_budget(*a, out); };
  return c;
}
}  // namespace shardcheck::cli
