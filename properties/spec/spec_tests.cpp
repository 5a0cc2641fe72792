// The op specs (lib/ops/op_spec.hpp and every family's <family>_spec.cpp): the JSON they print,
// local shapes over one- and two-dimensional meshes, the errors they raise, and the invariants
// every family's example specs must keep (one call list per rank, counts that tile the
// buffers, local shapes that tile the global ones). That the calls are what the ops really do
// is checked elsewhere, byte for byte: properties/budget/ (every rank's ledger against the
// spec's calls) and each suite's declared_traffic property.
#include "engine/slicing.hpp"
#include "ops/attention/attention_spec.hpp"
#include "ops/op_spec.hpp"
#include "runtime/errors.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <sstream>

namespace shardcheck {
namespace {

using spec::CallSpec;
using spec::Elem;
using spec::Pass;
using spec::Role;
using ::testing::HasSubstr;

TEST(OpSpec, JsonStringsAreQuotedAndEscaped) {
  EXPECT_EQ(spec::json_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(spec::json_string(std::string("x\ny\x01", 4)), "\"x\\ny\\u0001\"");
  EXPECT_EQ(spec::json_string("S(0)[explicit[2,0,3]]"), "\"S(0)[explicit[2,0,3]]\"");
}

TEST(OpSpec, JsonNumbersAreTheShortestThatReadBack) {
  EXPECT_EQ(spec::json_number(0.1), "0.1");
  EXPECT_EQ(spec::json_number(1e-5), "1e-05");
  EXPECT_EQ(spec::json_number(0.1 + 0.2), "0.30000000000000004");  // 17 digits to read back
  EXPECT_EQ(spec::json_number(3), "3");
  EXPECT_EQ(spec::json_number(std::nan("")), "null");
  EXPECT_EQ(spec::json_numbers({0.5, 2}), "[0.5, 2]");
  EXPECT_EQ(spec::JsonObject().field("a", true).field("b", std::size_t{7}).str(),
            "{\"a\": true, \"b\": 7}");
}

TEST(OpSpec, LocalShapesFollowEveryMeshDimension) {
  // [batch 2, L 7, hidden 6] on (cp 2, tp 3): S(1) by {3, 4} over cp, S(2) chunk over tp.
  const auto t =
      spec::tensor("x", Role::input, {2, 7, 6},
                   {Placement::shard(1, SplitPolicy::explicit_sizes({3, 4})), Placement::shard(2)});
  const std::vector<spec::Size> mesh{{"cp", 2}, {"tp", 3}};
  EXPECT_EQ(t.local_shape(mesh, 0), (std::vector<std::size_t>{2, 3, 2}));  // cp 0, tp 0
  EXPECT_EQ(t.local_shape(mesh, 2), (std::vector<std::size_t>{2, 3, 2}));  // cp 0, tp 2
  EXPECT_EQ(t.local_shape(mesh, 4), (std::vector<std::size_t>{2, 4, 2}));  // cp 1, tp 1
  const auto r =
      spec::tensor("b", Role::parameter, {6}, {Placement::replicate(), Placement::replicate()});
  EXPECT_EQ(r.local_shape(mesh, 5), (std::vector<std::size_t>{6}));
}

TEST(OpSpec, CallsCountAndMoveWhatTheRuntimeRecords) {
  const auto ag = spec::all_gather_spec(Pass::forward, "x", "tp", Elem::value, {3, 0, 4}, 1);
  EXPECT_EQ(ag.elements(), 7U);
  EXPECT_EQ(ag.group_size, 3);
  // Rank 1 sends every piece but c_2 (3·4 B of 7·4) and receives every piece but its own (7·4).
  EXPECT_EQ(ag.bytes(4), (wire::WireBytes{12, 28}));
  const auto ar =
      spec::all_reduce_spec(Pass::backward, "dx", "tp", Elem::acc, 10, 2, 3, Algorithm::ring);
  EXPECT_EQ(ar.group_rank, 1);  // taken mod p
  EXPECT_EQ(ar.elements(), 10U);
  const auto rs = spec::ring_shift_spec(Pass::forward, "k,v", "cp", Elem::value, 6, 8, 3, 0);
  EXPECT_EQ(rs.elements(), 6U);  // the ledger counts what this rank sends
  EXPECT_EQ(rs.bytes(2), (wire::WireBytes{12, 16}));
  EXPECT_THAT(ag.to_string(), HasSubstr("all_gather over tp of x (T), counts [3, 0, 4]"));
}

TEST(OpSpec, UsageErrorsNameTheOpAndWhatToPass) {
  spec::OpSpec s;
  s.op = "column_parallel_linear";
  s.tensors = {spec::tensor("x", Role::input, {2}, {Placement::replicate()}),
               spec::tensor("w", Role::parameter, {2}, {Placement::replicate()})};
  try {
    (void)s.tensor("bias");
    FAIL() << "no throw";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("column_parallel_linear has no tensor 'bias'"));
    EXPECT_THAT(e.what(), HasSubstr("its tensors are x, w"));
  }
  CallSpec bad;
  bad.op = Collective::broadcast;
  try {
    (void)bad.bytes(4);
    FAIL() << "no throw";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("broadcast is not a collective an op spec makes"));
  }
  try {
    (void)check::place(Tensor<float>({2}), Placement::partial(), 2, 0);
    FAIL() << "no throw";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("an input placed P(sum) has no one piece per rank"));
  }
}

// What every spec must keep, whatever its op.
void expect_consistent(const spec::OpSpec& s) {
  SCOPED_TRACE(s.op);
  EXPECT_FALSE(s.family.empty());
  EXPECT_EQ(s.calls.size(), static_cast<std::size_t>(s.world()));
  std::set<std::string> names;
  for (const auto& t : s.tensors) {
    SCOPED_TRACE(t.name);
    EXPECT_TRUE(names.insert(t.name).second) << "tensor named twice";
    EXPECT_EQ(t.placements.size(), std::max<std::size_t>(s.mesh.size(), 1));
    for (int r = 0; r < s.world(); ++r) EXPECT_EQ(t.local_shape(s.mesh, r).size(), t.shape.size());
    // On a one-dimensional mesh a shard's pieces tile its dimension.
    if (s.mesh.size() == 1 && t.placement().is_shard() && t.local_shapes.empty()) {
      std::size_t total = 0;
      for (int r = 0; r < s.world(); ++r) total += t.local_shape(s.mesh, r)[t.placement().dim()];
      EXPECT_EQ(total, t.shape[t.placement().dim()]);
    }
  }
  for (const auto& k : s.kept) EXPECT_FALSE(k.empty());
  for (const auto& rank : s.calls) {
    bool backward = false;
    for (const auto& c : rank) {
      SCOPED_TRACE(c.to_string());
      EXPECT_GE(c.group_rank, 0);
      EXPECT_LT(c.group_rank, c.group_size);
      if (c.op == Collective::all_gather || c.op == Collective::reduce_scatter) {
        EXPECT_EQ(c.counts.size(), static_cast<std::size_t>(c.group_size));
      }
      EXPECT_FALSE(backward && c.pass == Pass::forward) << "a forward call after the backward's";
      backward = backward || c.pass == Pass::backward;
      (void)c.bytes(4);  // every call has the runtime's bytes
    }
  }
  // Buffers: one entry per rank (none for an op whose buffers are its parts'), no empty moment,
  // each buffer named and serving a collective over one of the spec's groups.
  if (!s.buffers.empty()) {
    EXPECT_EQ(s.buffers.size(), static_cast<std::size_t>(s.world()));
  }
  for (const auto& rank : s.buffers) {
    for (const auto* pass : {&rank.forward, &rank.backward}) {
      for (const auto& moment : *pass) {
        EXPECT_FALSE(moment.empty()) << "an empty moment";
        for (const auto& b : moment) {
          SCOPED_TRACE(b.name);
          EXPECT_FALSE(b.name.empty());
          EXPECT_NE(b.op, Collective::broadcast);
          EXPECT_TRUE(b.group == "kv_group" ||
                      std::any_of(s.mesh.begin(), s.mesh.end(),
                                  [&](const spec::Size& m) { return m.first == b.group; }))
              << "buffer over group " << b.group;
        }
      }
    }
  }
}

TEST(OpSpec, ChainedBuffersAreTaggedByPartInRunOrder) {
  spec::OpSpec first, second;
  first.buffers = {{{{{"x gathered", Elem::value, 6, "tp", Collective::all_gather}}},
                    {{{"dx full", Elem::value, 6, "tp", Collective::reduce_scatter}}}}};
  second.buffers = {{{{{"y partial", Elem::value, 4, "tp", Collective::reduce_scatter}}},
                     {{{"dy gathered", Elem::acc, 4, "tp", Collective::all_gather}}}}};
  const auto c = spec::chain_buffers(first, "fc1", second, "fc2", 0);
  ASSERT_EQ(c.forward.size(), 2U);
  ASSERT_EQ(c.backward.size(), 2U);
  EXPECT_EQ(c.forward[0][0].name, "fc1: x gathered");
  EXPECT_EQ(c.forward[1][0].name, "fc2: y partial");
  EXPECT_EQ(c.backward[0][0].name, "fc2: dy gathered");  // the backward runs fc2 first
  EXPECT_EQ(c.backward[0][0].elem, Elem::acc);
  EXPECT_EQ(c.backward[1][0].name, "fc1: dx full");
  std::vector<spec::Moment> to;
  spec::add_moment(to, {});
  EXPECT_TRUE(to.empty()) << "an empty moment is not added";
  spec::OpSpec s = spec::op_spec("op", "family", "{}", {}, {{"tp", 1}}, {"x"});
  s.calls = {{}};
  s.buffers = {second.buffers[0]};
  EXPECT_THAT(spec::to_json(s),
              HasSubstr("\"buffers\": {\"forward\": [[{\"name\": \"y partial\", \"elem\": "
                        "\"T\", \"elements\": 4, \"group\": \"tp\", \"collective\": "
                        "\"reduce_scatter\"}]], \"backward\": [[{\"name\": \"dy gathered\""));
}

// The whole model's layer (its gradients summed over dp × cp by the model's finalize) is the
// layer's spec less exactly the cp all_reduces (the parameter pack and dbo) and their buffers.
TEST(OpSpec, ALayerWhoseCallerSumsOverCpLosesExactlyTheCpAllReduces) {
  HeadParallelConfig layer;
  layer.attention.q_heads = 4;
  layer.attention.kv_heads = 2;
  layer.attention.head_dim = 2;
  layer.attention.mask.q_len = layer.attention.mask.k_len = 7;
  layer.hidden = 6;
  layer.has_bias = true;
  layer.context_parallel = ContextParallelConfig{};
  layer.context_parallel->seq_len = 7;
  const auto full = attention_layer_spec(layer, 1, 2, 4);
  const auto left = attention_layer_spec_grads_left_to_caller(layer, 1, 2, 4);
  expect_consistent(left);
  const auto over_cp = [](const auto& x) {
    return x.group == "cp" && x.op == Collective::all_reduce;
  };
  ASSERT_EQ(left.calls.size(), full.calls.size());
  for (std::size_t r = 0; r < full.calls.size(); ++r) {
    auto kept = full.calls[r];
    std::erase_if(kept, over_cp);
    EXPECT_EQ(full.calls[r].size() - kept.size(), 2U) << "rank " << r << ": the pack and dbo";
    ASSERT_EQ(left.calls[r].size(), kept.size()) << "rank " << r;
    for (std::size_t i = 0; i < kept.size(); ++i) {
      EXPECT_EQ(left.calls[r][i].tensor, kept[i].tensor) << "rank " << r << " call " << i;
    }
    EXPECT_EQ(left.buffers[r].forward.size(), full.buffers[r].forward.size());
    std::size_t cp_buffers = 0;
    for (const auto& m : full.buffers[r].backward)
      cp_buffers += std::count_if(m.begin(), m.end(), over_cp);
    EXPECT_GT(cp_buffers, 0U) << "rank " << r << ": the full layer declares its cp pack";
    for (const auto& m : left.buffers[r].backward) {
      EXPECT_FALSE(m.empty());
      EXPECT_EQ(std::count_if(m.begin(), m.end(), over_cp), 0) << "rank " << r;
    }
  }
}

TEST(OpSpec, EveryFamilysExampleSpecsAreConsistentAndPrintable) {
  const auto all = spec::example_specs();
  std::set<std::string> families, ops;
  for (const auto& s : all) {
    expect_consistent(s);
    families.insert(s.family);
    EXPECT_TRUE(ops.insert(s.op).second) << s.op << " listed twice";
    const auto json = spec::to_json(s);
    EXPECT_THAT(json, HasSubstr("\"op\": \"" + s.op + "\""));
    EXPECT_EQ(std::count(json.begin(), json.end(), '{'), std::count(json.begin(), json.end(), '}'));
  }
  // Every family of SHARDCHECK_FAMILIES (the top-level CMakeLists.txt) has example specs.
  std::set<std::string> listed;
  std::stringstream list(SHARDCHECK_FAMILY_LIST);
  for (std::string f; std::getline(list, f, ',');) listed.insert(f);
  EXPECT_EQ(families, listed);
}

}  // namespace
}  // namespace shardcheck
