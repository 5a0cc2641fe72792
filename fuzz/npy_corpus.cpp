// Writes the seed corpus of npy_fuzz: one small .npy file per target below, each a valid file
// with one feature of the format (each version, each byte order, Fortran order of rank 2 and 3,
// a scalar, a zero-size array, each accepted descr, the header spellings Python allows) or a
// deliberately invalid one (bad magic and version, a truncated header or data, each kind of bad
// header, each refused descr, shapes that overflow):
//   npy_corpus <dir>            writes the seeds (fuzz/corpus/npy)
//   npy_corpus --check <dir>    fails when a seed no longer parses to its target: the expected
//                               descr and shape, or a refusal whose message holds the expected
//                               text
// Round trips and to_tensor are checked by the harness when ctest replays the corpus.
#include "corpus_seeds.hpp"

#include "cases/npy.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace {

using shardcheck::cases::CaseError;
using shardcheck::cases::NpyArray;
using Bytes = std::vector<std::uint8_t>;

// A file: the preamble of `version` (major), the header text as given, then `data`.
Bytes file(int version, const std::string& text, const Bytes& data) {
  Bytes b{0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(version), 0};
  const std::size_t len_bytes = version == 1 ? 2 : 4;
  for (std::size_t k = 0; k < len_bytes; ++k) {
    b.push_back(static_cast<std::uint8_t>((text.size() >> (8 * k)) & 0xff));
  }
  b.insert(b.end(), text.begin(), text.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// The dict NumPy writes, padded as NumPy pads it for `version`, then `data`.
Bytes npy(const std::string& descr, const std::string& shape, const Bytes& data,
          bool fortran = false, int version = 1) {
  std::string d = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                  ", 'shape': " + shape + ", }";
  const std::size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + d.size() + 1) % 64 != 0) d += ' ';
  return file(version, d + "\n", data);
}

// `n` items of `bytes` bytes counting up from 1 (little endian), or from the top (big endian).
Bytes items(std::size_t n, int bytes, bool big = false) {
  Bytes b;
  for (std::size_t i = 0; i < n; ++i) {
    for (int k = 0; k < bytes; ++k) {
      const int at = big ? bytes - 1 - k : k;
      b.push_back(at == 0 ? static_cast<std::uint8_t>(i + 1) : 0);
    }
  }
  return b;
}

struct Target {
  std::string name;
  Bytes bytes;
  std::string descr;               // accepted: the descr it reads as ("" for a refusal)
  std::vector<std::size_t> shape;  // accepted: its shape
  std::string error;               // refused: a part of the message
};

Target ok(std::string name, Bytes b, std::string descr, std::vector<std::size_t> shape) {
  return {std::move(name), std::move(b), std::move(descr), std::move(shape), ""};
}
Target bad(std::string name, Bytes b, std::string error) {
  return {std::move(name), std::move(b), "", {}, std::move(error)};
}

std::vector<Target> targets() {
  std::vector<Target> t;
  t.push_back(ok("ok-v1-f8-2x3", npy("<f8", "(2, 3)", items(6, 8)), "<f8", {2, 3}));
  t.push_back(ok("ok-v2-f4-3", npy("<f4", "(3,)", items(3, 4), false, 2), "<f4", {3}));
  t.push_back(ok("ok-v3-u2-4", npy("<u2", "(4,)", items(4, 2), false, 3), "<u2", {4}));
  t.push_back(ok("ok-big-endian-f8", npy(">f8", "(2,)", items(2, 8, true)), "<f8", {2}));
  t.push_back(ok("ok-big-endian-i2-fortran-2x2", npy(">i2", "(2, 2)", items(4, 2, true), true),
                 "<i2", {2, 2}));
  t.push_back(ok("ok-native-order-i4", npy("=i4", "(2,)", items(2, 4)), "<i4", {2}));
  t.push_back(ok("ok-no-order-u4", npy("u4", "(2,)", items(2, 4)), "<u4", {2}));
  t.push_back(ok("ok-pipe-order-u1", npy("|u1", "(5,)", items(5, 1)), "|u1", {5}));
  t.push_back(ok("ok-fortran-rank2-f4", npy("<f4", "(2, 3)", items(6, 4), true), "<f4", {2, 3}));
  t.push_back(
      ok("ok-fortran-rank3-i4", npy("<i4", "(2, 3, 4)", items(24, 4), true), "<i4", {2, 3, 4}));
  t.push_back(ok("ok-fortran-rank1-f2", npy("<f2", "(3,)", items(3, 2), true), "<f2", {3}));
  t.push_back(ok("ok-scalar-f8", npy("<f8", "()", items(1, 8)), "<f8", {}));
  t.push_back(ok("ok-zero-size-0x3", npy("<i8", "(0, 3)", {}), "<i8", {0, 3}));
  t.push_back(ok("ok-zero-size-fortran-3x0", npy("<f4", "(3, 0)", {}, true), "<f4", {3, 0}));
  for (const char* d :
       {"<f8", "<f4", "<f2", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "|b1"}) {
    const int n = d[2] - '0';
    t.push_back(ok(std::string("ok-descr-") + (d + 1), npy(d, "(2,)", items(2, n)), d, {2}));
  }
  t.push_back(ok("ok-descr-question-mark", npy("?", "(2,)", items(2, 1)), "|b1", {2}));
  t.push_back(
      ok("ok-double-quotes-whitespace",
         file(1, " {\"shape\" :( 2 ,\t3 ),'fortran_order':False,\n\"descr\":'<f4'}\n", items(6, 4)),
         "<f4", {2, 3}));
  t.push_back(ok("ok-python2-long", npy("<i4", "(2L, 1L)", items(2, 4)), "<i4", {2, 1}));
  t.push_back(ok("ok-bfloat16-bits-u2",
                 npy("<u2", "(3,)", Bytes{0x80, 0x3f, 0x40, 0xc0, 0xc1, 0x7f}), "<u2", {3}));
  t.push_back(ok("ok-u8-above-int64", npy("<u8", "(1,)", Bytes(8, 0xff)), "<u8", {1}));
  t.push_back(
      ok("ok-i8-outside-int32", npy("<i8", "(1,)", Bytes{0, 0, 0, 0x80, 0, 0, 0, 0}), "<i8", {1}));
  {
    std::string dims;
    for (int k = 0; k < 64; ++k) dims += "1, ";
    t.push_back(ok("ok-64-dims", npy("<f4", "(" + dims + ")", items(1, 4)), "<f4",
                   std::vector<std::size_t>(64, 1)));
  }

  const Bytes good = npy("<f4", "(2,)", items(2, 4));
  Bytes magic = good;
  magic[1] = 'n';
  t.push_back(bad("bad-magic", magic, "magic: the file does not start with"));
  Bytes version = good;
  version[6] = 4;
  t.push_back(bad("bad-version-4", version, "version: 4.0 is not a format version"));
  t.push_back(bad("bad-preamble-cut", Bytes(good.begin(), good.begin() + 7),
                  "version: the file ends inside the preamble"));
  t.push_back(bad("bad-header-length-cut", Bytes(good.begin(), good.begin() + 9),
                  "header: the file ends inside the header length"));
  t.push_back(bad("bad-header-past-end", Bytes(good.begin(), good.begin() + 40),
                  "runs past the end of the file"));
  t.push_back(bad("bad-no-newline",
                  file(1,
                       "{'descr': '<f4', 'fortran_order': False, "
                       "'shape': ()} ",
                       items(1, 4)),
                  "does not end in '\\n'"));
  t.push_back(bad("bad-not-a-dict", file(1, "('<f4', False, ())\n", {}), "expected '{'"));
  t.push_back(bad("bad-open-string", file(1, "{'descr': '<f4}\n", {}), "is not closed"));
  t.push_back(bad("bad-missing-shape", file(1, "{'descr': '<f4', 'fortran_order': False}\n", {}),
                  "'shape' missing"));
  t.push_back(
      bad("bad-duplicate-key",
          file(1, "{'shape': (), 'descr': '<f4', 'fortran_order': False, 'shape': ()}\n", {}),
          "the key 'shape' appears twice"));
  t.push_back(bad("bad-unknown-key",
                  file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 0}\n", {}),
                  "unknown key 'x'"));
  t.push_back(bad("bad-descr-complex", npy("<c8", "()", items(1, 8)), "'<c8' is not an element"));
  t.push_back(bad("bad-descr-object", npy("|O", "()", items(1, 8)), "'|O' is not an element"));
  t.push_back(bad("bad-descr-string", npy("<U2", "()", items(1, 8)), "'<U2' is not an element"));
  t.push_back(
      bad("bad-descr-datetime", npy("<M8[s]", "()", items(1, 8)), "'<M8[s]' is not an element"));
  t.push_back(bad("bad-descr-structured",
                  file(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}\n", {}),
                  "descr: not a string"));
  t.push_back(bad("bad-fortran-not-bool",
                  file(1, "{'descr': '<f4', 'fortran_order': 1, 'shape': ()}\n", {}),
                  "fortran_order: expected True or False"));
  t.push_back(bad("bad-shape-list",
                  file(1,
                       "{'descr': '<f4', 'fortran_order': False, "
                       "'shape': [2]}\n",
                       {}),
                  "shape: expected a tuple"));
  t.push_back(bad("bad-shape-negative", npy("<f4", "(-2,)", {}), "a negative dimension"));
  t.push_back(bad("bad-shape-one-tuple-no-comma", npy("<f4", "(2)", items(2, 4)),
                  "expected ',' after the only dimension"));
  t.push_back(bad("bad-shape-beyond-64-bits", npy("<f4", "(99999999999999999999,)", {}),
                  "does not fit in 64 bits"));
  {
    std::string dims;
    for (int k = 0; k < 65; ++k) dims += "1, ";
    t.push_back(bad("bad-shape-65-dims", npy("<f4", "(" + dims + ")", items(1, 4)),
                    "more than 64 dimensions"));
  }
  t.push_back(bad("bad-element-count-overflow", npy("<f4", "(4294967296, 4294967296)", {}),
                  "more elements than a size_t counts"));
  t.push_back(bad("bad-byte-count-overflow", npy("<f8", "(4294967296, 536870912)", {}),
                  "more bytes than a size_t counts"));
  t.push_back(
      bad("bad-huge-shape-no-data", npy("<f8", "(1000000000, 1000000000)", {}), "(too short)"));
  t.push_back(bad("bad-data-truncated", npy("<f4", "(2, 3)", items(5, 4)), "(too short)"));
  t.push_back(bad("bad-data-too-long", npy("<f4", "(2,)", items(3, 4)), "(too long)"));
  return t;
}

// "" when the seed meets its target, else what it does instead.
std::string miss(const Target& t, const Bytes& b) {
  return shardcheck::fuzz::refusal_miss<CaseError>(t.error, [&]() -> std::string {
    const NpyArray a = shardcheck::cases::parse_npy(b, t.name);
    if (!t.error.empty()) return "parses (descr " + a.descr() + ") instead of being refused";
    if (a.descr() != t.descr || a.shape != t.shape) {
      return "parses to descr " + a.descr() + " of rank " + std::to_string(a.shape.size());
    }
    return "";
  });
}

}  // namespace

int main(int argc, char** argv) {
  const shardcheck::fuzz::TargetCorpus<Target> corpus{
      targets, [](const Target& t) { return t.bytes; }, miss,
      [](const Target& t) {
        return t.error.empty() ? ("ok " + t.descr) : ("refused: " + t.error);
      }};
  return corpus.main(argc, argv);
}
