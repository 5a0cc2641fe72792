// libFuzzer harness for the case manifest reader (cases/case_manifest.hpp): any bytes as the
// text of a case.json, and the same bytes as the text of a run.json (cases/run_manifest.hpp).
//
// A CaseError is the reader refusing bad input, which is its job: the input is dropped. Anything
// else is a bug the harness makes libFuzzer keep: another exception escaping (nlohmann-json's
// type_error or out_of_range from an unchecked access, std::bad_alloc), a crash, a sanitizer
// report (signed overflow in the world size, a read past the text), or a manifest accepted
// although it breaks what the reader promises:
//   - the op is a non-empty string, at least one output is given;
//   - the world size is the mesh's product, from 1 to 2^20, every dimension at least 1;
//   - an output given per rank has exactly world() files, an input never is;
//   - every size and tensor the manifest names can be looked up by its name;
//   - a per-dimension placement (cases/dim_placement.hpp) was parsed exactly when the text is
//     written per dimension, has at least one dimension, every zigzag or partial dimension names
//     an axis, no axis twice, and its normalized text parses back to itself.
// A run manifest accepted has at least one step, each with a non-empty name and a directory
// below the run's ("fuzz/..."), no directory twice; every link runs from one of its steps to a
// later one (the tensors it names are checked against the cases, not here).
// Then every field of the config object is read as each JSON type and as an object, each read
// either returning or throwing CaseError (the getters family bindings use, cases/json_fields.hpp).
// SHARDCHECK_FUZZ_VERBOSE=1 prints every input.
#include "cases/case_manifest.hpp"
#include "cases/run_manifest.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

namespace {

using shardcheck::cases::CaseError;
using shardcheck::cases::CaseManifest;
using shardcheck::cases::Fields;

[[noreturn]] void violation(const std::string& what, const std::string& text) {
  std::fprintf(stderr, "case manifest violation: %s\ninput: %s\n", what.c_str(), text.c_str());
  std::abort();
}

template <class Read>
void try_read(Read&& read) {
  try {
    read();
  } catch (const CaseError&) {
    // a refusal with a message: fine
  }
}

// Every field of `f` read every way; objects recursively, up to a small depth.
void read_every_way(Fields f, int depth) {
  for (const auto& k : Fields(f).keys()) {
    try_read([&] { (void)f.boolean(k); });
    try_read([&] { (void)f.number(k); });
    try_read([&] { (void)f.integer(k); });
    try_read([&] { (void)f.size(k); });
    try_read([&] { (void)f.string(k); });
    try_read([&] { (void)f.choice(k, {"chunk", "balanced"}); });
    try_read([&] { (void)f.sizes(k); });
    try_read([&] { (void)f.numbers_or(k, {}); });
    if (depth > 0) try_read([&] { read_every_way(f.object(k), depth - 1); });
  }
  try_read([&] { f.done(); });
}

void check_dims(const shardcheck::cases::TensorFiles& t, const std::string& text) {
  using shardcheck::cases::is_per_dimension;
  using shardcheck::cases::parse_dim_placement;
  if (t.dims.has_value() != is_per_dimension(t.placement)) {
    violation("output " + t.name + "'s placement parsed per dimension or not, wrongly", text);
  }
  if (!t.dims) return;
  const auto& p = *t.dims;
  if (p.dims.empty()) violation("a per-dimension placement without dimensions", text);
  for (const auto& d : p.dims) {
    if (d.name.empty()) violation("a dimension without a name", text);
    if ((d.zigzag || d.partial) && d.axes.empty()) violation("zigzag/partial without axis", text);
    for (const auto& a : d.axes) {
      if (p.dim_of(a) != static_cast<int>(&d - p.dims.data())) violation("axis twice", text);
    }
  }
  const std::string norm = p.to_string();
  std::string again;
  try {
    again = parse_dim_placement(norm).to_string();
  } catch (const std::exception& e) {
    violation("the normalized placement " + norm + " does not parse: " + e.what(), text);
  }
  if (again != norm) violation("the normalized placement " + norm + " reads as " + again, text);
}

void check(const CaseManifest& m, const std::string& text) {
  if (m.op.empty()) violation("an empty op was accepted", text);
  if (m.outputs.empty()) violation("a manifest without outputs was accepted", text);
  std::size_t product = 1;
  for (const auto& [name, n] : m.mesh) {
    if (n == 0) violation("a mesh dimension of 0 was accepted", text);
    product *= n;
  }
  if (product > (std::size_t{1} << 20) || static_cast<std::size_t>(m.world()) != product) {
    violation("world() is not the mesh's product within 2^20", text);
  }
  for (const auto& t : m.inputs) {
    if (t.per_rank || t.files.size() != 1) violation("input " + t.name + " is not one file", text);
    if (m.input(t.name) == nullptr) violation("input " + t.name + " cannot be found", text);
  }
  for (const auto& t : m.outputs) {
    const std::size_t want = t.per_rank ? static_cast<std::size_t>(m.world()) : 1;
    if (t.files.size() != want) violation("output " + t.name + " has the wrong file count", text);
    if (m.output(t.name) == nullptr) violation("output " + t.name + " cannot be found", text);
    check_dims(t, text);
  }
  for (const auto& [name, n] : m.sizes) {
    if (m.size(name) != n) violation("size " + name + " does not read back", text);
  }
  read_every_way(m.config, 3);
}

}  // namespace

void check_run(const shardcheck::cases::RunManifest& m, const std::string& text) {
  if (m.steps.empty()) violation("a run without steps was accepted", text);
  std::vector<std::string> dirs;
  for (const auto& s : m.steps) {
    if (s.name.empty()) violation("a step without a name", text);
    if (s.dir.rfind("fuzz/", 0) != 0 || s.dir.size() <= 5) {
      violation("a step's directory " + s.dir + " is not below the run's", text);
    }
    const std::string norm = (std::filesystem::path(s.dir).lexically_normal() / "").string();
    if (norm == "fuzz/" || norm.rfind("fuzz/", 0) != 0) {
      violation("a step's directory " + s.dir + " is not below the run's", text);
    }
    if (std::find(dirs.begin(), dirs.end(), norm) != dirs.end()) {
      violation("the step " + s.dir + " twice", text);
    }
    dirs.push_back(norm);
  }
  for (const auto& l : m.links) {
    if (l.to >= m.steps.size() || l.from >= l.to) {
      violation("a link from step " + std::to_string(l.from) + " to step " + std::to_string(l.to) +
                    " of " + std::to_string(m.steps.size()) + " was accepted",
                text);
    }
  }
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (std::getenv("SHARDCHECK_FUZZ_VERBOSE") != nullptr) {
    std::fprintf(stderr, "input: %s\n", text.c_str());
  }
  try {
    check(shardcheck::cases::parse_case_manifest(text, "fuzz/case.json", "fuzz"), text);
  } catch (const CaseError&) {
    // refused, with a message naming the file and the field
  }
  try {
    check_run(shardcheck::cases::parse_run_manifest(text, "fuzz/run.json", "fuzz"), text);
  } catch (const CaseError&) {
    // refused
  }
  return 0;
}
