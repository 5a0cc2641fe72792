#include "runtime/launcher.hpp"

#include "runtime/errors.hpp"
#include "runtime/omp/omp_communicator.hpp"
#include "runtime/omp/world.hpp"

#include <omp.h>

#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>

namespace shardcheck {

std::chrono::milliseconds RunOptions::default_timeout() {
  constexpr std::chrono::milliseconds fallback{60000};
  const char* env = std::getenv("SHARDCHECK_TIMEOUT_MS");
  if (env == nullptr || *env == '\0') return fallback;
  const std::string_view text(env);
  long long ms = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (ec != std::errc() || end != text.data() + text.size() || ms <= 0) {
    throw UsageError("SHARDCHECK_TIMEOUT_MS='" + std::string(text) +
                     "' is not a positive number of milliseconds; set it to e.g. 60000 or unset "
                     "it");
  }
  return std::chrono::milliseconds(ms);
}

namespace {

// A secondary failure: the rank only stopped because another one failed first.
bool is_secondary(const std::exception_ptr& e) { return holds<PeerAborted>(e); }

}  // namespace

std::string describe_exception(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception (not derived from std::exception)";
  }
}

void throw_rank_failure(const std::vector<std::exception_ptr>& errors) {
  std::vector<RankError> all;
  for (std::size_t r = 0; r < errors.size(); ++r) {
    if (errors[r]) all.push_back({static_cast<int>(r), errors[r], describe_exception(errors[r])});
  }
  const RankError* primary = &all.front();
  for (const auto& e : all) {
    if (!is_secondary(e.error)) {
      primary = &e;
      break;
    }
  }
  std::string message = "rank " + std::to_string(primary->rank) + " failed: " + primary->what;
  std::string stopped;
  for (const auto& e : all) {
    if (e.rank != primary->rank && is_secondary(e.error)) {
      stopped += (stopped.empty() ? "" : ", ") + std::to_string(e.rank);
    }
  }
  if (!stopped.empty()) message += "\n(ranks " + stopped + " stopped waiting because of it)";
  const int rank = primary->rank;
  std::exception_ptr cause = primary->error;
  throw RankFailure(message, rank, std::move(cause), std::move(all));
}

RunResult run(int world_size, const std::function<void(Communicator&)>& fn,
              const RunOptions& options) {
  if (world_size < 1 || world_size > max_world_size) {
    throw UsageError("run: world size " + std::to_string(world_size) +
                     " is out of range; use 1 to " + std::to_string(max_world_size) + " ranks");
  }
  // omp_get_level counts inactive regions too: a rank of a one-rank run() is one.
  if (omp_get_level() > 0) {
    throw UsageError(
        "run: called from inside a parallel region (a rank of another run(), or an OpenMP "
        "parallel region); ranks cannot start ranks. Call run() from the main thread");
  }
  omp::World world(world_size, options.timeout);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(world_size));
  int team_size = 0;

  // Exactly world_size threads, or none of them runs the function.
  const int saved_dynamic = omp_get_dynamic();
  omp_set_dynamic(0);
#pragma omp parallel num_threads(world_size) default(none) \
    shared(world, errors, team_size, fn, world_size)
  {
    const int r = omp_get_thread_num();
    if (r == 0) team_size = omp_get_num_threads();
    if (omp_get_num_threads() == world_size) {
      try {
        auto comm = omp::make_world_communicator(world, r);
        fn(*comm);
        world.rank_finished(r);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
        world.rank_failed(r);
      }
    }
  }
  omp_set_dynamic(saved_dynamic);

  if (team_size != world_size) {
    throw Error("run: OpenMP started " + std::to_string(team_size) + " threads for " +
                std::to_string(world_size) +
                " ranks; raise OMP_THREAD_LIMIT (and leave "
                "OMP_DYNAMIC unset) so every rank gets its own thread");
  }
  for (const auto& e : errors) {
    if (e) throw_rank_failure(errors);
  }
  return {world.take_ledgers()};
}

}  // namespace shardcheck
