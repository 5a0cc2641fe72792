// One command of the shardcheck program as a table: its operands, its options (what each takes,
// what it does, its default), examples, and what it runs. The parser and the help both read the
// table, so the program cannot accept an option that its --help does not describe.
#pragma once

#include "runtime/errors.hpp"

#include <charconv>
#include <cstddef>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace shardcheck::cli {

struct Option {
  std::string name;        // as typed: "--cases"
  std::string value;       // what it takes, "N"; empty for a flag
  std::string help;        // what it does (wrapped by print_help)
  std::string default_is;  // "100", "off", "every suite"
  // Called with the value (a flag's is ""); throws UsageError for a bad value.
  std::function<void(const std::string& value)> set;
};

struct Command {
  std::string name;           // "check"
  std::string summary;        // one line, for the program's help
  std::string description;    // a paragraph after the usage line
  std::string operands;       // "[SUITE...]"; empty when it takes none
  std::string operands_help;  // what the operands are, and their default
  std::vector<Option> options;
  std::string exit_status;  // "0 ...; 1 ...; 2 ..."
  std::vector<std::string> examples;
  // Called with each operand in order; empty: the command takes none. Throws UsageError.
  std::function<void(const std::string& operand)> operand;
  // Runs the command on what parse_arguments set; `command_line` is argv joined by spaces.
  std::function<int(std::ostream& out, const std::string& command_line)> run;
};

// True when -h or --help is one of args: anywhere, it wins over every other argument.
bool asks_for_help(const std::vector<std::string>& args);

// Feeds args to c's options and operands, in order. An argument that starts with '-' (other than
// "-" itself) is an option; an option that takes a value takes the next argument, whatever it is.
// @throws UsageError (one line): an unknown option, a missing value, an operand c does not take,
//         or what an option's set or c.operand throws for a bad value.
void parse_arguments(const Command& c, const std::vector<std::string>& args);

// c's help on out: the usage line, the description, the operands, every option with what it
// takes, what it does and its default, then -h/--help, the exit statuses and the examples.
void print_help(const Command& c, std::ostream& out);

// Writes text on out from column `at`, wrapping at 80 columns to lines indented by `indent`,
// and ends the line.
void put_wrapped(std::ostream& out, const std::string& text, std::size_t indent, std::size_t at);

// The whole number `text` for option `opt`, in [lo, hi].
// @throws UsageError naming opt, the range and the text, for anything else.
template <class I>
I parse_whole(const std::string& opt, const std::string& text, I lo, I hi) {
  I v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || v < lo || v > hi) {
    throw UsageError(opt + " takes a whole number from " + std::to_string(lo) + " to " +
                     std::to_string(hi) + ", not '" + text + "'");
  }
  return v;
}

// The duration `text` for option `opt`: a whole number and a unit, s, m or h ("90s", "10m",
// "8h"), from 1 s to 168 h (a week), in seconds.
// @throws UsageError "--time takes a duration like 90s, 10m or 8h (1s to 168h), not 'x'".
long long parse_duration(const std::string& opt, const std::string& text);

// The time now, ISO 8601 in UTC ("2026-12-01T21:30:00Z"), for a report's "started".
std::string now_utc();

}  // namespace shardcheck::cli
