// The command line under mpirun, with a fake case driver in this process
// (testing/fake_case_driver.hpp) standing for MpiCaseDriver: --max-world fits the processes (the
// default is lowered and says so; more than the processes is a usage error), the campaign
// options and the commands other than check and mutants are refused with the reason, and a
// process other than the checker writes no report. Under a real mpirun: properties/mpi/.
#include "testing/fake_case_driver.hpp"
#include "tools/shardcheck/cli_test_support.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace shardcheck::cli {
namespace {

using check::testing::FakeCaseDriver;
using check::testing::ScopedCaseDriver;
using test_support::run_cli;

void expect_refused(const std::vector<std::string>& args, const std::string& words) {
  const auto r = run_cli(args);
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(CliUnderMpirun, MaxWorldIsAtMostTheProcesses) {
  const FakeCaseDriver driver(4, 0);
  const ScopedCaseDriver scope(driver);
  expect_refused({"check", "linear", "--max-world", "8"},
                 "--max-world 8 needs as many processes; mpirun started 4 (mpirun -np 8, or "
                 "--max-world 4)");
  const auto r = run_cli({"check", "linear", "--property", "matches_reference", "--cases", "3"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("max-world 4: the processes mpirun started\nPASS  linear/", 0), 0U)
      << r.out;
  const auto given = run_cli(
      {"check", "linear", "--property", "matches_reference", "--cases", "3", "--max-world", "3"});
  EXPECT_EQ(given.status, 0) << given.err;
  EXPECT_EQ(given.out.find("max-world"), std::string::npos) << given.out;
}

TEST(CliUnderMpirun, CampaignOptionsAndOtherCommandsAreRefused) {
  const FakeCaseDriver driver(2, 0);
  const ScopedCaseDriver scope(driver);
  expect_refused({"check", "linear", "--time", "1m"}, "--time is not supported under mpirun");
  expect_refused({"check", "linear", "--replay-db", "db.jsonl"},
                 "--replay-db is not supported under mpirun");
  expect_refused({"compare", "case"},
                 "under mpirun only check and mutants run (and list, help, version); run "
                 "compare without mpirun");
  expect_refused({"budget"}, "run budget without mpirun");
}

TEST(CliUnderMpirun, OnlyTheCheckerWritesTheReport) {
  const auto dir = std::filesystem::temp_directory_path() / "shardcheck_mpirun_cli_report";
  std::filesystem::remove_all(dir);
  const FakeCaseDriver other(2, 1);
  {
    const ScopedCaseDriver scope(other);
    const auto r = run_cli({"check", "linear", "--property", "matches_reference", "--cases", "2",
                            "--report", dir.string()});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(
        std::filesystem::is_directory(dir));  // made by every process, so a bad one stops all
    EXPECT_FALSE(std::filesystem::exists(dir / "report.json"));
  }
  const FakeCaseDriver checker(2, 0);
  const ScopedCaseDriver scope(checker);
  const auto r = run_cli({"check", "linear", "--property", "matches_reference", "--cases", "2",
                          "--report", dir.string()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir / "report.json"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace shardcheck::cli
