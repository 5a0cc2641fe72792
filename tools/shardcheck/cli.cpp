#include "tools/shardcheck/cli.hpp"

#include "engine/runner.hpp"
#include "engine/suite.hpp"
#include "reports/report.hpp"
#include "runtime/errors.hpp"
#include "tools/shardcheck/budget_command.hpp"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace shardcheck::cli {
namespace {

constexpr int max_world_limit = 64;

struct Options {
  std::string command;
  std::vector<std::string> suites;
  std::optional<std::string> impl;
  std::optional<std::string> property;
  int cases = 100;
  std::uint64_t seed = 1;
  check::RunConfig config;
  std::optional<std::string> report_dir;
  bool shrink = true;
  bool dtype_given = false;
  std::string command_line;
};

[[noreturn]] void usage_error(const std::string& msg) { throw UsageError(msg); }

template <class I>
I parse_int(const std::string& opt, const std::string& text, I lo, I hi) {
  I v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || v < lo || v > hi) {
    usage_error(opt + " takes a whole number from " + std::to_string(lo) + " to " +
                std::to_string(hi) + ", not '" + text + "'");
  }
  return v;
}

std::vector<DType> parse_dtypes(const std::string& text) {
  std::vector<DType> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    bool found = false;
    for (const DType t : {DType::float64, DType::float32, DType::bfloat16, DType::float16}) {
      if (item == name(t)) {
        out.push_back(t);
        found = true;
      }
    }
    if (!found) {
      usage_error("--dtype: unknown element type '" + item +
                  "'; use a comma-separated list of float64, float32, bfloat16, float16");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

Options parse(int argc, const char* const* argv) {
  Options o;
  if (argc < 2) usage_error("missing command; use list, check, mutants or budget");
  o.command = argv[1];
  if (o.command != "list" && o.command != "check" && o.command != "mutants") {
    usage_error("unknown command '" + o.command + "'; use list, check, mutants or budget");
  }
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--impl" && o.command == "check") o.impl = value();
    else if (a == "--property" && o.command == "check") o.property = value();
    else if (a == "--cases") o.cases = parse_int<int>(a, value(), 1, 1000000);
    else if (a == "--seed") o.seed = parse_int<std::uint64_t>(a, value(), 0, UINT64_MAX);
    else if (a == "--max-world")
      o.config.max_world = parse_int<int>(a, value(), 1, max_world_limit);
    else if (a == "--dtype") {
      o.config.dtypes = parse_dtypes(value());
      o.dtype_given = true;
    } else if (a == "--report") o.report_dir = value();
    else if (a == "--no-shrink" && o.command == "check") o.shrink = false;
    else if (a.rfind("--", 0) == 0) usage_error("unknown option '" + a + "' for " + o.command);
    else if (o.command == "list") usage_error("list takes no arguments");
    else o.suites.push_back(a);
  }
  return o;
}

std::vector<const check::Suite*> selected(const Options& o) {
  std::vector<const check::Suite*> out;
  const auto& reg = check::SuiteRegistry::instance();
  if (o.suites.empty()) {
    for (const auto& s : reg.all()) out.push_back(s.get());
    return out;
  }
  for (const auto& name : o.suites) {
    const auto* s = reg.find(name);
    if (s == nullptr) {
      std::string known;
      for (const auto& k : reg.all()) known += (known.empty() ? "" : ", ") + k->name();
      usage_error("unknown suite '" + name + "'; known suites: " + known);
    }
    out.push_back(s);
  }
  return out;
}

std::string now_utc() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string ratio_text(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", r);
  return buf;
}

std::string replay_command(const Options& o, const check::PropertyOutcome& p) {
  std::string s = "shardcheck check " + p.suite + " --impl " + p.impl + " --property " +
                  p.property + " --seed " + std::to_string(o.seed) + " --cases " +
                  std::to_string(o.cases) + " --max-world " + std::to_string(o.config.max_world);
  if (o.dtype_given) {
    s += " --dtype ";
    for (std::size_t i = 0; i < o.config.dtypes.size(); ++i) {
      s += (i ? "," : "") + std::string(name(o.config.dtypes[i]));
    }
  }
  return s;
}

std::string indent(const std::string& text) {
  std::string out = "    ";
  for (const char c : text) {
    out += c;
    if (c == '\n') out += "    ";
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == '\n')) out.pop_back();
  return out;
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

int check_command(const Options& o, std::ostream& out) {
  const auto suites = selected(o);
  const std::string impl = o.impl.value_or("shardcheck");
  check::Collector collector;
  report::Report rep;
  rep.command = o.command_line;
  rep.started = now_utc();
  rep.seed = o.seed;
  rep.cases = o.cases;
  rep.config = o.config;
  int passed = 0;
  int failed = 0;
  int skipped = 0;
  for (const auto* s : suites) {
    bool known_impl = false;
    for (const auto& i : s->implementations()) known_impl |= i.name == impl;
    if (!known_impl) {
      usage_error("suite '" + s->name() + "' has no implementation '" + impl +
                  "'; see `shardcheck list`");
    }
    for (const auto& p : s->properties()) {
      if (o.property && p.name != *o.property) continue;
      if (!s->applies(p.name, impl)) {
        out << "SKIP  " << s->name() << "/" << p.name << " [" << impl
            << "]: not applicable (the implementation does not claim the deterministic kernel)\n";
        ++skipped;
        continue;
      }
      check::RunParams params;
      params.seed = o.seed;
      params.cases = o.cases;
      params.shrink = o.shrink;
      auto result = check::run_property(*s, p.name, impl, o.config, params, collector);
      if (result.passed) {
        ++passed;
        out << "PASS  " << s->name() << "/" << p.name << " [" << impl << "]  " << result.cases
            << " cases, worst bound ratio " << ratio_text(result.max_ratio) << "\n";
      } else {
        ++failed;
        out << "FAIL  " << s->name() << "/" << p.name << " [" << impl << "]  after " << result.cases
            << " passing cases; the smallest failing case:\n"
            << indent(result.message) << "\n  replay: " << replay_command(o, result) << "\n";
      }
      rep.properties.push_back(std::move(result));
    }
  }
  if (o.property && passed + failed + skipped == 0) {
    usage_error("no suite has a property '" + *o.property + "'; see `shardcheck list`");
  }
  if (o.report_dir) {
    rep.collector = &collector;
    report::write_report(rep, *o.report_dir);
    out << "report: " << *o.report_dir << "/report.md, " << *o.report_dir << "/report.json\n";
  }
  out << passed << " passed, " << failed << " failed";
  if (skipped != 0) out << ", " << skipped << " skipped";
  out << "\n";
  return failed == 0 ? 0 : 1;
}

int mutants_command(const Options& o, std::ostream& out) {
  const auto suites = selected(o);
  check::Collector collector;
  report::Report rep;
  rep.command = o.command_line;
  rep.started = now_utc();
  rep.seed = o.seed;
  rep.cases = o.cases;
  rep.config = o.config;
  int killed = 0;
  int survived = 0;
  for (const auto* s : suites) {
    for (const auto& m : s->implementations()) {
      if (!m.is_mutant) continue;
      report::MutantOutcome mo;
      mo.suite = s->name();
      mo.mutant = m.name;
      mo.description = m.description;
      for (const auto& p : s->properties()) {
        if (!s->applies(p.name, m.name)) continue;
        check::RunParams params;
        params.seed = o.seed;
        params.cases = o.cases;
        auto r = check::run_property(*s, p.name, m.name, o.config, params, collector);
        if (!r.passed) {
          mo.killed = true;
          mo.killed_by = p.name;
          mo.cases = r.cases + 1;
          mo.counterexample = r.message;
          break;
        }
      }
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
  if (o.report_dir) {
    rep.collector = &collector;
    report::write_report(rep, *o.report_dir);
    out << "report: " << *o.report_dir << "/report.md, " << *o.report_dir << "/report.json\n";
  }
  out << killed << " killed, " << survived << " survived\n";
  return survived == 0 ? 0 : 1;
}

}  // namespace

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  try {
    if (argc >= 2 && std::string(argv[1]) == "budget") {
      return budget_command(std::vector<std::string>(argv + 2, argv + argc), out);
    }
    Options o = parse(argc, argv);
    for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "") + std::string(argv[i]);
    if (o.command == "list") return list(out);
    if (o.command == "check") return check_command(o, out);
    return mutants_command(o, out);
  } catch (const UsageError& e) {
    err << "shardcheck: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << "shardcheck: internal error: " << e.what() << "\n";
    return 3;
  }
}

}  // namespace shardcheck::cli
