#include "cases/run_manifest.hpp"

#include "cases/json_fields.hpp"

#include <algorithm>
#include <filesystem>

namespace shardcheck::cases {
namespace {

namespace fs = std::filesystem;

// A step's path: relative, inside the run's directory.
void check_step_path(const Fields& steps, const std::string& at, const std::string& path) {
  if (path.empty()) steps.fail(at, "is an empty path; give the step's case directory");
  const fs::path p(path);
  if (p.is_absolute()) {
    steps.fail(at, "is the absolute path " + path +
                       "; give the case directory relative to run.json's, so the dump can move");
  }
  const fs::path norm = p.lexically_normal();
  if (norm.empty() || norm == "." || norm == "./") {
    steps.fail(at, "is " + path +
                       ", the run's own directory; give a step's case directory below "
                       "it");
  }
  for (const auto& part : p) {
    if (part == "..") {
      steps.fail(at, "is " + path +
                         ", which leaves the run's directory; keep every step's case "
                         "directory below run.json's");
    }
  }
}

}  // namespace

bool is_run_dir(const std::string& dir) {
  std::error_code ec;
  return fs::is_directory(dir, ec) && fs::is_regular_file(fs::path(dir) / "run.json", ec);
}

RunManifest parse_run_manifest(const std::string& json, const std::string& file,
                               const std::string& dir) {
  Fields top(parse_json_text(json, file), file, "");
  RunManifest m;
  m.file = file;
  const long long version = top.integer("shardcheck_run");
  if (version != run_format_version) {
    top.fail("shardcheck_run", "is " + std::to_string(version) +
                                   " but this shardcheck reads version " +
                                   std::to_string(run_format_version));
  }
  m.name = top.string_or("name", "");
  const nlohmann::json& steps = top.raw("steps");
  if (!steps.is_array() || steps.empty()) {
    top.fail("steps",
             "give a non-empty array of case directories in dataflow order, each a path or "
             "{\"case\": path, \"name\": text}");
  }
  // The steps array as an object keyed by position, for Fields' messages ("steps.2.case").
  nlohmann::json by_index = nlohmann::json::object();
  for (std::size_t k = 0; k < steps.size(); ++k) by_index[std::to_string(k)] = steps[k];
  Fields list(by_index, file, "steps");
  std::vector<std::string> seen;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const std::string at = std::to_string(k);
    RunStep s;
    std::string path;
    if (steps[k].is_string()) {
      path = list.string(at);
      check_step_path(list, at, path);
      s.name = path;
    } else if (steps[k].is_object()) {
      Fields step = list.object(at);
      path = step.string("case");
      check_step_path(step, "case", path);
      s.name = step.string_or("name", path);
      step.done();
    } else {
      list.fail(at, R"(give the step's case directory, or {"case": path, "name": text})");
    }
    // "a", "a/" and "./a/." are one directory.
    const std::string norm = (fs::path(path).lexically_normal() / "").string();
    if (std::find(seen.begin(), seen.end(), norm) != seen.end()) {
      list.fail(at, "is " + path + " again; each case is one step of the run");
    }
    seen.push_back(norm);
    s.dir = (fs::path(dir) / path).string();
    m.steps.push_back(std::move(s));
  }
  if (top.has("links")) {
    const nlohmann::json& links = top.raw("links");
    if (!links.is_array()) {
      top.fail("links", R"(give an array of {"from": step, "output": name, "to": step, )"
                        R"("input": name})");
    }
    nlohmann::json link_index = nlohmann::json::object();
    for (std::size_t k = 0; k < links.size(); ++k) link_index[std::to_string(k)] = links[k];
    Fields all(link_index, file, "links");
    // A step named as written in "steps" ("a", "a/" and "./a/." are one).
    const auto step_of = [&](Fields& link, const std::string& key) {
      const std::string path = link.string(key);
      const std::string norm = (fs::path(path).lexically_normal() / "").string();
      const auto it = std::find(seen.begin(), seen.end(), norm);
      if (it == seen.end()) {
        std::string names;
        for (const auto& st : steps) {
          names += (names.empty() ? "" : ", ") +
                   (st.is_string() ? st.get<std::string>() : st.value("case", std::string()));
        }
        link.fail(key, "is " + path + ", which is not a step of the run; give one of " + names);
      }
      return static_cast<std::size_t>(it - seen.begin());
    };
    for (std::size_t k = 0; k < links.size(); ++k) {
      const std::string at = std::to_string(k);
      if (!links[k].is_object()) {
        all.fail(at, R"(give {"from": step, "output": name, "to": step, "input": name})");
      }
      Fields link = all.object(at);
      RunLink l;
      l.from = step_of(link, "from");
      l.output = link.string("output");
      l.to = step_of(link, "to");
      l.input = link.string("input");
      if (l.to <= l.from) {
        all.fail(at, "runs from step " + std::to_string(l.from + 1) + " to step " +
                         std::to_string(l.to + 1) +
                         "; a link runs along the dataflow, from a step to a later one");
      }
      link.done();
      m.links.push_back(std::move(l));
    }
  }
  top.done();
  return m;
}

RunManifest read_run_manifest(const std::string& path) {
  const ManifestText t = read_manifest_text(
      path, "run.json",
      "give a run directory holding run.json (docs/case-format.md, \"A whole run\")");
  return parse_run_manifest(t.text, t.file, t.dir);
}

}  // namespace shardcheck::cases
