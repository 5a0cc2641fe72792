// shardcheck compare on attention cases written to disk here
// (suites/attention/attention_compare.cpp): the library's own context_parallel_attention
// (contiguous and zigzag, causal, padding and explicit masks) and attention_layer on a (cp, tp)
// mesh pass with one piece per rank in float32 and bfloat16; the dense op's global outputs pass
// once cut by the cp positions (the query and the key positions of a chunked prefill case); a
// planted bug (lse written in base 2) fails on lse only; a piece of the wrong shape is a layout
// failure naming the rank; an exp2 kernel and online-softmax kernels (any key-block size) pass
// under their declared contracts and the default, one that never rescales l does not;
// the layer under sequence parallelism (token rows over tp, uneven and
// empty) passes per rank and global, and rows in another order fail on y and dx; every bad input
// is a CaseError whose message is pinned.
#include "cases/case_manifest.hpp"
#include "cases/npy.hpp"
#include "compare/compare.hpp"
#include "ops/attention/attention.hpp"
#include "suites/attention/attention_accumulate_emulation.hpp"
#include "suites/attention/attention_exp2_emulation.hpp"
#include "suites/attention/attention_impl.hpp"
#include "suites/attention/attention_online_emulation.hpp"
#include "suites/attention/attention_run.hpp"
#include "testing/compare_test_util.hpp"
#include "testing/ops_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

namespace shardcheck::check::attention_compare_tests {
namespace {

using namespace compare_test;  // case files written and compared (compare_test_util.hpp)
using json = nlohmann::json;

// Values k/4 for k in [−4, 4]: exact in every element type, so the files hold what was drawn.
template <class T>
Tensor<T> quarters(Shape s, int seed) {
  return exact_values<T>(std::move(s), seed, {5, 11, 9, 4.0F});
}

// One case directory being written: its tensors as .npy files, then case.json.
class CaseDir {
 public:
  CaseDir(const std::string& name, const AttentionCase& c)
      : dir_(fresh_dir("shardcheck_attention_compare_tests_" + name)) {
    const spec::OpSpec s = op_spec(c);
    manifest_ = {{"shardcheck_case", 1},
                 {"op", s.op},
                 {"config", json::parse(s.config_json)},
                 {"dtype", std::string(name_of(c.dtype))},
                 {"inputs", json::object()},
                 {"outputs", json::object()}};
    for (const auto& [k, n] : s.sizes) manifest_["sizes"][k] = n;
    for (const auto& [k, n] : s.mesh) manifest_["mesh"][k] = n;
  }
  template <class T>
  void input(const std::string& name, const Tensor<T>& t) {
    manifest_["inputs"][name] = save(name, t);
  }
  template <class T>
  void output(const std::string& name, const Tensor<T>& t) {
    manifest_["outputs"][name] = save(name, t);
  }
  template <class T>
  void output_ranks(const std::string& name, const std::vector<Tensor<T>>& pieces) {
    json files = json::array();
    for (std::size_t r = 0; r < pieces.size(); ++r) {
      files.push_back(save(name + ".rank" + std::to_string(r), pieces[r]));
    }
    manifest_["outputs"][name] = {{"ranks", files}};
  }
  json& manifest() { return manifest_; }
  const fs::path& dir() const { return dir_; }
  // Writes case.json and judges the case.
  CompareResult compare() const {
    write();
    return compare_case(cases::read_case_manifest(dir_.string()));
  }
  // Writes case.json and returns the CaseError's message ("no error" when there is none).
  std::string error() const {
    write();
    try {
      compare_case(cases::read_case_manifest(dir_.string()));
    } catch (const cases::CaseError& e) {
      return e.what();
    } catch (const std::exception& e) {
      return std::string("not a CaseError: ") + e.what();
    }
    return "no error";
  }

 private:
  static std::string_view name_of(DType t) { return name(t); }
  template <class T>
  std::string save(const std::string& name, const Tensor<T>& t) const {
    std::string file = name + ".npy";
    cases::write_npy((dir_ / file).string(), cases::from_tensor(t));
    return file;
  }
  void write() const { std::ofstream(dir_ / "case.json", std::ios::binary) << manifest_.dump(); }
  fs::path dir_;
  json manifest_;
};

// context_parallel_attention: batch 2, L = 9, h = 4, g = 2 (GQA), d = 2 over cp = 3 (zigzag:
// positions [0, 1], [2, 3, 8], [4, 5, 6, 7], not the contiguous cut [0, 3), [3, 6), [6, 9)).
AttentionCase core_case(DType dtype, CpLayout layout, MaskKind kind) {
  AttentionCase c;
  c.op = AttentionOp::context_parallel;
  c.dtype = dtype;
  c.cp = 3;
  c.batch = 2;
  auto& a = c.layer.attention;
  a.q_heads = 4;
  a.kv_heads = 2;
  a.head_dim = 2;
  a.mask.kind = kind;
  a.mask.q_len = a.mask.k_len = 9;
  a.mask.key_lengths = {9, 4};
  if (kind == MaskKind::explicit_mask) {
    a.mask.allowed = Tensor<std::uint8_t>(Shape{2, 9, 9});
    for (std::size_t i = 0; i < a.mask.allowed.size(); ++i) a.mask.allowed[i] = (i % 3) != 0;
  }
  ContextParallelConfig cc;
  cc.seq_len = 9;
  cc.layout = layout;
  c.layer.context_parallel = cc;
  return c;
}

template <class T>
AttentionData<T> core_data(const AttentionCase& c) {
  const auto& a = c.attention();
  AttentionData<T> d;
  d.q = quarters<T>({c.batch, c.q_len(), a.q_heads, a.head_dim}, 1);
  d.k = quarters<T>({c.batch, c.k_len(), a.kv_heads, a.head_dim}, 2);
  d.v = quarters<T>({c.batch, c.k_len(), a.kv_heads, a.head_dim}, 3);
  d.dout = quarters<T>({c.batch, c.q_len(), a.q_heads, a.head_dim}, 4);
  return d;
}

// The explicit mask's values in the config (to_json writes only its shape).
void put_allowed(CaseDir& dir, const AttentionCase& c) {
  const auto& m = c.attention().mask;
  if (m.kind != MaskKind::explicit_mask) return;
  json rows = json::array();
  for (std::size_t b = 0; b < c.batch; ++b) {
    json plane = json::array();
    for (std::size_t t = 0; t < m.q_len; ++t) {
      json row = json::array();
      for (std::size_t s = 0; s < m.k_len; ++s)
        row.push_back(m.allowed[(b * m.q_len + t) * m.k_len + s]);
      plane.push_back(row);
    }
    rows.push_back(plane);
  }
  dir.manifest()["config"]["attention"]["mask"]["allowed"] = rows;
}

// A core case's directory with its inputs q, k, v, dout (and the explicit mask's values).
template <class T>
CaseDir core_inputs(const std::string& name, const AttentionCase& c, const AttentionData<T>& d) {
  CaseDir dir(name, c);
  put_allowed(dir, c);
  dir.input("q", d.q);
  dir.input("k", d.k);
  dir.input("v", d.v);
  dir.input("dout", d.dout);
  return dir;
}

// The library's ranks, each rank's out, lse, dq, dk, dv written as its own file.
template <class T>
CaseDir library_core_case(const std::string& name, const AttentionCase& c) {
  const auto d = core_data<T>(c);
  const auto run = run_ranks(AttentionAdapter<LibraryAttention>{}, c, d);
  EXPECT_TRUE(run.error.empty()) << run.error;
  CaseDir dir = core_inputs(name, c, d);
  using O = CoreRankOutputs<T>;
  dir.output_ranks("out", pieces_of(run.core, &O::out));
  dir.output_ranks("lse", pieces_of(run.core, &O::lse));
  dir.output_ranks("dq", pieces_of(run.core, &O::dq));
  dir.output_ranks("dk", pieces_of(run.core, &O::dk));
  dir.output_ranks("dv", pieces_of(run.core, &O::dv));
  return dir;
}

// The dense op's global outputs (a correct implementation: one partition of the keys), with
// lse transformed by `lse_bug`.
CaseDir dense_core_case(const std::string& name, const AttentionCase& c,
                        const std::function<float(float)>& lse_bug = {}) {
  const auto d = core_data<float>(c);
  auto fwd = attention_forward(c.attention(), d.q, d.k, d.v);
  const auto g = attention_backward(c.attention(), d.q, d.k, d.v, fwd, d.dout);
  CaseDir dir = core_inputs(name, c, d);
  dir.output("out", fwd.out);
  if (lse_bug) {
    for (auto& x : fwd.lse.values()) x = lse_bug(x);
  }
  dir.output("lse", fwd.lse);
  dir.output("dq", g.dq);
  dir.output("dk", g.dk);
  dir.output("dv", g.dv);
  return dir;
}

TEST(AttentionCompare, the_library_ranks_pass_in_float32_and_bfloat16) {
  for (auto layout : {CpLayout::contiguous, CpLayout::zigzag}) {
    for (auto kind : {MaskKind::causal, MaskKind::explicit_mask, MaskKind::none}) {
      SCOPED_TRACE(to_string(layout) + " " + to_string(kind));
      const auto f32 =
          library_core_case<float>("f32", core_case(DType::float32, layout, kind)).compare();
      EXPECT_TRUE(f32.verdict.pass()) << f32.verdict.explain();
      EXPECT_EQ(f32.verdict.tensors.size(), 5U);
      EXPECT_EQ(f32.verdict.world, 3);
      const auto bf16 =
          library_core_case<bfloat16>("bf16", core_case(DType::bfloat16, layout, kind)).compare();
      EXPECT_TRUE(bf16.verdict.pass()) << bf16.verdict.explain();
      EXPECT_EQ(bf16.verdict.tensors.size(), 5U);
    }
  }
}

// Chunked prefill (Lq = 3 new tokens after 6 cached keys, causal bottom-right; sizes.q_seq_len
// and cp.q_seq_len in the case) on cp = 3 zigzag: the library's ranks pass, the dense op's
// global outputs pass once cut by the query positions (out, lse, dq) and the key positions (dk,
// dv), and the same outputs judged as a top-left mask fail (the alignment is read from the case).
TEST(AttentionCompare, a_chunked_prefill_case_is_cut_by_query_and_key_positions) {
  auto c = core_case(DType::float32, CpLayout::zigzag, MaskKind::causal);
  c.shape = AttentionShape::chunked_prefill;
  c.layer.attention.mask.q_len = 3;
  c.layer.context_parallel->q_seq_len = 3;
  const auto ranks = library_core_case<float>("prefill_ranks", c).compare();
  EXPECT_TRUE(ranks.verdict.pass()) << ranks.verdict.explain();
  EXPECT_EQ(ranks.verdict.tensors.size(), 5U);
  auto dense = dense_core_case("prefill_dense", c);
  const auto r = dense.compare();
  EXPECT_TRUE(r.verdict.pass()) << r.verdict.explain();
  dense.manifest()["config"]["attention"]["mask"]["alignment"] = "top_left";
  const auto wrong = dense.compare();
  EXPECT_FALSE(wrong.verdict.pass()) << "bottom-right outputs passed as top-left";
}

TEST(AttentionCompare, global_outputs_are_cut_by_the_cp_positions) {
  for (auto layout : {CpLayout::contiguous, CpLayout::zigzag}) {
    SCOPED_TRACE(to_string(layout));
    const auto r =
        dense_core_case("dense", core_case(DType::float32, layout, MaskKind::causal)).compare();
    EXPECT_TRUE(r.verdict.pass()) << r.verdict.explain();
    EXPECT_EQ(r.verdict.tensors.size(), 5U);
  }
}

TEST(AttentionCompare, an_lse_in_base_two_fails_on_lse_only) {
  // A kernel that works in exp2 and returns its log2-sum-exp unconverted (FlashAttention's
  // kernels scale by log2(e) internally).
  const auto c = core_case(DType::float32, CpLayout::zigzag, MaskKind::causal);
  const auto r = dense_core_case("lse_base2", c, [](float x) {
                   return static_cast<float>(x / std::log(2.0));
                 }).compare();
  ASSERT_FALSE(r.verdict.pass());
  for (const auto& t : r.verdict.tensors) EXPECT_EQ(t.pass(), t.name != "lse") << t.summary();
  expect_parts(r.verdict.explain(), {"lse: worst element", "of the bound"});
}

// A FlashAttention-style kernel (attention_exp2_emulation.hpp: exp2 of an fma'd pre-scaled
// argument in float, lse kept in base 2 then converted) as the dense op's global outputs: within
// its declared contract "exp2", and within the default, which covers both forms.
TEST(AttentionCompare, an_exp2_kernel_passes_under_its_contract_and_the_default) {
  const auto c = core_case(DType::float32, CpLayout::zigzag, MaskKind::causal);
  const auto d = core_data<float>(c);
  const auto run =
      attention_exp2::exp2_kernel<float>(c.attention(), d.q, d.k, d.v, d.dout, {0, c.k_len()});
  CaseDir dir = core_inputs("exp2", c, d);
  const auto& a = c.attention();
  dir.output("out", Tensor<float>(d.q.shape(), run.out));
  dir.output("lse", Tensor<float>(Shape{c.batch, a.q_heads, c.q_len()}, run.lse));
  dir.output("dq", Tensor<float>(d.q.shape(), run.dq));
  dir.output("dk", Tensor<float>(d.k.shape(), run.dk));
  dir.output("dv", Tensor<float>(d.k.shape(), run.dv));
  dir.manifest()["contract"] = "exp2";
  const auto declared = dir.compare();
  EXPECT_TRUE(declared.verdict.pass()) << declared.verdict.explain();
  expect_parts(declared.contract, {"default: inputs and outputs in float32",
                                   "; contract exp2: p = exp2(q·k·scale_log2 − "
                                   "fl(m·scale_log2))"});
  dir.manifest().erase("contract");
  const auto either = dir.compare();
  EXPECT_TRUE(either.verdict.pass()) << either.verdict.explain();
  expect_parts(
      either.contract,
      {"the softmax's weights as the online softmax (key blocks of any size", ", or as p = exp2(",
       ": the larger bound, which also covers p = exp(fl(s − m)) over the whole row "
       "(docs/attention.md)"});
  dir.manifest()["contract"] = "exp";
  const auto natural = dir.compare();
  expect_parts(natural.contract, {"; contract exp: p = exp(fl(s − m))"});
  const auto worst = [](const CompareResult& r) {
    double w = 0;
    for (const auto& t : r.verdict.tensors) w = std::max(w, t.max_ratio);
    return w;
  };
  std::printf("attention exp2 kernel: worst |err|/bound %.3g (exp2), %.3g (default), %.3g (exp)\n",
              worst(declared), worst(either), worst(natural));
  // FlashAttention-2's CUDA forms: the argument unfused, the lse in natural units: within exp2
  // declared with that lse form, and within the default.
  attention_emulation::KernelForm fa2;
  fa2.unfused = fa2.natural_lse = true;
  const auto run2 =
      attention_exp2::exp2_kernel<float>(c.attention(), d.q, d.k, d.v, d.dout, {0, c.k_len()}, fa2);
  dir.output("out", Tensor<float>(d.q.shape(), run2.out));
  dir.output("lse", Tensor<float>(Shape{c.batch, a.q_heads, c.q_len()}, run2.lse));
  dir.output("dq", Tensor<float>(d.q.shape(), run2.dq));
  dir.output("dk", Tensor<float>(d.k.shape(), run2.dk));
  dir.output("dv", Tensor<float>(d.k.shape(), run2.dv));
  dir.manifest()["contract"] = {{"name", "exp2"}, {"lse", "natural"}};
  const auto fa2_declared = dir.compare();
  EXPECT_TRUE(fa2_declared.verdict.pass()) << fa2_declared.verdict.explain();
  expect_parts(fa2_declared.contract, {"; the lse in natural units"});
  dir.manifest().erase("contract");
  const auto fa2_default = dir.compare();
  EXPECT_TRUE(fa2_default.verdict.pass()) << fa2_default.verdict.explain();
  std::printf(
      "attention exp2 kernel, FlashAttention-2's forms: worst |err|/bound %.3g (exp2, "
      "natural lse), %.3g (default)\n",
      worst(fa2_declared), worst(fa2_default));
}

// An online-softmax kernel (attention_online_emulation.hpp: a running max over key blocks of 1
// and of 4 keys, the running l and acc rescaled at every block) as the dense op's forward
// outputs: under natural exp within its declared contract "online", under exp2 within "exp2",
// both within the default; the same kernel that never rescales l fails under its own contract.
TEST(AttentionCompare, an_online_softmax_kernel_passes_under_its_contract_and_the_default) {
  const auto c = core_case(DType::float32, CpLayout::zigzag, MaskKind::causal);
  const auto d = core_data<float>(c);
  const auto& a = c.attention();
  const auto forward_case = [&](const std::string& name, const auto& run) {
    CaseDir dir = core_inputs(name, c, d);
    dir.manifest()["inputs"].erase("dout");
    dir.output("out", Tensor<float>(d.q.shape(), run.out));
    dir.output("lse", Tensor<float>(Shape{c.batch, a.q_heads, c.q_len()}, run.lse));
    return dir;
  };
  const auto worst = [](const CompareResult& r) {
    double w = 0;
    for (const auto& t : r.verdict.tensors) w = std::max(w, t.max_ratio);
    return w;
  };
  for (const bool exp2 : {false, true}) {
    for (const std::size_t block : {1U, 4U}) {
      const std::string contract = exp2 ? "exp2" : "online";
      SCOPED_TRACE(contract + ", key blocks of " + std::to_string(block));
      auto dir =
          forward_case("online_" + contract + std::to_string(block),
                       attention_online::online_kernel<float>(a, d.q, d.k, d.v, block, exp2));
      dir.manifest()["contract"] = contract;
      const auto declared = dir.compare();
      EXPECT_TRUE(declared.verdict.pass()) << declared.verdict.explain();
      expect_parts(declared.contract, {"; contract " + contract + ": "});
      dir.manifest().erase("contract");
      const auto either = dir.compare();
      EXPECT_TRUE(either.verdict.pass()) << either.verdict.explain();
      std::printf(
          "attention online kernel (%s, blocks of %zu): worst |err|/bound %.3g (%s), %.3g "
          "(default)\n",
          contract.c_str(), block, worst(declared), contract.c_str(), worst(either));
      // The kernel's key block declared: fewer rescales a row, a tighter bound on every element.
      dir.manifest()["contract"] = {{"name", contract}, {"key_block", block}};
      const auto blocked = dir.compare();
      EXPECT_TRUE(blocked.verdict.pass()) << blocked.verdict.explain();
      if (block > 1) {
        expect_parts(blocked.contract, {"; key blocks of at least 4 positions (a part's first and "
                                        "last may be shorter): at most 3 rescales a row"});
        bool tighter = false;
        for (std::size_t x = 0; x < blocked.verdict.tensors.size(); ++x) {
          const double any = declared.verdict.tensors[x].max_ratio;
          EXPECT_GE(blocked.verdict.tensors[x].max_ratio, any);
          tighter = tighter || blocked.verdict.tensors[x].max_ratio > any;
        }
        EXPECT_TRUE(tighter) << "a declared key block of 4 did not tighten any tensor's bound";
        std::printf("  declared key_block 4: worst |err|/bound %.3g\n", worst(blocked));
      }
      auto bug =
          forward_case("online_no_l_rescale_" + contract + std::to_string(block),
                       attention_online::online_kernel<float>(a, d.q, d.k, d.v, block, exp2, true));
      bug.manifest()["contract"] = {{"name", contract}, {"key_block", block}};
      const auto r = bug.compare();
      EXPECT_FALSE(r.verdict.pass()) << "an online kernel that never rescales l passed";
    }
  }
}

// A bfloat16 kernel that accumulates in bfloat16 (attention_accumulate_emulation.hpp: every step
// rounded to bfloat16) as the dense op's global outputs: outside the default contract (float32
// accumulation), within the declared "accumulate": "bfloat16", whose contract line says so; a
// sum too long for a bfloat16 accumulator's a-priori bound is refused, naming the sizes.
TEST(AttentionCompare, a_bfloat16_accumulating_kernel_passes_its_declared_accumulator) {
  const auto c = core_case(DType::bfloat16, CpLayout::zigzag, MaskKind::causal);
  const auto d = core_data<bfloat16>(c);
  const auto run = attention_accumulate::accumulate_kernel<bfloat16, bfloat16>(
      c.attention(), d.q, d.k, d.v, d.dout, {0, c.k_len()});
  CaseDir dir = core_inputs("accumulate_bf16", c, d);
  const auto& a = c.attention();
  const auto as_t = [](const Shape& shape, const std::vector<float>& v) {
    Tensor<bfloat16> t(shape);
    for (std::size_t i = 0; i < v.size(); ++i) t[i] = bfloat16(v[i]);
    return t;
  };
  dir.output("out", as_t(d.q.shape(), run.out));
  dir.output("lse", Tensor<float>(Shape{c.batch, a.q_heads, c.q_len()}, run.lse));
  dir.output("dq", as_t(d.q.shape(), run.dq));
  dir.output("dk", as_t(d.k.shape(), run.dk));
  dir.output("dv", as_t(d.k.shape(), run.dv));
  const auto fallback = dir.compare();
  EXPECT_FALSE(fallback.verdict.pass()) << "a bfloat16 accumulator passed the float32 bound";
  dir.manifest()["accumulate"] = "bfloat16";
  const auto declared = dir.compare();
  EXPECT_TRUE(declared.verdict.pass()) << declared.verdict.explain();
  expect_parts(declared.contract, {"declared accumulate: inputs and outputs in bfloat16, every "
                                   "dot product and sum accumulated in bfloat16"});
  const auto worst = [](const CompareResult& r) {
    double w = 0;
    for (const auto& t : r.verdict.tensors) w = std::max(w, t.max_ratio);
    return w;
  };
  std::printf(
      "attention bfloat16 accumulation: worst |err|/bound %.3g (default), %.3g "
      "(accumulate bfloat16)\n",
      worst(fallback), worst(declared));
  dir.manifest()["sizes"]["seq_len"] = 300;
  dir.manifest()["sizes"]["q_seq_len"] = 300;
  dir.manifest()["config"]["cp"]["seq_len"] = 300;
  dir.manifest()["config"]["attention"]["mask"]["q_len"] = 300;
  dir.manifest()["config"]["attention"]["mask"]["k_len"] = 300;
  expect_parts(dir.error(),
               {"case.json: accumulate: is bfloat16 but the longest contraction has 300 terms (Lk "
                "= 300, Lq = 300, head_dim = 2) and a dot accumulated in bfloat16 has an a-priori "
                "bound only up to 255 terms"});
}

TEST(AttentionCompare, a_forward_only_case_is_judged_on_what_it_gives) {
  auto dir = dense_core_case("forward_only",
                             core_case(DType::float32, CpLayout::zigzag, MaskKind::causal));
  auto& m = dir.manifest();
  m["inputs"].erase("dout");
  for (const char* g : {"dq", "dk", "dv"}) m["outputs"].erase(g);
  const auto r = dir.compare();
  EXPECT_TRUE(r.verdict.pass()) << r.verdict.explain();
  EXPECT_EQ(r.verdict.tensors.size(), 2U);
}

TEST(AttentionCompare, a_piece_a_position_short_is_a_layout_failure_naming_the_rank) {
  const auto c = core_case(DType::float32, CpLayout::zigzag, MaskKind::causal);
  auto dir = library_core_case<float>("short_piece", c);
  const Shape want{2, positions_of(c, 1).size(), 4, 2};
  const Shape got{2, want[1] - 1, 4, 2};
  cases::write_npy((dir.dir() / "dq.rank1.npy").string(), cases::from_tensor(Tensor<float>(got)));
  const auto r = dir.compare();
  ASSERT_FALSE(r.verdict.pass());
  for (const auto& t : r.verdict.tensors) EXPECT_EQ(t.pass(), t.name != "dq") << t.summary();
  expect_parts(r.verdict.explain(),
               {"layout: rank 1's piece of dq", format_shape(got), format_shape(want)});
}

// ---------------------------------------------------------------- the layer on (cp, tp)

// attention_layer: batch 1, L = 6, h = 4, d = 2, hidden 3, causal, on (cp, tp) = (2, 2) with
// the sequence zigzag over cp, or on (1, 2) without context parallelism.
AttentionCase layer_case(DType dtype, std::size_t kv_heads, bool with_cp = true) {
  AttentionCase c;
  c.op = AttentionOp::layer;
  c.dtype = dtype;
  c.cp = 2;
  c.tp = 2;
  c.batch = 1;
  auto& a = c.layer.attention;
  a.q_heads = 4;
  a.kv_heads = kv_heads;  // 2: one kv head per tp rank; 1: shared by both (g < tp)
  a.head_dim = 2;
  a.mask.kind = MaskKind::causal;
  a.mask.q_len = a.mask.k_len = 6;
  c.layer.hidden = 3;
  ContextParallelConfig cc;
  cc.seq_len = 6;
  cc.layout = CpLayout::zigzag;
  if (with_cp) {
    c.layer.context_parallel = cc;
  } else {
    c.cp = 1;
  }
  return c;
}

// A layer's y or dx [batch, L, hidden] in the sequence's order, from the world ranks' pieces
// (layer_piece's inverse): each rank's rows are tokens [first, first + rows) of its cp piece
// flattened batch-major (without sequence parallelism tp coordinate 0's whole piece).
template <class T>
Tensor<T> global_tokens(const AttentionCase& c, const std::vector<Tensor<T>>& pieces) {
  const std::size_t n = c.layer.hidden, len = c.len();
  const bool sp = c.layer.sequence_parallel;
  Tensor<T> g({c.batch, len, n});
  for (int r = 0; r < c.world(); ++r) {
    if (!sp && tp_coord(c, r) != 0) continue;  // the tp ranks' copies are one
    const auto pos = positions_of(c, cp_coord(c, r));
    std::size_t first = 0;
    if (sp) {
      const auto counts = sp_row_counts(c, cp_coord(c, r));
      for (int k = 0; k < tp_coord(c, r); ++k) first += counts[static_cast<std::size_t>(k)];
    }
    const auto& piece = pieces[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < piece.size() / n; ++i) {
      const std::size_t token = first + i, b = token / pos.size(), t = pos[token % pos.size()];
      for (std::size_t e = 0; e < n; ++e) g[(b * len + t) * n + e] = piece[i * n + e];
    }
  }
  return g;
}

template <class T>
CaseDir library_layer_case(const std::string& name, const AttentionCase& c, bool global_y) {
  const auto& a = c.attention();
  const std::size_t hd = a.q_heads * a.head_dim, kd = a.kv_heads * a.head_dim, n = c.layer.hidden;
  AttentionData<T> d;
  d.x = quarters<T>({c.batch, c.len(), n}, 1);
  d.dy = quarters<T>({c.batch, c.len(), n}, 2);
  d.w = {quarters<T>({hd, n}, 3), quarters<T>({hd}, 4),    quarters<T>({kd, n}, 5),
         quarters<T>({kd}, 6),    quarters<T>({kd, n}, 7), quarters<T>({kd}, 8),
         quarters<T>({n, hd}, 9), quarters<T>({n}, 10)};
  const auto run = run_ranks(AttentionAdapter<LibraryAttention>{}, c, d);
  EXPECT_TRUE(run.error.empty()) << run.error;
  CaseDir dir(name, c);
  dir.input("x", d.x);
  dir.input("dy", d.dy);
  using G = AttentionLayerGrads<T>;
  for (const auto& p : layer_parameters<T>()) dir.input(p.name, d.w.*p.weight);
  std::vector<G> grads;
  for (const auto& o : run.layer) grads.push_back(o.grads);
  if (global_y) {
    const auto y = global_tokens(c, pieces_of(run.layer, &LayerRankOutputs<T>::y));
    const auto dx = global_tokens(c, pieces_of(grads, &G::dx));
    dir.output("y", y);
    dir.output("dx", dx);
  } else {
    dir.output_ranks("y", pieces_of(run.layer, &LayerRankOutputs<T>::y));
    dir.output_ranks("dx", pieces_of(grads, &G::dx));
  }
  for (const auto& p : layer_parameters<T>()) {
    dir.output_ranks(std::string("d") + p.name, pieces_of(grads, p.grad));
  }
  return dir;
}

// The case with its file `file` replaced by zeros of `shape`: judged, it fails, and the
// explanation has `parts` (a layout failure naming the rank).
void expect_layout_failure(const CaseDir& dir, const std::string& file, const Shape& shape,
                           const std::vector<std::string>& parts) {
  cases::write_npy((dir.dir() / file).string(), cases::from_tensor(Tensor<float>(shape)));
  const auto r = dir.compare();
  ASSERT_FALSE(r.verdict.pass());
  expect_parts(r.verdict.explain(), parts);
}

TEST(AttentionCompare, the_library_layer_passes_on_a_cp_tp_mesh) {
  for (std::size_t g : {2U, 1U}) {
    SCOPED_TRACE("kv_heads " + std::to_string(g));
    for (bool global_y : {false, true}) {
      const auto f32 =
          library_layer_case<float>("layer_f32", layer_case(DType::float32, g), global_y).compare();
      EXPECT_TRUE(f32.verdict.pass()) << f32.verdict.explain();
      EXPECT_EQ(f32.verdict.tensors.size(), 10U);
      EXPECT_EQ(f32.verdict.world, 4);
    }
    const auto bf16 =
        library_layer_case<bfloat16>("layer_bf16", layer_case(DType::bfloat16, g), false).compare();
    EXPECT_TRUE(bf16.verdict.pass()) << bf16.verdict.explain();
  }
  const auto no_cp =
      library_layer_case<float>("layer_no_cp", layer_case(DType::float32, 2, false), true)
          .compare();
  EXPECT_TRUE(no_cp.verdict.pass()) << no_cp.verdict.explain();
  EXPECT_EQ(no_cp.verdict.world, 2);
}

// The layer under a declared bfloat16 accumulator: the library's bfloat16 layer (float32
// accumulation, which rounds less often) passes the wider bound, the contract line names it, and
// a hidden size past a bfloat16 dot's 255 terms is refused naming the layer's sizes.
TEST(AttentionCompare, the_layer_takes_a_declared_accumulator) {
  auto dir = library_layer_case<bfloat16>("layer_acc", layer_case(DType::bfloat16, 2), false);
  const auto fallback = dir.compare();
  dir.manifest()["accumulate"] = "bfloat16";
  const auto r = dir.compare();
  EXPECT_TRUE(r.verdict.pass()) << r.verdict.explain();
  // Every bound of the layer widens (its projections and its core take the accumulator), so
  // each tensor's ratio drops where it is not 0 (an exact tensor).
  ASSERT_EQ(r.verdict.tensors.size(), fallback.verdict.tensors.size());
  std::size_t rounded = 0;
  for (std::size_t i = 0; i < r.verdict.tensors.size(); ++i) {
    if (fallback.verdict.tensors[i].max_ratio == 0) continue;
    ++rounded;
    EXPECT_LT(r.verdict.tensors[i].max_ratio, fallback.verdict.tensors[i].max_ratio)
        << r.verdict.tensors[i].summary();
  }
  EXPECT_GE(rounded, 8U);
  expect_parts(r.contract, {"declared accumulate: inputs and outputs in bfloat16, every dot "
                            "product and sum accumulated in bfloat16"});
  dir.manifest()["sizes"]["hidden"] = 256;
  dir.manifest()["config"]["hidden"] = 256;
  expect_parts(dir.error(), {"case.json: accumulate: is bfloat16 but the longest contraction has "
                             "256 terms (Lk = ",
                             ", hidden = 256, q_heads·head_dim = "});
}

// The layer under sequence parallelism: batch 3, L = 6 zigzag over cp = 2 by the chunks
// [1, 1, 2, 2] (each cp rank 3 positions, 9 tokens), x, y, dy, dx as each tp rank's rows of them
// under `token_split`.
AttentionCase sp_layer_case(DType dtype, const SplitPolicy& token_split) {
  AttentionCase c = layer_case(dtype, 2);
  c.batch = 3;
  c.layer.context_parallel->split = SplitPolicy::explicit_sizes({1, 1, 2, 2});
  c.layer.sequence_parallel = true;
  c.layer.token_split = token_split;
  c.layer.batch = c.batch;
  return c;
}

TEST(AttentionCompare, the_library_layer_passes_with_sequence_parallelism) {
  for (const auto& split : {SplitPolicy::chunk(), SplitPolicy::explicit_sizes({9, 0}),
                            SplitPolicy::explicit_sizes({2, 7})}) {
    SCOPED_TRACE(split.to_string());
    for (bool global_y : {false, true}) {
      const auto r =
          library_layer_case<float>("layer_sp", sp_layer_case(DType::float32, split), global_y)
              .compare();
      EXPECT_TRUE(r.verdict.pass()) << r.verdict.explain();
      EXPECT_EQ(r.verdict.tensors.size(), 10U);
      EXPECT_EQ(r.verdict.world, 4);
      for (const auto& t : r.verdict.tensors) {
        if (t.name == "y" || t.name == "dx") {
          EXPECT_EQ(t.placement.substr(0, 4), "S(0)") << t.name;  // the world ranks' rows
        }
      }
    }
  }
  const auto bf16 =
      library_layer_case<bfloat16>("layer_sp_bf16",
                                   sp_layer_case(DType::bfloat16, SplitPolicy::chunk()), false)
          .compare();
  EXPECT_TRUE(bf16.verdict.pass()) << bf16.verdict.explain();
}

// Token rows written in Megatron's sequence-first order ([L_j, batch] flattened, where the case
// declares batch-major rows) have every rank's shape right and fail on y and dx only; every tp
// rank writing all of its cp piece's rows (y all_reduced) is a layout failure naming the rank.
TEST(AttentionCompare, sequence_parallel_rows_in_another_order_or_all_rows_fail) {
  const auto c = sp_layer_case(DType::float32, SplitPolicy::explicit_sizes({2, 7}));
  auto dir = library_layer_case<float>("layer_sp_order", c, false);
  for (const char* name : {"y", "dx"}) {
    std::vector<Tensor<float>> pieces;
    for (int r = 0; r < c.world(); ++r) {
      const std::string file = std::string(name) + ".rank" + std::to_string(r) + ".npy";
      pieces.push_back(cases::to_tensor<float>(cases::read_npy((dir.dir() / file).string()),
                                               DType::float32, file));
    }
    const auto g = global_tokens(c, pieces);
    for (int r = 0; r < c.world(); ++r) {
      const auto pos = positions_of(c, cp_coord(c, r));
      const auto counts = sp_row_counts(c, cp_coord(c, r));
      const std::size_t first = tp_coord(c, r) == 0 ? 0 : counts[0];
      Tensor<float> rows({counts[static_cast<std::size_t>(tp_coord(c, r))], 3});
      for (std::size_t i = 0; i < rows.dim(0); ++i) {
        const std::size_t token = first + i, t = pos[token / c.batch], b = token % c.batch;
        for (std::size_t e = 0; e < 3; ++e) rows[i * 3 + e] = g[(b * c.len() + t) * 3 + e];
      }
      const std::string file = std::string(name) + ".rank" + std::to_string(r) + ".npy";
      cases::write_npy((dir.dir() / file).string(), cases::from_tensor(rows));
    }
  }
  const auto wrong = dir.compare();
  ASSERT_FALSE(wrong.verdict.pass());
  for (const auto& t : wrong.verdict.tensors) {
    EXPECT_EQ(t.pass(), t.name != "y" && t.name != "dx") << t.summary();
  }
  expect_parts(wrong.verdict.explain(), {"y: worst element", "dx: worst element"});

  expect_layout_failure(library_layer_case<float>("layer_sp_all_rows", c, false), "y.rank1.npy",
                        {9, 3}, {"layout: rank 1's piece of y", "[9, 3]", "holds [7, 3]"});
}

TEST(AttentionCompare, a_layer_gradient_on_the_wrong_rows_is_a_layout_failure) {
  const auto c = layer_case(DType::float32, 2);
  // Rank 3 (cp 1, tp 1) returns every query head's rows of dwq.
  expect_layout_failure(library_layer_case<float>("layer_rows", c, false), "dwq.rank3.npy", {8, 3},
                        {"layout: rank 3's piece of dwq", "[8, 3]", "[4, 3]"});
}

// Placements written per dimension, as a trainer's dump annotates them: y's sequence is cut
// over cp in the zigzag order and replicated over tp, dwq's rows are cut over tp.
TEST(AttentionCompare, per_dimension_placements_name_the_zigzag_sequence) {
  auto dir = library_layer_case<float>("layer_dims", layer_case(DType::float32, 2), false);
  auto& out = dir.manifest()["outputs"];
  out["y"]["placement"] = "b s(cp,zigzag) h";
  out["dx"]["placement"] = "[S(1)[explicit[2,4]], R]";  // DTensor's words still work
  out["dwq"]["placement"] = "o(tp) i";
  const auto ok = dir.compare();
  EXPECT_TRUE(ok.verdict.pass()) << ok.verdict.explain();

  out["y"]["placement"] = "b s(cp) h";  // the contiguous cut, where the layout is zigzag
  const auto contiguous = dir.compare();
  ASSERT_FALSE(contiguous.verdict.pass());
  expect_parts(contiguous.verdict.explain(),
               {"declares y placed b s(cp) h but attention_layer places it b s(cp,zigzag) h"});

  out["y"]["placement"] = "b s(tp,zigzag) h(cp)";
  const auto swapped = dir.compare();
  ASSERT_FALSE(swapped.verdict.pass());
  expect_parts(swapped.verdict.explain(), {"places it b s(cp,zigzag) h"});
}

// ---------------------------------------------------------------- bad input, by message

struct BadCase {
  std::string what;
  std::function<void(json&)> edit;
  std::vector<std::string> parts;
};

TEST(AttentionCompareBadInput, every_error_names_the_file_and_the_field) {
  auto dir =
      dense_core_case("bad_input", core_case(DType::float32, CpLayout::zigzag, MaskKind::causal));
  const json good = dir.manifest();
  cases::write_npy((dir.dir() / "k_as_q.npy").string(),
                   cases::from_tensor(Tensor<float>(Shape{2, 9, 4, 2})));
  const std::vector<BadCase> cases = {
      {"misspelt mask field",
       [](json& m) { m["config"]["attention"]["mask"]["kidn"] = "causal"; },
       {"config.attention.mask: unknown field kidn", "kind"}},
      {"misspelt cp field",
       [](json& m) { m["config"]["cp"]["layuot"] = "zigzag"; },
       {"config.cp: unknown field layuot", "layout"}},
      {"layout of the wrong type",
       [](json& m) { m["config"]["cp"]["layout"] = 2; },
       {"config.cp.layout: is an integer; give a string"}},
      {"unknown layout",
       [](json& m) { m["config"]["cp"]["layout"] = "striped"; },
       {"config.cp.layout", "contiguous", "zigzag"}},
      {"unknown mask kind",
       [](json& m) { m["config"]["attention"]["mask"]["kind"] = "sliding"; },
       {"config.attention.mask.kind", "none", "causal", "explicit_mask"}},
      {"missing size",
       [](json& m) { m["sizes"].erase("head_dim"); },
       {"sizes.head_dim: missing; context_parallel_attention needs it"}},
      {"config disagreeing with the sizes",
       [](json& m) { m["config"]["attention"]["q_heads"] = 2; },
       {"config.attention.q_heads: is 2 but sizes.q_heads is 4"}},
      {"kv heads not dividing the query heads",
       [](json& m) {
         m["config"]["attention"]["kv_heads"] = 3;
         m["sizes"]["kv_heads"] = 3;
       },
       {"config.attention.kv_heads: is 3 but q_heads is 4; the kv heads must divide"}},
      {"key_lengths of another batch",
       [](json& m) { m["config"]["attention"]["mask"]["key_lengths"] = {9}; },
       {"config.attention.mask.key_lengths: has 1 entries but batch is 2"}},
      {"explicit mask without its values",
       [](json& m) {
         m["config"]["attention"]["mask"]["kind"] = "explicit_mask";
         m["config"]["attention"]["mask"]["allowed_shape"] = {2, 9, 9};
       },
       {"config.attention.mask.allowed: missing"}},
      {"explicit mask of the wrong shape",
       [](json& m) {
         m["config"]["attention"]["mask"]["kind"] = "explicit_mask";
         m["config"]["attention"]["mask"]["allowed_shape"] = {2, 9, 9};
         m["config"]["attention"]["mask"]["allowed"] = {{{1, 0}}, {{1, 0}}};
       },
       {"config.attention.mask.allowed: is not nested arrays of shape [2, 9, 9] (at depth 1: 1 "
        "entries)"}},
      {"a split that does not tile",
       [](json& m) {
         m["config"]["cp"]["split"] = {{"kind", "explicit"}, {"sizes", {3, 3}}};
       },
       {"case.json: config:", "explicit sizes [3,3]"}},
      {"input of the wrong shape",
       [](json& m) { m["inputs"]["k"] = "k_as_q.npy"; },
       {"k_as_q.npy: shape: is [2, 9, 4, 2] but context_parallel_attention's k is [2, 9, 2, 2]"}},
      {"gradient without dout",
       [](json& m) { m["inputs"].erase("dout"); },
       {"inputs.dout: missing; the case gives dq"}},
      {"mesh of another name",
       [](json& m) {
         m["mesh"] = {{"sp", 3}};
       },
       {"mesh: is {sp=3} but context_parallel_attention at this config runs on {cp=3}"}},
      {"unknown contract",
       [](json& m) { m["contract"] = "exp10"; },
       {"case.json: contract: is \"exp10\" but context_parallel_attention knows \"exp\" (p = "
        "exp(fl(s − m)) of the scaled scores over the whole row, as lib/ops/attention), "
        "\"online\" (the online softmax (key blocks of any size, a running max m_b, p = "
        "exp(fl(s − m_b)), l and acc rescaled by exp(fl(m_old − m_new)), out = acc/l or "
        "acc·fl(1/l) at the end), as PyTorch 2's CPU flash-attention kernel) and \"exp2\" (p = "
        "exp2(q·k·scale_log2 − fl(m·scale_log2)) with scale_log2 = fl(scale·log2(e)), the "
        "argument by one fma or a rounded product, the online softmax's rescales by exp2, out = "
        "acc/l or acc·fl(1/l), the lse kept in base 2 and converted or taken as fl(m·scale) + "
        "logf(l), as FlashAttention-2/3 (PyTorch's copy included) and Triton kernels); omit the "
        "field for a bound that covers all three"}},
      {"lse form under online",
       [](json& m) {
         m["contract"] = {{"name", "online"}, {"lse", "base2"}};
       },
       {"case.json: contract.lse: is \"base2\" but contract \"online\" takes the lse in natural "
        "units, m + log(l); the lse's form is for \"exp2\": give that name, or omit the field"}},
      {"unknown lse form",
       [](json& m) {
         m["contract"] = {{"name", "exp2"}, {"lse", "log10"}};
       },
       {"case.json: contract.lse: "}},
      {"key_block 0",
       [](json& m) {
         m["contract"] = {{"name", "exp2"}, {"key_block", 0}};
       },
       {"case.json: contract.key_block: is 0; give the kernel's smallest key block (a positive "
        "number of key positions), or 1 for any block size"}},
      {"key_block with the whole-row exp",
       [](json& m) {
         m["contract"] = {{"name", "exp"}, {"key_block", 64}};
       },
       {"case.json: contract.key_block: is 64 but contract \"exp\" forms the whole row at once; "
        "a key block is for the online softmax: give \"online\" or \"exp2\", or omit the name"}},
      {"unknown contract parameter",
       [](json& m) {
         m["contract"] = {{"name", "exp2"}, {"block_n", 64}};
       },
       {"case.json: contract: unknown field block_n; the fields known here are key_block, lse, name"}},
      {"exp2 with a negative scale",
       [](json& m) {
         m["contract"] = "exp2";
         m["config"]["attention"]["scale"] = -0.5;
       },
       {"case.json: contract: is \"exp2\" but config.attention.scale is -0.500000; exp2's "
        "kernels take the raw scores' max as the scaled scores', which needs a positive scale: "
        "give \"exp\" or \"online\", or omit the field"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    dir.manifest() = good;
    c.edit(dir.manifest());
    const std::string msg = dir.error();
    expect_parts(msg, c.parts);
    expect_parts(msg, {"shardcheck_attention_compare_tests_bad_input/"});
  }
}

TEST(AttentionCompareBadInput, the_layer_names_its_mesh_and_its_bias) {
  auto dir = library_layer_case<float>("bad_layer", layer_case(DType::float32, 2), false);
  const json good = dir.manifest();
  dir.manifest()["mesh"] = {{"tp", 4}};
  expect_parts(dir.error(), {"mesh: is {tp=4} but attention_layer at this config runs on "
                             "{cp=1, tp=4}"});
  dir.manifest() = good;
  dir.manifest()["config"]["has_bias"] = false;
  expect_parts(dir.error(), {"attention_layer has no tensor bk, bo, bq, bv, dbk, dbo, dbq, dbv"});
  dir.manifest() = good;
  dir.manifest()["config"]["kv_head_split"] = {{"kind", "explicit"}, {"sizes", {2, 1}}};
  expect_parts(dir.error(), {"case.json: config:"});
  dir.manifest() = good;
  dir.manifest()["inputs"].erase("dy");
  expect_parts(dir.error(), {"inputs.dy: missing; the case gives dwq"});
}

TEST(AttentionCompareBadInput, a_sequence_parallel_layer_names_its_batch_and_token_split) {
  auto dir = library_layer_case<float>(
      "bad_sp_layer", sp_layer_case(DType::float32, SplitPolicy::explicit_sizes({2, 7})), false);
  const json good = dir.manifest();
  dir.manifest()["config"]["batch"] = 2;
  expect_parts(dir.error(), {"config.batch: is 2 but sizes.batch is 3; give the same value, 0, "
                             "or leave the field out"});
  dir.manifest() = good;
  dir.manifest()["config"]["batch"] = 0;
  EXPECT_EQ(dir.error(), "no error");
  dir.manifest() = good;
  dir.manifest()["config"]["token_split"] = {{"kind", "explicit"}, {"sizes", {2, 6}}};
  expect_parts(dir.error(), {"case.json: config:", "explicit sizes [2,6]"});
  dir.manifest() = good;
  dir.manifest()["config"]["sequence_parallel"] = "yes";
  expect_parts(dir.error(), {"config.sequence_parallel: is a string; give true or false"});
}

}  // namespace
}  // namespace shardcheck::check::attention_compare_tests
