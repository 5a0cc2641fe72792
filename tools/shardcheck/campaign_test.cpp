// `shardcheck check --time` and `--replay-db` (check_campaign.hpp, replay_db.hpp): a timed run
// states the cases it ran and stops near its budget; a failure found in a later batch replays
// with its batch's seed; the example database records a failure once, replays it first on the
// next run (failing again, or reported as no longer failing), and refuses malformed lines.
#include "tools/shardcheck/check_campaign.hpp"
#include "tools/shardcheck/cli_test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace shardcheck::cli {
namespace {

using test_support::run_cli;
using test_support::split_words;

// The words of the first "replay: shardcheck ..." line of out, without "shardcheck".
std::vector<std::string> replay_words(const std::string& out) {
  const auto at = out.find("replay: shardcheck ");
  if (at == std::string::npos) return {};
  auto words = split_words(out.substr(at + 8, out.find('\n', at) - at - 8));
  words.erase(words.begin());
  return words;
}

// The cases of the PASS/FAIL line of `what`: "PASS  linear/x [impl]  N cases".
int cases_of(const std::string& out, const std::string& what) {
  const auto at = out.find(what);
  if (at == std::string::npos) return -1;
  std::istringstream line(out.substr(at + what.size()));
  int n = -1;
  line >> n;
  return n;
}

std::vector<std::string> lines_of(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::filesystem::path fresh(const char* name) {
  auto p = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(p);
  return p;
}

const std::vector<std::string> failing = {"check",      "linear",
                                          "--impl",     "mutant:bias-on-every-rank",
                                          "--property", "matches_reference",
                                          "--dtype",    "float32,float64"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

TEST(CheckTime, RunsBatchesUntilItsBudgetAndStatesTheCasesRun) {
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_cli(
      {"check", "linear", "--property", "matches_reference", "--time", "3s", "--max-world", "3"});
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.status, 0) << r.out;
  const int cases = cases_of(r.out, "PASS  linear/matches_reference [shardcheck]  ");
  // "N cases in T s (B batches)" ("1 batch"): the cases stated are those run, B batches of at most
  // 100 (how many fit in 3 s depends on the build and the machine's load: ASan runs far fewer, so
  // the count itself is not asserted).
  const auto open = r.out.find(" s (");
  ASSERT_NE(open, std::string::npos) << r.out;
  std::istringstream batches_text(r.out.substr(open + 4));
  int batches = 0;
  batches_text >> batches;
  EXPECT_NE(
      r.out.find(batches == 1 ? " batch), worst bound ratio " : " batches), worst bound ratio "),
      std::string::npos)
      << r.out;
  EXPECT_GE(cases, 1) << r.out;
  EXPECT_GT(cases, (batches - 1) * 100) << r.out;
  EXPECT_LE(cases, batches * 100) << r.out;
  // The budget holds: the batch running at the deadline stops at its next case.
  EXPECT_LT(took, 3.0 + 2.0) << r.out;
  EXPECT_GT(took, 2.5) << r.out;
}

TEST(CheckTime, TheReportStatesTheBudgetNotTheDefaultCaseCount) {
  // report.json said "cases": 100 (the --cases default) for a timed run that ran other counts.
  const auto dir = fresh("shardcheck-timed-report");
  const auto r = run_cli({"check", "linear", "--property", "matches_reference", "--time", "1s",
                          "--max-world", "2", "--report", dir.string()});
  ASSERT_EQ(r.status, 0) << r.out;
  std::ifstream in(dir / "report.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_TRUE(j["cases"].is_null()) << j.dump();
  EXPECT_EQ(j["time_seconds"], 1);
  EXPECT_EQ(j["properties"][0]["cases"],
            cases_of(r.out, "PASS  linear/matches_reference [shardcheck]  "));
  std::ifstream md(dir / "report.md");
  const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("a timed campaign of 1 s"), std::string::npos) << text;
  EXPECT_EQ(text.find("cases per property"), std::string::npos) << text;
}

TEST(CheckTime, BatchSeedsStartAtTheSeedAndStepByTheGoldenRatio) {
  EXPECT_EQ(batch_seed(5, 0), 5U);
  EXPECT_EQ(batch_seed(5, 2), 5U + 2U * 0x9E3779B97F4A7C15ULL);
  EXPECT_NE(batch_seed(6, 1), batch_seed(5, 2));
}

TEST(CheckTime, AFailureReplaysWithItsBatchSeedAndOneHundredCases) {
  const auto r = run_cli(with(failing, {"--time", "20s", "--seed", "5"}));
  ASSERT_EQ(r.status, 1) << r.out;
  const auto words = replay_words(r.out);
  ASSERT_FALSE(words.empty()) << r.out;
  const auto again = run_cli(words);
  EXPECT_EQ(again.status, 1);
  // The replay (a plain --cases run) prints the same shrunk case.
  const auto body = [](const std::string& out) {
    const auto at = out.find("the smallest failing case:");
    return out.substr(at, out.find("replay:") - at);
  };
  EXPECT_EQ(body(again.out), body(r.out));
  EXPECT_NE(r.out.find("--cases 100 "), std::string::npos) << r.out;
}

TEST(CheckReplayDb, RecordsAFailureOnceAndReplaysItFirst) {
  const auto db = fresh("shardcheck-replay-db-test.jsonl");
  const auto first = run_cli(with(failing, {"--cases", "60", "--replay-db", db.string()}));
  EXPECT_EQ(first.status, 1);
  EXPECT_NE(first.out.find("  new: appended to " + db.string()), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("0 still failing, 0 no longer failing, 0 not registered; 1 new"),
            std::string::npos)
      << first.out;
  auto lines = lines_of(db);
  ASSERT_EQ(lines.size(), 1U);
  const auto e = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(e["suite"], "linear");
  EXPECT_EQ(e["property"], "matches_reference");
  EXPECT_EQ(e["impl"], "mutant:bias-on-every-rank");
  EXPECT_EQ(e["seed"], 1);
  EXPECT_EQ(e["cases"], 60);
  EXPECT_EQ(e["max_world"], 8);
  EXPECT_EQ(e["dtypes"], "float32,float64");
  EXPECT_NE(e["counterexample"].get<std::string>().find("row_parallel_linear"), std::string::npos);

  const auto second = run_cli(with(failing, {"--cases", "60", "--replay-db", db.string()}));
  EXPECT_EQ(second.status, 1);
  const auto replayed = second.out.find("REPLAY FAIL   linear/matches_reference");
  EXPECT_EQ(replayed, 0U) << "the entry is replayed before the campaign:\n" << second.out;
  EXPECT_NE(second.out.find("  already in " + db.string()), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("1 still failing, 0 no longer failing, 0 not registered; 0 new"),
            std::string::npos)
      << second.out;
  EXPECT_EQ(lines_of(db).size(), 1U) << "the same finding is not appended twice";
}

TEST(CheckReplayDb, AnEntryThatPassesNowOrIsNotRegisteredIsReported) {
  const auto db = fresh("shardcheck-replay-db-fixed.jsonl");
  std::ofstream(db) << R"({"suite": "linear", "property": "matches_reference", )"
                    << R"("impl": "shardcheck", "seed": 3, "cases": 5, "max_world": 3, )"
                    << R"("dtypes": "float64", "counterexample": "once", "found": "then"})"
                    << "\n\n"
                    << R"({"suite": "gone", "property": "p", "impl": "shardcheck", "seed": 1, )"
                    << R"("cases": 5, "max_world": 3, "dtypes": "float64", )"
                    << R"("counterexample": "x"})"
                    << "\n";
  const auto r = run_cli({"check", "linear", "--property", "matches_reference", "--cases", "5",
                          "--max-world", "3", "--replay-db", db.string()});
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("REPLAY FIXED  linear/matches_reference [shardcheck]  no longer fails (5 "
                       "cases pass; found then): shardcheck check linear --impl shardcheck "
                       "--property matches_reference --seed 3 --cases 5 --max-world 3 --dtype "
                       "float64"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("REPLAY SKIP   gone/p [shardcheck]  not registered"), std::string::npos);
  EXPECT_NE(r.out.find("0 still failing, 1 no longer failing, 1 not registered; 0 new"),
            std::string::npos)
      << r.out;
}

TEST(CheckReplayDb, AMalformedLineIsAUsageErrorBeforeAnythingRuns) {
  const auto db = fresh("shardcheck-replay-db-bad.jsonl");
  const std::string ok =
      R"({"suite": "linear", "property": "matches_reference", "impl": "shardcheck", "seed": 1, )"
      R"("cases": 5, "max_world": 3, "dtypes": "float64", "counterexample": "x"})";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{not json", "line 2: not JSON"},
      {"[1, 2]", "line 2: not a JSON object"},
      {R"({"suite": "linear"})", "line 2: field 'property' is missing or not a string"},
      {R"({"suite": "linear", "property": "p", "impl": "i", "seed": -1})",
       "line 2: field 'seed' is missing or not a whole number"},
      {R"({"suite": "s", "property": "p", "impl": "i", "seed": 1, "cases": 0, "max_world": 3})",
       "line 2: cases must be 1 to 1000000"},
      {R"({"suite": "s", "property": "p", "impl": "i", "seed": 1, "cases": 5, "max_world": 3, )"
       R"("dtypes": "float8", "counterexample": ""})",
       "unknown element type 'float8'"},
  };
  for (const auto& [line, fragment] : bad) {
    std::ofstream(db) << ok << "\n" << line << "\n";
    const auto r = run_cli({"check", "linear", "--cases", "1", "--replay-db", db.string()});
    EXPECT_EQ(r.status, 2) << line;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace shardcheck::cli
