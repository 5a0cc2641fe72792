#include "tools/shardcheck/suite_commands.hpp"

#include "engine/case_driver.hpp"
#include "engine/format_number.hpp"
#include "engine/replay.hpp"
#include "engine/runner.hpp"
#include "engine/suite.hpp"
#include "ops/op_spec.hpp"
#include "reports/report.hpp"
#include "runtime/errors.hpp"
#include "tools/shardcheck/check_campaign.hpp"
#include "tools/shardcheck/replay_db.hpp"

#include <chrono>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <system_error>
#include <vector>

namespace shardcheck::cli {
namespace {

constexpr int max_world_limit = 64;
constexpr int max_cases = 1000000;

// What check and mutants read from the command line; the defaults are the help's.
struct SuiteRun {
  std::vector<std::string> suites;
  std::string impl = "shardcheck";
  std::optional<std::string> property;
  int cases = 100;
  std::uint64_t seed = 1;
  check::RunConfig config;
  std::optional<std::string> report_dir;
  bool shrink = true;
  bool dtype_given = false;
  bool cases_given = false;
  bool max_world_given = false;
  std::optional<long long> time_seconds;  // --time: the campaign's budget
  std::optional<std::string> replay_db;   // --replay-db FILE
};

[[noreturn]] void usage_error(const std::string& msg) { throw UsageError(msg); }

// The options check and mutants share, in the order the help lists them.
std::vector<Option> run_options(const std::shared_ptr<SuiteRun>& o) {
  const SuiteRun d;
  return {
      {"--cases", "N", "cases per property, from 1 to " + std::to_string(max_cases),
       std::to_string(d.cases),
       [o](const std::string& v) {
         o->cases = parse_whole<int>("--cases", v, 1, max_cases);
         o->cases_given = true;
       }},
      {"--seed", "S",
       "the random seed (a whole number from 0 to 2^64 - 1); a run replays exactly "
       "with the same seed, cases, max-world and dtypes",
       std::to_string(d.seed),
       [o](const std::string& v) {
         o->seed = parse_whole<std::uint64_t>("--seed", v, 0, UINT64_MAX);
       }},
      {"--max-world", "P",
       "the largest world size (tp, cp, ...) a case may draw, from 1 to " +
           std::to_string(max_world_limit),
       std::to_string(d.config.max_world),
       [o](const std::string& v) {
         o->config.max_world = parse_whole<int>("--max-world", v, 1, max_world_limit);
         o->max_world_given = true;
       }},
      {"--dtype", "LIST", "the element types cases draw from, comma-separated",
       dtype_list(d.config.dtypes),
       [o](const std::string& v) {
         o->config.dtypes = parse_dtypes(v);
         o->dtype_given = true;
       }},
      {"--report", "DIR",
       "write DIR/report.md, DIR/report.json and DIR/report.html (the outcomes, the numerics "
       "of every op and the failing cases; the page with plots); DIR is created before the run",
       "no report", [o](const std::string& v) { o->report_dir = v; }},
  };
}

std::function<void(const std::string&)> suite_operand(const std::shared_ptr<SuiteRun>& o) {
  return [o](const std::string& s) { o->suites.push_back(s); };
}

std::vector<const check::Suite*> selected(const SuiteRun& o) {
  std::vector<const check::Suite*> out;
  const auto& reg = check::SuiteRegistry::instance();
  if (o.suites.empty()) {
    for (const auto& s : reg.all()) out.push_back(s.get());
    return out;
  }
  for (const auto& name : o.suites) {
    const auto* s = reg.find(name);
    if (s == nullptr) {
      std::string msg = "unknown suite '" + name + "'; known suites:";
      const char* separator = " ";
      for (const auto& k : reg.all()) {
        msg += separator;
        msg += k->name();
        separator = ", ";
      }
      usage_error(msg);
    }
    out.push_back(s);
  }
  return out;
}

// Every selected suite has the implementation, and one of them has the property (if given).
void require_impl_and_property(const std::vector<const check::Suite*>& suites, const SuiteRun& o) {
  bool property_found = false;
  for (const auto* s : suites) {
    bool known_impl = false;
    for (const auto& i : s->implementations()) known_impl |= i.name == o.impl;
    if (!known_impl) {
      usage_error("suite '" + s->name() + "' has no implementation '" + o.impl +
                  "'; `shardcheck list` names each suite's implementations");
    }
    for (const auto& p : s->properties()) property_found |= o.property && p.name == *o.property;
  }
  if (o.property && !property_found) {
    usage_error("no suite has a property '" + *o.property +
                "'; `shardcheck list` names each suite's properties");
  }
}

// Creates the report directory before the run, so an unwritable one fails in a second.
void prepare_report_dir(const SuiteRun& o) {
  if (!o.report_dir) return;
  std::error_code ec;
  std::filesystem::create_directories(*o.report_dir, ec);
  if (ec) {
    usage_error("--report: cannot create directory '" + *o.report_dir + "': " + ec.message() +
                "; pass a writable directory");
  }
}

report::Report new_report(const SuiteRun& o, const std::string& command_line) {
  report::Report rep;
  rep.command = command_line;
  rep.started = now_utc();
  rep.seed = o.seed;
  rep.cases = o.time_seconds ? 0 : o.cases;
  rep.time_seconds = o.time_seconds;
  rep.config = o.config;
  return rep;
}

void finish_report(report::Report& rep, const check::Collector& collector, const SuiteRun& o,
                   std::ostream& out) {
  const auto* d = check::case_driver();
  if (!o.report_dir || (d != nullptr && !d->checker())) return;
  rep.collector = &collector;
  report::write_report(rep, *o.report_dir);
  out << "report: " << *o.report_dir << "/report.md, " << *o.report_dir << "/report.json, "
      << *o.report_dir << "/report.html\n";
}

// The command that replays p, which ran `cases` cases with `seed`.
std::string replay_command(const SuiteRun& o, const check::PropertyOutcome& p, std::uint64_t seed,
                           int cases) {
  return check::replay_command({p.suite, p.impl, p.property, seed, cases, o.config.max_world,
                                o.dtype_given ? check::dtype_operand(o.config.dtypes) : ""});
}

// The suites and every op's spec as one JSON object (`list --json`).
int list_json(std::ostream& out) {
  using spec::json_string;
  using spec::JsonObject;
  auto named = [](const std::string& name, const std::string& description) {
    return JsonObject().field("name", name).field("description", description).str();
  };
  std::string suites;
  for (const auto& s : check::SuiteRegistry::instance().all()) {
    std::string props, impls, mutants;
    for (const auto& p : s->properties()) {
      props += (props.empty() ? "" : ", ") + named(p.name, p.description);
    }
    for (const auto& i : s->implementations()) {
      auto& to = i.is_mutant ? mutants : impls;
      to += (to.empty() ? "" : ", ") + named(i.name, i.description);
    }
    suites += (suites.empty() ? "" : ",\n    ") + JsonObject()
                                                      .field("name", s->name())
                                                      .field("description", s->description())
                                                      .raw("properties", "[" + props + "]")
                                                      .raw("implementations", "[" + impls + "]")
                                                      .raw("mutants", "[" + mutants + "]")
                                                      .str();
  }
  std::string ops;
  for (const auto& o : spec::example_specs()) {
    ops += (ops.empty() ? "" : ",\n    ") + spec::to_json(o);
  }
  out << "{\n  \"version\": " << json_string(SHARDCHECK_VERSION) << ",\n  \"suites\": [\n    "
      << suites << "\n  ],\n  \"ops\": [\n    " << ops << "\n  ]\n}\n";
  return 0;
}

int list(std::ostream& out) {
  for (const auto& s : check::SuiteRegistry::instance().all()) {
    out << "suite " << s->name() << ": " << s->description() << "\n  properties:\n";
    for (const auto& p : s->properties()) out << "    " << p.name << ": " << p.description << "\n";
    out << "  implementations:\n";
    for (const auto& i : s->implementations()) {
      if (!i.is_mutant) out << "    " << i.name << ": " << i.description << "\n";
    }
    out << "  mutants:\n";
    for (const auto& i : s->implementations()) {
      if (i.is_mutant) out << "    " << i.name << ": " << i.description << "\n";
    }
  }
  return 0;
}

struct Tally {
  int passed = 0, failed = 0, skipped = 0;
  int appended = 0;  // new entries written to --replay-db
};

// A --time campaign's clock: each property gets an equal share of what is left when it starts.
struct Clock {
  std::chrono::steady_clock::time_point end;
  int properties_left = 0;
  std::chrono::steady_clock::time_point next_deadline() {
    const auto now = std::chrono::steady_clock::now();
    const auto left = end > now ? end - now : std::chrono::steady_clock::duration::zero();
    return now + left / std::max(1, properties_left--);
  }
};

// Appends the failure to --replay-db unless an entry already holds the same finding.
void record_failure(const SuiteRun& o, const check::PropertyOutcome& r, std::uint64_t seed,
                    int cases, std::vector<ReplayEntry>& known, Tally& t, std::ostream& out) {
  if (!o.replay_db) return;
  ReplayEntry e{
      r.suite,   r.property, r.impl, seed, cases, o.config.max_world, dtype_list(o.config.dtypes),
      r.message, now_utc()};
  for (const auto& k : known) {
    if (same_finding(k, e)) {
      out << "  already in " << *o.replay_db << "\n";
      return;
    }
  }
  append_replay_entry(*o.replay_db, e);
  known.push_back(std::move(e));
  ++t.appended;
  out << "  new: appended to " << *o.replay_db << "\n";
}

// One property of suite s on o.impl: its PASS, FAIL or SKIP line(s), counted in t.
void check_property(const check::Suite& s, const check::PropertyInfo& p, const SuiteRun& o,
                    Clock& clock, std::vector<ReplayEntry>& known, check::Collector& collector,
                    report::Report& rep, Tally& t, std::ostream& out) {
  if (!s.applies(p.name, o.impl)) {
    out << "SKIP  " << s.name() << "/" << p.name << " [" << o.impl
        << "]: not applicable (the implementation does not claim the deterministic kernel)\n";
    ++t.skipped;
    return;
  }
  check::PropertyOutcome result;
  std::uint64_t seed = o.seed;
  int cases = o.cases;
  std::string timing;
  if (o.time_seconds) {
    auto timed = run_property_until(s, p.name, o.impl, o.config, o.seed, o.shrink,
                                    clock.next_deadline(), collector);
    result = std::move(timed.outcome);
    seed = timed.seed;
    cases = timed_batch_cases;
    timing = " in " + check::format_number(timed.seconds, 3) + " s (" +
             std::to_string(timed.batches) + (timed.batches == 1 ? " batch" : " batches") + ")";
  } else {
    check::RunParams params;
    params.seed = o.seed;
    params.cases = o.cases;
    params.shrink = o.shrink;
    result = check::run_property(s, p.name, o.impl, o.config, params, collector);
  }
  if (result.passed) {
    ++t.passed;
    out << "PASS  " << s.name() << "/" << p.name << " [" << o.impl << "]  " << result.cases
        << " cases" << timing << ", worst bound ratio " << check::format_number(result.max_ratio, 3)
        << "\n";
  } else {
    ++t.failed;
    out << "FAIL  " << s.name() << "/" << p.name << " [" << o.impl << "]  after " << result.cases
        << " passing cases" << timing << "; the smallest failing case:\n"
        << indent(result.message) << "\n  replay: " << replay_command(o, result, seed, cases)
        << "\n";
    if (!result.gave_up) record_failure(o, result, seed, cases, known, t, out);
  }
  rep.properties.push_back(std::move(result));
}

// Under mpirun (a case driver is set: engine/case_driver.hpp) a case's ranks are the processes:
// --max-world is at most their number (the default is lowered to it, and says so), and only
// process 0 writes the report (the others run the same cases in lockstep and print nothing; they
// create the report directory too, so a bad --report stops every process alike). --time and
// --replay-db are refused: a campaign decides by the clock and by files, which the processes
// would not share.
SuiteRun fit_to_processes(SuiteRun o, std::ostream& out) {
  const auto* d = check::case_driver();
  if (d == nullptr) return o;
  if (o.time_seconds) usage_error("--time is not supported under mpirun; give --cases");
  if (o.replay_db) usage_error("--replay-db is not supported under mpirun; run it without mpirun");
  const int p = d->processes();
  if (o.config.max_world > p) {
    if (o.max_world_given) {
      usage_error("--max-world " + std::to_string(o.config.max_world) +
                  " needs as many processes; mpirun started " + std::to_string(p) +
                  " (mpirun -np " + std::to_string(o.config.max_world) + ", or --max-world " +
                  std::to_string(p) + ")");
    }
    o.config.max_world = p;
    out << "max-world " << p << ": the processes mpirun started\n";
  }
  return o;
}

int run_check(const SuiteRun& given, const std::string& command_line, std::ostream& out) {
  const SuiteRun o = fit_to_processes(given, out);
  if (o.time_seconds && o.cases_given) {
    usage_error("--time and --cases both given: --time runs as many cases as fit; give one");
  }
  const auto suites = selected(o);
  require_impl_and_property(suites, o);
  prepare_report_dir(o);
  std::vector<ReplayEntry> known;
  if (o.replay_db) {
    known = read_replay_db(*o.replay_db);
    for (const auto& e : known) parse_dtypes(e.dtypes);
    require_writable_replay_db(*o.replay_db);
  }
  Clock clock;
  clock.end = std::chrono::steady_clock::now() + std::chrono::seconds(o.time_seconds.value_or(0));
  for (const auto* s : suites) {
    for (const auto& p : s->properties()) {
      clock.properties_left += (!o.property || p.name == *o.property) && s->applies(p.name, o.impl);
    }
  }
  check::Collector collector;
  ReplayTally replayed;
  if (o.replay_db) replayed = replay_entries(known, o.shrink, collector, out);
  report::Report rep = new_report(o, command_line);
  Tally t;
  for (const auto* s : suites) {
    for (const auto& p : s->properties()) {
      if (!o.property || p.name == *o.property) {
        check_property(*s, p, o, clock, known, collector, rep, t, out);
      }
    }
  }
  finish_report(rep, collector, o, out);
  if (o.replay_db) {
    out << "replay-db " << *o.replay_db << ": " << replayed.still_failing << " still failing, "
        << replayed.fixed << " no longer failing, " << replayed.not_registered
        << " not registered; " << t.appended << " new\n";
  }
  out << t.passed << " passed, " << t.failed << " failed";
  if (t.skipped != 0) out << ", " << t.skipped << " skipped";
  out << "\n";
  return t.failed == 0 && replayed.still_failing == 0 ? 0 : 1;
}

// Runs s's properties on mutant m until one fails (kills it).
report::MutantOutcome try_mutant(const check::Suite& s, const check::ImplementationInfo& m,
                                 const SuiteRun& o, check::Collector& collector) {
  report::MutantOutcome mo;
  mo.suite = s.name();
  mo.mutant = m.name;
  mo.description = m.description;
  check::RunParams params;
  params.seed = o.seed;
  params.cases = o.cases;
  const auto kill = check::kill_mutant(s, m.name, o.config, params, collector);
  mo.killed = kill.killed;
  mo.killed_by = kill.killed_by;
  mo.cases = kill.cases;
  mo.counterexample = kill.counterexample;
  return mo;
}

int run_mutants(const SuiteRun& given, const std::string& command_line, std::ostream& out) {
  const SuiteRun o = fit_to_processes(given, out);
  const auto suites = selected(o);
  prepare_report_dir(o);
  check::Collector collector;
  report::Report rep = new_report(o, command_line);
  int killed = 0;
  int survived = 0;
  for (const auto* s : suites) {
    for (const auto& m : s->implementations()) {
      if (!m.is_mutant) continue;
      auto mo = try_mutant(*s, m, o, collector);
      if (mo.killed) {
        ++killed;
        const auto first_line = mo.counterexample.substr(0, mo.counterexample.find('\n'));
        out << "killed    " << mo.mutant << "  after " << mo.cases << " cases by " << mo.killed_by
            << ": " << first_line << "\n";
      } else {
        ++survived;
        out << "SURVIVED  " << mo.mutant << "  (" << o.cases
            << " cases of every property passed): " << mo.description << "\n";
      }
      rep.mutants.push_back(std::move(mo));
    }
  }
  finish_report(rep, collector, o, out);
  out << killed << " killed, " << survived << " survived\n";
  return survived == 0 ? 0 : 1;
}

}  // namespace

Command list_command() {
  const auto json = std::make_shared<bool>(false);
  Command c;
  c.name = "list";
  c.summary =
      "name every suite, its properties, implementations and mutants; --json: every op's spec";
  c.description =
      "Prints every registered suite with its description, then its properties, its "
      "implementations and its mutants, each with one line of description. With --json, one "
      "JSON object instead: the suites as lists of {name, description}, and every op's spec "
      "(lib/ops/<family>/<family>_spec.hpp) at an example configuration of its family: the op, "
      "its family, its configuration, its sizes and mesh, its tensors (role, global shape, "
      "placement per mesh dimension, each rank's local shape) and each rank's collectives "
      "(pass, tensor, group, collective, element type, algorithm, counts).";
  c.options = {{"--json", "", "print the suites and every op's spec as JSON (docs/cli.md)", "off",
                [json](const std::string&) { *json = true; }}};
  c.exit_status = "0; 2 a usage error (on stderr).";
  c.examples = {"shardcheck list", "shardcheck list --json"};
  c.run = [json](std::ostream& out, const std::string&) {
    return *json ? list_json(out) : list(out);
  };
  return c;
}

Command check_command() {
  const auto o = std::make_shared<SuiteRun>();
  const SuiteRun d;
  Command c;
  c.name = "check";
  c.summary = "run the properties of suites against one implementation";
  c.description =
      "Runs every property of the given suites against one implementation, printing one PASS, "
      "FAIL or SKIP line per property and then \"N passed, N failed\". A failure prints its "
      "smallest failing case and the command that replays it.";
  c.operands = "[SUITE...]";
  c.operands_help = "the suites to check (default: every suite; `shardcheck list` names them)";
  c.options = {
      {"--impl", "NAME", "the implementation to check; every suite checked must have it", d.impl,
       [o](const std::string& v) { o->impl = v; }},
      {"--property", "NAME", "check only this property", "every property",
       [o](const std::string& v) { o->property = v; }},
  };
  for (auto& opt : run_options(o)) c.options.push_back(std::move(opt));
  c.options.push_back({"--no-shrink", "", "report the first failing case as drawn, unshrunk",
                       "shrink", [o](const std::string&) { o->shrink = false; }});
  c.options.push_back(
      {"--time", "DURATION",
       "run each property for its share of DURATION (90s, 10m, 8h: split equally among the "
       "properties left), as many cases as fit, in batches of 100 cases with seeds S, S + "
       "0x9E3779B97F4A7C15, ...; a failure's replay names its batch's seed. Not with --cases",
       "off: --cases cases",
       [o](const std::string& v) { o->time_seconds = parse_duration("--time", v); }});
  c.options.push_back(
      {"--replay-db", "FILE",
       "an example database (JSON lines): replay every entry first (each fails again or is "
       "reported as no longer failing), then run the properties and append each new failure",
       "none", [o](const std::string& v) { o->replay_db = v; }});
  c.exit_status =
      "0 every property passed; 1 a property failed (or a --replay-db entry failed again); 2 a "
      "usage error (on stderr).";
  c.examples = {"shardcheck check", "shardcheck check linear --cases 200 --report out",
                "shardcheck check --time 8h --seed 20261202 --max-world 16 --replay-db db.jsonl",
                "shardcheck check linear --impl mutant:bias-on-every-rank --property "
                "matches_reference --dtype float32"};
  c.operand = suite_operand(o);
  c.run = [o](std::ostream& out, const std::string& line) { return run_check(*o, line, out); };
  return c;
}

Command mutants_command() {
  const auto o = std::make_shared<SuiteRun>();
  Command c;
  c.name = "mutants";
  c.summary = "run every mutant of suites against their properties: each must be killed";
  c.description =
      "Runs each mutant (a known bug, planted) of the given suites against the suite's "
      "properties until one fails, printing one \"killed\" or \"SURVIVED\" line per mutant and "
      "then \"N killed, N survived\".";
  c.operands = "[SUITE...]";
  c.operands_help = "the suites whose mutants to run (default: every suite)";
  c.options = run_options(o);
  c.exit_status = "0 every mutant was killed; 1 a mutant survived; 2 a usage error (on stderr).";
  c.examples = {"shardcheck mutants", "shardcheck mutants linear --cases 50"};
  c.operand = suite_operand(o);
  c.run = [o](std::ostream& out, const std::string& line) { return run_mutants(*o, line, out); };
  return c;
}

}  // namespace shardcheck::cli
