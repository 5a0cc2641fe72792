// Reading one case's tensors (docs/case-format.md) into the types a family's steps take
// (engine/rank_family.hpp): the inputs as the family's global Data<T>, the outputs as the pieces
// each rank would have returned, so the family's own check_outputs materializes and judges them
// exactly as it judges a run of its suite.
//
//   inputs    global tensors; each .npy's shape must be the spec's global shape
//   outputs   a global .npy (cut into the ranks' pieces by the spec's placement, so
//             materializing it gives it back unchanged; a Partial output is all on rank 0),
//             or one .npy per rank: each piece's shape must be the spec's local shape of that
//             rank, and a declared placement (DTensor's words, or per dimension as
//             "b s(cp,zigzag) h d") must be the spec's. A piece that breaks either is a
//             layout failure of that tensor, naming the rank (the verdict reports it: the
//             implementation is wrong, the case is not malformed).
// An output the manifest does not give is not judged (supplied() says which are); an input or
// output the op does not have is an error (done()).
#pragma once

#include "cases/case_manifest.hpp"
#include "cases/npy.hpp"
#include "engine/slicing.hpp"
#include "layout/placement.hpp"
#include "ops/op_spec.hpp"
#include "tensor/tensor.hpp"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace shardcheck::check {

class CaseReader {
 public:
  // `spec` is the op's spec at the manifest's config, sizes and mesh.
  CaseReader(const cases::CaseManifest& manifest, const spec::OpSpec& spec)
      : m_(manifest), s_(spec) {}

  // Reads input `name` into `t` (its elements: T, the manifest's dtype for the op's T tensors).
  // Returns false when the manifest does not give it and it is not `required`.
  // @throws cases::CaseError naming the file: absent though required, an .npy of another
  // element type, a shape other than the spec's.
  template <Element T>
  bool input(const std::string& name, Tensor<T>& t, bool required = true) {
    asked_.insert(name);
    const cases::TensorFiles* f = m_.input(name);
    if (f == nullptr) {
      if (required) {
        throw cases::CaseError(m_.file + ": inputs." + name + ": missing; " + s_.op +
                               " needs it (shape " + format_shape(s_.tensor(name).shape) + ")");
      }
      return false;
    }
    const std::string path = m_.path(f->files.at(0));
    t = cases::to_tensor<T>(cases::read_npy(path), dtype_of<T>, path);
    if (t.shape() != s_.tensor(name).shape) {
      throw cases::CaseError(path + ": shape: is " + format_shape(t.shape()) + " but " + s_.op +
                             "'s " + name + " is " + format_shape(s_.tensor(name).shape) +
                             " at the manifest's sizes; fix the file or the sizes");
    }
    return true;
  }

  // Reads output `name` into outputs[r].*member for each rank r (outputs is grown to the world
  // size). A global file is cut into rank r's piece by cut(global, r): by default the spec's
  // placement over its first mesh dimension (a family whose pieces follow positions, as
  // attention's zigzag layout, or a mesh of several dimensions passes its own). Returns whether
  // the manifest gives it.
  template <Element T, class Outputs>
  bool output(const std::string& name, std::vector<Outputs>& outputs, Tensor<T> Outputs::*member) {
    const spec::TensorSpec& ts = s_.tensor(name);
    const int world = s_.world();
    return output(name, outputs, member, [&ts, world](const Tensor<T>& g, int r) {
      return piece_of(g, ts.placement(), world, r);
    });
  }
  template <Element T, class Outputs, class Cut>
  bool output(const std::string& name, std::vector<Outputs>& outputs, Tensor<T> Outputs::*member,
              Cut&& cut) {
    asked_.insert(name);
    if (outputs.size() < static_cast<std::size_t>(s_.world())) {
      outputs.resize(static_cast<std::size_t>(s_.world()));
    }
    const cases::TensorFiles* f = m_.output(name);
    if (f == nullptr) return false;
    supplied_.insert(name);
    const spec::TensorSpec& ts = s_.tensor(name);
    const int world = s_.world();
    if (!f->per_rank) {
      const std::string path = m_.path(f->files.at(0));
      Tensor<T> g = cases::to_tensor<T>(cases::read_npy(path), dtype_of<T>, path);
      if (g.shape() != ts.shape) {
        throw cases::CaseError(path + ": shape: is " + format_shape(g.shape()) + " but " + s_.op +
                               "'s " + name + " is " + format_shape(ts.shape) +
                               " at the manifest's sizes; fix the file or the sizes");
      }
      for (int r = 0; r < world; ++r) {
        outputs[static_cast<std::size_t>(r)].*member = cut(g, r);
      }
      return true;
    }
    if (std::string why = placement_problem(*f, ts); !why.empty()) {
      problems_[name] = std::move(why);
    }
    for (int r = 0; r < world; ++r) {
      const std::string path = m_.path(f->files.at(static_cast<std::size_t>(r)));
      Tensor<T> p = cases::to_tensor<T>(cases::read_npy(path), dtype_of<T>, path);
      const auto want = ts.local_shape(s_.mesh, r);
      if (p.shape() != want && !problems_.contains(name)) {
        problems_[name] = layout_problem(name, r, path, p.shape(), want, placement_text(ts));
      }
      outputs[static_cast<std::size_t>(r)].*member = std::move(p);
    }
    return true;
  }

  // Whether the manifest gives output `name` (read or not).
  bool has_output(const std::string& name) const { return m_.output(name) != nullptr; }
  // @throws cases::CaseError: `output` is given, but judging it needs `input`, which is not.
  [[noreturn]] void require_input_for(const std::string& input, const std::string& output) const {
    throw cases::CaseError(m_.file + ": inputs." + input + ": missing; the case gives " + output +
                           ", which is judged against the reference's gradient for " + input +
                           "; give " + input + " or drop " + output);
  }

  // The outputs the manifest gives (the others are not judged).
  bool supplied(const std::string& name) const { return supplied_.count(name) != 0; }
  // Layout problems found while reading, by tensor name.
  const std::map<std::string, std::string>& problems() const { return problems_; }
  // @throws cases::CaseError naming the tensors the manifest gives that the op does not have.
  void done() const;

 private:
  // "layout: rank 1's piece of dw (dw.1.npy) is [7, 1] but ... holds [7, 2]; check ...".
  std::string layout_problem(const std::string& name, int r, const std::string& path,
                             const Shape& got, const Shape& want,
                             const std::string& placement) const {
    const std::string rank = std::to_string(r);
    return "layout: rank " + rank + "'s piece of " + name + " (" + path + ") is " +
           format_shape(got) + " but " + s_.op + " places " + name + " " + placement +
           ", so rank " + rank + " holds " + format_shape(want) +
           "; check the shard offsets and sizes of the split";
  }
  // Empty when the placement a per-rank output declares (none, DTensor's words, or per
  // dimension: cases/dim_placement.hpp) is the spec's, else the layout problem saying both
  // (case_placement.cpp). Over a mesh of several axes the DTensor form lists one placement per
  // axis: "[S(1), R]". Per dimension, the kinds, the sharded dimension of each axis and the
  // zigzag layout must be the spec's; the split policy is the config's (each piece's shape is
  // checked against it).
  // @throws cases::CaseError naming the file and the field: a per-dimension placement with
  // another number of dimensions than the tensor, or an axis the op's mesh does not have.
  std::string placement_problem(const cases::TensorFiles& f, const spec::TensorSpec& ts) const;
  // The placements over the mesh as the spec prints them: "S(0)", or "[S(1), R]" over two
  // dimensions.
  static std::string placement_text(const spec::TensorSpec& ts) {
    if (ts.placements.size() == 1) return ts.placements[0].to_string();
    std::string t;
    for (const auto& p : ts.placements) t += (t.empty() ? "" : ", ") + p.to_string();
    return "[" + t + "]";
  }
  template <class T>
  static Tensor<T> piece_of(const Tensor<T>& g, const Placement& p, int world, int r) {
    if (!p.is_partial()) return place(g, p, world, r);
    return r == 0 ? g : Tensor<T>(g.shape());  // partial terms: the whole on rank 0, zeros
  }

  const cases::CaseManifest& m_;
  const spec::OpSpec& s_;
  std::set<std::string> asked_, supplied_;
  std::map<std::string, std::string> problems_;
};

}  // namespace shardcheck::check
