#include "vocab_cross_entropy_input.hpp"

#include "split_policy_input.hpp"

#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

namespace shardcheck::fuzz {
namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

const double specials_table[] = {
    std::numeric_limits<double>::quiet_NaN(),
    -std::numeric_limits<double>::quiet_NaN(),
    inf,
    -inf,
    0.0,
    -0.0,
    std::numeric_limits<double>::max(),
    -std::numeric_limits<double>::max(),
    1e30,
    -1e30,
    1e300,
    -1e300,
    std::numeric_limits<double>::denorm_min(),
    1e-310,
    static_cast<double>(std::numeric_limits<float>::max()),
    static_cast<double>(std::numeric_limits<float>::denorm_min()),
    709.78,  // exp's overflow threshold, float64
    -745.13,
    88.72,  // and float32
    -103.97,
    1.0,
    -1.0,
};

double value(ByteReader& r, bool is_float) {
  const std::uint8_t tag = r.byte() % 4;
  double v = 0;
  switch (tag) {
    case 0:
      if (is_float) {
        const auto b = static_cast<std::uint32_t>(r.le(4));
        float f = 0;
        std::memcpy(&f, &b, sizeof f);
        v = f;
      } else {
        const std::uint64_t b = r.le(8);
        std::memcpy(&v, &b, sizeof v);
      }
      break;
    case 1: {
      const auto s = vocab_specials();
      v = s[r.byte() % s.size()];
      break;
    }
    case 2: v = r.int8() / 4.0; break;
    default: v = static_cast<std::int16_t>(r.le(2)) * 64.0; break;
  }
  return is_float ? static_cast<double>(static_cast<float>(v)) : v;
}

}  // namespace

std::span<const double> vocab_specials() { return specials_table; }

VocabInput decode_vocab_input(std::span<const std::uint8_t> bytes) {
  ByteReader r(bytes);
  VocabInput in;
  const std::uint8_t b0 = r.byte();
  in.is_float = (b0 & 1) != 0;
  const int red = (b0 >> 1) & 3;
  in.cfg.reduction = red == 0   ? LossReduction::none
                     : red == 1 ? LossReduction::sum
                                : LossReduction::mean;
  const double eps[] = {0.0, 0.125, 0.5, 1.0};
  in.cfg.label_smoothing = eps[(b0 >> 3) & 3];
  const bool class_w = (b0 & 0x20) != 0, token_w = (b0 & 0x40) != 0;
  if ((b0 & 0x80) != 0) in.cfg.ignore_index = std::nullopt;
  in.tokens = 1 + r.byte() % 4;
  const std::size_t V = 1 + r.byte() % 8;
  in.cfg.vocab = V;
  in.ranks = 1 + r.byte() % 3;
  switch (r.byte() % 3) {
    case 0: in.cfg.vocab_split = SplitPolicy::chunk(); break;
    case 1: in.cfg.vocab_split = SplitPolicy::balanced(); break;
    default: {
      std::vector<std::size_t> sizes;
      std::size_t left = V;
      for (int k = 0; k + 1 < in.ranks; ++k) {
        const std::size_t s = r.byte() % (left + 1);
        sizes.push_back(s);
        left -= s;
      }
      sizes.push_back(left);
      in.cfg.vocab_split = SplitPolicy::explicit_sizes(sizes);
    }
  }
  for (std::size_t t = 0; t < in.tokens; ++t) {
    const std::uint8_t b = r.byte();
    switch (b % 8) {
      case 5: in.targets.push_back(-100); break;
      case 6: in.targets.push_back(static_cast<std::int64_t>(V + b / 8)); break;
      case 7: in.targets.push_back(-1 - static_cast<std::int64_t>(b / 8)); break;
      default: in.targets.push_back(static_cast<std::int64_t>((b / 8) % V)); break;
    }
  }
  for (std::size_t k = 0; k < in.tokens * V; ++k) in.logits.push_back(value(r, in.is_float));
  if (class_w) {
    for (std::size_t v = 0; v < V; ++v) in.cfg.class_weight.push_back(value(r, in.is_float));
  }
  if (token_w) {
    for (std::size_t t = 0; t < in.tokens; ++t)
      in.cfg.token_weight.push_back(value(r, in.is_float));
  }
  const std::size_t nd = in.cfg.reduction == LossReduction::none ? in.tokens : 1;
  for (std::size_t k = 0; k < nd; ++k) in.dloss.push_back(value(r, in.is_float));
  return in;
}

std::string describe(const VocabInput& in) {
  std::string s;
  char buf[96];
  const auto list = [&](const char* what, const std::vector<double>& v) {
    s += what;
    for (double x : v) {
      std::snprintf(buf, sizeof buf, " %a", x);
      s += buf;
    }
    s += "\n";
  };
  std::snprintf(buf, sizeof buf,
                "%s tokens=%zu V=%zu P=%d split=", in.is_float ? "float32" : "float64", in.tokens,
                in.cfg.vocab, in.ranks);
  s += buf;
  s += in.cfg.vocab_split.to_string() + " reduction=" + std::string(name(in.cfg.reduction));
  std::snprintf(buf, sizeof buf, " label_smoothing=%g ignore_index=%s\n", in.cfg.label_smoothing,
                in.cfg.ignore_index ? std::to_string(*in.cfg.ignore_index).c_str() : "none");
  s += buf;
  s += "targets:";
  for (auto t : in.targets) s += " " + std::to_string(t);
  s += "\n";
  list("logits:", in.logits);
  if (!in.cfg.class_weight.empty()) list("class_weight:", in.cfg.class_weight);
  if (!in.cfg.token_weight.empty()) list("token_weight:", in.cfg.token_weight);
  list("dloss:", in.dloss);
  return s;
}

}  // namespace shardcheck::fuzz
