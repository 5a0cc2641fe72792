#include "collectives_check.hpp"

#include "properties/runtime/collective_model.hpp"
#include "properties/runtime/model_bridge.hpp"

#include <algorithm>
#include <cstring>
#include <iomanip>
#include <limits>
#include <optional>
#include <sstream>

namespace shardcheck::fuzz {
namespace {

template <Element T>
std::vector<T> from_bytes(std::span<const std::byte> b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

template <Element T>
std::string show(T x) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(2 * sizeof(T)) << std::setfill('0')
     << static_cast<std::uint64_t>(model::bits_of(x)) << std::dec << " (";
  if constexpr (std::is_integral_v<T>) {
    os << static_cast<long long>(x);
  } else if constexpr (sizeof(T) == 2) {
    os << std::setprecision(9) << static_cast<float>(x);
  } else {
    os << std::setprecision(17) << x;
  }
  return os.str() + ")";
}

// The model's result of every group rank of call i (nullopt: the rank has no result).
template <Element T>
std::vector<std::optional<std::vector<T>>> expected(const Program& prog, std::size_t i) {
  const Call& c = prog.calls[i];
  const int p = static_cast<int>(prog.groups[static_cast<std::size_t>(c.group)].members.size());
  model::Bufs<T> in;
  for (const auto& bytes : prog.inputs[i]) in.push_back(from_bytes<T>(bytes));
  std::vector<std::optional<std::vector<T>>> out(static_cast<std::size_t>(p));
  auto all = [&](const model::Bufs<T>& bufs) {
    for (std::size_t k = 0; k < bufs.size(); ++k) out[k] = bufs[k];
  };
  const auto root = static_cast<std::size_t>(c.root);
  switch (c.kind) {
    case Kind::barrier: break;
    case Kind::broadcast: all(model::broadcast(in, c.root)); break;
    case Kind::reduce: out[root] = model::reduce(in, model::to_model(c.op), c.root); break;
    case Kind::all_reduce:
      all(model::all_reduce(in, model::to_model(c.op), model::to_model(c.algo)));
      break;
    case Kind::all_gather: all(model::all_gather(in)); break;
    case Kind::reduce_scatter:
      all(model::reduce_scatter(in, c.counts, model::to_model(c.op), model::to_model(c.algo)));
      break;
    case Kind::all_to_all: all(model::all_to_all(in, c.matrix)); break;
    case Kind::gather: out[root] = model::gather(in); break;
    case Kind::scatter: all(model::scatter(in[root], c.counts)); break;
    case Kind::ring_shift: all(model::ring_shift(in, c.shift)); break;
    case Kind::send_recv:
      out[static_cast<std::size_t>(c.dst)] = in[static_cast<std::size_t>(c.src)];
      break;
  }
  return out;
}

template <Element T>
std::string compare(const std::vector<T>& want, std::span<const std::byte> got_bytes,
                    model::Match match) {
  const auto got = from_bytes<T>(got_bytes);
  if (got.size() != want.size()) {
    return "has " + std::to_string(got.size()) + " elements, the model " +
           std::to_string(want.size());
  }
  std::size_t bad = 0, first = want.size();
  for (std::size_t k = 0; k < want.size(); ++k) {
    if (!model::same(got[k], want[k], match)) {
      if (first == want.size()) first = k;
      ++bad;
    }
  }
  if (bad == 0) return {};
  return std::to_string(bad) + " of " + std::to_string(want.size()) +
         " elements differ; first at index " + std::to_string(first) + ": got " + show(got[first]) +
         ", model " + show(want[first]);
}

template <Element T>
std::size_t first_difference(const std::vector<T>& want, std::span<const std::byte> got_bytes,
                             model::Match match) {
  const auto got = from_bytes<T>(got_bytes);
  for (std::size_t k = 0; k < std::min(want.size(), got.size()); ++k) {
    if (!model::same(got[k], want[k], match)) return k;
  }
  return 0;
}

// Every rank's input element `index` (where it has one): what a reproducer needs to know.
template <Element T>
std::string inputs_at(const Program& prog, std::size_t i, std::size_t index) {
  std::ostringstream os;
  os << "  inputs (flat index " << index << " of each rank's send buffer):";
  for (std::size_t r = 0; r < prog.inputs[i].size(); ++r) {
    const auto v = from_bytes<T>(prog.inputs[i][r]);
    os << "  [" << r << "] " << (index < v.size() ? show(v[index]) : std::string("-"));
  }
  return os.str() + "\n";
}

// Index in world rank w's actions of call i as it was issued (-1 when w has no part in it).
int action_of(const Program& prog, int w, int i) {
  const auto& acts = prog.actions[static_cast<std::size_t>(w)];
  for (std::size_t j = 0; j < acts.size(); ++j) {
    if (acts[j].call == i && !acts[j].stop && !acts[j].raise) return static_cast<int>(j);
  }
  return -1;
}

Collective collective_of(const Call& c, int r) { return fuzz::collective_of(c.kind, r == c.src); }

Algorithm algorithm_of(const Call& c) {
  switch (c.kind) {
    case Kind::barrier: return Algorithm::none;
    case Kind::broadcast:
    case Kind::reduce: return Algorithm::chain;
    case Kind::all_gather: return Algorithm::ring;
    case Kind::all_reduce:
    case Kind::reduce_scatter: return c.algo;
    default: return Algorithm::direct;
  }
}

// count and bytes of the ledger entry of group rank r of p, from the model's formulas.
std::pair<std::uint64_t, model::Traffic> ledger_of(const Call& c, int r, int p) {
  const std::size_t e = size_of(c.dtype);
  const auto ur = static_cast<std::size_t>(r);
  switch (c.kind) {
    case Kind::barrier: return {0, {}};
    case Kind::broadcast: return {c.count, model::broadcast_traffic(p, r, c.root, c.count * e)};
    case Kind::reduce: return {c.count, model::reduce_traffic(p, r, c.root, c.count * e)};
    case Kind::all_reduce:
      return {c.count, model::all_reduce_traffic(model::to_model(c.algo), p, r, c.count, e)};
    case Kind::all_gather:
      return {model::total(c.counts), model::all_gather_traffic(c.counts, r, e)};
    case Kind::reduce_scatter:
      return {model::total(c.counts),
              model::reduce_scatter_traffic(model::to_model(c.algo), c.counts, r, e)};
    case Kind::all_to_all: {
      std::vector<std::size_t> col;
      for (const auto& row : c.matrix) col.push_back(row[ur]);
      return {model::total(c.matrix[ur]), model::all_to_all_traffic(c.matrix[ur], col, r, e)};
    }
    case Kind::gather:
      return {model::total(c.counts), model::gather_traffic(c.counts, r, c.root, e)};
    case Kind::scatter:
      return {model::total(c.counts), model::scatter_traffic(c.counts, r, c.root, e)};
    case Kind::ring_shift:
      return {c.counts[ur],
              model::ring_shift_traffic(p, c.shift, c.counts[ur], recv_count(c, r, p), e)};
    case Kind::send_recv:
      if (r == c.src) return {c.count, {c.count * e, 0}};
      return {c.count, {0, c.count * e}};
  }
  return {0, {}};
}

}  // namespace

std::string check_outputs(const Program& prog, const Execution& ex) {
  std::ostringstream err;
  // Each communicator is the group it was made for, and send buffers are left alone.
  for (int w = 0; w < prog.world; ++w) {
    const auto& acts = prog.actions[static_cast<std::size_t>(w)];
    for (std::size_t j = 0; j < acts.size(); ++j) {
      const RankBuffers& rb = ex.bufs[static_cast<std::size_t>(w)][j];
      if (!rb.executed) continue;
      const Group& g = prog.groups[static_cast<std::size_t>(acts[j].spec.group)];
      if (rb.seen_rank != rank_in(g, w) || rb.seen_members != g.members) {
        err << "world rank " << w << " at call #" << acts[j].call << ": the communicator of g"
            << acts[j].spec.group << " says rank " << rb.seen_rank << " of size " << rb.seen_size
            << "; it was made as rank " << rank_in(g, w) << " of " << g.members.size() << '\n';
      }
      if (rb.a_is_send && rb.a != rb.a_before) {
        err << "world rank " << w << " at call #" << acts[j].call
            << ": the send buffer changed during the call\n";
      }
    }
  }
  for (std::size_t i = 0; i < prog.calls.size(); ++i) {
    const Call& c = prog.calls[i];
    const Group& g = prog.groups[static_cast<std::size_t>(c.group)];
    const int p = static_cast<int>(g.members.size());
    int ran = 0, parts = 0;
    for (int r = 0; r < p; ++r) {
      if (c.kind == Kind::send_recv && r != c.src && r != c.dst) continue;
      ++parts;
      const int j = action_of(prog, g.members[static_cast<std::size_t>(r)], static_cast<int>(i));
      if (j >= 0 && ex.bufs[static_cast<std::size_t>(g.members[static_cast<std::size_t>(r)])]
                           [static_cast<std::size_t>(j)]
                               .executed) {
        ++ran;
      }
    }
    if (ran == 0) continue;  // skipped by a rank that returned early, alone in its group
    if (ran != parts) {
      err << "call #" << i << " completed on " << ran << " of its " << parts
          << " ranks although run() returned normally\n";
      continue;
    }
    bool shown_inputs = false;
    // Where two NaNs meet in a sum or a product, IEEE 754 (6.2.3) leaves the result's payload
    // and sign open (and compilers commute the operands): there every NaN equals every NaN.
    // Elsewhere the bits, up to the quiet bit of a signaling NaN (model_bridge.hpp).
    const bool any_nan =
        (c.kind == Kind::reduce || c.kind == Kind::all_reduce || c.kind == Kind::reduce_scatter) &&
        (c.op == ReduceOp::sum || c.op == ReduceOp::avg || c.op == ReduceOp::product);
    const model::Match match =
        any_nan ? model::Match::nan_payload_free : model::Match::nan_quiet_bit_free;
    auto result_of = [&](int r) {
      const int w = g.members[static_cast<std::size_t>(r)];
      const int j = action_of(prog, w, static_cast<int>(i));
      return ex.bufs[static_cast<std::size_t>(w)][static_cast<std::size_t>(j)].output(c.dtype);
    };
    visit_dtype(c.dtype, [&](auto t) {
      using T = decltype(t);
      const auto want = expected<T>(prog, i);
      for (int r = 0; r < p; ++r) {
        const auto& wr = want[static_cast<std::size_t>(r)];
        if (!wr) continue;
        const std::string diff = compare<T>(*wr, result_of(r), match);
        if (!diff.empty()) {
          err << "call #" << i << " (" << describe(c, g) << "), group rank " << r << " (world rank "
              << g.members[static_cast<std::size_t>(r)] << "): result " << diff << '\n';
          if (!shown_inputs) {
            err << inputs_at<T>(prog, i, first_difference<T>(*wr, result_of(r), match));
          }
          shown_inputs = true;
        }
      }
    });
    // all_reduce promises the same bits on every rank, NaN payloads included.
    if (c.kind == Kind::all_reduce) {
      for (int r = 1; r < p; ++r) {
        const auto a = result_of(0), b = result_of(r);
        if (a.size() != b.size() || !std::equal(a.begin(), a.end(), b.begin())) {
          err << "call #" << i << " (" << describe(c, g) << "): group rank " << r
              << "'s result differs in its bits from group rank 0's\n";
        }
      }
    }
  }
  return err.str();
}

std::string check_ledgers(const Program& prog, const Execution& ex) {
  std::ostringstream err;
  for (int w = 0; w < prog.world; ++w) {
    const auto uw = static_cast<std::size_t>(w);
    const auto& entries = ex.result->ledgers[uw].entries();
    const auto& acts = prog.actions[uw];
    std::vector<std::uint64_t> steps(prog.groups.size(), 0);
    std::size_t k = 0;
    for (std::size_t j = 0; j < acts.size(); ++j) {
      if (!ex.bufs[uw][j].executed) continue;
      const Call& c = acts[j].spec;
      const Group& g = prog.groups[static_cast<std::size_t>(c.group)];
      const int p = static_cast<int>(g.members.size());
      const int r = rank_in(g, w);
      if (k >= entries.size()) {
        err << "world rank " << w << ": the ledger has " << entries.size()
            << " entries, but the rank made more calls (missing call #" << acts[j].call << ")\n";
        break;
      }
      const LedgerEntry& e = entries[k++];
      const auto [count, bytes] = ledger_of(c, r, p);
      const bool p2p = c.kind == Kind::send_recv;
      const bool reduces =
          c.kind == Kind::reduce || c.kind == Kind::all_reduce || c.kind == Kind::reduce_scatter;
      std::ostringstream want;
      want << name(collective_of(c, r)) << ' ' << name(algorithm_of(c)) << ' ';
      if (c.kind != Kind::barrier) want << name(c.dtype);
      want << " x" << count << ' ' << format_group(g.members) << " sent " << bytes.sent << " recv "
           << bytes.recv;
      if (!p2p) want << " step " << steps[static_cast<std::size_t>(c.group)];
      const bool ok = e.op == collective_of(c, r) && e.group && *e.group == g.members &&
                      (c.kind == Kind::barrier || e.dtype == c.dtype) && e.count == count &&
                      e.bytes_sent == bytes.sent && e.bytes_recv == bytes.recv &&
                      e.algorithm == algorithm_of(c) && (!reduces || e.reduce_op == c.op) &&
                      (!p2p || e.peer == (r == c.src ? c.dst : c.src)) &&
                      (p2p || e.step == steps[static_cast<std::size_t>(c.group)]);
      if (!ok) {
        err << "world rank " << w << " call #" << acts[j].call << ": ledger entry '"
            << e.to_string() << " step " << e.step << " peer " << e.peer << "', expected '"
            << want.str() << "'\n";
      }
      if (!p2p) ++steps[static_cast<std::size_t>(c.group)];
    }
    if (k < entries.size()) {
      err << "world rank " << w << ": the ledger has " << entries.size() - k
          << " entries more than the rank made calls\n";
    }
  }
  return err.str();
}

}  // namespace shardcheck::fuzz
