// One JSON object of a case manifest, read field by field with errors a user can act on: each
// names the file, the field's path ("config.out_split.kind") and what was expected. An object
// remembers which fields were read, so done() can refuse the ones nobody asked for (a misspelt
// option is an error, never silently ignored).
#pragma once

#include "cases/npy.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace shardcheck::cases {

// `text` parsed as JSON. @throws CaseError naming `file`: malformed (with the byte offset), or
// a number beyond float64's range.
nlohmann::json parse_json_text(const std::string& text, const std::string& file);

// A manifest file's text: `path` itself, or path/`name` when path is a directory ("case.json",
// "run.json"). Returns the text and the file read. @throws CaseError "<file>: cannot be read;
// <what to give>" when it cannot be read.
struct ManifestText {
  std::string text, file, dir;  // dir: the file's directory, where its paths point
};
ManifestText read_manifest_text(const std::string& path, const std::string& name,
                                const std::string& what_to_give);

class Fields {
 public:
  Fields() = default;
  // `file` and `path` name the object in errors ("case.json", "config").
  // @throws CaseError when `value` is not an object.
  Fields(nlohmann::json value, std::string file, std::string path);

  bool has(const std::string& key) const;
  // Each getter throws CaseError naming file, path.key and the expected type when the field is
  // absent or of another type; the *_or forms return `fallback` when it is absent.
  bool boolean(const std::string& key);
  bool boolean_or(const std::string& key, bool fallback);
  double number(const std::string& key);
  double number_or(const std::string& key, double fallback);
  std::size_t size(const std::string& key);  // a non-negative integer
  std::size_t size_or(const std::string& key, std::size_t fallback);
  long long integer(const std::string& key);
  long long integer_or(const std::string& key, long long fallback);
  std::string string(const std::string& key);
  std::string string_or(const std::string& key, const std::string& fallback);
  // One of `choices`; @throws CaseError listing them.
  std::string choice(const std::string& key, const std::vector<std::string>& choices);
  std::string choice_or(const std::string& key, const std::vector<std::string>& choices,
                        const std::string& fallback);
  std::vector<std::size_t> sizes(const std::string& key);  // an array of non-negative integers
  std::vector<std::size_t> sizes_or(const std::string& key, std::vector<std::size_t> fallback);
  std::vector<double> numbers_or(const std::string& key, std::vector<double> fallback);
  Fields object(const std::string& key);
  // The object's keys in order, each marked read.
  std::vector<std::string> keys();
  // The raw value (marked read), for a caller that walks it itself.
  const nlohmann::json& raw(const std::string& key);

  // @throws CaseError naming every field of this object that no getter read, and the fields
  // that were asked for (what the reader knows).
  void done() const;

  // A CaseError "file: path.key: message".
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  const std::string& file() const { return file_; }
  std::string where(const std::string& key) const;  // "config.out_split"
  std::string dump() const { return value_.dump(); }

 private:
  const nlohmann::json& need(const std::string& key, const char* expected);
  // need(key), checked by `is` (a json type test), as T.
  template <class T>
  T typed(const std::string& key, const char* expected,
          bool (nlohmann::json::*is)() const noexcept);
  nlohmann::json value_ = nlohmann::json::object();
  std::string file_, path_;
  std::set<std::string> read_;           // fields a getter returned
  mutable std::set<std::string> asked_;  // fields a getter or has() asked for, present or not
};

}  // namespace shardcheck::cases
