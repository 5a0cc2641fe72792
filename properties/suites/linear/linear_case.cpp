#include "suites/linear/linear_case.hpp"

#include "engine/instantiate.hpp"
#include "generators/layout_gen.hpp"
#include "generators/structure.hpp"

namespace shardcheck::check {
namespace {

// Case sizes: small enough for the high-precision reference to stay cheap, large enough for
// uneven splits, primes, empty shards and cancellation.
constexpr std::size_t max_tokens = 13, max_features = 24;

// Largest exponent of generated values for T such that no correct computation of a case this
// size overflows: |dot| <= k * 2^(2e) must stay below T's max with room for the bias.
// k <= 24 terms (< 2^5) of products < 2^(2e), plus a bias < 2^e: |y| < 2^(2e+6) must stay
// below T's largest finite value (2^16 for float16, 2^128 for float32/bfloat16).
constexpr gen::MaxExp linear_max_exp{.float16 = 4, .bfloat16 = 40, .float32 = 40, .float64 = 200};

}  // namespace

std::string LinearCase::describe() const {
  std::string s = "tokens=" + std::to_string(tokens) + " in=" + std::to_string(in) +
                  " out=" + std::to_string(out) + " P=" + std::to_string(world);
  if (layer == LinearLayer::column_parallel) {
    s += " out_split=" + column.out_split.to_string();
    if (column.gather_output) s += " gather_output";
    if (column.sequence_parallel_input) {
      s += " sequence_parallel_input token_split=" + column.token_split.to_string();
    }
    s += std::string(" all_reduce=") + std::string(name(column.all_reduce_algorithm));
    s += " kernel=" + std::string(name(column.kernel));
  } else {
    s += " in_split=" + row.in_split.to_string();
    if (!row.input_is_parallel) s += " input_split_locally";
    if (row.sequence_parallel_output) {
      s += " sequence_parallel_output token_split=" + row.token_split.to_string();
    }
    s += std::string(" reduce=") + std::string(name(row.reduce_algorithm));
    s += " kernel=" + std::string(name(row.kernel));
  }
  s += has_bias ? " bias" : " no_bias";
  if (accumulate) s += " accumulate=" + std::string(name(*accumulate));
  s += " profile=" + gen::to_string(profile);
  return s;
}

rc::Gen<LinearCase> gen_case(const RunConfig& config, const LinearCaseOptions& options) {
  return rc::gen::exec([config, options] {
    LinearCase c;
    c.layer = options.layer
                  ? *options.layer
                  : *gen::structureOf({LinearLayer::column_parallel, LinearLayer::row_parallel});
    c.dtype = *gen::genFloatDType(config.dtypes);
    c.world = options.world ? *options.world : *gen::genWorld(config.max_world);
    c.tokens = *gen::genDim(max_tokens);
    c.in = *gen::genDim(max_features);
    c.out = *gen::genDim(max_features);
    c.has_bias = *gen::weightedStructure<bool>({{3, true}, {1, false}});
    c.profile = options.profile ? *options.profile : *gen::genProfile();
    const Kernel kernel =
        options.kernel ? *options.kernel : *gen::structureOf({Kernel::deterministic, Kernel::fast});
    const Algorithm algo = *gen::structureOf({Algorithm::ring, Algorithm::sequential});
    const bool sp = *gen::weightedStructure<bool>({{2, false}, {1, true}});
    if (c.layer == LinearLayer::column_parallel) {
      c.column.out_features = c.out;
      c.column.tokens = c.tokens;
      c.column.out_split = *gen::genSplit(c.out, c.world);
      c.column.gather_output = *gen::chance(50);
      c.column.sequence_parallel_input = sp;
      c.column.token_split = *gen::genSplit(c.tokens, c.world);
      c.column.all_reduce_algorithm = algo;
      c.column.kernel = kernel;
    } else {
      c.row.in_split = *gen::genSplit(c.in, c.world);
      c.row.input_is_parallel = *gen::weightedStructure<bool>({{3, true}, {1, false}});
      c.row.sequence_parallel_output = sp;
      c.row.token_split = *gen::genSplit(c.tokens, c.world);
      c.row.reduce_algorithm = algo;
      c.row.kernel = kernel;
    }
    RC_CLASSIFY(gen::has_empty_piece(c.feature_split(), c.feature_dim(), c.world),
                "empty feature shard");
    RC_TAG(gen::policy_kind(c.feature_split()));
    return c;
  });
}

template <class T>
rc::Gen<LinearData<T>> gen_data(const LinearCase& c) {
  return rc::gen::exec([c] {
    const int e = linear_max_exp.of<T>();
    LinearData<T> d;
    d.x = *gen::genTensor<T>({c.tokens, c.in}, c.profile, e);
    d.w = *gen::genTensor<T>({c.out, c.in}, c.profile, e);
    if (c.has_bias) d.b = *gen::genTensor<T>({c.out}, c.profile, e);
    d.dy = *gen::genTensor<T>({c.tokens, c.out}, c.profile, e);
    return d;
  });
}

SHARDCHECK_INSTANTIATE_GEN_DATA(LinearCase, LinearData)

}  // namespace shardcheck::check
