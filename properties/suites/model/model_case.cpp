#include "suites/model/model_case.hpp"

#include "engine/instantiate.hpp"
#include "generators/layout_gen.hpp"
#include "generators/structure.hpp"
#include "generators/values.hpp"
#include "ops/mlp/mlp.hpp"
#include "ops/norm/norm.hpp"

#include <algorithm>
#include <cmath>

namespace shardcheck::check {
namespace {

// Case sizes: the reference and its bound run every op of the step in high precision, so the
// model stays tiny; the mesh is what the suite is about.
constexpr std::size_t max_layers = 3, max_hidden = 6, max_head_dim = 3, max_ffn = 6, max_vocab = 9,
                      max_sequences = 4, max_seq_len = 5;

// A split policy a rank can apply to a count it only learns at run time (a micro-batch's
// tokens, a dp rank's sequences): chunk or balanced.
rc::Gen<SplitPolicy> genCountFreeSplit() {
  return gen::structureOf({SplitPolicy::chunk(), SplitPolicy::balanced()});
}

// (h/g, g), drawn so that the heads can be assigned to the tp ranks
// (head_parallel_attention.hpp): g ≥ tp (each rank its kv heads, uneven under kv_head_split), or,
// one case in three when tp > 1, a kv head shared by the tp ranks of its group: g a divisor of tp
// below it and h/g a multiple of tp/g.
std::pair<std::size_t, std::size_t> gen_heads(int tp) {
  const auto p = static_cast<std::size_t>(tp);
  if (p > 1 && *gen::chance(33)) {
    std::vector<std::size_t> below;
    for (std::size_t g = 1; g < p; ++g) {
      if (p % g == 0) below.push_back(g);
    }
    const std::size_t g = *gen::structureOf(below);
    return {(p / g) * *gen::structure<std::size_t>(1, 2), g};
  }
  return {*gen::structure<std::size_t>(1, 3), p + *gen::structure<std::size_t>(0, 2)};
}

}  // namespace

std::string ModelCase::describe() const {
  const auto& c = cfg;
  std::string s = "layers=" + std::to_string(c.layers) + " H=" + std::to_string(c.hidden) +
                  " heads=" + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) +
                  " d=" + std::to_string(c.head_dim) + " ffn=" + std::to_string(c.ffn) +
                  " V=" + std::to_string(c.vocab) + " " + to_string(c.norm.kind) + " " +
                  std::string(name(c.activation)) + (c.linear_bias ? " bias" : " no_bias") +
                  (c.tied_embedding ? " tied" : "") + " B=" + std::to_string(sequences) +
                  " L=" + std::to_string(seq_len) + " mesh " + model_mesh(par).to_string() + " " +
                  to_string(par);
  s += " lr=" + std::to_string(opt.learning_rate);
  s += opt.max_grad_norm > 0 ? " max_grad_norm=" + std::to_string(opt.max_grad_norm)
                             : std::string(" no_clipping");
  return s;
}

rc::Gen<ModelCase> gen_case(const RunConfig& config, const ModelCaseOptions& options) {
  return rc::gen::exec([config, options] {
    ModelCase c;
    c.dtype = *gen::genFloatDType(config.dtypes);
    // The mesh: the world size uniform in [1, max_world] (every size from the first cases on,
    // shrinking toward 1), then three of the axes each a divisor of what is left (shrinking
    // toward 1) and the fourth the rest.
    const int max_world = std::max(1, config.max_world);
    const int lo =
        std::min(max_world, std::max(options.min_world.value_or(1), options.min_pp.value_or(1)));
    c.world = *gen::structure<int>(lo, max_world);
    int room = c.world;
    auto axis = [&](int at_least) {
      // Each divisor of what is left, the ones above 1 twice as likely as 1 (every axis and the
      // seams on it come early; still shrinking toward the smallest).
      std::vector<std::pair<std::size_t, int>> divisors;
      for (int k = 1; k <= room; ++k) {
        if (room % k == 0 && k >= std::min(at_least, room)) {
          divisors.emplace_back(k == 1 ? 1 : 2, k);
        }
      }
      const int v = *gen::weightedStructure(divisors);
      room /= v;
      return v;
    };
    // The axes in a drawn order (the last one takes what is left), pp first when pinned.
    std::vector<int*> axes = {&c.par.pp, &c.par.tp, &c.par.cp, &c.par.dp};
    if (!options.min_pp) {
      const int rotate = *gen::structure<int>(0, 3);
      std::rotate(axes.begin(), axes.begin() + rotate, axes.end());
      if (*gen::chance(50)) std::swap(axes[1], axes[2]);
    }
    for (std::size_t i = 0; i + 1 < axes.size(); ++i) {
      *axes[i] = axis(axes[i] == &c.par.pp ? options.min_pp.value_or(1) : 1);
    }
    *axes.back() = room;
    // The model.
    auto& m = c.cfg;
    m.layers = *gen::structure<std::size_t>(0, max_layers);
    m.hidden = *gen::genDim(max_hidden);
    m.head_dim = *gen::structure<std::size_t>(1, max_head_dim);
    m.ffn = *gen::genDim(max_ffn);
    m.vocab = *gen::genDim(max_vocab);
    const auto [group, g] = gen_heads(c.par.tp);
    m.kv_heads = g;
    m.heads = group * g;
    m.norm.kind =
        *gen::structureOf({NormKind::layer_norm, NormKind::rms_norm, NormKind::layer_norm_no_bias});
    m.norm.eps = std::ldexp(1.0, -*gen::structure<int>(8, 16));  // exact in every acc_t<T>
    m.activation = *gen::structureOf({Activation::gelu, Activation::swiglu, Activation::gelu_tanh});
    m.linear_bias = *gen::chance(50);
    m.tied_embedding = options.tied ? *options.tied : *gen::chance(50);
    m.ignore_index = -100;
    // The batch and its partition.
    c.sequences = *gen::structure<std::size_t>(1, max_sequences);
    c.seq_len = *gen::structure<std::size_t>(1, max_seq_len);
    auto& p = c.par;
    p.layer_split = *gen::genSplit(m.layers, p.pp);
    p.batch_split = *gen::genSplit(c.sequences, p.dp);
    p.micro_batches = *gen::structure<int>(1, 3);
    p.micro_batch_split = *genCountFreeSplit();
    p.cp_layout = *gen::structureOf({CpLayout::contiguous, CpLayout::zigzag});
    p.seq_split = *gen::genSplit(c.seq_len, p.cp_layout == CpLayout::zigzag ? 2 * p.cp : p.cp);
    p.cp_algorithm = *gen::structureOf({CpAlgorithm::ring, CpAlgorithm::all_gather});
    p.sequence_parallel = *gen::chance(50);
    p.token_split = *genCountFreeSplit();
    p.kv_head_split = m.kv_heads >= static_cast<std::size_t>(p.tp)
                          ? *gen::genSplit(m.kv_heads, p.tp)
                          : SplitPolicy::chunk();
    p.ffn_split = *gen::genSplit(m.ffn, p.tp);
    p.vocab_split = *gen::genSplit(m.vocab, p.tp);
    p.reduce_algorithm = *gen::structureOf({Algorithm::ring, Algorithm::sequential});
    // The optimizer: SGD with learning rate 1 or 1/2, clipping off or at a norm of 2^e (the
    // norm of these models' gradients is O(1), so both sides of the clip occur).
    c.opt.learning_rate = *gen::structureOf({1.0, 0.5});
    const bool clip = options.clipping ? *options.clipping : *gen::chance(50);
    c.opt.max_grad_norm = clip ? std::ldexp(1.0, *gen::structure<int>(-6, 1)) : 0.0;
    c.opt.clip_eps = std::ldexp(1.0, -20);
    RC_TAG(model_mesh(p).to_string());
    RC_CLASSIFY(p.sequence_parallel, "sequence parallel");
    RC_CLASSIFY(m.tied_embedding, "tied embedding");
    return c;
  });
}

namespace {

// Unit-profile values scaled by 2^-s, s = ceil(log2(sqrt(fan_in))) (about an initialization's
// std): the activations stay O(1) through the layers, so the bound stays finite and tight. Exact
// in every T: the scale is a power of two and |v| ≥ 2^-8·2^-3 stays above float16's normals.
template <class T>
Tensor<T> weights(Shape shape, std::size_t fan_in, int extra = 0) {
  Tensor<T> t = *gen::genTensor<T>(std::move(shape), gen::Profile::unit, 0);
  const int s = static_cast<int>(std::ceil(
                    0.5 * std::log2(static_cast<double>(std::max<std::size_t>(fan_in, 1))))) +
                extra;
  for (auto& v : t.values()) v = static_cast<T>(std::ldexp(static_cast<double>(v), -s));
  return t;
}

}  // namespace

template <class T>
rc::Gen<ModelData<T>> gen_data(const ModelCase& c) {
  return rc::gen::exec([c] {
    const auto& m = c.cfg;
    ModelData<T> d;
    // Every parameter of the model's list (model_param_shapes): matrices scaled by their fan-in
    // (the embedding's rows are looked up, not summed: fan-in 1), the norms' gammas unit
    // values, the betas and biases 2^-2 of that.
    d.params = ModelParams<T>();
    d.params.layers.resize(m.layers);
    ModelParams<double> shapes = model_param_shapes(m);
    for_each_param(
        d.params, shapes, [](const std::string& n, Tensor<T>& t, const Tensor<double>& s) {
          if (s.ndim() == 0) return;
          const bool matrix = s.ndim() == 2, gamma = n.find("gamma") != std::string::npos;
          const std::size_t fan_in = matrix && n != "embedding" ? s.dim(1) : 1;
          t = weights<T>(s.shape(), fan_in, matrix || gamma ? 0 : 2);
        });
    // The batch, aimed at the seams: ids and targets anywhere in the vocabulary, or (one in
    // three) at the first or last id of a tp rank's vocabulary piece (the shard edges a
    // vocab-parallel loss gets wrong); a target is ignored one time in five; one case in eight
    // every target of one dp rank's sequences, and one in eight every target at one cp rank's
    // positions, is ignored (a loss denominator of 0 on that rank; the global mean still counts
    // the others).
    auto& b = d.batch;
    b.sequences = c.sequences;
    b.seq_len = c.seq_len;
    const std::size_t n = c.sequences * c.seq_len;
    const int V = static_cast<int>(m.vocab);
    std::vector<int> edges;
    for (const Piece& piece : split(c.par.vocab_split, m.vocab, c.par.tp)) {
      if (piece.size == 0) continue;
      edges.push_back(static_cast<int>(piece.offset));
      edges.push_back(static_cast<int>(piece.offset + piece.size - 1));
    }
    auto id = [&] {
      if (*gen::chance(33)) return edges[*gen::structure<std::size_t>(0, edges.size() - 1)];
      return *gen::structure<int>(0, V - 1);
    };
    for (std::size_t t = 0; t < n; ++t) {
      b.ids.push_back(id());
      b.targets.push_back(*gen::chance(20) ? -100 : id());
    }
    if (*gen::chance(12)) {
      const int dp = *gen::structure<int>(0, c.par.dp - 1);
      const Piece seqs = dp_sequences(c.par, c.sequences, dp);
      for (std::size_t s = seqs.offset; s < seqs.offset + seqs.size; ++s) {
        for (std::size_t t = 0; t < c.seq_len; ++t) b.targets[s * c.seq_len + t] = -100;
      }
    }
    if (*gen::chance(12)) {
      const int cp = *gen::structure<int>(0, c.par.cp - 1);
      for (const std::size_t t : model_cp_positions(c.par, c.seq_len, cp)) {
        for (std::size_t s = 0; s < c.sequences; ++s) b.targets[s * c.seq_len + t] = -100;
      }
    }
    return d;
  });
}

SHARDCHECK_INSTANTIATE_GEN_DATA(ModelCase, ModelData)

}  // namespace shardcheck::check
