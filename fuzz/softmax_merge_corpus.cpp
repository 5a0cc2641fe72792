// Writes the seed corpus of softmax_merge_fuzz: one small input per target below, each an
// explicit merge problem (every value written as raw bits, so it decodes bit for bit), covering
// every convention and numerical hazard of lib/ops/softmax_merge/softmax_merge.hpp, plus a few
// random byte strings from a fixed-seed splitmix64:
//   softmax_merge_corpus <dir>            writes the seeds (fuzz/corpus/softmax_merge)
//   softmax_merge_corpus --check <dir>    fails when a seed no longer decodes to its target
// Nothing is merged here: the harness checks the results when ctest replays the corpus.
#include "corpus_seeds.hpp"
#include "softmax_merge_input.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

namespace {

using shardcheck::fuzz::MergeInput;
using shardcheck::fuzz::SplitMix64;

constexpr double inf = std::numeric_limits<double>::infinity();
const double qnan = std::numeric_limits<double>::quiet_NaN();

// parts × rows lse and parts × rows × width outs, in the decoder's order.
MergeInput make(bool is_float, std::size_t rows, std::size_t width, std::vector<double> lse,
                std::vector<double> out, const std::vector<std::size_t>& groups = {},
                std::size_t ring_start = 0, bool ring_from_empty = false) {
  MergeInput in;
  in.is_float = is_float;
  in.rows = rows;
  in.width = width;
  in.parts = rows == 0 ? 0 : lse.size() / rows;
  in.ring_start = ring_start;
  in.ring_from_empty = ring_from_empty;
  in.group_of_part = groups.empty() ? std::vector<std::size_t>(in.parts, 0) : groups;
  in.lse = std::move(lse);
  in.out = std::move(out);
  if (in.out.size() != in.parts * rows * width || in.group_of_part.size() != in.parts) {
    std::fprintf(stderr, "softmax_merge_corpus: a target's sizes do not match\n");
    std::exit(2);
  }
  if (is_float) {
    for (auto& v : in.lse) v = static_cast<double>(static_cast<float>(v));
    for (auto& v : in.out) v = static_cast<double>(static_cast<float>(v));
  }
  return in;
}

struct Target {
  std::string name;
  MergeInput input;
};

std::vector<Target> targets() {
  const double l3 = std::log(3.0);
  const double fmax = std::numeric_limits<float>::max();
  const double dmax = std::numeric_limits<double>::max();
  std::vector<Target> t;
  t.push_back({"ok-two-parts-float64", make(false, 2, 3, {0, 1.5, l3, -0.25},
                                            {1, 2, 3, 4, 5, 6, 5, -1, 0.5, -2, 0, 8}, {0, 1})});
  t.push_back({"ok-two-parts-float32", make(true, 2, 3, {0, 1.5, l3, -0.25},
                                            {1, 2, 3, 4, 5, 6, 5, -1, 0.5, -2, 0, 8}, {0, 1})});
  {
    std::vector<double> lse, out;
    SplitMix64 r{7};
    for (std::size_t j = 0; j < 6; ++j) {
      for (std::size_t i = 0; i < 4; ++i)
        lse.push_back(static_cast<double>(r.next() % 64) / 16 - 2);
      for (std::size_t k = 0; k < 16; ++k)
        out.push_back(static_cast<double>(r.next() % 256) / 32 - 4);
    }
    t.push_back(
        {"ok-six-parts-comparable-float64", make(false, 4, 4, lse, out, {0, 1, 2, 3, 0, 1}, 3)});
    t.push_back({"ok-six-parts-comparable-float32",
                 make(true, 4, 4, lse, out, {3, 3, 0, 0, 1, 2}, 5, true)});
  }
  t.push_back({"empty-partial-nan-out", make(false, 1, 2, {0.5, -inf}, {1, 2, qnan, qnan})});
  t.push_back({"empty-partial-inf-out", make(true, 1, 2, {-inf, 0.5}, {inf, -inf, 1, 2}, {}, 1)});
  t.push_back({"all-empty-rows", make(false, 2, 2, {-inf, -inf, -inf, -inf},
                                      {qnan, 1, inf, 2, 3, qnan, -inf, 0}, {0, 1})});
  t.push_back({"zero-partials", make(false, 3, 2, {}, {})});
  t.push_back({"plus-inf-lse", make(false, 2, 2, {inf, 0, 1, -inf}, {1, 2, 3, 4, 5, 6, 7, 8})});
  t.push_back({"nan-lse-wins-over-plus-inf",
               make(true, 1, 2, {inf, qnan, 0}, {1, 2, 3, 4, 5, 6}, {0, 1, 1})});
  t.push_back({"nan-out-non-empty", make(false, 1, 3, {0, -40}, {1, 2, 3, 4, qnan, 6})});
  t.push_back(
      {"inf-out-underflowing-weight", make(true, 1, 2, {0, -200}, {1, 2, inf, -inf}, {0, 1}, 1)});
  t.push_back({"huge-gap-1e30", make(false, 2, 2, {1e30, 0, 0, -1e30}, {1, 2, 3, 4, 5, 6, 7, 8})});
  t.push_back({"huge-gap-1e30-float32",
               make(true, 2, 2, {1e30, 0, 0, -1e30}, {1, 2, 3, 4, 5, 6, 7, 8}, {1, 0})});
  t.push_back({"max-vs-lowest-float64", make(false, 1, 1, {-dmax, dmax}, {3, 1})});
  t.push_back({"max-vs-lowest-float32", make(true, 1, 1, {fmax, -fmax}, {3, 1})});
  t.push_back({"large-lse-no-shift-float64",
               make(false, 2, 1, {1e4, 800, 1e4, 800.5}, {1, 2, 3, 4}, {0, 1}, 0, true)});
  t.push_back({"large-lse-no-shift-float32",
               make(true, 2, 1, {1e4, 100, 1e4, 100.5}, {1, 2, 3, 4}, {0, 1}, 1)});
  t.push_back({"very-negative-lse", make(false, 1, 2, {-1e4, -1e4 - 0.5}, {1, 2, 3, 4})});
  t.push_back({"subnormal-lse-and-outs",
               make(false, 1, 2, {std::numeric_limits<double>::denorm_min(), 0},
                    {std::numeric_limits<double>::denorm_min(), -1e-310, 1e-320, 0})});
  t.push_back({"ring-from-empty-first-part-empty",
               make(false, 2, 2, {-inf, -inf, 1, -inf, 2, 0.5},
                    {qnan, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}, {0, 0, 1}, 0, true)});
  t.push_back({"nested-with-empty-groups", make(true, 1, 2, {0.25, -inf, 3, 1},
                                                {1, 2, qnan, qnan, 5, 6, 7, 8}, {0, 0, 3, 3}, 2)});
  t.push_back({"width-zero-lse-only", make(false, 3, 0, {0, -inf, 5, 1, 2, -inf}, {}, {0, 1})});
  t.push_back({"out-near-max-three-equal", make(false, 1, 1, {0, 0, 0}, {dmax, dmax, dmax})});
  t.push_back(
      {"out-near-max-three-equal-float32", make(true, 1, 1, {0, 0, 0}, {fmax, fmax, fmax})});
  return t;
}

bool same(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::bit_cast<std::uint64_t>(a[i]) != std::bit_cast<std::uint64_t>(b[i])) return false;
  }
  return true;
}

bool same(const MergeInput& a, const MergeInput& b) {
  return a.is_float == b.is_float && a.ring_from_empty == b.ring_from_empty && a.rows == b.rows &&
         a.width == b.width && a.parts == b.parts && a.ring_start == b.ring_start &&
         a.group_of_part == b.group_of_part && same(a.lse, b.lse) && same(a.out, b.out);
}

int check(const std::filesystem::path& dir) {
  int bad = 0, checked = 0;
  for (const auto& t : targets()) {
    const auto bytes = shardcheck::fuzz::read_seed(dir / t.name);
    if (!bytes) {
      ++bad;
      continue;
    }
    const auto got = shardcheck::fuzz::decode_merge_input(bytes->data(), bytes->size());
    if (!same(got, t.input)) {
      std::fprintf(stderr, "seed %s no longer decodes to its target:\n%sbut to:\n%s",
                   t.name.c_str(), shardcheck::fuzz::describe(t.input).c_str(),
                   shardcheck::fuzz::describe(got).c_str());
      ++bad;
    }
    ++checked;
  }
  std::printf("%d seeds checked, %d bad\n", checked, bad);
  return bad == 0 ? 0 : 1;
}

int write(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  for (const auto& t : targets()) {
    shardcheck::fuzz::write_seed(dir / t.name, shardcheck::fuzz::encode_merge_input(t.input));
    std::printf("%s:\n%s", t.name.c_str(), shardcheck::fuzz::describe(t.input).c_str());
  }
  // Random byte strings (fixed seed): whatever the tags make of them.
  SplitMix64 r{20240611};
  for (int k = 0; k < 6; ++k) {
    std::vector<std::uint8_t> b(48 + r.next() % 160);
    for (auto& c : b) c = static_cast<std::uint8_t>(r.next());
    char name[32];
    std::snprintf(name, sizeof name, "random-%02d", k);
    shardcheck::fuzz::write_seed(dir / name, b);
    const auto in = shardcheck::fuzz::decode_merge_input(b.data(), b.size());
    std::printf("%s:\n%s", name, shardcheck::fuzz::describe(in).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return shardcheck::fuzz::corpus_main(argc, argv, write, check); }
