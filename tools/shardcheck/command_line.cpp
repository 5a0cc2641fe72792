#include "tools/shardcheck/command_line.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <ostream>
#include <sstream>

namespace shardcheck::cli {
namespace {

constexpr std::size_t help_width = 80;

bool is_option(const std::string& a) { return a.size() > 1 && a[0] == '-'; }

const Option* find_option(const Command& c, const std::string& name) {
  for (const auto& o : c.options) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

std::string label(const Option& o) { return o.value.empty() ? o.name : o.name + " " + o.value; }

const std::string help_label = "-h, --help";

// One option's line(s): its label in a column `column` wide, then what it does.
void put_option(std::ostream& out, const std::string& name, const std::string& text,
                std::size_t column) {
  out << "  " << name << std::string(column - name.size(), ' ');
  put_wrapped(out, text, 2 + column, 2 + column);
}

}  // namespace

bool asks_for_help(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(),
                     [](const std::string& a) { return a == "-h" || a == "--help"; });
}

void parse_arguments(const Command& c, const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (!is_option(a)) {
      if (!c.operand) throw UsageError(c.name + " takes no arguments, not '" + a + "'");
      c.operand(a);
      continue;
    }
    const Option* o = find_option(c, a);
    if (o == nullptr) throw UsageError("unknown option '" + a + "' for " + c.name);
    if (o->value.empty()) {
      o->set("");
    } else {
      if (i + 1 >= args.size()) throw UsageError(a + " needs a value (" + o->value + ")");
      o->set(args[++i]);
    }
  }
}

void print_help(const Command& c, std::ostream& out) {
  out << "usage: shardcheck " << c.name << (c.operands.empty() ? "" : " " + c.operands)
      << (c.options.empty() ? "" : " [OPTION...]") << "\n\n";
  put_wrapped(out, c.description.empty() ? c.summary : c.description, 0, 0);
  std::size_t column = help_label.size();
  for (const auto& o : c.options) column = std::max(column, label(o).size());
  column = std::max(column, c.operands.size()) + 2;
  if (!c.operands.empty()) {
    out << "\narguments:\n";
    put_option(out, c.operands, c.operands_help, column);
  }
  out << "\noptions:\n";
  for (const auto& o : c.options) {
    put_option(out, label(o), o.help + " (default: " + o.default_is + ")", column);
  }
  put_option(out, help_label, "print this help and exit", column);
  out << "\nexit status: ";
  put_wrapped(out, c.exit_status, 2, 13);
  out << "\nexamples:\n";
  for (const auto& e : c.examples) out << "  " << e << "\n";
}

void put_wrapped(std::ostream& out, const std::string& text, std::size_t indent, std::size_t at) {
  std::istringstream words(text);
  bool first = true;
  for (std::string w; words >> w; first = false) {
    if (!first && at + 1 + w.size() > help_width) {
      out << '\n' << std::string(indent, ' ');
      at = indent;
    } else if (!first) {
      out << ' ';
      ++at;
    }
    out << w;
    at += w.size();
  }
  out << '\n';
}

long long parse_duration(const std::string& opt, const std::string& text) {
  constexpr long long week = 168LL * 3600;
  long long n = 0;
  long long unit = 0;
  if (!text.empty()) {
    unit = text.back() == 's' ? 1 : text.back() == 'm' ? 60 : text.back() == 'h' ? 3600 : 0;
  }
  const char* end = text.data() + (text.empty() ? 0 : text.size() - 1);
  const auto [stop, ec] = std::from_chars(text.data(), end, n);
  if (unit == 0 || ec != std::errc{} || stop != end || n < 1 || n > week / unit) {
    throw UsageError(opt + " takes a duration like 90s, 10m or 8h (1s to 168h), not '" + text +
                     "'");
  }
  return n * unit;
}

std::string now_utc() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace shardcheck::cli
