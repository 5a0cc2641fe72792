#include "cases/json_fields.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <utility>

namespace shardcheck::cases {

nlohmann::json parse_json_text(const std::string& text, const std::string& file) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw CaseError(file + ": JSON: malformed at byte " + std::to_string(e.byte) + " (" + e.what() +
                    "); fix the file (python -m json.tool " + file + " shows where)");
  } catch (const nlohmann::json::exception& e) {
    // A number beyond double's range (1e400) is nlohmann-json's out_of_range, not a parse_error
    // (found by case_manifest_fuzz).
    throw CaseError(file + ": JSON: " + e.what() + "; write numbers within float64's range");
  }
}
ManifestText read_manifest_text(const std::string& path, const std::string& name,
                                const std::string& what_to_give) {
  namespace fs = std::filesystem;
  fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) p /= name;
  std::ifstream in(p, std::ios::binary);
  if (!in) throw CaseError(p.string() + ": cannot be read; " + what_to_give);
  return {std::string{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()},
          p.string(), p.parent_path().string()};
}

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

const char* type_name(const nlohmann::json& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

}  // namespace

Fields::Fields(nlohmann::json value, std::string file, std::string path)
    : value_(std::move(value)), file_(std::move(file)), path_(std::move(path)) {
  if (!value_.is_object()) {
    throw CaseError(file_ + ": " + path_ + ": is " + type_name(value_) +
                    ", not an object; write it as {\"field\": value, ...}");
  }
}

std::string Fields::where(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void Fields::fail(const std::string& key, const std::string& message) const {
  throw CaseError(file_ + ": " + where(key) + ": " + message);
}

template <class T>
T Fields::typed(const std::string& key, const char* expected,
                bool (nlohmann::json::*is)() const noexcept) {
  const auto& v = need(key, expected);
  if (!(v.*is)()) fail(key, std::string("is ") + type_name(v) + "; give " + expected);
  return v.get<T>();
}

bool Fields::has(const std::string& key) const {
  asked_.insert(key);
  return value_.contains(key);
}

const nlohmann::json& Fields::need(const std::string& key, const char* expected) {
  asked_.insert(key);
  if (!value_.contains(key)) {
    fail(key, std::string("missing; give ") + expected + " (docs/case-format.md)");
  }
  read_.insert(key);
  return value_.at(key);
}

bool Fields::boolean(const std::string& key) {
  return typed<bool>(key, "true or false", &nlohmann::json::is_boolean);
}
bool Fields::boolean_or(const std::string& key, bool fallback) {
  return has(key) ? boolean(key) : fallback;
}

double Fields::number(const std::string& key) {
  return typed<double>(key, "a number", &nlohmann::json::is_number);
}
double Fields::number_or(const std::string& key, double fallback) {
  return has(key) ? number(key) : fallback;
}

long long Fields::integer(const std::string& key) {
  const auto& v = need(key, "an integer");
  if (v.is_number_unsigned()) {
    if (v.get<unsigned long long>() >
        static_cast<unsigned long long>(std::numeric_limits<long long>::max())) {
      fail(key, "is " + v.dump() + ", too large; give an integer below 2^63");
    }
    return static_cast<long long>(v.get<unsigned long long>());
  }
  if (!v.is_number_integer()) fail(key, std::string("is ") + type_name(v) + "; give an integer");
  return v.get<long long>();
}
long long Fields::integer_or(const std::string& key, long long fallback) {
  return has(key) ? integer(key) : fallback;
}

std::size_t Fields::size(const std::string& key) {
  const long long n = integer(key);
  if (n < 0) fail(key, "is " + std::to_string(n) + "; give a non-negative integer");
  return static_cast<std::size_t>(n);
}
std::size_t Fields::size_or(const std::string& key, std::size_t fallback) {
  return has(key) ? size(key) : fallback;
}

std::string Fields::string(const std::string& key) {
  return typed<std::string>(key, "a string", &nlohmann::json::is_string);
}
std::string Fields::string_or(const std::string& key, const std::string& fallback) {
  return has(key) ? string(key) : fallback;
}

std::string Fields::choice(const std::string& key, const std::vector<std::string>& choices) {
  std::string s = string(key);
  for (const auto& c : choices) {
    if (c == s) return s;
  }
  fail(key, "is \"" + s + "\"; give one of " + join(choices));
}
std::string Fields::choice_or(const std::string& key, const std::vector<std::string>& choices,
                              const std::string& fallback) {
  return has(key) ? choice(key, choices) : fallback;
}

std::vector<std::size_t> Fields::sizes(const std::string& key) {
  const auto& v = need(key, "an array of non-negative integers");
  if (!v.is_array()) {
    fail(key, std::string("is ") + type_name(v) + "; give an array of non-negative integers");
  }
  std::vector<std::size_t> out;
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto& e = v[i];
    if (!e.is_number_unsigned() && !(e.is_number_integer() && e.get<long long>() >= 0)) {
      fail(key, "element " + std::to_string(i) + " is " + e.dump() +
                    "; give an array of non-negative integers");
    }
    out.push_back(e.get<std::size_t>());
  }
  return out;
}
std::vector<std::size_t> Fields::sizes_or(const std::string& key,
                                          std::vector<std::size_t> fallback) {
  return has(key) ? sizes(key) : std::move(fallback);
}

std::vector<double> Fields::numbers_or(const std::string& key, std::vector<double> fallback) {
  if (!has(key)) return fallback;
  const auto& v = need(key, "an array of numbers");
  if (!v.is_array()) fail(key, std::string("is ") + type_name(v) + "; give an array of numbers");
  std::vector<double> out;
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number()) {
      fail(key, "element " + std::to_string(i) + " is " + v[i].dump() + "; give numbers");
    }
    out.push_back(v[i].get<double>());
  }
  return out;
}

Fields Fields::object(const std::string& key) {
  const auto& v = need(key, "an object");
  if (!v.is_object()) fail(key, std::string("is ") + type_name(v) + "; give an object");
  return {v, file_, where(key)};
}

std::vector<std::string> Fields::keys() {
  std::vector<std::string> k;
  for (const auto& [name, v] : value_.items()) {
    k.push_back(name);
    read_.insert(name);
  }
  return k;
}

const nlohmann::json& Fields::raw(const std::string& key) { return need(key, "a value"); }

void Fields::done() const {
  std::vector<std::string> unknown;
  for (const auto& [name, v] : value_.items()) {
    if (read_.count(name) == 0) unknown.push_back(name);
  }
  if (unknown.empty()) return;
  const std::vector<std::string> known(asked_.begin(), asked_.end());
  throw CaseError(file_ + ": " + (path_.empty() ? std::string("the manifest") : path_) +
                  ": unknown field" + (unknown.size() > 1 ? "s " : " ") + join(unknown) +
                  (known.empty() ? std::string("; this object takes no fields")
                                 : "; the fields known here are " + join(known)) +
                  " (shardcheck list --json shows each op's config)");
}

}  // namespace shardcheck::cases
