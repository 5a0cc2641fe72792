// The speed baseline of the harnesses (fuzz/README.md, "Speed"): what libFuzzer itself, the
// sanitizers and this machine allow per input when the harness does almost nothing.
//
//   trivial_fuzz                       sums the input's bytes (no allocation, no threads)
//   SHARDCHECK_TRIVIAL_OMP=P           also opens one OpenMP parallel region of P threads per
//                                      input (what a harness pays that starts a team per input)
//
// Invariant (the one a baseline can have): the byte sum computed two ways agrees. It has no
// corpus folder, so scripts/fuzz and the nightly campaign do not fuzz it; scripts/fuzz-speed
// runs it beside every harness.
#include <omp.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace {

int team_size() {
  static const int p = [] {
    const char* e = std::getenv("SHARDCHECK_TRIVIAL_OMP");
    return e == nullptr ? 0 : std::atoi(e);
  }();
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::uint64_t forward = 0, backward = 0;
  for (std::size_t i = 0; i < size; ++i) forward += data[i];
  for (std::size_t i = size; i-- > 0;) backward += data[i];
  if (forward != backward) std::abort();
  if (const int p = team_size(); p > 0) {
    omp_set_dynamic(0);
    int seen = 0;
#pragma omp parallel num_threads(p) reduction(+ : seen)
    seen += 1;
    if (seen != p) std::abort();
  }
  return 0;
}
