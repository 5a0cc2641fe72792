// An op's spec: the one declaration of what a partitioned op of lib/ops takes, gives and moves,
// for one configuration, one set of global sizes and one group of ranks. Everything else that
// needs these facts reads them from here:
//   - the suites (properties/suites/<family>/): the placements by which they cut the inputs and
//     materialize the outputs, and the collectives their traffic property expects in every
//     rank's ledger (element type and count);
//   - the budget model (lib/budget/traffic.hpp): each call's exact bytes per rank
//     (runtime/wire_bytes.hpp), so `shardcheck budget` and the budget suite use the same list;
//   - `shardcheck list --json`: every op's spec as data a program reads (an external
//     implementation's case file names the op, its config and its tensors this way).
//
// A spec is written per op in lib/ops/<family>/<family>_spec.{hpp,cpp}, beside the op, as a
// function of the op's own configuration type (no parallel types):
//
//   OpSpec <op>_spec(const <Op>Config& cfg, <sizes>, int p);
//
// Tensors are global: `shape` is the dense tensor's, `placement` how the group's ranks hold it
// (DTensor's words, layout/placement.hpp: S(d)[split] a piece along d, R the whole tensor on
// every rank, P(sum) full-shape partial sums). Collectives are listed per rank, in the order the
// op makes them, forward then backward; an element type is named by its role (the op's T, or
// its accumulator acc_t<T>, runtime/dtype.hpp) so one spec serves the four dtypes.
#pragma once

#include "layout/placement.hpp"
#include "ops/field_table.hpp"
#include "runtime/dtype.hpp"
#include "runtime/enum_names.hpp"
#include "runtime/ledger.hpp"
#include "runtime/wire_bytes.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace shardcheck::spec {

enum class Pass : std::uint8_t { forward, backward };

// What a tensor is to the op: an input or output of the forward (x, y), a parameter (w, b), a
// tensor of the backward (dy in; dx, dw, db out), or one the forward makes for the backward
// (saved: a norm's output z, attention's lse).
enum class Role : std::uint8_t { input, parameter, output, grad_input, grad_output, saved };

// An element type by role: the op's T, its accumulator acc_t<T>, or an index (int64: ids,
// targets).
enum class Elem : std::uint8_t { value, acc, index };

}  // namespace shardcheck::spec

namespace shardcheck {
SHARDCHECK_ENUM_NAMES(spec::Pass, "forward", "backward");
SHARDCHECK_ENUM_NAMES(spec::Role, "input", "parameter", "output", "grad_input", "grad_output",
                      "saved");
SHARDCHECK_ENUM_NAMES(spec::Elem, "T", "acc_t<T>", "int64");
}  // namespace shardcheck

namespace shardcheck::spec {

using shardcheck::name;  // spec::name(role), as before the tables

// The DType an Elem is for an op run in `t` (acc: acc_dtype(t); index: int64).
DType dtype_of(Elem e, DType t);

// A size the op's spec is a function of, or a mesh dimension: {"tokens", 7}, {"tp", 3}.
using Size = std::pair<std::string, std::size_t>;

struct TensorSpec {
  std::string name;  // "x", "dw_gate"
  Role role = Role::input;
  Elem elem = Elem::value;            // T, acc_t<T> or int64
  std::vector<std::size_t> shape;     // global
  std::vector<Placement> placements;  // one per mesh dimension, in the mesh's order
  std::string layout;                 // how pieces map to positions when a split policy
                                      // does not say it all ("zigzag: ..."), else empty
  // Each rank's local shape when no placement states it (a kv head shared by several tp
  // ranks); empty: from the placements.
  std::vector<std::vector<std::size_t>> local_shapes;
  // The placement over the first (often the only) mesh dimension.
  const Placement& placement() const { return placements.at(0); }
  // Rank r's local shape (r row-major over `mesh`): local_shapes[r] when given, else for each
  // S(d) its split policy's piece of shape[d] at the rank's coordinate (R and P keep it).
  std::vector<std::size_t> local_shape(const std::vector<Size>& mesh, int r) const;
  std::uint64_t local_elements(const std::vector<Size>& mesh, int r) const;
};

// A tensor of T placed by `placements` (no explicit local shapes); `of` another element type.
TensorSpec tensor(std::string name, Role role, std::vector<std::size_t> shape,
                  std::vector<Placement> placements, std::string layout = "");
TensorSpec tensor_of(Elem elem, std::string name, Role role, std::vector<std::size_t> shape,
                     std::vector<Placement> placements, std::string layout = "");

// One collective one rank makes. `counts` are elements: all_gather and reduce_scatter, each
// group rank's piece; all_reduce, {the buffer}; ring_shift, {sent, received} (the ring's shift
// by one); send and recv, {the message}.
struct CallSpec {
  Pass pass = Pass::forward;
  std::string tensor;  // what moves: "x", "dx", "k,v", "dw_k,db_k,dw_v,db_v"
  std::string group;   // the mesh dimension it runs over: "tp", "cp", "kv_group"
  Collective op = Collective::all_reduce;
  Elem elem = Elem::value;
  Algorithm algorithm = Algorithm::ring;
  int group_size = 1;  // p of the group
  int group_rank = 0;  // this rank's position in it
  std::vector<std::size_t> counts;

  // The ledger's count (LedgerEntry::count): the full buffer for all_reduce, all_gather and
  // reduce_scatter; the message sent for ring_shift.
  std::uint64_t elements() const;
  // This rank's exact bytes (runtime/wire_bytes.hpp) for elements of `element_bytes` each.
  wire::WireBytes bytes(std::uint64_t element_bytes) const;
  // "all_gather over tp of x (T), counts [3, 2, 2]"
  std::string to_string() const;
};

// The calls of one rank, forward then backward, in the order the op makes them.
using RankCalls = std::vector<CallSpec>;

// A collective buffer: memory one rank holds for a collective during a pass beyond the op's
// inputs, outputs and kept tensors (budget/live_bytes.hpp tracks each one in the op's code): what
// a collective gathers or receives into, or the full tensor it reduce_scatters or all_reduces
// from. `elements` of role `elem`; `group` and `op` name the collective it serves (a caller that
// makes some collectives itself drops their buffers by these, as the model does with the
// attention layer's cp all_reduce).
struct BufferSpec {
  std::string name;  // "all_gathered x [tokens, in]"
  Elem elem = Elem::value;
  std::uint64_t elements = 0;
  std::string group;  // "tp", "cp", "kv_group"
  Collective op = Collective::all_gather;
};
// The buffers live together at one moment of a pass.
using Moment = std::vector<BufferSpec>;
// One rank's moments of each pass, in the order the op reaches them. A pass's peak is its first
// moment with the most bytes (budget/library_activations.hpp), so a spec lists every moment that
// is the largest for some sizes or element types; a pass with no collective buffer lists none.
struct RankBuffers {
  std::vector<Moment> forward;
  std::vector<Moment> backward;
};

struct OpSpec {
  std::string op;           // the library function: "column_parallel_linear"
  std::string family;       // its folder: "linear"
  std::string config_json;  // the configuration as a JSON object (the op's own type)
  std::vector<Size> sizes;  // the global sizes: tokens, in, out, ...
  std::vector<Size> mesh;   // the group(s): {"tp", 3} or {"cp", 2}, {"tp", 2}
  std::vector<TensorSpec> tensors;
  std::vector<RankCalls> calls;  // per rank of the mesh (row-major over `mesh`)
  // The activation model, which lib/budget/library_activations.hpp sizes in bytes and
  // properties/budget/ measures: `kept`, the tensors (inputs or saved) the caller keeps from the
  // forward for the backward, each rank's local piece of them; `buffers`, per rank of the mesh,
  // the collective buffers the op's code holds at each moment of each pass (empty: an op whose
  // buffers are its parts', such as the whole model, lib/budget/model_activations.hpp).
  std::vector<std::string> kept;
  std::vector<RankBuffers> buffers;

  int world() const;
  // @throws UsageError naming the op and the tensors it has when `name` is not one of them.
  const TensorSpec& tensor(const std::string& name) const;
  // Rank r's calls of one pass.
  RankCalls calls_of(int r, Pass pass) const;
};

// The spec as one JSON object: op, family, config, sizes, mesh, tensors (name, role, shape,
// placement, each rank's local shape), kept, and per rank its calls (pass, tensor, group,
// collective, elem, algorithm, group size and rank, counts, elements) and its buffers (forward
// and backward: a list of moments, each a list of buffers with name, elem, elements, group and
// collective).
std::string to_json(const OpSpec& s);

// Every op's spec at an example configuration of its family (lib/ops/<family>/*_spec.cpp,
// <family>_example_specs(); the list is generated from SHARDCHECK_FAMILIES), in family order.
std::vector<OpSpec> example_specs();

// ---------------------------------------------------------------- helpers for the spec files

// A spec with its names, configuration, sizes, mesh and kept tensors; the spec file adds the
// tensors, and each rank's calls and buffers.
OpSpec op_spec(std::string op, std::string family, std::string config_json, std::vector<Size> sizes,
               std::vector<Size> mesh, std::vector<std::string> kept = {});

// A JSON object written field by field: JsonObject().field("gather_output", true).str().
class JsonObject {
 public:
  JsonObject& field(const std::string& key, bool v);
  JsonObject& field(const std::string& key, double v);
  JsonObject& field(const std::string& key, std::size_t v);
  JsonObject& field(const std::string& key, int v);
  JsonObject& field(const std::string& key, const char* v);
  JsonObject& field(const std::string& key, const std::string& v);  // a JSON string
  JsonObject& field(const std::string& key, std::int64_t v);
  JsonObject& field(const std::string& key, const SplitPolicy& v);  // json_split
  JsonObject& field(const std::string& key, const std::vector<double>& v);
  JsonObject& field(const std::string& key, const std::vector<std::size_t>& v);
  template <NamedEnum E>
  JsonObject& field(const std::string& key, E v) {  // its name (runtime/enum_names.hpp)
    return field(key, to_string(v));
  }
  template <class V>
  JsonObject& field(const std::string& key, const std::optional<V>& v) {  // the value or null
    return v ? field(key, *v) : raw(key, "null");
  }
  // A configuration (ops/field_table.hpp) or any value with a to_json(v): its JSON object.
  template <class C>
  requires requires(const C& c) { to_json(c); }
  JsonObject& field(const std::string& key, const C& v) { return raw(key, to_json(v)); }
  JsonObject& raw(const std::string& key, const std::string& json);  // already JSON
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void key(const std::string& k);
  std::string body_;
};
std::string json_string(const std::string& s);  // quoted and escaped
std::string json_number(double v);              // shortest round-trip, %.17g
std::string json_numbers(const std::vector<double>& v);
std::string json_sizes(const std::vector<std::size_t>& v);  // [3, 0, 4]  // [1, 0.5]
std::string json_split(const SplitPolicy& s);               // {"kind": "explicit", "sizes": [...]}

// A configuration's fields (ops/field_table.hpp) as a JSON object, in its table's order; the
// caller may add a field the table cannot hold (one computed from others).
template <FieldConfig C>
JsonObject fields_object(const C& cfg) {
  JsonObject o;
  for_each_field(cfg, [&o](const char* key, const auto& v) { o.field(key, v); });
  return o;
}

// Calls of rank r of a group of p, element counts by the runtime's rules.
CallSpec all_reduce_spec(Pass pass, std::string tensor, std::string group, Elem elem,
                         std::size_t elements, int p, int r, Algorithm algo);
CallSpec all_gather_spec(Pass pass, std::string tensor, std::string group, Elem elem,
                         std::vector<std::size_t> counts, int r);
CallSpec reduce_scatter_spec(Pass pass, std::string tensor, std::string group, Elem elem,
                             std::vector<std::size_t> counts, int r, Algorithm algo);
// A message of `elements` to (send) or from (recv) another rank of a group of p (pipeline
// stages pass activations this way).
CallSpec send_spec(Pass pass, std::string tensor, std::string group, Elem elem,
                   std::size_t elements, int p, int r);
CallSpec recv_spec(Pass pass, std::string tensor, std::string group, Elem elem,
                   std::size_t elements, int p, int r);
CallSpec ring_shift_spec(Pass pass, std::string tensor, std::string group, Elem elem,
                         std::size_t sent, std::size_t received, int p, int r);

// Appends `from` to `to`, renaming each call's tensor by the first matching {old, new} (an op
// composed of others names their tensors its own way: fc1's y is the MLP's h).
using Rename = std::pair<std::string, std::string>;
void append_calls(RankCalls& to, RankCalls from, const std::vector<Rename>& renames = {});

// Rank r's calls of an op that runs `first` then `second` (each renamed as given): the forward
// first's then second's, the backward second's then first's.
RankCalls chain_calls(const OpSpec& first, const std::vector<Rename>& first_names,
                      const OpSpec& second, const std::vector<Rename>& second_names, int r);

// The moments of an op that runs `first` then `second`, rank r: each buffer's name prefixed by
// its part ("fc1: all_gathered x [tokens, in]"); the forward first's then second's moments, the
// backward second's then first's. Each part frees its buffers before it returns, so the chain's
// peak is the largest of its parts' peaks.
RankBuffers chain_buffers(const OpSpec& first, const std::string& first_part, const OpSpec& second,
                          const std::string& second_part, int r);
// A rank's buffers when the op holds one buffer, in one pass.
RankBuffers one_buffer(Pass pass, BufferSpec b);
// Appends moment m to `to` unless it is empty (a pass whose buffers depend on the config).
void add_moment(std::vector<Moment>& to, Moment m);
// Appends `from` to `to`, each buffer's name prefixed by "part: " (none when `part` is empty).
void append_moments(std::vector<Moment>& to, const std::vector<Moment>& from,
                    const std::string& part = "");

// split_sizes(policy, n, p) with every piece times `by` (the elements of a row).
std::vector<std::size_t> pieces_times(const SplitPolicy& policy, std::size_t n, int p,
                                      std::size_t by);

}  // namespace shardcheck::spec

namespace shardcheck {

// A configuration as the JSON object its spec carries (OpSpec::config_json), every field of its
// table (ConfigFields<C>, beside the op's spec) by its name.
template <FieldConfig C>
std::string to_json(const C& cfg) {
  return spec::fields_object(cfg).str();
}

}  // namespace shardcheck
