#include "cases/case_manifest.hpp"

#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace shardcheck::cases {
namespace {

constexpr std::size_t max_world = std::size_t{1} << 20;

std::vector<std::pair<std::string, std::size_t>> named_sizes(Fields f) {
  std::vector<std::pair<std::string, std::size_t>> out;
  for (const auto& k : f.keys()) out.emplace_back(k, f.size(k));
  return out;
}

// "x.npy", or {"ranks": [...], "placement": "S(0)"} (outputs only).
TensorFiles tensor_files(const std::string& name, const nlohmann::json& v, const Fields& parent,
                         bool outputs_may_be_per_rank, int world) {
  TensorFiles t;
  t.name = name;
  if (v.is_string()) {
    t.files = {v.get<std::string>()};
    if (t.files[0].empty()) parent.fail(name, "is an empty file name; give the .npy file's path");
    return t;
  }
  if (!outputs_may_be_per_rank) {
    parent.fail(name, "must be one .npy file (a global tensor): inputs are given whole");
  }
  if (!v.is_object()) {
    parent.fail(name,
                "give an .npy file name, or {\"ranks\": [one file per rank], "
                "\"placement\": \"S(0)\"}");
  }
  Fields f(v, parent.file(), parent.where(name));
  t.per_rank = true;
  const auto& ranks = f.raw("ranks");
  if (!ranks.is_array()) f.fail("ranks", "give an array of .npy file names, one per rank");
  for (const auto& r : ranks) {
    if (!r.is_string() || r.get<std::string>().empty()) {
      f.fail("ranks", "give an array of .npy file names, one per rank");
    }
    t.files.push_back(r.get<std::string>());
  }
  if (static_cast<int>(t.files.size()) != world) {
    f.fail("ranks", "has " + std::to_string(t.files.size()) + " files but the mesh has " +
                        std::to_string(world) + " ranks; give one file per rank, in rank order");
  }
  t.placement = f.string_or("placement", "");
  if (is_per_dimension(t.placement)) {
    try {
      t.dims = parse_dim_placement(t.placement);
    } catch (const std::invalid_argument& e) {
      f.fail("placement", "\"" + t.placement + "\" " + e.what() +
                              "; write one token per dimension, as \"b s(cp,zigzag) h(tp) d\", or "
                              "DTensor's words, as \"S(0)\" (docs/case-format.md)");
    }
  }
  f.done();
  return t;
}

std::vector<TensorFiles> tensor_list(Fields f, bool per_rank_allowed, int world) {
  std::vector<TensorFiles> out;
  for (const auto& k : f.keys()) {
    out.push_back(tensor_files(k, f.raw(k), f, per_rank_allowed, world));
  }
  return out;
}

}  // namespace

DType parse_float_dtype(const std::string& name, const std::string& where) {
  const auto t = enum_from_name<DType>(name);
  if (t && is_floating(*t)) return *t;
  throw CaseError(where + ": is \"" + name +
                  "\"; give one of float64, float32, bfloat16, float16 (PyTorch's names)");
}

std::size_t CaseManifest::size(const std::string& name) const {
  for (const auto& [k, v] : sizes) {
    if (k == name) return v;
  }
  std::string have;
  for (const auto& s : sizes) have += (have.empty() ? "" : ", ") + s.first;
  throw CaseError(file + ": sizes." + name + ": missing; " + op +
                  " needs it (given: " + (have.empty() ? std::string("none") : have) + ")");
}

int CaseManifest::world() const {
  int w = 1;
  for (const auto& m : mesh) w *= static_cast<int>(m.second);
  return w;
}

const TensorFiles* CaseManifest::input(const std::string& name) const {
  for (const auto& t : inputs) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const TensorFiles* CaseManifest::output(const std::string& name) const {
  for (const auto& t : outputs) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string CaseManifest::path(const std::string& f) const {
  return (std::filesystem::path(dir) / f).string();
}

CaseManifest parse_case_manifest(const std::string& json, const std::string& file,
                                 const std::string& dir) {
  Fields top(parse_json_text(json, file), file, "");
  CaseManifest m;
  m.dir = dir;
  m.file = file;
  const long long version = top.integer("shardcheck_case");
  if (version != case_format_version) {
    top.fail("shardcheck_case", "is " + std::to_string(version) +
                                    " but this shardcheck reads "
                                    "version " +
                                    std::to_string(case_format_version) +
                                    "; write the case with a matching python/shardcheck_case.py");
  }
  m.op = top.string("op");
  if (m.op.empty()) top.fail("op", "is empty; give the op's name as `shardcheck list` prints it");
  m.config = top.object("config");
  m.sizes = named_sizes(top.object("sizes"));
  m.mesh = top.has("mesh") ? named_sizes(top.object("mesh")) : decltype(m.mesh){};
  // DeviceMesh's limit (2^20 ranks, layout/device_mesh.cpp), which also keeps world() an int.
  std::size_t world = 1;
  for (const auto& [name, n] : m.mesh) {
    if (n == 0) top.fail("mesh." + name, "is 0; a mesh dimension has at least one rank");
    if (n > max_world || world * n > max_world) {
      top.fail("mesh." + name, "makes the mesh over " + std::to_string(max_world) +
                                   " ranks; a case runs on at most that many");
    }
    world *= n;
  }
  m.dtype = parse_float_dtype(top.string("dtype"), file + ": dtype");
  if (top.has("accumulate")) {
    m.accumulate = parse_float_dtype(top.string("accumulate"), file + ": accumulate");
  }
  if (top.has("contract")) {
    const nlohmann::json& c = top.raw("contract");
    if (c.is_object()) {
      Fields o(c, file, "contract");
      m.contract = o.string_or("name", "");
      m.contract_options = std::move(o);
    } else if (c.is_string()) {
      m.contract = c.get<std::string>();
    } else {
      top.fail("contract",
               "is neither a string nor an object; give the contract's name, or an "
               "object of its name and parameters ({\"name\": \"exp2\", "
               "\"key_block\": 128}; docs/case-format.md)");
    }
  }
  m.inputs = tensor_list(top.object("inputs"), false, m.world());
  m.outputs = tensor_list(top.object("outputs"), true, m.world());
  if (m.outputs.empty()) top.fail("outputs", "is empty; give at least one output to compare");
  if (top.has("baseline")) {
    m.baseline = tensor_list(top.object("baseline"), true, m.world());
    for (const auto& b : m.baseline) {
      if (m.output(b.name) == nullptr) {
        top.fail("baseline." + b.name,
                 "is not among the outputs; a baseline tensor is compared "
                 "with the implementation's tensor of the same name");
      }
    }
    m.baseline_implementation = top.string_or("baseline_implementation", "");
  }
  m.implementation = top.string_or("implementation", "");
  top.done();
  return m;
}

CaseManifest read_case_manifest(const std::string& path) {
  const ManifestText t = read_manifest_text(
      path, "case.json",
      "give a case directory holding case.json, or the manifest itself (docs/case-format.md)");
  return parse_case_manifest(t.text, t.file, t.dir);
}

}  // namespace shardcheck::cases
