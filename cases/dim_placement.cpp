#include "cases/dim_placement.hpp"

#include <algorithm>
#include <stdexcept>

namespace shardcheck::cases {
namespace {

bool word_start(char c) { return (c >= 'a' && c <= 'z') || c == '_'; }
bool word_char(char c) { return word_start(c) || (c >= '0' && c <= '9'); }

class Reader {
 public:
  explicit Reader(std::string_view t) : t_(t) {}

  bool at_end() const { return i_ == t_.size(); }
  char peek() const { return at_end() ? '\0' : t_[i_]; }
  void skip_spaces() {
    while (!at_end() && t_[i_] == ' ') ++i_;
  }
  // [a-z_][a-z0-9_]*; `what` names it in the error ("a dimension's name").
  std::string word(const char* what) {
    if (!word_start(peek())) fail(std::string("expected ") + what + " ([a-z_][a-z0-9_]*)");
    const std::size_t b = i_;
    while (!at_end() && word_char(t_[i_])) ++i_;
    return std::string(t_.substr(b, i_ - b));
  }
  void expect(char c, const std::string& after) {
    if (peek() != c) fail(std::string("expected '") + c + "' " + after);
    ++i_;
  }
  [[noreturn]] void fail(const std::string& why) const {
    std::string got = at_end() ? "the end" : "'" + std::string(1, t_[i_]) + "'";
    throw std::invalid_argument("at character " + std::to_string(i_) + " (" + got + "): " + why);
  }
  std::size_t pos() const { return i_; }

 private:
  std::string_view t_;
  std::size_t i_ = 0;
};

// name '(' item (',' item)* ')', the opening name already read.
void read_items(Reader& r, DimPlacement::Dim& d, std::vector<std::string>& seen) {
  r.expect('(', "after " + d.name);
  for (;;) {
    const std::size_t at = r.pos();
    const std::string item = r.word("a mesh axis, zigzag or partial");
    if (item == "zigzag" || item == "partial") {
      bool& flag = item == "zigzag" ? d.zigzag : d.partial;
      if (flag) {
        throw std::invalid_argument("at character " + std::to_string(at) + ": " + item +
                                    " twice in " + d.name);
      }
      flag = true;
    } else {
      if (std::find(seen.begin(), seen.end(), item) != seen.end()) {
        throw std::invalid_argument("at character " + std::to_string(at) + ": axis " + item +
                                    " named twice; an axis acts on one dimension");
      }
      seen.push_back(item);
      d.axes.push_back(item);
    }
    if (r.peek() == ',') {
      r.expect(',', "");
      continue;
    }
    r.expect(')', "or ',' after " + item);
    break;
  }
  if (d.axes.empty()) {
    throw std::invalid_argument(d.name + "(...): names no mesh axis; write the axis beside " +
                                (d.zigzag ? "zigzag" : "partial") + ", as s(cp,zigzag)");
  }
  if (d.zigzag && d.partial) {
    throw std::invalid_argument(d.name +
                                "(...): zigzag and partial together; a zigzag dimension is "
                                "sharded, a partial tensor is not");
  }
}

}  // namespace

int DimPlacement::dim_of(std::string_view axis) const {
  for (std::size_t k = 0; k < dims.size(); ++k) {
    if (std::find(dims[k].axes.begin(), dims[k].axes.end(), axis) != dims[k].axes.end()) {
      return static_cast<int>(k);
    }
  }
  return -1;
}

std::string DimPlacement::to_string() const {
  std::string s;
  for (const auto& d : dims) {
    if (!s.empty()) s += ' ';
    s += d.name;
    std::vector<std::string> items = d.axes;
    if (d.zigzag) items.emplace_back("zigzag");
    if (d.partial) items.emplace_back("partial");
    if (items.empty()) continue;
    s += '(';
    for (std::size_t k = 0; k < items.size(); ++k) s += (k == 0 ? "" : ",") + items[k];
    s += ')';
  }
  return s;
}

bool is_per_dimension(std::string_view text) { return !text.empty() && word_start(text[0]); }

DimPlacement parse_dim_placement(std::string_view text) {
  Reader r(text);
  DimPlacement p;
  std::vector<std::string> seen;
  r.skip_spaces();
  if (r.at_end()) r.fail("expected a dimension; write one per dimension, as \"b s(cp) h d\"");
  while (!r.at_end()) {
    DimPlacement::Dim d;
    d.name = r.word("a dimension's name");
    if (r.peek() == '(') read_items(r, d, seen);
    p.dims.push_back(std::move(d));
    if (!r.at_end() && r.peek() != ' ') r.fail("expected ' ' between dimensions, or '('");
    r.skip_spaces();
  }
  return p;
}

}  // namespace shardcheck::cases
