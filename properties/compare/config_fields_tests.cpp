// The config enums' names (runtime/enum_names.hpp) read back by the case parsers: every name the
// spec prints parses to its enumerator through named_or (config_fields.hpp), an absent field takes
// the fallback, and a name of no enumerator is a CaseError that lists every name. The configs'
// field tables (ops/field_table.hpp): what to_json writes, read_fields reads back.
#include "budget/activation_memory.hpp"
#include "compare/config_fields.hpp"
#include "ops/attention/attention_spec.hpp"
#include "ops/linear/linear_spec.hpp"
#include "ops/mlp/mlp_spec.hpp"
#include "ops/norm/norm_spec.hpp"
#include "ops/op_spec.hpp"
#include "ops/vocab/vocab_spec.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace shardcheck::check {
namespace {

cases::Fields config_with(const nlohmann::json& value) {
  return {nlohmann::json{{"field", value}}, "case.json", "config"};
}

template <class E>
void round_trips(const std::string& listed) {
  SCOPED_TRACE(listed);
  std::set<std::string_view> seen;
  for (const E e : enum_values<E>()) {
    EXPECT_TRUE(seen.insert(name(e)).second) << "duplicate name " << name(e);
    EXPECT_EQ(enum_from_name<E>(name(e)), e);
    cases::Fields f = config_with(std::string(name(e)));
    const E other = static_cast<E>((static_cast<std::size_t>(e) + 1) % enum_count<E>);
    EXPECT_EQ(named_or(f, "field", other), e);
  }
  EXPECT_EQ(names_or<E>(), listed);
  EXPECT_EQ(name(static_cast<E>(enum_count<E>)), "?");
  EXPECT_EQ(enum_from_name<E>("no such name"), std::nullopt);
}

TEST(config_enum_names, every_name_parses_back_to_its_enumerator) {
  round_trips<DType>("float64, float32, bfloat16, float16, int32 or int64");
  round_trips<Algorithm>("none, ring, sequential, chain or direct");
  round_trips<Collective>(
      "barrier, broadcast, reduce, all_reduce, all_gather, reduce_scatter, all_to_all, gather, "
      "scatter, send, recv or ring_shift");
  round_trips<ReduceOp>("sum, avg, max, min or product");
  round_trips<Kernel>("deterministic or fast");
  round_trips<Activation>("gelu, gelu_tanh or swiglu");
  round_trips<NormKind>("layer_norm, layer_norm_no_bias or rms_norm");
  round_trips<LossReduction>("none, sum or mean");
  round_trips<MaskKind>("none, causal or explicit_mask");
  round_trips<CausalAlignment>("bottom_right or top_left");
  round_trips<CpLayout>("contiguous or zigzag");
  round_trips<CpAlgorithm>("ring or all_gather");
  round_trips<budget::Recompute>("none, selective or full");
  round_trips<spec::Pass>("forward or backward");
  round_trips<spec::Role>("input, parameter, output, grad_input, grad_output or saved");
  round_trips<spec::Elem>("T, acc_t<T> or int64");
}

TEST(config_enum_names, an_absent_field_takes_the_fallback) {
  cases::Fields f(nlohmann::json::object(), "case.json", "config");
  EXPECT_EQ(named_or(f, "kind", NormKind::rms_norm), NormKind::rms_norm);
}

TEST(config_enum_names, an_unknown_name_is_an_error_listing_every_name) {
  cases::Fields f = config_with("ring_allreduce");
  try {
    named_or(f, "field", CpAlgorithm::ring);
    FAIL() << "no CaseError";
  } catch (const cases::CaseError& e) {
    EXPECT_STREQ(e.what(),
                 "case.json: config.field: is \"ring_allreduce\"; give one of ring, all_gather");
  }
}

TEST(config_enum_names, a_name_of_the_wrong_type_is_an_error) {
  cases::Fields f = config_with(2);
  EXPECT_THROW(named_or(f, "field", Kernel::fast), cases::CaseError);
}

// What SHARDCHECK_ENUM_NAMES's compile-time check reads: an enumerator, or a value of none.
static_assert(shardcheck::detail::is_enumerator<MaskKind::explicit_mask>());
static_assert(!shardcheck::detail::is_enumerator<static_cast<MaskKind>(3)>());
static_assert(!shardcheck::detail::enumerators_are<MaskKind>(std::make_index_sequence<2>()));
static_assert(!shardcheck::detail::enumerators_are<MaskKind>(std::make_index_sequence<4>()));

// cfg written by to_json and read back by read_fields into a default config: the same JSON, and
// no field of it left unread.
template <class C>
void reads_back(const C& cfg) {
  const std::string json = to_json(cfg);
  SCOPED_TRACE(json);
  cases::Fields f(nlohmann::json::parse(json), "case.json", "config");
  C read{};
  read_fields(f, read);
  EXPECT_NO_THROW(f.done());
  EXPECT_EQ(to_json(read), json);
}

TEST(config_field_tables, what_to_json_writes_read_fields_reads_back) {
  ColumnParallelConfig column{.out_features = 6, .tokens = 5, .gather_output = true};
  column.out_split = SplitPolicy::explicit_sizes({4, 0, 2});
  column.kernel = Kernel::fast;
  reads_back(column);
  RowParallelConfig row{.input_is_parallel = false, .sequence_parallel_output = true};
  row.token_split = SplitPolicy::balanced();
  row.reduce_algorithm = Algorithm::sequential;
  reads_back(row);
  MlpConfig mlp{.activation = Activation::swiglu, .ffn_features = 8, .tokens = 3};
  mlp.sequence_parallel = true;
  reads_back(mlp);
  SequenceParallelNormConfig norm{.norm = {NormKind::rms_norm, 0.25}, .tokens = 7};
  reads_back(norm);
  VocabEmbeddingConfig embedding{.vocab = 12, .real_vocab = 10, .padding_idx = 3};
  reads_back(embedding);
  VocabCrossEntropyConfig ce;
  ce.vocab = 9;
  ce.ignore_index = std::nullopt;
  ce.label_smoothing = 0.125;
  ce.reduction = LossReduction::sum;
  ce.class_weight = {0.5, 2};
  reads_back(ce);
  ContextParallelConfig cp{.seq_len = 9, .layout = CpLayout::zigzag, .q_seq_len = 3};
  cp.algorithm = CpAlgorithm::all_gather;
  reads_back(cp);
}

}  // namespace
}  // namespace shardcheck::check
