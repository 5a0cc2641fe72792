// Writes the seed corpus of case_manifest_fuzz: one small case.json per target below, each a
// valid manifest with one feature (global and per-rank outputs, a declared placement, every
// optional field, the config of each linear layer, nested split objects, a mesh of two
// dimensions, no mesh at all) or a deliberately invalid one (malformed JSON, each kind of refused
// field, a value of each wrong type, a per-rank file count other than the world size, a mesh
// over 2^20 ranks, sizes that do not fit in 64 bits):
//   case_manifest_corpus <dir>            writes the seeds (fuzz/corpus/case_manifest)
//   case_manifest_corpus --check <dir>    fails when a seed no longer reads to its target: the
//                                         op and output count, or a refusal whose message holds
//                                         the expected text
#include "corpus_seeds.hpp"

#include "cases/case_manifest.hpp"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace {

using shardcheck::cases::CaseError;
using Bytes = std::vector<std::uint8_t>;

struct Target {
  std::string name;
  std::string text;
  std::string op;       // valid: the op read back
  std::size_t outputs;  // valid: how many outputs
  std::string error;    // invalid: a part of the refusal
};

// A manifest around its fields: the required ones, then `more`.
std::string manifest(const std::string& op, const std::string& outputs,
                     const std::string& more = "", const std::string& mesh = R"({"tp": 3})") {
  return R"({"shardcheck_case": 1, "op": ")" + op +
         R"(", "config": {"out_split": {"kind": "explicit", "sizes": [2, 0, 5]}}, )"
         R"("sizes": {"tokens": 5, "in": 4, "out": 7}, "mesh": )" +
         mesh +
         R"(, "dtype": "float32", )"
         R"("inputs": {"x": "x.npy", "w": "w.npy", "b": "b.npy", "dy": "dy.npy"}, )"
         R"("outputs": )" +
         outputs + more + "}";
}

const std::string ranks3 = R"j({"ranks": ["y.0.npy", "y.1.npy", "y.2.npy"], "placement": "S(1)"})j";

std::vector<Target> targets() {
  const std::string col = "column_parallel_linear";
  const std::string y = R"({"y": "y.npy"})";
  return {
      {"ok-global", manifest(col, y), col, 1, ""},
      {"ok-all-outputs",
       manifest(col, R"({"y": "y.npy", "dx": "dx.npy", "dw": "dw.npy", "db": "db.npy"})"), col, 4,
       ""},
      {"ok-per-rank", manifest(col, R"({"y": )" + ranks3 + "}"), col, 1, ""},
      {"ok-optional-fields",
       manifest(col, y, R"(, "accumulate": "float32", "implementation": "torch 2.1 cpu")"), col, 1,
       ""},
      {"ok-row", manifest("row_parallel_linear", y), "row_parallel_linear", 1, ""},
      {"ok-contract-object",
       manifest("attention_layer", y, R"(, "contract": {"name": "exp2", "key_block": 64})",
                R"({"cp": 2, "tp": 2})"),
       "attention_layer", 1, ""},
      {"bad-contract-type", manifest(col, y, R"(, "contract": [1])"), "", 0,
       "contract: is neither a string nor an object"},
      {"bad-contract-name-type", manifest(col, y, R"(, "contract": {"name": 3})"), "", 0,
       "contract.name: is an integer"},
      {"ok-mesh-2d", manifest("attention_layer", y, "", R"({"cp": 2, "tp": 2})"), "attention_layer",
       1, ""},
      {"ok-no-mesh",
       R"({"shardcheck_case": 1, "op": "x", "config": {}, "sizes": {}, "dtype": "bfloat16", )"
       R"("inputs": {}, "outputs": {"y": {"ranks": ["y.npy"]}}})",
       "x", 1, ""},
      {"ok-per-dimension-placement",
       manifest(col, R"j({"y": {"ranks": ["y.0.npy", "y.1.npy", "y.2.npy"], )j"
                     R"j("placement": "t h(tp)"}})j"),
       col, 1, ""},
      {"ok-per-dimension-zigzag",
       manifest("attention_layer",
                R"j({"y": {"ranks": ["0", "1", "2", "3"], "placement": "b s(cp,zigzag) h"}, )j"
                R"j("dx": {"ranks": ["0", "1", "2", "3"], "placement": "b s h(tp,partial)"}})j",
                "", R"j({"cp": 2, "tp": 2})j"),
       "attention_layer", 2, ""},
      {"bad-per-dimension-placement",
       manifest(col, R"j({"y": {"ranks": ["y.0.npy", "y.1.npy", "y.2.npy"], )j"
                     R"j("placement": "t h(tp"}})j"),
       "", 0, "expected ')' or ',' after tp"},
      // run.json texts (the harness reads every input as a run too): refused as a case.
      {"run-two-steps",
       R"({"shardcheck_run": 1, "name": "block 0", "steps": ["00_norm", )"
       R"({"case": "01_attention", "name": "layer 0 attention"}]})",
       "", 0, "shardcheck_case"},
      {"run-linked",
       R"({"shardcheck_run": 1, "steps": ["00_norm", "01_attention", "./02_mlp/"], "links": [)"
       R"({"from": "00_norm", "output": "y", "to": "01_attention", "input": "x"}, )"
       R"({"from": "01_attention/", "output": "y", "to": "02_mlp", "input": "x"}]})",
       "", 0, "shardcheck_case"},
      {"run-link-against-the-dataflow",
       R"({"shardcheck_run": 1, "steps": ["a", "b"], "links": [)"
       R"({"from": "b", "output": "y", "to": "a", "input": "x"}]})",
       "", 0, "shardcheck_case"},
      {"run-step-leaves-the-run", R"({"shardcheck_run": 1, "steps": ["a/../../b", "./a/."]})", "",
       0, "shardcheck_case"},
      {"bad-json", manifest(col, y).substr(0, 60), "", 0, "JSON: malformed at byte"},
      // Found by the harness: nlohmann-json throws out_of_range, not parse_error, for it.
      {"bad-number-overflow", R"({"shardcheck_case": 184467441e308073709551615})", "", 0,
       "number overflow parsing"},
      {"bad-not-object", "[1, 2, 3]", "", 0, "is an array, not an object"},
      {"bad-version", R"({"shardcheck_case": 7})", "", 0, "is 7 but this shardcheck reads"},
      {"bad-version-huge", R"({"shardcheck_case": 18446744073709551615})", "", 0,
       "too large; give an integer below 2^63"},
      {"bad-op-type", R"({"shardcheck_case": 1, "op": 3})", "", 0, "op: is an integer"},
      // Found by the harness (a 10-minute run, 2026-12-03): an empty op was read as an op.
      {"regression-empty-op-accepted", manifest("", y), "", 0, "op: is empty"},
      {"bad-unknown-field", manifest(col, y, R"(, "seed": 3)"), "", 0, "unknown field seed"},
      {"bad-dtype", manifest(col, y).replace(manifest(col, y).find("float32"), 7, "int8"), "", 0,
       "dtype: is \"int8\""},
      {"bad-size-negative",
       manifest(col, y).replace(manifest(col, y).find("\"tokens\": 5"), 11, "\"tokens\": -5"), "",
       0, "is -5; give a non-negative integer"},
      {"bad-mesh-zero", manifest(col, y, "", R"({"tp": 0})"), "", 0, "is 0; a mesh dimension"},
      {"bad-mesh-huge", manifest(col, y, "", R"({"tp": 4096, "cp": 4096})"), "", 0,
       "makes the mesh over 1048576 ranks"},
      {"bad-rank-count", manifest(col, R"({"y": {"ranks": ["a.npy"]}})"), "", 0,
       "has 1 files but the mesh has 3 ranks"},
      {"bad-ranks-type", manifest(col, R"({"y": {"ranks": "a.npy"}})"), "", 0,
       "give an array of .npy file names"},
      {"bad-per-rank-field", manifest(col, R"({"y": {"ranks": ["a.npy"], "offset": 1}})", "", "{}"),
       "", 0, "unknown field offset"},
      {"bad-input-per-rank",
       manifest(col, y).replace(manifest(col, y).find("\"x.npy\""), 7, R"({"ranks": []})"), "", 0,
       "must be one .npy file"},
      {"bad-no-outputs", manifest(col, "{}"), "", 0, "outputs: is empty"},
      {"bad-empty-file-name", manifest(col, R"({"y": ""})"), "", 0, "is an empty file name"},
      {"bad-config-type", R"({"shardcheck_case": 1, "op": "x", "config": [1]})", "", 0,
       "config: is an array"},
  };
}

Bytes bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

// "" when the seed meets its target, else what it does instead.
std::string miss(const Target& t, const Bytes& b) {
  return shardcheck::fuzz::refusal_miss<CaseError>(t.error, [&]() -> std::string {
    const auto m =
        shardcheck::cases::parse_case_manifest(std::string(b.begin(), b.end()), t.name, "corpus");
    if (!t.error.empty()) return "reads (op " + m.op + ") instead of being refused";
    if (m.op != t.op || m.outputs.size() != t.outputs) {
      return "reads op " + m.op + " with " + std::to_string(m.outputs.size()) + " outputs";
    }
    return "";
  });
}

}  // namespace

int main(int argc, char** argv) {
  const shardcheck::fuzz::TargetCorpus<Target> corpus{
      targets, [](const Target& t) { return bytes_of(t.text); }, miss,
      [](const Target& t) { return t.error.empty() ? ("ok " + t.op) : ("refused: " + t.error); }};
  return corpus.main(argc, argv);
}
