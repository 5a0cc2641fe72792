// The shardcheck command line: the help of the program and of every command (each option of the
// table in cli.cpp, with its default), --version, every user-facing error (one line on err that
// points to the help, exit status 2, nothing on out), the output contract of check (one line per
// property, the closing "N passed, N failed"), a failure's explanation and replay command (and
// that replaying reproduces it), the report files, and `list --json` (parsed with nlohmann-json).
#include "tools/shardcheck/cli.hpp"
#include "budget/model_activations.hpp"
#include "engine/suite.hpp"
#include "tools/shardcheck/cli_test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace shardcheck::cli {
namespace {

using test_support::Result;
using test_support::run_cli;
using test_support::split_words;

bool is_command(const std::string& name) {
  for (const auto& c : command_options()) {
    if (c.command == name) return true;
  }
  return false;
}

// Where an error of `args` must point: the help of the command args[0] names (--version names
// version), or the program's.
std::string help_pointer(const std::vector<std::string>& args) {
  if (args.empty()) return "(see shardcheck --help)\n";
  const std::string command = args[0] == "--version" ? "version" : args[0];
  if (is_command(command)) return "(see shardcheck " + command + " --help)\n";
  return "(see shardcheck --help)\n";
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Status 2, one line on err: the message (which contains fragment) and the pointer to the help.
void expect_error_line(const Result& r, const std::vector<std::string>& args,
                       const std::string& fragment) {
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err.rfind("shardcheck: error: ", 0), 0U) << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  EXPECT_TRUE(ends_with(r.err, help_pointer(args))) << r.err;
}

// A usage error found before anything ran: nothing on out.
void expect_usage_error(const std::vector<std::string>& args, const std::string& fragment) {
  const auto r = run_cli(args);
  expect_error_line(r, args, fragment);
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(Cli, UsageErrorsAreOneLineWithStatus2) {
  expect_usage_error({}, "missing command");
  expect_usage_error({"frobnicate"}, "unknown command 'frobnicate'");
  expect_usage_error({"check", "nope"}, "unknown suite 'nope'; known suites: linear");
  expect_usage_error({"mutants", "nope"}, "unknown suite 'nope'");
  expect_usage_error({"check", "--cases", "0"}, "--cases takes a whole number from 1");
  expect_usage_error({"check", "--cases", "12x"}, "not '12x'");
  expect_usage_error({"check", "--seed", "-3"}, "--seed takes a whole number");
  expect_usage_error({"check", "--max-world", "0"},
                     "--max-world takes a whole number from 1 to 64");
  expect_usage_error({"check", "--max-world", "65"}, "--max-world");
  expect_usage_error({"check", "--dtype", "float8"}, "unknown element type 'float8'");
  expect_usage_error({"check", "--dtype", "float32,"}, "unknown element type ''");
  expect_usage_error({"check", "--impl", "nobody"}, "has no implementation 'nobody'");
  expect_usage_error({"check", "--property", "nothing"}, "no suite has a property 'nothing'");
  expect_usage_error({"check", "--bogus"}, "unknown option '--bogus' for check");
  expect_usage_error({"mutants", "--impl", "x"}, "unknown option '--impl' for mutants");
  expect_usage_error({"check", "--cases"}, "--cases needs a value");
  expect_usage_error({"check", "--time", "10"}, "--time takes a duration like 90s, 10m or 8h");
  expect_usage_error({"check", "--time", "0s"}, "(1s to 168h), not '0s'");
  expect_usage_error({"check", "--time", "169h"}, "not '169h'");
  expect_usage_error({"check", "--time", "1.5h"}, "not '1.5h'");
  expect_usage_error({"check", "--time", "5m", "--cases", "10"}, "--time and --cases both given");
  expect_usage_error({"check", "--replay-db"}, "--replay-db needs a value (FILE)");
  expect_usage_error({"check", "--replay-db", "/proc"}, "--replay-db: cannot read '/proc'");
  expect_usage_error({"check", "--replay-db", "/proc/shardcheck-db"},
                     "--replay-db: cannot write '/proc/shardcheck-db'");
  expect_usage_error({"mutants", "--time", "5m"}, "unknown option '--time' for mutants");
  expect_usage_error({"list", "extra"}, "list takes no arguments, not 'extra'");
  expect_usage_error({"--bogus"},
                     "unknown option '--bogus'; the commands are list, check, mutants, compare, "
                     "budget, help, version");
  expect_usage_error({"check", "-x"}, "unknown option '-x' for check");
  expect_usage_error({"check", "--dtype"}, "--dtype needs a value (LIST)");
  expect_usage_error({"mutants", "--seed", "1.5"}, "--seed takes a whole number from 0 to");
  expect_usage_error({"help", "nope"}, "unknown command 'nope'; the commands are list, check");
  expect_usage_error({"help", "check", "list"}, "help takes at most one command, not 'list' too");
  expect_usage_error({"version", "extra"}, "version takes no arguments, not 'extra'");
  expect_usage_error({"--version", "extra"}, "version takes no arguments, not 'extra'");
}

// Checked before anything runs: the first suite has this mutant, the others do not.
TEST(Cli, AnImplementationMissingFromASelectedSuiteStopsBeforeAnythingRuns) {
  expect_usage_error({"check", "--impl", "mutant:bias-on-every-rank"},
                     "has no implementation 'mutant:bias-on-every-rank'; `shardcheck list` names "
                     "each suite's implementations");
}

TEST(Cli, TheProgramsHelpListsEveryCommandOnOut) {
  const auto help = run_cli({"--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_TRUE(help.err.empty()) << help.err;
  for (const auto& c : command_options()) {
    EXPECT_NE(help.out.find("\n  " + c.command + " "), std::string::npos) << c.command;
  }
  for (const char* s :
       {"usage: shardcheck COMMAND", "\n  -h, --help ", "\n  --version ",
        "shardcheck COMMAND --help", "exit status: 0", "\nexamples:\n  shardcheck "}) {
    EXPECT_NE(help.out.find(s), std::string::npos) << s << "\n" << help.out;
  }
  for (const std::vector<std::string>& same : {std::vector<std::string>{"-h"}, {"help"}}) {
    const auto r = run_cli(same);
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.out, help.out) << same[0];
    EXPECT_TRUE(r.err.empty()) << r.err;
  }
}

// The lines of `help` that describe `option` (from its line to the next option or section),
// joined: each run of blanks and line breaks made one space.
std::string option_block(const std::string& help, const std::string& option) {
  const auto at = help.find("\n  " + option + " ");
  if (at == std::string::npos) return "";
  const auto end = std::min(help.find("\n  -", at + 1), help.find("\n\n", at + 1));
  std::string joined;
  for (const char c : help.substr(at + 3, end - at - 3)) {
    const bool blank = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (!blank) joined += c;
    else if (!joined.empty() && joined.back() != ' ') joined += ' ';
  }
  return joined;
}

// What the option does: words (lower case, unlike the metavariable) before "(default: X)".
void expect_option_described(const std::string& help, const std::string& command,
                             const std::string& option) {
  const auto block = option_block(help, option);
  ASSERT_FALSE(block.empty()) << command << " --help does not describe " << option << "\n" << help;
  const auto def = block.find("(default: ");
  ASSERT_NE(def, std::string::npos) << command << " " << option << " has no default: " << block;
  EXPECT_NE(block[def + 10], ')') << command << " " << option << ": empty default";
  const std::string words = block.substr(option.size(), def - option.size());
  EXPECT_TRUE(std::any_of(words.begin(), words.end(), ::islower))
      << command << " " << option << " says nothing about what it does: " << block;
}

TEST(Cli, EveryCommandsHelpDescribesEachOptionWithItsDefault) {
  const auto all = command_options();
  for (const char* c : {"list", "check", "mutants", "budget", "help", "version"}) {
    EXPECT_TRUE(is_command(c)) << c;
  }
  for (const auto& c : all) {
    const auto help = run_cli({c.command, "--help"});
    EXPECT_EQ(help.status, 0) << c.command;
    EXPECT_TRUE(help.err.empty()) << help.err;
    EXPECT_EQ(help.out.rfind("usage: shardcheck " + c.command, 0), 0U) << help.out;
    for (const std::string& s : {std::string("\n  -h, --help "), std::string("\nexit status: "),
                                 "\nexamples:\n  shardcheck " + c.command}) {
      EXPECT_NE(help.out.find(s), std::string::npos) << c.command << ": " << s << "\n" << help.out;
    }
    for (const auto& o : c.options) expect_option_described(help.out, c.command, o);
    for (const std::vector<std::string>& same :
         {std::vector<std::string>{c.command, "-h"}, {"help", c.command}, {"-h", c.command}}) {
      const auto r = run_cli(same);
      EXPECT_EQ(r.status, 0) << same[0] << " " << same[1];
      EXPECT_EQ(r.out, help.out) << same[0] << " " << same[1];
      EXPECT_TRUE(r.err.empty()) << r.err;
    }
  }
}

TEST(Cli, HelpAnywhereAmongACommandsArgumentsWinsAndRunsNothing) {
  const auto dir = std::filesystem::temp_directory_path() / "shardcheck-cli-test-help-wins";
  std::filesystem::remove_all(dir);
  const std::vector<std::vector<std::string>> cases = {
      {"check", "linear", "--cases", "5", "--report", dir.string(), "--help"},
      {"check", "--bogus", "-h"},
      {"check", "--cases", "--help"},
      {"mutants", "nope", "--report", dir.string(), "-h"},
      {"budget", "--seq", "0", "--help"},
      {"list", "extra", "--help"},
      {"version", "--help"},
  };
  for (const auto& args : cases) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.status, 0) << args[0] << " " << args[1];
    EXPECT_TRUE(r.err.empty()) << r.err;
    EXPECT_EQ(r.out.rfind("usage: shardcheck " + args[0], 0), 0U) << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(dir)) << "a help ran the command";
}

// The number is CMake's PROJECT_VERSION, by the compile definition tools/CMakeLists.txt gives
// both the library and this test.
TEST(Cli, VersionPrintsTheProjectsVersion) {
  const std::string version = SHARDCHECK_VERSION;
  EXPECT_EQ(std::count(version.begin(), version.end(), '.'), 2) << version;
  for (const char* word : {"--version", "version"}) {
    const auto r = run_cli({word});
    EXPECT_EQ(r.status, 0) << word;
    EXPECT_EQ(r.out, "shardcheck " + version + "\n") << word;
    EXPECT_TRUE(r.err.empty()) << r.err;
  }
}

TEST(Cli, ListNamesSuitesPropertiesImplementationsAndMutants) {
  const auto r = run_cli({"list"});
  EXPECT_EQ(r.status, 0);
  for (const char* s : {"suite linear", "matches_reference", "declared_traffic",
                        "shardcheck:", "mutant:bias-on-every-rank", "mutant:gather-wrong-axis"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  }
}

// `list --json` is data a program reads: it parses, names every registered suite with its
// properties and mutants, and gives every family at least one op spec whose tensors and calls
// are complete (one local shape and one call list per rank, counts that add up).
TEST(Cli, ListJsonPrintsTheSuitesAndEveryOpsSpec) {
  const auto r = run_cli({"list", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("version"), SHARDCHECK_VERSION);
  std::set<std::string> suites, families;
  for (const auto& s : check::SuiteRegistry::instance().all()) {
    suites.insert(s->name());
    const auto it = std::find_if(j.at("suites").begin(), j.at("suites").end(),
                                 [&](const auto& x) { return x.at("name") == s->name(); });
    ASSERT_NE(it, j.at("suites").end()) << s->name();
    EXPECT_EQ(it->at("properties").size(), s->properties().size()) << s->name();
    const auto impls = s->implementations();
    const auto mutants =
        std::count_if(impls.begin(), impls.end(), [](const auto& i) { return i.is_mutant; });
    EXPECT_EQ(static_cast<std::ptrdiff_t>(it->at("mutants").size()), mutants) << s->name();
  }
  for (const auto& op : j.at("ops")) {
    SCOPED_TRACE(op.at("op").get<std::string>());
    families.insert(op.at("family").get<std::string>());
    std::size_t world = 1;
    for (const auto& [dim, n] : op.at("mesh").items()) world *= n.get<std::size_t>();
    EXPECT_EQ(op.at("ranks").size(), world);
    EXPECT_TRUE(op.at("config").is_object());
    for (const auto& t : op.at("tensors")) {
      EXPECT_EQ(t.at("local_shapes").size(), world) << t.at("name");
      EXPECT_EQ(t.at("placements").size(), std::max<std::size_t>(op.at("mesh").size(), 1));
    }
    for (const auto& rank : op.at("ranks")) {
      for (const auto& c : rank.at("calls")) {
        const auto counts = c.at("counts").get<std::vector<std::size_t>>();
        const std::size_t sum = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
        EXPECT_EQ(c.at("elements"), c.at("collective") == "ring_shift" ? counts.at(0) : sum);
        EXPECT_LT(c.at("group_rank").get<int>(), c.at("group_size").get<int>());
      }
    }
  }
  // Every op family's suite has its op specs, and no other family; redistribution's suite is
  // not an op family (lib/layout: no spec), the one suite without ops.
  EXPECT_EQ(suites.erase("redistribute"), 1U);
  EXPECT_EQ(families, suites);
  // The first example, column_parallel_linear with sequence_parallel_input and gather_output
  // on 3 ranks (lib/ops/linear/linear_spec.cpp): rank 0's calls in order.
  const auto& col = j.at("ops").at(0);
  ASSERT_EQ(col.at("op"), "column_parallel_linear");
  std::vector<std::string> calls;
  for (const auto& c : col.at("ranks").at(0).at("calls")) {
    calls.push_back(c.at("pass").get<std::string>() + " " + c.at("collective").get<std::string>() +
                    " " + c.at("tensor").get<std::string>());
  }
  EXPECT_EQ(calls,
            (std::vector<std::string>{"forward all_gather x", "forward all_gather y",
                                      "backward all_gather x", "backward reduce_scatter dx"}));
}

TEST(Cli, CheckPrintsOneLinePerPropertyAndTheClosingCount) {
  const auto r = run_cli({"check", "linear", "--cases", "5", "--max-world", "3"});
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("PASS  linear/matches_reference [shardcheck]  5 cases, worst bound ratio"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\n6 passed, 0 failed\n"), std::string::npos) << r.out;
}

TEST(Cli, AFailureIsExplainedAndItsReplayReproducesIt) {
  const std::vector<std::string> args = {"check",      "linear",
                                         "--impl",     "mutant:bias-on-every-rank",
                                         "--property", "matches_reference",
                                         "--cases",    "60",
                                         "--dtype",    "float32,float64"};
  const auto r = run_cli(args);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("FAIL  linear/matches_reference [mutant:bias-on-every-rank]"),
            std::string::npos);
  // The case in words: op, dtype, P, shapes, split; the worst element with its owner.
  for (const char* s : {"row_parallel_linear", "P=", "tokens=", "in_split=", "worst element y[",
                        "bound", "assert_close"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("\n0 passed, 1 failed\n"), std::string::npos);
  const auto at = r.out.find("replay: shardcheck ");
  ASSERT_NE(at, std::string::npos);
  const std::string replay = r.out.substr(at + 8, r.out.find('\n', at) - at - 8);
  EXPECT_EQ(replay,
            "shardcheck check linear --impl mutant:bias-on-every-rank --property "
            "matches_reference --seed 1 --cases 60 --max-world 8 --dtype float32,float64");
  auto words = split_words(replay);
  words.erase(words.begin());
  const auto again = run_cli(words);
  EXPECT_EQ(again.status, 1);
  EXPECT_EQ(again.out, r.out) << "the replay must reproduce the same shrunk failure";
}

// A minimal JSON syntax check (RFC 8259 values), enough to prove the report parses.
struct Json {
  const std::string& s;
  std::size_t i = 0;
  void ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool lit(const char* w) {
    const std::string word(w);
    if (s.compare(i, word.size(), word) != 0) return false;
    i += word.size();
    return true;
  }
  bool string() {
    if (s[i] != '"') return false;
    for (++i; i < s.size(); ++i) {
      if (s[i] == '\\') ++i;
      else if (s[i] == '"') return ++i, true;
      else if (static_cast<unsigned char>(s[i]) < 0x20) return false;
    }
    return false;
  }
  bool number() {
    const std::size_t start = i;
    while (i < s.size() && std::string("+-0123456789.eE").find(s[i]) != std::string::npos) ++i;
    return i > start;
  }
  bool value() {
    ws();
    if (i >= s.size()) return false;
    bool ok = false;
    if (s[i] == '{') ok = members('}', true);
    else if (s[i] == '[') ok = members(']', false);
    else if (s[i] == '"') ok = string();
    else ok = lit("true") || lit("false") || lit("null") || number();
    ws();
    return ok;
  }
  bool members(char close, bool object) {
    ++i;
    ws();
    if (s[i] == close) return ++i, true;
    for (;;) {
      if (object) {
        ws();
        if (!string()) return false;
        ws();
        if (s[i++] != ':') return false;
      }
      if (!value()) return false;
      if (s[i] == ',') {
        ++i;
        continue;
      }
      return s[i++] == close;
    }
  }
};

TEST(Cli, ReportWritesValidJsonAndMarkdownTables) {
  const auto dir = std::filesystem::temp_directory_path() / "shardcheck-cli-test-report";
  std::filesystem::remove_all(dir);
  const auto r = run_cli({"check", "linear", "--impl", "mutant:dw-transposed", "--cases", "20",
                          "--report", dir.string()});
  EXPECT_EQ(r.status, 1);
  std::ifstream json_file(dir / "report.json");
  const std::string json((std::istreambuf_iterator<char>(json_file)), {});
  Json parser{json};
  EXPECT_TRUE(parser.value() && parser.i == json.size()) << "invalid JSON near " << parser.i;
  for (const char* s : {R"("schema": "shardcheck-report/1")", "\"statistics\": [",
                        "\"max_bound_ratio\"", "\"fixed_tolerance_missed\""}) {
    EXPECT_NE(json.find(s), std::string::npos) << s;
  }
  std::ifstream md_file(dir / "report.md");
  const std::string md((std::istreambuf_iterator<char>(md_file)), {});
  for (const char* s : {"# shardcheck report", "## Numerics: mutant:dw-transposed",
                        "| op | dtype | P |", "## Properties", "**FAIL**", "## Failures"}) {
    EXPECT_NE(md.find(s), std::string::npos) << s;
  }
}

// Found before the run (nothing on out), for check and mutants.
TEST(Cli, AnUncreatableReportDirectoryIsAnError) {
  for (const char* command : {"check", "mutants"}) {
    expect_usage_error({command, "linear", "--cases", "1", "--report", "/proc/shardcheck-no"},
                       "--report: cannot create directory '/proc/shardcheck-no': ");
  }
}

// Found when the report is written, after the run (whose lines are on out).
TEST(Cli, AnUnwritableReportFileIsAnError) {
  const auto dir = std::filesystem::temp_directory_path() / "shardcheck-cli-test-unwritable";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "report.json");  // a directory where the file goes
  const std::vector<std::string> args = {"check",    "linear",     "--cases",
                                         "1",        "--property", "matches_reference",
                                         "--report", dir.string()};
  const auto r = run_cli(args);
  // The report is written to a temporary file, then renamed over report.json (atomically): the
  // rename is what fails.
  expect_error_line(r, args, "report: cannot rename '" + (dir / "report.json.tmp.").string());
  expect_error_line(r, args, "' to '" + (dir / "report.json").string() + "'");
  EXPECT_NE(r.out.find("PASS  linear/matches_reference"), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace shardcheck::cli

namespace shardcheck::cli {
namespace {

TEST(Cli, BudgetPrintsTheTable2RowsParametersAndTraffic) {
  const auto r = run_cli({"budget"});  // GPT-3 175B on tp=8
  EXPECT_EQ(r.status, 0) << r.err;
  for (const char* s : {"budget on mesh (tp=8)", "* TP: ", "TP + SP + selective recomputation",
                        "5as/h = 80", "325.2 GiB in the model", "4 all_reduce"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  const auto j = run_cli({"budget", "--mesh", "pp=2,dp=2,cp=2,tp=4", "--sp", "--json"});
  EXPECT_EQ(j.status, 0) << j.err;
  Json parser{j.out};
  EXPECT_TRUE(parser.value() && parser.i == j.out.size()) << j.out;
  for (const char* s : {R"("selected": "TP + SP")", "\"all_gathers\": 4",
                        "\"mesh\": \"(pp=2, dp=2, cp=2, tp=4)\""}) {
    EXPECT_NE(j.out.find(s), std::string::npos) << s << "\n" << j.out;
  }
}

// The library's own model beside Table 2 (budget/library_activations.hpp), for GPT-3 175B.
TEST(Cli, BudgetPrintsTheLibraryModel) {
  const auto r = run_cli({"budget"});  // tp = 8, no SP, no CP
  EXPECT_EQ(r.status, 0) << r.err;
  // Attention layer on a tp rank: x 2048·12288·2 B, q, k, v, out 2048·1536·2 B each, lse
  // 2048·12·4 B = 75595776 B; no collective buffer (y and dx are all_reduced in place).
  for (const char* s : {"library model (shardcheck's own ops; fullest rank; 2-byte values, "
                        "4-byte accumulators)",
                        "attention layer (heads over tp, ring CP over cp): 0.0704041 GiB / 0 GiB "
                        "/ 0 GiB",
                        "MLP (parallel_mlp: fc1 column-parallel [4h, h], fc2 row-parallel [h, "
                        "4h]): 0.0703125 GiB / 0 GiB / 0 GiB"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  const auto j = run_cli({"budget", "--mesh", "pp=2,dp=2,cp=2,tp=4", "--sp", "--json"});
  EXPECT_EQ(j.status, 0) << j.err;
  Json parser{j.out};
  EXPECT_TRUE(parser.value() && parser.i == j.out.size()) << j.out;
  // The MLP with SP on s/cp = 1024 tokens over tp = 4: kept the 256-token shard of x
  // (6291456 B) and h [1024, 4h/4] (25165824 B); forward peak fc1's all_gathered x or fc2's full
  // partial y (25165824 B each), backward peak fc1's re-gathered x and full dx.
  for (const char* s :
       {R"("library_activation_bytes_per_rank": {"element_bytes": 2, "accumulator_bytes": 4)",
        "{\"op\": \"MLP (parallel_mlp: fc1 column-parallel [4h, h], fc2 row-parallel [h, 4h], "
        "SP)\", \"kept\": 31457280, "
        "\"forward_peak\": 25165824, \"backward_peak\": 50331648, \"sent\": ",
        // The attention layer with SP keeps x's 256 token rows (6291456 B), q, k, v, out of its
        // 24 heads over the 1024 positions (6291456 B each) and lse (98304 B).
        "{\"op\": \"attention layer (heads over tp, ring CP over cp, SP)\", \"kept\": 31555584, ",
        "\"op\": \"SP LayerNorm (one of two)\""}) {
    EXPECT_NE(j.out.find(s), std::string::npos) << s << "\n" << j.out;
  }
  // The bytes each op's spec sends (priced by budget/traffic.hpp) against the paper's closed form:
  // without SP one layer's attention (y, dx) and MLP (fc2's y, fc1's dx) are Megatron's 4
  // all_reduces of s·b·h values (Korthikanti et al. 2022, §4.2.2), byte for byte.
  const auto plain = nlohmann::json::parse(run_cli({"budget", "--json"}).out);
  std::uint64_t layer_sent = 0;
  for (const auto& op : plain.at("library_activation_bytes_per_rank").at("ops")) {
    const auto name = op.at("op").get<std::string>();
    if (name.rfind("attention layer", 0) == 0 || name.rfind("MLP", 0) == 0) {
      layer_sent += op.at("sent").get<std::uint64_t>();
    }
  }
  EXPECT_EQ(static_cast<double>(layer_sent),
            plain.at("traffic_per_layer").at("tensor_parallel").at("per_rank_bytes").get<double>());
  EXPECT_NE(r.out.find("attention layer (heads over tp, ring CP over cp): 0.0704041 GiB / 0 GiB / "
                       "0 GiB; sends 0.164062 GiB"),
            std::string::npos)
      << r.out;
  const auto half = run_cli({"budget", "--bytes", "1.5"});
  EXPECT_EQ(half.status, 0) << half.err;
  EXPECT_NE(half.out.find("library model: needs a whole number of bytes"), std::string::npos)
      << half.out;
}

// The whole step's rows (budget/model_activations.hpp, budget/model_traffic.hpp): a model small
// enough to count by hand on pp = 2, dp = 2, tp = 2 with 2 micro-batches of 1 sequence of 4
// tokens per dp rank, hidden 4, float32.
TEST(Cli, BudgetPrintsTheWholeStep) {
  const auto r = run_cli({"budget"});  // GPT-3 175B on tp = 8: one stage, 96 layers
  EXPECT_EQ(r.status, 0) << r.err;
  const std::string heading =
      "whole training step (model_train_step; 2-byte values, 4-byte accumulators; no "
      "recomputation):";
  for (const std::string& s : {heading, std::string("1 sequences of 2048 tokens"),
                               std::string("8 ranks"), std::string("activation peak: "),
                               std::string("bytes one rank sends, the fullest per mesh axis: "),
                               std::string("model_parallel "), std::string("tp ")}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  std::vector<std::string> small;
  std::istringstream words(
      "budget --seq 4 --batch 1 --hidden 4 --heads 2 --layers 2 --vocab 8 --bytes 4 --mesh "
      "pp=2,dp=2,tp=2 --micro-batches 2 --json");
  for (std::string w; words >> w;) small.push_back(w);
  const auto j = run_cli(small);
  ASSERT_EQ(j.status, 0) << j.err;
  const auto step = nlohmann::json::parse(j.out).at("model_step");
  EXPECT_EQ(step.at("ranks").get<int>(), 8) << j.out;
  // Stage 0 sends each micro-batch's x [4 tokens, 4] of float32 forward (2 · 64 B) and receives
  // the two dx; stage 1 the reverse: 128 B in 4 calls either way.
  EXPECT_EQ(step.at("sent_per_axis").at("pp").at("bytes").get<std::uint64_t>(), 128U) << j.out;
  EXPECT_EQ(step.at("sent_per_axis").at("pp").at("calls").get<std::uint64_t>(), 4U) << j.out;
  for (const char* axis : {"tp", "dp_cp", "model_parallel"}) {
    EXPECT_GT(step.at("sent_per_axis").at(axis).at("bytes").get<std::uint64_t>(), 0U) << axis;
  }
  // The peak is the fullest rank's by the model the suite measures (model_budget_tests.cpp).
  ModelConfig cfg;
  cfg.vocab = 8;
  cfg.hidden = 4;
  cfg.heads = cfg.kv_heads = 2;
  cfg.head_dim = 2;
  cfg.ffn = 16;
  cfg.layers = 2;
  cfg.linear_bias = true;
  ModelParallelConfig par;
  par.pp = par.dp = par.tp = 2;
  par.micro_batches = 2;
  std::uint64_t peak = 0;
  for (int w = 0; w < 8; ++w) {
    peak = std::max(peak, budget::model_step_activations(cfg, par, 4, 4, w, {4, 4}).peak);
  }
  EXPECT_EQ(step.at("activation_peak").at("bytes").get<std::uint64_t>(), peak) << j.out;
  // Shapes the step does not take are skipped with the reason.
  const auto odd = run_cli({"budget", "--hidden", "10", "--heads", "3"});
  EXPECT_NE(odd.out.find("n/a (the step takes head_dim = hidden/heads whole (10/3 is not))"),
            std::string::npos)
      << odd.out;
  const auto big = run_cli({"budget", "--mesh", "dp=256,tp=8", "--json"});
  EXPECT_NE(big.out.find("at most 1024 ranks (this mesh has 2048)"), std::string::npos) << big.out;
}

TEST(Cli, BudgetUsageErrorsAreOneLineWithStatus2) {
  expect_usage_error({"budget", "--micro-batches", "0"},
                     "--micro-batches takes a whole number from 1");
  expect_usage_error({"budget", "--mesh", "tp=x"},
                     "--mesh tp takes a whole number from 1 to 1048576, not 'x'");
  expect_usage_error({"budget", "--mesh", "tp=2.5"}, "--mesh tp takes a whole number");
  expect_usage_error({"budget", "--mesh", "tp=0"}, "--mesh tp takes a whole number");
  expect_usage_error({"budget", "--mesh", "dp=2048,tp=1024"}, "multiply to more than 2^20");
  expect_usage_error({"budget", "--mesh", "tp"}, "'tp' is not name=size");
  expect_usage_error({"budget", "--mesh", "tp=2,tp=2"}, "appears twice");
  expect_usage_error({"budget", "--recompute", "some"}, "--recompute takes none, selective");
  expect_usage_error({"budget", "--seq", "0"}, "--seq takes a positive number, not '0'");
  expect_usage_error({"budget", "--vocab", "inf"}, "--vocab takes a positive number, not 'inf'");
  expect_usage_error({"budget", "--bytes", "-2"}, "--bytes takes a positive number");
  expect_usage_error({"budget", "--frob"}, "unknown option '--frob' for budget");
  expect_usage_error({"budget", "--hidden"}, "--hidden needs a value (H)");
  expect_usage_error({"budget", "extra"}, "budget takes no arguments, not 'extra'");
}

}  // namespace
}  // namespace shardcheck::cli
