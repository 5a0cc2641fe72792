#include "suites/mlp/mlp_case.hpp"

#include "engine/instantiate.hpp"
#include "generators/layout_gen.hpp"
#include "generators/structure.hpp"

namespace shardcheck::check {
namespace {

// Case sizes: the high-precision reference stays cheap. float16 keeps the unit profile's worst
// case finite: with |v| < 2, H, F ≤ 8 and tokens ≤ 6, |h| ≤ 34, swiglu's |a| ≤ 1.3e3 and
// |y|, |dx| ≤ 3.9e4 < 65504.
constexpr std::size_t max_tokens = 9, max_hidden = 12, max_ffn = 16;
constexpr std::size_t max_tokens_f16 = 6, max_hidden_f16 = 8, max_ffn_f16 = 8;

// Largest exponent of generated values such that no correct computation of a case overflows
// (docs/mlp.md, "Values"): |y|, |dx| < 2^(5e + 19) with the case sizes.
// Values below 2^(e+1): |h| < 2^(2e+6), swiglu's |a| < 2^(4e+13), |y|, |dx| < 2^(5e+19) must
// stay below T's largest finite value (float16 keeps the unit profile's < 2: see above).
constexpr gen::MaxExp mlp_max_exp{.float16 = -1, .bfloat16 = 20, .float32 = 20, .float64 = 190};

}  // namespace

std::string MlpCase::describe() const {
  std::string s = std::string(name(cfg.activation)) + " tokens=" + std::to_string(tokens) +
                  " hidden=" + std::to_string(hidden) + " ffn=" + std::to_string(ffn()) +
                  " P=" + std::to_string(world) + " ffn_split=" + cfg.ffn_split.to_string();
  if (cfg.sequence_parallel) {
    s += " sequence_parallel token_split=" + cfg.token_split.to_string();
  }
  s += std::string(" reduce=") + std::string(name(cfg.reduce_algorithm));
  s += " kernel=" + std::string(name(cfg.kernel));
  s += has_bias ? " bias" : " no_bias";
  if (accumulate) s += " accumulate=" + std::string(name(*accumulate));
  s += " profile=" + gen::to_string(profile);
  return s;
}

rc::Gen<MlpCase> gen_case(const RunConfig& config, const MlpCaseOptions& options) {
  return rc::gen::exec([config, options] {
    MlpCase c;
    c.dtype = *gen::genFloatDType(config.dtypes);
    const bool f16 = c.dtype == DType::float16;
    c.world = options.world ? *options.world : *gen::genWorld(config.max_world);
    c.tokens = *gen::genDim(f16 ? max_tokens_f16 : max_tokens);
    c.hidden = *gen::genDim(f16 ? max_hidden_f16 : max_hidden);
    c.cfg.ffn_features = *gen::genDim(f16 ? max_ffn_f16 : max_ffn);
    c.cfg.activation =
        options.activation
            ? *options.activation
            : *gen::structureOf({Activation::gelu, Activation::gelu_tanh, Activation::swiglu});
    c.has_bias = *gen::weightedStructure<bool>({{3, true}, {1, false}});
    c.profile = *gen::genProfile();
    c.cfg.ffn_split = *gen::genSplit(c.ffn(), c.world);
    c.cfg.tokens = c.tokens;
    c.cfg.sequence_parallel = options.sequence_parallel
                                  ? *options.sequence_parallel
                                  : *gen::weightedStructure<bool>({{1, false}, {1, true}});
    c.cfg.token_split = *gen::genSplit(c.tokens, c.world);
    c.cfg.reduce_algorithm = *gen::structureOf({Algorithm::ring, Algorithm::sequential});
    c.cfg.kernel = *gen::structureOf({Kernel::deterministic, Kernel::fast});
    RC_CLASSIFY(gen::has_empty_piece(c.cfg.ffn_split, c.ffn(), c.world), "empty ffn shard");
    RC_TAG(gen::policy_kind(c.cfg.ffn_split));
    return c;
  });
}

template <class T>
rc::Gen<MlpData<T>> gen_data(const MlpCase& c) {
  return rc::gen::exec([c] {
    const int e = mlp_max_exp.of<T>();
    const std::size_t kf = up_rows_per_feature(c.cfg.activation) * c.ffn();
    MlpData<T> d;
    d.x = *gen::genTensor<T>({c.tokens, c.hidden}, c.profile, e);
    d.w_up = *gen::genTensor<T>({kf, c.hidden}, c.profile, e);
    d.w_down = *gen::genTensor<T>({c.hidden, c.ffn()}, c.profile, e);
    if (c.has_bias) {
      d.b_up = *gen::genTensor<T>({kf}, c.profile, e);
      d.b_down = *gen::genTensor<T>({c.hidden}, c.profile, e);
    }
    d.dy = *gen::genTensor<T>({c.tokens, c.hidden}, c.profile, e);
    return d;
  });
}

SHARDCHECK_INSTANTIATE_GEN_DATA(MlpCase, MlpData)

}  // namespace shardcheck::check
