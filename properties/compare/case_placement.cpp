// CaseReader::placement_problem: a per-rank output's declared placement against the op's spec
// (case_reader.hpp), in DTensor's words or per dimension (cases/dim_placement.hpp).
#include "compare/case_reader.hpp"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace shardcheck::check {
namespace {

// Whether the spec's pieces along the dimension `axis` shards follow the zigzag layout.
bool zigzag_axis(const spec::TensorSpec& ts, const std::string& axis) {
  return axis == "cp" && std::string_view(ts.layout).starts_with("zigzag");
}

// The spec's placement written per dimension with the case's own dimension names (so the
// message shows the two side by side): each sharded axis on its dimension, zigzag where the
// spec's layout is; a partial axis where the case wrote it (else on the first dimension).
cases::DimPlacement spec_in_case_words(const cases::DimPlacement& declared,
                                       const spec::TensorSpec& ts,
                                       const std::vector<spec::Size>& mesh) {
  cases::DimPlacement out;
  for (const auto& d : declared.dims) out.dims.push_back({d.name, {}, false, false});
  for (std::size_t a = 0; a < mesh.size(); ++a) {
    const Placement& p = ts.placements.at(a);
    const std::string& axis = mesh[a].first;
    if (p.is_shard() && p.dim() < out.dims.size()) {
      auto& d = out.dims[p.dim()];
      d.axes.push_back(axis);
      d.zigzag = d.zigzag || zigzag_axis(ts, axis);
    } else if (p.is_partial()) {
      const int k = declared.dim_of(axis);
      auto& d = out.dims[k < 0 ? 0 : static_cast<std::size_t>(k)];
      d.axes.push_back(axis);
      d.partial = true;
    }
  }
  return out;
}

// Whether `declared` says over every axis what the spec's placements say: the kind, the
// sharded dimension, and zigzag exactly on the dimension cp shards when the spec's layout is
// zigzag (the layout is context parallelism's: lib/ops/attention/attention_spec.cpp).
bool same_placement(const cases::DimPlacement& declared, const spec::TensorSpec& ts,
                    const std::vector<spec::Size>& mesh) {
  for (std::size_t a = 0; a < mesh.size(); ++a) {
    const Placement& p = ts.placements.at(a);
    const std::string& axis = mesh[a].first;
    const int k = declared.dim_of(axis);
    const cases::DimPlacement::Dim* d =
        k < 0 ? nullptr : &declared.dims[static_cast<std::size_t>(k)];
    switch (p.kind()) {
      case Placement::Kind::shard:
        if (d == nullptr || k != static_cast<int>(p.dim()) || d->partial) return false;
        if (d->zigzag != zigzag_axis(ts, axis)) return false;
        break;
      case Placement::Kind::replicate:
        if (d != nullptr) return false;
        break;
      case Placement::Kind::partial:
        if (d == nullptr || !d->partial) return false;
        break;
    }
  }
  return true;
}

}  // namespace

std::string CaseReader::placement_problem(const cases::TensorFiles& f,
                                          const spec::TensorSpec& ts) const {
  if (f.placement.empty()) return "";
  std::string declared = f.placement;
  std::string spec_words = placement_text(ts);
  if (f.dims) {
    const auto& dims = *f.dims;
    const std::string field = m_.file + ": outputs." + f.name + ".placement: \"" + f.placement;
    if (dims.dims.size() != ts.shape.size()) {
      throw cases::CaseError(field + "\" has " + std::to_string(dims.dims.size()) +
                             " dimensions but " + s_.op + "'s " + f.name + " is " +
                             format_shape(ts.shape) + " (" + std::to_string(ts.shape.size()) +
                             "); write one token per dimension");
    }
    std::string axes;
    for (const auto& [axis, size] : s_.mesh) axes += (axes.empty() ? "" : ", ") + axis;
    for (const auto& d : dims.dims) {
      for (const auto& axis : d.axes) {
        const bool known = std::any_of(s_.mesh.begin(), s_.mesh.end(),
                                       [&](const spec::Size& m) { return m.first == axis; });
        if (known) continue;
        std::string why = field;
        why += "\" names the mesh axis " + axis + " but " + s_.op + "'s mesh has ";
        why += axes.empty() ? "no axis" : axes;
        why += " (the manifest's mesh); name those";
        throw cases::CaseError(why);
      }
    }
    if (same_placement(dims, ts, s_.mesh)) return "";
    declared = dims.to_string();
    spec_words = spec_in_case_words(dims, ts, s_.mesh).to_string() + " (" + spec_words + ")";
  } else if (f.placement == spec_words) {
    return "";
  }
  return "the case declares " + f.name + " placed " + declared + " but " + s_.op + " places it " +
         spec_words + " at this config (shardcheck list --json); the pieces were not compared";
}

}  // namespace shardcheck::check
