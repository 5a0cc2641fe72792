#include "budget/parameter_memory.hpp"

#include "layout/split_policy.hpp"
#include "runtime/errors.hpp"

namespace shardcheck::budget {
namespace {

int size_of_dim(const DeviceMesh& mesh, const std::string& name) {
  for (const auto& d : mesh.dims()) {
    if (d.name == name) return d.size;
  }
  return 1;
}

int coord_of(const DeviceMesh& mesh, const std::vector<int>& coords, const std::string& name) {
  for (std::size_t i = 0; i < mesh.ndim(); ++i) {
    if (mesh.dim(i).name == name) return coords[i];
  }
  return 0;
}

}  // namespace

ParameterAccount account_parameters(const std::vector<ParameterTensor>& params,
                                    const DeviceMesh& mesh, std::uint64_t element_bytes) {
  const int tp = size_of_dim(mesh, "tp");
  const int pp = size_of_dim(mesh, "pp");
  const int replicated = size_of_dim(mesh, "dp") * size_of_dim(mesh, "cp");
  ParameterAccount a;
  a.bytes_per_rank.assign(static_cast<std::size_t>(mesh.world_size()), 0);
  for (const auto& p : params) {
    if (p.pp_stage < 0 || p.pp_stage >= pp) {
      throw UsageError("parameter " + p.name + " is on pipeline stage " +
                       std::to_string(p.pp_stage) + " but mesh " + mesh.to_string() + " has " +
                       std::to_string(pp) + " stage(s); pass a stage in [0, " + std::to_string(pp) +
                       ") or add a pp dimension of that size");
    }
    a.model_bytes += p.elements * element_bytes;
    a.replicas.push_back(p.tp_sharded ? replicated : replicated * tp);
    const auto pieces = split_sizes(SplitPolicy::balanced(), p.elements, tp);
    for (int r = 0; r < mesh.world_size(); ++r) {
      const auto c = mesh.coordinates(r);
      if (coord_of(mesh, c, "pp") != p.pp_stage) continue;
      const std::uint64_t n =
          p.tp_sharded ? pieces[static_cast<std::size_t>(coord_of(mesh, c, "tp"))] : p.elements;
      a.bytes_per_rank[static_cast<std::size_t>(r)] += n * element_bytes;
    }
  }
  return a;
}

std::vector<ParameterTensor> gpt_parameters(std::uint64_t layers, std::uint64_t h,
                                            std::uint64_t vocab, int pp) {
  std::vector<ParameterTensor> out;
  out.push_back({"embedding.word", vocab * h, true, 0});
  const std::uint64_t per_stage =
      (layers + static_cast<std::uint64_t>(pp) - 1) / static_cast<std::uint64_t>(pp);
  for (std::uint64_t l = 0; l < layers; ++l) {
    const int stage = static_cast<int>(l / per_stage);
    const std::string p = "layers." + std::to_string(l) + ".";
    out.push_back({p + "attn.qkv.weight", 3 * h * h, true, stage});
    out.push_back({p + "attn.qkv.bias", 3 * h, true, stage});
    out.push_back({p + "attn.proj.weight", h * h, true, stage});
    out.push_back({p + "attn.proj.bias", h, false, stage});
    out.push_back({p + "mlp.fc1.weight", 4 * h * h, true, stage});
    out.push_back({p + "mlp.fc1.bias", 4 * h, true, stage});
    out.push_back({p + "mlp.fc2.weight", 4 * h * h, true, stage});
    out.push_back({p + "mlp.fc2.bias", h, false, stage});
    out.push_back({p + "ln1.weight", h, false, stage});
    out.push_back({p + "ln1.bias", h, false, stage});
    out.push_back({p + "ln2.weight", h, false, stage});
    out.push_back({p + "ln2.bias", h, false, stage});
  }
  return out;
}

}  // namespace shardcheck::budget
