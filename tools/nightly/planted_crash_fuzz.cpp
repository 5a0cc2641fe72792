// A libFuzzer harness with a planted bug, built only for the tests of scripts/nightly
// (tools/nightly/CMakeLists.txt): it is not in build/fuzz/fuzz/, so a campaign never runs it
// unless asked to (`scripts/nightly --harness-exe`). The bug: an input that starts with "BUG"
// reads one byte past the end of a 4-byte heap buffer, which AddressSanitizer reports as a
// heap-buffer-overflow in planted_overflow(). libFuzzer's comparison tracing finds the prefix
// within seconds from the seed "BU"; every crashing input has the same stack, so a campaign
// must report one deduplicated finding, whatever number of crash files libFuzzer writes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

namespace {

// Reads buffer[at] from a 4-byte heap buffer: past its end when at >= 4.
__attribute__((noinline)) int planted_overflow(const std::uint8_t* data, std::size_t size,
                                               std::size_t at) {
  const auto buffer = std::make_unique<std::uint8_t[]>(4);
  std::memcpy(buffer.get(), data, size < 4 ? size : 4);
  return buffer[at];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size >= 3 && data[0] == 'B' && data[1] == 'U' && data[2] == 'G') {
    return planted_overflow(data, size, 4);
  }
  return 0;
}
