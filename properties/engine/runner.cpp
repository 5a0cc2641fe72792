#include "engine/runner.hpp"

#include "engine/case_driver.hpp"
#include "engine/verdict.hpp"
#include "runtime/errors.hpp"

#include <rapidcheck.h>
#include <rapidcheck/GenerationFailure.h>
#include <rapidcheck/detail/TestListenerAdapter.h>

#include <chrono>

namespace shardcheck::check {

namespace {

// @throws UsageError "suite 's' has no <what> 'name'; <listed>: a, b" unless one of `infos` (each
// with a .name) is called `name`.
template <class Info>
void require_known(const Suite& suite, const std::vector<Info>& infos, const std::string& name,
                   const char* what, const char* listed) {
  std::string known;
  for (const auto& i : infos) {
    if (i.name == name) return;
    known += (known.empty() ? "" : ", ") + i.name;
  }
  throw UsageError("suite '" + suite.name() + "' has no " + what + " '" + name + "'; " + listed +
                   ": " + known);
}

// One case under a case driver (case_driver.hpp, "Lockstep"): the checker's outcome is every
// process's. The checker ends the case as run_case did (its exception rethrown unchanged, so its
// messages are those of a run without a driver); the other processes end it with the outcome the
// checker sent: "p" passed, "f<message>" failed, "d<message>" discarded (RapidCheck's own rule,
// rapidcheck/detail/Property.hpp: a CaseResult as it is, a GenerationFailure discards, any other
// exception fails).
void run_case_in_lockstep(const CaseDriver& d, const Suite& suite, const std::string& property,
                          const std::string& impl, const RunConfig& config) {
  std::string outcome = "p";
  std::exception_ptr mine;
  try {
    suite.run_case(property, impl, config);
  } catch (const rc::detail::CaseResult& r) {
    mine = std::current_exception();
    if (r.type != rc::detail::CaseResult::Type::Success) {
      outcome = (r.type == rc::detail::CaseResult::Type::Discard ? "d" : "f") + r.description;
    }
  } catch (const rc::GenerationFailure& e) {  // RapidCheck discards the case
    mine = std::current_exception();
    outcome = std::string("d") + e.what();
  } catch (const std::exception& e) {
    mine = std::current_exception();
    outcome = std::string("f") + e.what();
  } catch (...) {
    mine = std::current_exception();
    outcome = "fan exception that is not a std::exception";
  }
  const std::string agreed = d.agree(outcome);
  if (d.checker()) {
    if (mine) std::rethrow_exception(mine);
    return;
  }
  if (outcome != "p" && outcome != agreed) {
    d.abandon("ended a case with\n  " + outcome + "\nwhere process 0 ended it with\n  " + agreed);
  }
  if (agreed == "p") return;
  throw rc::detail::CaseResult(agreed[0] == 'd' ? rc::detail::CaseResult::Type::Discard
                                                : rc::detail::CaseResult::Type::Failure,
                               agreed.substr(1));
}

}  // namespace

PropertyOutcome run_property(const Suite& suite, const std::string& property,
                             const std::string& impl, const RunConfig& config,
                             const RunParams& params, Collector& collector) {
  require_known(suite, suite.properties(), property, "property", "its properties");
  require_known(suite, suite.implementations(), impl, "implementation", "known");

  PropertyOutcome out;
  out.suite = suite.name();
  out.property = property;
  out.impl = impl;
  collector.set_context(suite.name(), property, impl);
  const ActiveCollector active(collector);
  const ShrinkClarity clarity;  // the counterexample fails at least min(2, first ratio) clearly

  rc::detail::TestMetadata metadata;
  metadata.id = suite.name() + "/" + property + "/" + impl;
  metadata.description = metadata.id;
  rc::detail::TestParams tp;
  tp.seed = params.seed;
  tp.maxSuccess = params.cases;
  tp.maxSize = params.max_size;
  tp.disableShrinking = !params.shrink;
  rc::detail::TestListenerAdapter quiet;
  int skipped = 0;      // cases drawn after params.deadline, passed without running
  bool failed = false;  // a case failed: shrinking runs every candidate, deadline or not
  int ran = 0;          // cases run so far (shrinking candidates included)
  const auto body = [&] {
    // The first case always runs, so a property never passes on no case at all.
    bool skip = params.deadline && !failed && ran > 0 &&
                std::chrono::steady_clock::now() >= *params.deadline;
    const auto* driver = case_driver();
    if (driver != nullptr) skip = driver->agree(skip ? "skip" : "run") == "skip";
    if (skip) {
      ++skipped;
      return;
    }
    ++ran;
    try {
      if (driver != nullptr) {
        run_case_in_lockstep(*driver, suite, property, impl, config);
      } else {
        suite.run_case(property, impl, config);
      }
    } catch (const rc::detail::CaseResult& r) {
      failed = failed || r.type == rc::detail::CaseResult::Type::Failure;
      throw;
    } catch (...) {
      failed = true;
      throw;
    }
  };
  const auto result = rc::detail::checkTestable(body, metadata, tp, quiet);
  out.hit_deadline = skipped > 0;

  if (result.is<rc::detail::SuccessResult>()) {
    const auto& ok = result.get<rc::detail::SuccessResult>();
    out.passed = true;
    out.cases = ok.numSuccess - skipped;
    out.tags = ok.distribution;
  } else if (result.is<rc::detail::FailureResult>()) {
    const auto& fail = result.get<rc::detail::FailureResult>();
    out.cases = fail.numSuccess;
    // RC_FAIL prefixes its message with "file:line:\nRC_FAIL(expr)\n\n": keep the message.
    out.message = fail.description;
    if (const auto cut = out.message.find("RC_FAIL("); cut != std::string::npos) {
      if (const auto body = out.message.find("\n\n", cut); body != std::string::npos) {
        out.message = out.message.substr(body + 2);
      }
    }
    out.counterexample = fail.counterExample;
  } else if (result.is<rc::detail::GaveUpResult>()) {
    const auto& gave = result.get<rc::detail::GaveUpResult>();
    out.gave_up = true;
    out.cases = gave.numSuccess;
    out.message = "gave up: " + gave.description;
  } else if (result.is<rc::detail::Error>()) {
    out.message = "error: " + result.get<rc::detail::Error>().description;
  }
  out.max_ratio = collector.max_ratio(suite.name(), property, impl);
  return out;
}

MutantKill kill_mutant(const Suite& suite, const std::string& impl, const RunConfig& config,
                       const RunParams& params, Collector& collector) {
  MutantKill kill;
  for (const auto& p : suite.properties()) {
    if (!suite.applies(p.name, impl)) continue;
    const auto r = run_property(suite, p.name, impl, config, params, collector);
    if (!r.passed) {
      kill.killed = true;
      kill.killed_by = p.name;
      kill.cases = r.cases + 1;
      kill.counterexample = r.message;
      break;
    }
  }
  return kill;
}

}  // namespace shardcheck::check
