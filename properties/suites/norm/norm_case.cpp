#include "suites/norm/norm_case.hpp"

#include "engine/instantiate.hpp"
#include "generators/layout_gen.hpp"
#include "generators/structure.hpp"

#include <cstdio>

namespace shardcheck::check {
namespace {

// Sizes: the reference propagates an error bound through every step, so keep it modest.
constexpr std::size_t max_tokens = 24, max_hidden = 32, max_block_tokens = 10, max_block_hidden = 8,
                      max_ffn = 8;

// Largest exponent of generated values for T such that no correct computation overflows
// (docs/norm.md, "Value ranges").
// The norm: |xhat| ≤ sqrt(hidden) < 2^3 and rstd ≤ eps^(-1/2) < 2^10, so |y| < 2^(e+4),
// |dx| < 2^10·(hidden + 2)·2^(2e) < 2^(2e+16) and the parameter gradients < 2^(e+8).
// x² in A: < 2^(2e). float16 (A = float32, T = float16 with max 2^16): e = 0 keeps dx finite
// in all but the most extreme draws (an overflow to inf at the final rounding is accepted by
// the check when the exact value reaches the threshold).
constexpr gen::MaxExp norm_max_exp{.float16 = 0, .bfloat16 = 40, .float32 = 40, .float64 = 200};
// The block multiplies by two [ffn, hidden] products (< 2^8 each): float16 uses e = -2 there.
constexpr gen::MaxExp block_max_exp{.float16 = -2, .bfloat16 = 40, .float32 = 40, .float64 = 200};

}  // namespace

std::string NormCase::describe() const {
  char eps[32];
  std::snprintf(eps, sizeof eps, "%g", norm().norm.eps);
  std::string s = to_string(op) + " " + to_string(kind()) + " tokens=" + std::to_string(tokens()) +
                  " hidden=" + std::to_string(hidden) + " P=" + std::to_string(world) +
                  " token_split=" + norm().token_split.to_string() + " eps=" + eps +
                  " reduce=" + std::string(name(norm().reduce_algorithm));
  if (op == NormOp::block) {
    s += " ffn=" + std::to_string(block.ffn) + " ffn_split=" + block.ffn_split.to_string();
    s += " kernel=" + std::string(name(block.kernel));
  }
  return s + " profile=" + gen::to_string(profile);
}

rc::Gen<NormCase> gen_case(const RunConfig& config, const NormCaseOptions& options) {
  return rc::gen::exec([config, options] {
    NormCase c;
    c.op = options.op ? *options.op
                      : *gen::weightedStructure<NormOp>({{2, NormOp::norm}, {1, NormOp::block}});
    c.dtype = *gen::genFloatDType(config.dtypes);
    if (options.world) {
      c.world = *options.world;
    } else if (options.min_world && config.max_world >= *options.min_world) {
      c.world = *gen::structure<int>(*options.min_world, config.max_world);
    } else {
      c.world = *gen::genWorld(config.max_world);
    }
    const bool block = c.op == NormOp::block;
    auto& n = c.block.norm;
    n.norm.kind =
        *gen::structureOf({NormKind::layer_norm, NormKind::layer_norm_no_bias, NormKind::rms_norm});
    n.norm.eps = *gen::structureOf({1e-5, 1e-6, 0.0625});
    n.tokens = *gen::genDim(block ? max_block_tokens : max_tokens);
    c.hidden = *gen::genDim(block ? max_block_hidden : max_hidden);
    n.token_split = *gen::genSplit(n.tokens, c.world);
    n.reduce_algorithm = *gen::structureOf({Algorithm::ring, Algorithm::sequential});
    if (block) {
      c.block.ffn = *gen::genDim(max_ffn);
      c.block.ffn_split = *gen::genSplit(c.block.ffn, c.world);
      c.block.kernel = *gen::structureOf({Kernel::deterministic, Kernel::fast});
    }
    c.profile = *gen::genProfile();
    RC_CLASSIFY(gen::has_empty_piece(n.token_split, n.tokens, c.world), "empty token shard");
    RC_TAG(gen::policy_kind(n.token_split));
    return c;
  });
}

template <class T>
rc::Gen<NormData<T>> gen_data(const NormCase& c) {
  return rc::gen::exec([c] {
    const int e = (c.op == NormOp::block ? block_max_exp : norm_max_exp).of<T>();
    const std::size_t h = c.hidden, tokens = c.tokens();
    NormData<T> d;
    d.x = *gen::genTensor<T>({tokens, h}, c.profile, e);
    // gamma and beta: parameters, unit-like (the profile's extremes are exercised through x and
    // dy; a wide gamma adds nothing the bound does not already scale with).
    d.gamma = *gen::genTensor<T>({h}, gen::Profile::unit, std::min(e, 0));
    if (has_beta(c.kind())) d.beta = *gen::genTensor<T>({h}, gen::Profile::unit, std::min(e, 0));
    d.dy = *gen::genTensor<T>({tokens, h}, c.profile, e);
    if (c.op == NormOp::block) {
      d.w1 = *gen::genTensor<T>({c.block.ffn, h}, gen::Profile::unit, std::min(e, 0));
      d.w2 = *gen::genTensor<T>({h, c.block.ffn}, gen::Profile::unit, std::min(e, 0));
    }
    return d;
  });
}

SHARDCHECK_INSTANTIATE_GEN_DATA(NormCase, NormData)

}  // namespace shardcheck::check
