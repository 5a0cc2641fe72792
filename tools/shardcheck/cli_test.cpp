// The shardcheck command line: every user-facing error (one line, exit status 2), the output
// contract of check (one line per property, the closing "N passed, N failed"), a failure's
// explanation and replay command (and that replaying reproduces it), and the report files.
#include "tools/shardcheck/cli.hpp"
#include "engine/suite.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace shardcheck::cli {
namespace {

struct Result {
  int status;
  std::string out, err;
};

Result run_cli(std::vector<std::string> args) {
  check::register_builtin_suites();
  args.insert(args.begin(), "shardcheck");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int status = run(static_cast<int>(argv.size()), argv.data(), out, err);
  return {status, out.str(), err.str()};
}

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

void expect_usage_error(std::vector<std::string> args, const std::string& fragment) {
  const auto r = run_cli(args);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("shardcheck: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
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
  expect_usage_error({"list", "extra"}, "list takes no arguments");
}

TEST(Cli, ListNamesSuitesPropertiesImplementationsAndMutants) {
  const auto r = run_cli({"list"});
  EXPECT_EQ(r.status, 0);
  for (const char* s : {"suite linear", "matches_reference", "declared_traffic",
                        "shardcheck:", "mutant:bias-on-every-rank", "mutant:gather-wrong-axis"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  }
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
  for (const char* s : {"\"schema\": \"shardcheck-report/1\"", "\"statistics\": [",
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

TEST(Cli, AnUnwritableReportDirectoryIsAnError) {
  const auto r = run_cli({"check", "linear", "--cases", "1", "--property", "matches_reference",
                          "--report", "/proc/shardcheck-cannot-write-here"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("report: cannot create directory"), std::string::npos) << r.err;
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
  for (const char* s : {"\"selected\": \"TP + SP\"", "\"all_gathers\": 4",
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
                        "MLP fc1 column-parallel [4h, h]: 0.046875 GiB / 0 GiB / 0 GiB"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  const auto j = run_cli({"budget", "--mesh", "pp=2,dp=2,cp=2,tp=4", "--sp", "--json"});
  EXPECT_EQ(j.status, 0) << j.err;
  Json parser{j.out};
  EXPECT_TRUE(parser.value() && parser.i == j.out.size()) << j.out;
  // fc1 with SP on s/cp = 1024 tokens over tp = 4: kept the 256-token shard of x, forward the
  // all_gathered x, backward the re-gathered x and the full dx.
  for (const char* s :
       {"\"library_activation_bytes_per_rank\": {\"element_bytes\": 2, \"accumulator_bytes\": 4",
        "{\"op\": \"MLP fc1 column-parallel [4h, h], SP input\", \"kept\": 6291456, "
        "\"forward_peak\": 25165824, \"backward_peak\": 50331648}",
        "\"op\": \"SP LayerNorm (one of two)\""}) {
    EXPECT_NE(j.out.find(s), std::string::npos) << s << "\n" << j.out;
  }
  const auto half = run_cli({"budget", "--bytes", "1.5"});
  EXPECT_EQ(half.status, 0) << half.err;
  EXPECT_NE(half.out.find("library model: needs a whole number of bytes"), std::string::npos)
      << half.out;
}

TEST(Cli, BudgetUsageErrorsAreOneLineWithStatus2) {
  expect_usage_error({"budget", "--mesh", "tp=x"}, "--mesh tp takes a positive number");
  expect_usage_error({"budget", "--mesh", "tp"}, "'tp' is not name=size");
  expect_usage_error({"budget", "--mesh", "tp=2,tp=2"}, "appears twice");
  expect_usage_error({"budget", "--recompute", "some"}, "--recompute takes none, selective");
  expect_usage_error({"budget", "--seq", "0"}, "--seq takes a positive number");
  expect_usage_error({"budget", "--frob"}, "unknown option '--frob' for budget");
  expect_usage_error({"budget", "--hidden"}, "--hidden needs a value");
}

}  // namespace
}  // namespace shardcheck::cli
