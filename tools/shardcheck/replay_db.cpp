#include "tools/shardcheck/replay_db.hpp"

#include "engine/replay.hpp"
#include "runtime/errors.hpp"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace shardcheck::cli {
namespace {

using nlohmann::json;

// e's field `key` of JSON type `type`, for line `n` of `path`.
template <class T>
T field(const json& e, const char* key, json::value_t type, const std::string& path, int n) {
  const auto it = e.find(key);
  const bool number_ok =
      type == json::value_t::number_unsigned && it != e.end() && it->is_number_unsigned();
  if (it == e.end() || (!number_ok && it->type() != type)) {
    throw UsageError("--replay-db: '" + path + "' line " + std::to_string(n) + ": field '" + key +
                     "' is missing or not a " +
                     (type == json::value_t::string ? "string" : "whole number") +
                     "; fix or delete the line");
  }
  return it->get<T>();
}

}  // namespace

std::vector<ReplayEntry> read_replay_db(const std::string& path) {
  std::vector<ReplayEntry> out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return out;
  std::ifstream in(path);
  if (!in || std::filesystem::is_directory(path, ec)) {
    throw UsageError("--replay-db: cannot read '" + path + "'; pass a readable file");
  }
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json e;
    try {
      e = json::parse(line);
    } catch (const json::exception& x) {
      throw UsageError("--replay-db: '" + path + "' line " + std::to_string(n) + ": not JSON (" +
                       x.what() + "); fix or delete the line");
    }
    if (!e.is_object()) {
      throw UsageError("--replay-db: '" + path + "' line " + std::to_string(n) +
                       ": not a JSON object; fix or delete the line");
    }
    const auto str = json::value_t::string;
    const auto num = json::value_t::number_unsigned;
    ReplayEntry r;
    r.suite = field<std::string>(e, "suite", str, path, n);
    r.property = field<std::string>(e, "property", str, path, n);
    r.impl = field<std::string>(e, "impl", str, path, n);
    r.seed = field<std::uint64_t>(e, "seed", num, path, n);
    const auto cases = field<std::uint64_t>(e, "cases", num, path, n);
    const auto max_world = field<std::uint64_t>(e, "max_world", num, path, n);
    if (cases < 1 || cases > 1000000 || max_world < 1 || max_world > 64) {
      throw UsageError("--replay-db: '" + path + "' line " + std::to_string(n) +
                       ": cases must be 1 to 1000000 and max_world 1 to 64; fix or delete the "
                       "line");
    }
    r.cases = static_cast<int>(cases);
    r.max_world = static_cast<int>(max_world);
    r.dtypes = field<std::string>(e, "dtypes", str, path, n);
    r.counterexample = field<std::string>(e, "counterexample", str, path, n);
    if (const auto f = e.find("found"); f != e.end() && f->is_string()) r.found = *f;
    out.push_back(std::move(r));
  }
  return out;
}

void require_writable_replay_db(const std::string& path) {
  std::error_code ec;
  const bool is_dir = std::filesystem::is_directory(path, ec);
  std::ofstream f;
  if (!is_dir) f.open(path, std::ios::app);
  if (is_dir || !f) {
    throw UsageError("--replay-db: cannot write '" + path + "': " +
                     (is_dir ? std::string("a directory") : std::string(std::strerror(errno))) +
                     "; pass a writable file");
  }
}

void append_replay_entry(const std::string& path, const ReplayEntry& e) {
  const json j = {{"suite", e.suite},   {"property", e.property},
                  {"impl", e.impl},     {"seed", e.seed},
                  {"cases", e.cases},   {"max_world", e.max_world},
                  {"dtypes", e.dtypes}, {"counterexample", e.counterexample},
                  {"found", e.found}};
  std::ofstream f(path, std::ios::app);
  f << j.dump() << '\n';
  f.flush();
  if (!f) throw UsageError("--replay-db: cannot write '" + path + "'; pass a writable file");
}

bool same_finding(const ReplayEntry& a, const ReplayEntry& b) {
  return a.suite == b.suite && a.property == b.property && a.impl == b.impl &&
         a.counterexample == b.counterexample;
}

std::string replay_command(const ReplayEntry& e) {
  return check::replay_command(
      {e.suite, e.impl, e.property, e.seed, e.cases, e.max_world, e.dtypes});
}

}  // namespace shardcheck::cli
