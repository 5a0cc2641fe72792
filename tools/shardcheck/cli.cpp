#include "tools/shardcheck/cli.hpp"

#include "engine/case_driver.hpp"
#include "runtime/errors.hpp"
#include "tools/shardcheck/budget_command.hpp"
#include "tools/shardcheck/command_line.hpp"
#include "tools/shardcheck/compare_command.hpp"
#include "tools/shardcheck/suite_commands.hpp"

#include <algorithm>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#ifndef SHARDCHECK_VERSION
#error "SHARDCHECK_VERSION (the project's version) comes from tools/CMakeLists.txt"
#endif

namespace shardcheck::cli {
namespace {

std::vector<Command> commands();

const Command* find_command(const std::vector<Command>& all, const std::string& name) {
  for (const auto& c : all) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::string command_names() {
  std::string s;
  for (const auto& c : commands()) s += (s.empty() ? "" : ", ") + c.name;
  return s;
}

[[noreturn]] void program_error(const std::string& msg) {
  throw UsageError(msg + " (see shardcheck --help)");
}

void print_program_help(std::ostream& out) {
  out << "usage: shardcheck COMMAND [ARGUMENT...] [OPTION...]\n"
         "       shardcheck -h | --help | --version\n\n";
  put_wrapped(out,
              "Checks partitioned (tensor-, sequence- and context-parallel) model ops against a "
              "high-precision dense reference.",
              0, 0);
  out << "\ncommands:\n";
  const auto all = commands();
  std::size_t column = 0;
  for (const auto& c : all) column = std::max(column, c.name.size() + 2);
  for (const auto& c : all) {
    out << "  " << c.name << std::string(column - c.name.size(), ' ');
    put_wrapped(out, c.summary, 2 + column, 2 + column);
  }
  out << "\noptions:\n"
         "  -h, --help   print this help and exit (the same as `shardcheck help`)\n"
         "  --version    print the version and exit (the same as `shardcheck version`)\n\n"
         "A command's arguments and options: shardcheck COMMAND --help\n"
         "  (or shardcheck help COMMAND).\n\n"
         "exit status: 0 success; 1 a property failed or a mutant survived; 2 a usage error,\n"
         "  on one line on stderr.\n\n"
         "examples:\n"
         "  shardcheck list\n"
         "  shardcheck check linear --cases 200\n"
         "  shardcheck check --help\n";
}

Command help_command() {
  const auto topic = std::make_shared<std::string>();
  Command c;
  c.name = "help";
  c.summary = "print the program's help, or one command's";
  c.description =
      "Prints the program's help (every command in one line, the exit statuses), or with "
      "COMMAND that command's help, the same as shardcheck COMMAND --help. shardcheck -h and "
      "shardcheck --help are shardcheck help.";
  c.operands = "[COMMAND]";
  c.operands_help = "the command to describe (default: the program's help, which lists them)";
  c.exit_status = "0; 2 a usage error, such as an unknown command (on stderr).";
  c.examples = {"shardcheck help", "shardcheck help check"};
  c.operand = [topic](const std::string& a) {
    if (!topic->empty()) throw UsageError("help takes at most one command, not '" + a + "' too");
    *topic = a;
  };
  c.run = [topic](std::ostream& out, const std::string&) {
    if (topic->empty()) {
      print_program_help(out);
      return 0;
    }
    const auto all = commands();
    const Command* about = find_command(all, *topic);
    if (about == nullptr) {
      throw UsageError("unknown command '" + *topic + "'; the commands are " + command_names());
    }
    print_help(*about, out);
    return 0;
  };
  return c;
}

Command version_command() {
  Command c;
  c.name = "version";
  c.summary = "print the version: shardcheck " SHARDCHECK_VERSION;
  c.description =
      "Prints \"shardcheck X.Y.Z\", the version of the CMake project it was built from. "
      "shardcheck --version is shardcheck version.";
  c.exit_status = "0; 2 a usage error (on stderr).";
  c.examples = {"shardcheck version", "shardcheck --version"};
  c.run = [](std::ostream& out, const std::string&) {
    out << "shardcheck " SHARDCHECK_VERSION "\n";
    return 0;
  };
  return c;
}

// The program's commands, each with its options: the one table that parsing, every help text and
// command_options() read.
std::vector<Command> commands() {
  std::vector<Command> all;
  all.push_back(list_command());
  all.push_back(check_command());
  all.push_back(mutants_command());
  all.push_back(compare_command());
  all.push_back(budget_command());
  all.push_back(help_command());
  all.push_back(version_command());
  return all;
}

// Runs the command args[0] names (-h/--help and --version name help and version) on the rest;
// its usage errors point to its help.
int dispatch(const std::vector<std::string>& args, const std::string& line, std::ostream& out) {
  if (args.empty()) program_error("missing command; the commands are " + command_names());
  std::string name = args[0];
  if (name == "-h" || name == "--help") name = "help";
  if (name == "--version") name = "version";
  const auto all = commands();
  const Command* c = find_command(all, name);
  if (c == nullptr) {
    program_error((name[0] == '-' ? "unknown option '" : "unknown command '") + name +
                  "'; the commands are " + command_names());
  }
  if (check::case_driver() != nullptr && name != "check" && name != "mutants" && name != "help" &&
      name != "version" && name != "list") {
    program_error("under mpirun only check and mutants run (and list, help, version); run " + name +
                  " without mpirun");
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (asks_for_help(rest)) {
    print_help(*c, out);
    return 0;
  }
  try {
    parse_arguments(*c, rest);
    return c->run(out, line);
  } catch (const UsageError& e) {
    throw UsageError(std::string(e.what()) + " (see shardcheck " + c->name + " --help)");
  }
}

}  // namespace

std::vector<CommandOptions> command_options() {
  std::vector<CommandOptions> out;
  for (const auto& c : commands()) {
    CommandOptions co{c.name, {}};
    for (const auto& o : c.options) co.options.push_back(o.name);
    out.push_back(std::move(co));
  }
  return out;
}

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  try {
    const std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
    std::string line = argc > 0 ? argv[0] : "shardcheck";
    for (const auto& a : args) line += " " + a;
    return dispatch(args, line, out);
  } catch (const UsageError& e) {
    err << "shardcheck: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << "shardcheck: internal error: " << e.what() << "\n";
    return 3;
  }
}

}  // namespace shardcheck::cli
