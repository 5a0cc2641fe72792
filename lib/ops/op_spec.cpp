#include "ops/op_spec.hpp"

#include "runtime/counts.hpp"
#include "runtime/errors.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>

namespace shardcheck::spec {

DType dtype_of(Elem e, DType t) {
  switch (e) {
    case Elem::value: return t;
    case Elem::acc: return acc_dtype(t);
    case Elem::index: return DType::int64;
  }
  return t;
}

TensorSpec tensor(std::string name, Role role, std::vector<std::size_t> shape,
                  std::vector<Placement> placements, std::string layout) {
  return tensor_of(Elem::value, std::move(name), role, std::move(shape), std::move(placements),
                   std::move(layout));
}

TensorSpec tensor_of(Elem elem, std::string name, Role role, std::vector<std::size_t> shape,
                     std::vector<Placement> placements, std::string layout) {
  return {std::move(name),   role, elem, std::move(shape), std::move(placements),
          std::move(layout), {}};
}

std::uint64_t TensorSpec::local_elements(const std::vector<Size>& mesh, int r) const {
  const auto s = local_shape(mesh, r);
  return std::accumulate(s.begin(), s.end(), std::uint64_t{1},
                         [](std::uint64_t a, std::size_t b) { return a * b; });
}

std::vector<std::size_t> TensorSpec::local_shape(const std::vector<Size>& mesh, int r) const {
  if (!local_shapes.empty()) return local_shapes.at(static_cast<std::size_t>(r));
  auto s = shape;
  int stride = 1;
  for (std::size_t m = mesh.size(); m-- > 0;) {
    const int p = static_cast<int>(mesh[m].second);
    const int coord = (r / stride) % p;
    stride *= p;
    const Placement& pl = placements.at(m);
    if (pl.is_shard()) {
      s.at(pl.dim()) =
          split_sizes(pl.policy(), s.at(pl.dim()), p).at(static_cast<std::size_t>(coord));
    }
  }
  return s;
}

std::uint64_t CallSpec::elements() const {
  if (op == Collective::ring_shift) return counts.at(0);
  return std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
}

wire::WireBytes CallSpec::bytes(std::uint64_t element_bytes) const {
  switch (op) {
    case Collective::all_reduce:
      return wire::all_reduce(elements(), element_bytes, group_size, group_rank, algorithm);
    case Collective::all_gather: return wire::all_gather(counts, element_bytes, group_rank);
    case Collective::reduce_scatter:
      return wire::reduce_scatter(counts, element_bytes, group_rank, algorithm);
    case Collective::ring_shift:
      return wire::ring_shift(counts.at(0), counts.at(1), element_bytes, group_size, 1);
    case Collective::send: return wire::send(counts.at(0), element_bytes);
    case Collective::recv: return wire::recv(counts.at(0), element_bytes);
    default: break;
  }
  throw UsageError("CallSpec::bytes: " + std::string(shardcheck::name(op)) +
                   " is not a collective an op spec makes; use all_reduce, all_gather, "
                   "reduce_scatter, ring_shift, send or recv");
}

namespace {

std::string list(const std::vector<std::size_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

std::string CallSpec::to_string() const {
  return std::string(shardcheck::name(op)) + " over " + group + " of " + tensor + " (" +
         std::string(name(elem)) + "), counts " + list(counts);
}

int OpSpec::world() const {
  int w = 1;
  for (const auto& [dim, n] : mesh) w *= static_cast<int>(n);
  return w;
}

const TensorSpec& OpSpec::tensor(const std::string& name) const {
  std::string names;
  for (const auto& t : tensors) {
    if (t.name == name) return t;
    names += (names.empty() ? "" : ", ") + t.name;
  }
  throw UsageError("OpSpec::tensor: " + op + " has no tensor '" + name + "'; its tensors are " +
                   names);
}

RankCalls OpSpec::calls_of(int r, Pass pass) const {
  RankCalls out;
  for (const auto& c : calls.at(static_cast<std::size_t>(r))) {
    if (c.pass == pass) out.push_back(c);
  }
  return out;
}

// ---------------------------------------------------------------- JSON

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";  // JSON has no NaN or infinity
  char buf[32];
  for (int digits = 15; digits <= 17; ++digits) {  // the shortest that reads back the same
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string json_sizes(const std::vector<std::size_t>& v) { return list(v); }

std::string json_numbers(const std::vector<double>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + json_number(v[i]);
  return s + "]";
}

void JsonObject::key(const std::string& k) {
  if (!body_.empty()) body_ += ", ";
  body_ += json_string(k) + ": ";
}
JsonObject& JsonObject::field(const std::string& k, bool v) {
  key(k);
  body_ += v ? "true" : "false";
  return *this;
}
JsonObject& JsonObject::field(const std::string& k, double v) {
  key(k);
  body_ += json_number(v);
  return *this;
}
JsonObject& JsonObject::field(const std::string& k, std::size_t v) {
  key(k);
  body_ += std::to_string(v);
  return *this;
}
JsonObject& JsonObject::field(const std::string& k, int v) {
  key(k);
  body_ += std::to_string(v);
  return *this;
}
JsonObject& JsonObject::field(const std::string& k, std::int64_t v) {
  key(k);
  body_ += std::to_string(v);
  return *this;
}
JsonObject& JsonObject::field(const std::string& k, const SplitPolicy& v) {
  return raw(k, json_split(v));
}
JsonObject& JsonObject::field(const std::string& k, const std::vector<double>& v) {
  return raw(k, json_numbers(v));
}
JsonObject& JsonObject::field(const std::string& k, const std::vector<std::size_t>& v) {
  return raw(k, json_sizes(v));
}
JsonObject& JsonObject::field(const std::string& k, const char* v) {
  return field(k, std::string(v));
}
JsonObject& JsonObject::field(const std::string& k, const std::string& v) {
  key(k);
  body_ += json_string(v);
  return *this;
}
JsonObject& JsonObject::raw(const std::string& k, const std::string& json) {
  key(k);
  body_ += json;
  return *this;
}

std::string json_split(const SplitPolicy& s) {
  switch (s.kind()) {
    case SplitPolicy::Kind::chunk: return JsonObject().field("kind", "chunk").str();
    case SplitPolicy::Kind::balanced: return JsonObject().field("kind", "balanced").str();
    case SplitPolicy::Kind::explicit_sizes:
      return JsonObject().field("kind", "explicit").raw("sizes", list(s.sizes())).str();
  }
  return "null";
}

namespace {

std::string json_named_sizes(const std::vector<Size>& sizes) {
  JsonObject o;
  for (const auto& [k, v] : sizes) o.field(k, v);
  return o.str();
}

std::string json_placement(const Placement& p) {
  switch (p.kind()) {
    case Placement::Kind::shard:
      return JsonObject()
          .field("kind", "shard")
          .field("dim", p.dim())
          .raw("split", json_split(p.policy()))
          .field("text", p.to_string())
          .str();
    case Placement::Kind::replicate:
      return JsonObject().field("kind", "replicate").field("text", "R").str();
    case Placement::Kind::partial:
      return JsonObject()
          .field("kind", "partial")
          .field("reduce_op", p.reduce_op())
          .field("text", p.to_string())
          .str();
  }
  return "null";
}

std::string json_tensor(const TensorSpec& t, const std::vector<Size>& mesh, int world) {
  std::string locals = "[";
  for (int r = 0; r < world; ++r) locals += (r ? ", " : "") + list(t.local_shape(mesh, r));
  locals += "]";
  std::string placements = "[";
  for (std::size_t m = 0; m < t.placements.size(); ++m) {
    placements += (m ? ", " : "") + json_placement(t.placements[m]);
  }
  placements += "]";
  JsonObject o;
  o.field("name", t.name)
      .field("role", t.role)
      .field("elem", t.elem)
      .raw("shape", list(t.shape))
      .raw("placements", placements);
  if (!t.layout.empty()) o.field("layout", t.layout);
  return o.raw("local_shapes", locals).str();
}

std::string json_call(const CallSpec& c) {
  return JsonObject()
      .field("pass", c.pass)
      .field("tensor", c.tensor)
      .field("group", c.group)
      .field("collective", c.op)
      .field("elem", c.elem)
      .field("algorithm", c.algorithm)
      .field("group_size", c.group_size)
      .field("group_rank", c.group_rank)
      .raw("counts", list(c.counts))
      .field("elements", static_cast<std::size_t>(c.elements()))
      .str();
}

template <class T, class F>
std::string json_array(const std::vector<T>& v, F each) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + each(v[i]);
  return s + "]";
}

std::string json_buffer(const BufferSpec& b) {
  return JsonObject()
      .field("name", b.name)
      .field("elem", b.elem)
      .field("elements", static_cast<std::size_t>(b.elements))
      .field("group", b.group)
      .field("collective", b.op)
      .str();
}

std::string json_moment(const Moment& m) { return json_array(m, json_buffer); }

std::string json_buffers(const RankBuffers& b) {
  return JsonObject()
      .raw("forward", json_array(b.forward, json_moment))
      .raw("backward", json_array(b.backward, json_moment))
      .str();
}

}  // namespace

std::string to_json(const OpSpec& s) {
  std::string ranks = "[";
  for (std::size_t r = 0; r < s.calls.size(); ++r) {
    ranks += (r ? ", " : "") +
             JsonObject()
                 .field("rank", r)
                 .raw("calls", json_array(s.calls[r], json_call))
                 .raw("buffers", json_buffers(r < s.buffers.size() ? s.buffers[r] : RankBuffers{}))
                 .str();
  }
  ranks += "]";
  return JsonObject()
      .field("op", s.op)
      .field("family", s.family)
      .raw("config", s.config_json)
      .raw("sizes", json_named_sizes(s.sizes))
      .raw("mesh", json_named_sizes(s.mesh))
      .raw("tensors",
           json_array(s.tensors,
                      [&s](const TensorSpec& t) { return json_tensor(t, s.mesh, s.world()); }))
      .raw("kept", json_array(s.kept, json_string))
      .raw("ranks", ranks)
      .str();
}

// ---------------------------------------------------------------- call helpers

CallSpec all_reduce_spec(Pass pass, std::string tensor, std::string group, Elem elem,
                         std::size_t elements, int p, int r, Algorithm algo) {
  return {pass, std::move(tensor), std::move(group), Collective::all_reduce, elem, algo,
          p,    wrap_rank(r, p),   {elements}};
}

CallSpec send_spec(Pass pass, std::string tensor, std::string group, Elem elem,
                   std::size_t elements, int p, int r) {
  return {pass, std::move(tensor), std::move(group), Collective::send, elem, Algorithm::direct,
          p,    wrap_rank(r, p),   {elements}};
}

CallSpec recv_spec(Pass pass, std::string tensor, std::string group, Elem elem,
                   std::size_t elements, int p, int r) {
  return {pass, std::move(tensor), std::move(group), Collective::recv, elem, Algorithm::direct,
          p,    wrap_rank(r, p),   {elements}};
}

CallSpec all_gather_spec(Pass pass, std::string tensor, std::string group, Elem elem,
                         std::vector<std::size_t> counts, int r) {
  const int p = static_cast<int>(counts.size());
  return {pass, std::move(tensor), std::move(group), Collective::all_gather, elem, Algorithm::ring,
          p,    wrap_rank(r, p),   std::move(counts)};
}

CallSpec reduce_scatter_spec(Pass pass, std::string tensor, std::string group, Elem elem,
                             std::vector<std::size_t> counts, int r, Algorithm algo) {
  const int p = static_cast<int>(counts.size());
  return {pass, std::move(tensor), std::move(group), Collective::reduce_scatter, elem, algo,
          p,    wrap_rank(r, p),   std::move(counts)};
}

CallSpec ring_shift_spec(Pass pass, std::string tensor, std::string group, Elem elem,
                         std::size_t sent, std::size_t received, int p, int r) {
  return {
      pass, std::move(tensor), std::move(group), Collective::ring_shift, elem, Algorithm::direct,
      p,    wrap_rank(r, p),   {sent, received}};
}

void append_calls(RankCalls& to, RankCalls from, const std::vector<Rename>& renames) {
  for (auto& c : from) {
    for (const auto& [old_name, new_name] : renames) {
      if (c.tensor == old_name) {
        c.tensor = new_name;
        break;
      }
    }
    to.push_back(std::move(c));
  }
}

RankCalls chain_calls(const OpSpec& first, const std::vector<Rename>& first_names,
                      const OpSpec& second, const std::vector<Rename>& second_names, int r) {
  RankCalls c;
  append_calls(c, first.calls_of(r, Pass::forward), first_names);
  append_calls(c, second.calls_of(r, Pass::forward), second_names);
  append_calls(c, second.calls_of(r, Pass::backward), second_names);
  append_calls(c, first.calls_of(r, Pass::backward), first_names);
  return c;
}

OpSpec op_spec(std::string op, std::string family, std::string config_json, std::vector<Size> sizes,
               std::vector<Size> mesh, std::vector<std::string> kept) {
  OpSpec s;
  s.op = std::move(op);
  s.family = std::move(family);
  s.config_json = std::move(config_json);
  s.sizes = std::move(sizes);
  s.mesh = std::move(mesh);
  s.kept = std::move(kept);
  return s;
}

RankBuffers one_buffer(Pass pass, BufferSpec b) {
  RankBuffers r;
  (pass == Pass::forward ? r.forward : r.backward).push_back({std::move(b)});
  return r;
}

void add_moment(std::vector<Moment>& to, Moment m) {
  if (!m.empty()) to.push_back(std::move(m));
}

void append_moments(std::vector<Moment>& to, const std::vector<Moment>& from,
                    const std::string& part) {
  for (Moment m : from) {
    if (!part.empty()) {
      for (auto& b : m) b.name = part + ": " + b.name;
    }
    to.push_back(std::move(m));
  }
}

RankBuffers chain_buffers(const OpSpec& first, const std::string& first_part, const OpSpec& second,
                          const std::string& second_part, int r) {
  const auto& f = first.buffers.at(static_cast<std::size_t>(r));
  const auto& s = second.buffers.at(static_cast<std::size_t>(r));
  RankBuffers c;
  append_moments(c.forward, f.forward, first_part);
  append_moments(c.forward, s.forward, second_part);
  append_moments(c.backward, s.backward, second_part);
  append_moments(c.backward, f.backward, first_part);
  return c;
}

std::vector<std::size_t> pieces_times(const SplitPolicy& policy, std::size_t n, int p,
                                      std::size_t by) {
  auto v = split_sizes(policy, n, p);
  for (auto& x : v) x *= by;
  return v;
}

}  // namespace shardcheck::spec
