#include "runtime/mpi/mpi_communicator.hpp"

#include "runtime/counts.hpp"
#include "runtime/errors.hpp"
#include "runtime/omp/fold.hpp"

#include <cstring>
#include <string>
#include <utility>

namespace shardcheck::mpi {
namespace {

// Tags on a group's communicator (fingerprints, point to point) and on the run's control
// communicator (group rendezvous; notices use 1 there, mpi_world.cpp).
constexpr int fingerprint_tag = 1;
constexpr int header_tag = 2;
constexpr int reply_tag = 3;
constexpr int data_tag = 4;
constexpr int shift_tag = 5;
constexpr int rendezvous_tag = 2;
constexpr int commit_tag = 3;
constexpr std::size_t reply_bytes = 4096;  // a mismatch message, truncated beyond

// A CallDesc as 12 + 2p words (every rank's the same length, so receives are fixed-size).
constexpr std::size_t fixed_words = 12;
std::vector<std::uint64_t> encode(const CallDesc& c, std::uint64_t step, int p) {
  const auto n = static_cast<std::size_t>(p);
  if (c.counts.size() > n || c.counts2.size() > n) {
    throw Error("mpi backend: a call's counts have more entries than the group has ranks");
  }
  std::vector<std::uint64_t> w(fixed_words + 2 * n, 0);
  w[0] = step;
  w[1] = static_cast<std::uint64_t>(c.op);
  w[2] = static_cast<std::uint64_t>(c.dtype);
  w[3] = static_cast<std::uint64_t>(c.reduce_op);
  w[4] = static_cast<std::uint64_t>(c.algorithm);
  w[5] = static_cast<std::uint64_t>(static_cast<std::int64_t>(c.root));
  w[6] = static_cast<std::uint64_t>(static_cast<std::int64_t>(c.shift));
  w[7] = c.count;
  w[8] = c.send_count;
  w[9] = c.recv_count;
  w[10] = c.counts.size();
  w[11] = c.counts2.size();
  std::copy(c.counts.begin(), c.counts.end(), w.begin() + fixed_words);
  std::copy(c.counts2.begin(), c.counts2.end(),
            w.begin() + static_cast<std::ptrdiff_t>(fixed_words + n));
  return w;
}

CallDesc decode(std::span<const std::uint64_t> w, int p) {
  CallDesc c;
  c.op = static_cast<Collective>(w[1]);
  c.dtype = static_cast<DType>(w[2]);
  c.reduce_op = static_cast<ReduceOp>(w[3]);
  c.algorithm = static_cast<Algorithm>(w[4]);
  c.root = static_cast<int>(static_cast<std::int64_t>(w[5]));
  c.shift = static_cast<int>(static_cast<std::int64_t>(w[6]));
  c.count = w[7];
  c.send_count = w[8];
  c.recv_count = w[9];
  const auto first = w.begin() + fixed_words;
  c.counts.assign(first, first + static_cast<std::ptrdiff_t>(w[10]));
  const auto second = first + p;
  c.counts2.assign(second, second + static_cast<std::ptrdiff_t>(w[11]));
  return c;
}

// Per-rank byte counts and displacements as MPI's v-variants take them.
struct Layout {
  std::vector<int> counts, displs;
};
Layout layout(std::span<const std::size_t> elements, std::size_t element_bytes,
              std::string_view call) {
  Layout l;
  std::uint64_t at = 0;
  for (const auto e : elements) {
    l.counts.push_back(mpi_count(e * element_bytes, call));
    l.displs.push_back(mpi_count(at, call));
    at += e * element_bytes;
  }
  return l;
}
// p equal pieces of `bytes` each, back to back.
Layout equal_layout(int p, std::size_t bytes, std::string_view call) {
  const std::vector<std::size_t> pieces(static_cast<std::size_t>(p), bytes);
  return layout(pieces, 1, call);
}

const std::byte* at(const void* base, std::size_t byte_offset) {
  return static_cast<const std::byte*>(base) + byte_offset;
}

}  // namespace

MpiCommunicator::MpiCommunicator(World& world, std::vector<int> members, int group_rank, int index)
    : world_(world),
      members_(std::move(members)),
      ledger_members_(std::make_shared<const std::vector<int>>(members_)),
      rank_(group_rank),
      index_(index),
      sent_(members_.size(), 0),
      received_(members_.size(), 0) {}

MpiCommunicator::~MpiCommunicator() {
  if (comm_ != MPI_COMM_NULL && !broken_) MPI_Comm_free(&comm_);
}

void MpiCommunicator::wait(std::span<MPI_Request> reqs, std::span<const World::Peer> peers,
                           std::string_view what, bool collective, int peer, int tag,
                           std::uint64_t step, bool peers_only) {
  std::vector<World::Peer> world_peers;
  world_peers.reserve(peers.size());
  for (const auto& g : peers) {
    world_peers.push_back({members_[static_cast<std::size_t>(g.rank)], g.receive});
  }
  const Site site{what, step == ~std::uint64_t{0} ? step_ : step, &members_, peer, tag};
  try {
    world_.wait(reqs, world_peers, site, collective, peers_only);
  } catch (...) {
    broken_ = true;
    throw;
  }
}

void MpiCommunicator::wait_collective(MPI_Request& req) {
  std::vector<int> everyone;
  for (int k = 0; k < size(); ++k) {
    if (k != rank_) everyone.push_back(k);
  }
  // One request for the whole group: on a timeout every other rank is named.
  const World::Peer peers[1] = {{everyone.empty() ? rank_ : everyone.front(), true}};
  try {
    wait(std::span<MPI_Request>(&req, 1), peers, name(my_call_.op), true);
  } catch (const TimeoutError&) {
    throw TimeoutError("timeout: rank " + std::to_string(world_rank()) + " waited more than " +
                       std::to_string(world_.timeout().count()) + " ms in the data phase of " +
                       std::string(name(my_call_.op)) + " (step " + std::to_string(step_) +
                       ") on group " + format_group(members_) + "; one of the ranks " +
                       format_group(everyone) +
                       " (group ranks) stopped after the call was agreed.");
  }
}

std::vector<std::vector<std::uint64_t>> MpiCommunicator::all_exchange(
    const std::vector<std::uint64_t>& mine, MPI_Comm c, bool by_world_rank, int tag,
    std::string_view what, bool peers_only) {
  const int p = size();
  std::vector<std::vector<std::uint64_t>> theirs(static_cast<std::size_t>(p),
                                                 std::vector<std::uint64_t>(mine.size()));
  std::vector<MPI_Request> reqs;
  std::vector<World::Peer> peers;
  const auto words = static_cast<int>(mine.size());
  for (int k = 0; k < p; ++k) {
    if (k == rank_) continue;
    const int to = by_world_rank ? members_[static_cast<std::size_t>(k)] : k;
    reqs.emplace_back();
    check_mpi(MPI_Irecv(theirs[static_cast<std::size_t>(k)].data(), words, MPI_UINT64_T, to, tag, c,
                        &reqs.back()),
              "MPI_Irecv");
    peers.push_back({k, true});
    reqs.emplace_back();
    check_mpi(MPI_Isend(mine.data(), words, MPI_UINT64_T, to, tag, c, &reqs.back()), "MPI_Isend");
    peers.push_back({k, false});
  }
  wait(reqs, peers, what, false, -1, 0, ~std::uint64_t{0}, peers_only);
  theirs[static_cast<std::size_t>(rank_)] = mine;
  return theirs;
}

MPI_Comm MpiCommunicator::comm(std::string_view what) {
  if (comm_ != MPI_COMM_NULL) return comm_;
  const int p = size();
  // Phase 1, intent: which group (creation index, size, members) each member is creating.
  std::vector<std::uint64_t> intent(static_cast<std::size_t>(2 + world_.processes()), 0);
  intent[0] = static_cast<std::uint64_t>(index_);
  intent[1] = static_cast<std::uint64_t>(p);
  std::copy(members_.begin(), members_.end(), intent.begin() + 2);
  const auto theirs = all_exchange(intent, world_.control(), true, rendezvous_tag, what, false);
  for (int k = 0; k < p; ++k) {
    const auto& t = theirs[static_cast<std::size_t>(k)];
    if (t == intent) continue;
    std::vector<int> other;
    for (std::uint64_t j = 0; j < t[1]; ++j) other.push_back(static_cast<int>(t[2 + j]));
    broken_ = true;
    throw DeadlockError("deadlock: crossed groups: world rank " + std::to_string(world_rank()) +
                        " makes its first call on group " + format_group(members_) + " (creation " +
                        std::to_string(index_) +
                        " of that list), while world "
                        "rank " +
                        std::to_string(members_[static_cast<std::size_t>(k)]) +
                        " makes its first call on group " + format_group(other) + " (creation " +
                        std::to_string(t[0]) +
                        "). Ranks must use shared groups in the same order.");
  }
  // Phase 2, commit: a member that got every intent says so at once and waits only for the
  // others' commits (ignoring failures elsewhere in the run, whose notices could otherwise
  // make it give up while the others go on): once it has them all, every member is about to
  // call MPI_Comm_create_group, which therefore cannot hang.
  all_exchange({1}, world_.control(), true, commit_tag, what, true);
  MPI_Group world_group = MPI_GROUP_NULL;
  MPI_Group group = MPI_GROUP_NULL;
  check_mpi(MPI_Comm_group(world_.base(), &world_group), "MPI_Comm_group");
  check_mpi(MPI_Group_incl(world_group, p, members_.data(), &group), "MPI_Group_incl");
  check_mpi(MPI_Comm_create_group(world_.base(), group, 0, &comm_), "MPI_Comm_create_group");
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  return comm_;
}

// ---- the exchange ----

GroupCalls MpiCommunicator::do_exchange(const CallDesc& call, const void* /*send*/,
                                        void* /*recv*/) {
  MPI_Comm c = comm(name(call.op));
  const int p = size();
  my_call_ = call;
  const auto theirs =
      all_exchange(encode(call, step_, p), c, false, fingerprint_tag, name(call.op), false);
  calls_.assign(static_cast<std::size_t>(p), {});
  for (int k = 0; k < p; ++k) {
    calls_[static_cast<std::size_t>(k)] =
        k == rank_ ? call : decode(theirs[static_cast<std::size_t>(k)], p);
  }
  return {calls_, step_};
}

void MpiCommunicator::record_step(std::uint64_t count, wire::WireBytes bytes) {
  const CallDesc& d = my_call_;
  ledger().record({d.op, ledger_members_, d.dtype, count, bytes.sent, bytes.recv, d.algorithm,
                   d.reduce_op, -1, step_});
  ++step_;
}

// ---- collectives ----

void MpiCommunicator::do_barrier() {
  // The exchange already waited for every rank's fingerprint.
  record_step(0, wire::barrier());
}

void MpiCommunicator::do_broadcast(MutBuffer buf, int root) {
  const auto es = size_of(buf.dtype);
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(
      MPI_Ibcast(buf.data, mpi_count(buf.count * es, "broadcast"), MPI_BYTE, root, comm_, &req),
      "MPI_Ibcast");
  wait_collective(req);
  record_step(buf.count, wire::broadcast(buf.count, es, size(), rank_, root));
}

void MpiCommunicator::do_reduce(ConstBuffer send, MutBuffer recv, ReduceOp op, int root) {
  const int p = size();
  const auto es = size_of(send.dtype);
  const std::size_t bytes = send.count * es;
  std::vector<std::byte> all(rank_ == root ? bytes * static_cast<std::size_t>(p) : 0);
  MPI_Request req = MPI_REQUEST_NULL;
  const int n = mpi_count(bytes, "reduce");
  check_mpi(MPI_Igather(send.data, n, MPI_BYTE, all.data(), n, MPI_BYTE, root, comm_, &req),
            "MPI_Igather");
  wait_collective(req);
  if (rank_ == root) {
    // The chain's order: root+1, root+2, ..., root (communicator.hpp).
    std::vector<const void*> inputs;
    for (const int k : omp::fold_order(Algorithm::ring, root, p)) {
      inputs.push_back(at(all.data(), static_cast<std::size_t>(k) * bytes));
    }
    omp::fold(send.dtype, op, inputs, 0, send.count, recv.data, p);
  }
  record_step(send.count, wire::reduce(send.count, es, p, rank_, root));
}

void MpiCommunicator::reduce_chunk(ConstBuffer send, void* recv,
                                   std::span<const std::size_t> counts, ReduceOp op,
                                   Algorithm algo) {
  const int p = size();
  const auto es = size_of(send.dtype);
  const auto r = static_cast<std::size_t>(rank_);
  const std::size_t mine = counts[r] * es;
  // Chunk r of every rank's send, gathered here (rank k's at k * mine), then folded in order.
  const Layout out = layout(counts, es, "reduce_scatter");
  const Layout in = equal_layout(p, mine, "reduce_scatter");
  std::vector<std::byte> pieces(mine * static_cast<std::size_t>(p));
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Ialltoallv(send.data, out.counts.data(), out.displs.data(), MPI_BYTE, pieces.data(),
                           in.counts.data(), in.displs.data(), MPI_BYTE, comm_, &req),
            "MPI_Ialltoallv");
  wait_collective(req);
  std::vector<const void*> inputs;
  for (const int k : omp::fold_order(algo, rank_, p)) {
    inputs.push_back(at(pieces.data(), static_cast<std::size_t>(k) * mine));
  }
  omp::fold(send.dtype, op, inputs, 0, counts[r], recv, p);
}

void MpiCommunicator::do_reduce_scatter(ConstBuffer send, MutBuffer recv,
                                        std::span<const std::size_t> counts, ReduceOp op,
                                        Algorithm algo) {
  reduce_chunk(send, recv.data, counts, op, algo);
  record_step(counts_total(counts), wire::reduce_scatter(counts, size_of(send.dtype), rank_, algo));
}

void MpiCommunicator::do_all_reduce(ConstBuffer send, MutBuffer recv, ReduceOp op, Algorithm algo) {
  const int p = size();
  const auto es = size_of(send.dtype);
  const auto chunks = balanced_chunks(send.count, p);
  const auto r = static_cast<std::size_t>(rank_);
  // Phase 1: chunk r finished here as reduce_scatter does it (the same folding order).
  std::vector<std::byte> mine(chunks[r] * es);
  reduce_chunk(send, mine.data(), chunks, op, algo);
  // Phase 2: every finished chunk to every rank.
  const Layout l = layout(chunks, es, "all_reduce");
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgatherv(mine.data(), l.counts[r], MPI_BYTE, recv.data, l.counts.data(),
                            l.displs.data(), MPI_BYTE, comm_, &req),
            "MPI_Iallgatherv");
  wait_collective(req);
  record_step(send.count, wire::all_reduce(send.count, es, p, rank_, algo));
}

void MpiCommunicator::do_all_gather(ConstBuffer send, MutBuffer recv,
                                    std::span<const std::size_t> counts) {
  const auto es = size_of(send.dtype);
  const auto r = static_cast<std::size_t>(rank_);
  const Layout l = layout(counts, es, "all_gather");
  // In place: send is recv's own slice.
  const bool in_place = send.data == at(recv.data, static_cast<std::size_t>(l.displs[r]));
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgatherv(in_place ? MPI_IN_PLACE : send.data, l.counts[r], MPI_BYTE, recv.data,
                            l.counts.data(), l.displs.data(), MPI_BYTE, comm_, &req),
            "MPI_Iallgatherv");
  wait_collective(req);
  record_step(counts_total(counts), wire::all_gather(counts, es, rank_));
}

void MpiCommunicator::do_all_to_all(ConstBuffer send, std::span<const std::size_t> send_counts,
                                    MutBuffer recv, std::span<const std::size_t> recv_counts) {
  const auto es = size_of(send.dtype);
  const Layout out = layout(send_counts, es, "all_to_all");
  const Layout in = layout(recv_counts, es, "all_to_all");
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Ialltoallv(send.data, out.counts.data(), out.displs.data(), MPI_BYTE, recv.data,
                           in.counts.data(), in.displs.data(), MPI_BYTE, comm_, &req),
            "MPI_Ialltoallv");
  wait_collective(req);
  record_step(send.count, wire::all_to_all(send_counts, recv_counts, es, rank_));
}

void MpiCommunicator::do_gather(ConstBuffer send, MutBuffer recv,
                                std::span<const std::size_t> counts, int root) {
  const auto es = size_of(send.dtype);
  const Layout l = layout(counts, es, "gather");
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Igatherv(send.data, l.counts[static_cast<std::size_t>(rank_)], MPI_BYTE, recv.data,
                         l.counts.data(), l.displs.data(), MPI_BYTE, root, comm_, &req),
            "MPI_Igatherv");
  wait_collective(req);
  record_step(counts_total(counts), wire::gather(counts, es, rank_, root));
}

void MpiCommunicator::do_scatter(ConstBuffer send, MutBuffer recv,
                                 std::span<const std::size_t> counts, int root) {
  const auto es = size_of(recv.dtype);
  const Layout l = layout(counts, es, "scatter");
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Iscatterv(send.data, l.counts.data(), l.displs.data(), MPI_BYTE, recv.data,
                          l.counts[static_cast<std::size_t>(rank_)], MPI_BYTE, root, comm_, &req),
            "MPI_Iscatterv");
  wait_collective(req);
  record_step(counts_total(counts), wire::scatter(counts, es, rank_, root));
}

void MpiCommunicator::do_ring_shift(ConstBuffer send, MutBuffer recv, int /*shift*/) {
  const int p = size();
  const int shift = my_call_.shift;  // already mod p
  const auto es = size_of(send.dtype);
  if (shift == 0) {
    if (recv.count != 0 && recv.data != send.data) {
      std::memmove(recv.data, send.data, recv.count * es);
    }
  } else {
    const int dst = wrap_rank(rank_ + shift, p);
    const int src = wrap_rank(rank_ - shift, p);
    MPI_Request reqs[2];
    check_mpi(MPI_Irecv(recv.data, mpi_count(recv.count * es, "ring_shift"), MPI_BYTE, src,
                        shift_tag, comm_, &reqs[0]),
              "MPI_Irecv (ring_shift)");
    check_mpi(MPI_Isend(send.data, mpi_count(send.count * es, "ring_shift"), MPI_BYTE, dst,
                        shift_tag, comm_, &reqs[1]),
              "MPI_Isend (ring_shift)");
    const World::Peer peers[2] = {{src, true}, {dst, false}};
    wait(reqs, peers, "ring_shift", false);
  }
  record_step(send.count, wire::ring_shift(send.count, recv.count, es, p, shift));
}

// ---- point to point ----

// Which group a message belongs to: its members and creation index, hashed (FNV-1a).
std::uint64_t MpiCommunicator::group_key() const noexcept {
  std::uint64_t h = 1469598103934665603ULL;
  auto mix = [&](std::uint64_t v) {
    h ^= v;
    h *= 1099511628211ULL;
  };
  mix(static_cast<std::uint64_t>(index_));
  for (const int m : members_) mix(static_cast<std::uint64_t>(m));
  return h;
}

void MpiCommunicator::do_send(ConstBuffer buf, int dst, int tag) {
  MPI_Comm c = world_.p2p();
  const int to = members_[static_cast<std::size_t>(dst)];
  const std::uint64_t seq = sent_[static_cast<std::size_t>(dst)]++;
  const std::uint64_t header[4] = {buf.count, static_cast<std::uint64_t>(buf.dtype),
                                   static_cast<std::uint64_t>(static_cast<std::int64_t>(tag)),
                                   group_key()};
  std::vector<char> reply(reply_bytes + 1, '\0');
  MPI_Request reqs[2];
  check_mpi(
      MPI_Irecv(reply.data(), static_cast<int>(reply_bytes), MPI_CHAR, to, reply_tag, c, &reqs[0]),
      "MPI_Irecv (send reply)");
  check_mpi(MPI_Isend(header, 4, MPI_UINT64_T, to, header_tag, c, &reqs[1]), "MPI_Isend (send)");
  const World::Peer peers[2] = {{dst, true}, {dst, false}};
  wait(reqs, peers, "send", false, dst, tag, seq);
  const std::string error(reply.data());
  if (!error.empty()) throw CollectiveMismatch(error);
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Issend(buf.data, mpi_count(buf.count * size_of(buf.dtype), "send"), MPI_BYTE, to,
                       data_tag, c, &req),
            "MPI_Issend");
  wait(std::span<MPI_Request>(&req, 1), std::span<const World::Peer>(peers, 1), "send", false, dst,
       tag, seq);
  const auto bytes = wire::send(buf.count, size_of(buf.dtype));
  ledger().record({Collective::send, ledger_members_, buf.dtype, buf.count, bytes.sent, bytes.recv,
                   Algorithm::direct, ReduceOp::sum, dst, seq});
}

void MpiCommunicator::do_recv(MutBuffer buf, int src, int tag) {
  MPI_Comm c = world_.p2p();
  const int from = members_[static_cast<std::size_t>(src)];
  const std::uint64_t seq = received_[static_cast<std::size_t>(src)]++;
  std::uint64_t header[4] = {};
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Irecv(header, 4, MPI_UINT64_T, from, header_tag, c, &req), "MPI_Irecv (recv)");
  const World::Peer peer[1] = {{src, true}};
  const World::Peer reply_peer[1] = {{src, false}};
  wait(std::span<MPI_Request>(&req, 1), peer, "recv", false, src, tag, seq);
  const MessageDesc sent{header[0], static_cast<DType>(header[1]),
                         static_cast<int>(static_cast<std::int64_t>(header[2]))};
  std::string error = message_mismatch(caller(), seq, src, sent, {buf.count, buf.dtype, tag});
  if (header[3] != group_key()) {
    error = "send/recv on different groups: " + caller().who(rank_) + " of group " +
            format_group(members_) + " expects message " + std::to_string(seq) + " from " +
            caller().who(src) +
            ", which sent it on another group. Matching send and recv calls "
            "must be made on the same group.";
  }
  std::vector<char> reply(error.begin(), error.end());
  reply.resize(std::min(reply.size(), reply_bytes - 1));
  reply.push_back('\0');
  check_mpi(
      MPI_Isend(reply.data(), static_cast<int>(reply.size()), MPI_CHAR, from, reply_tag, c, &req),
      "MPI_Isend (recv reply)");
  wait(std::span<MPI_Request>(&req, 1), reply_peer, "recv", false, src, tag, seq);
  if (!error.empty()) throw CollectiveMismatch(error);
  check_mpi(MPI_Irecv(buf.data, mpi_count(buf.count * size_of(buf.dtype), "recv"), MPI_BYTE, from,
                      data_tag, c, &req),
            "MPI_Irecv (recv data)");
  wait(std::span<MPI_Request>(&req, 1), peer, "recv", false, src, tag, seq);
  const auto bytes = wire::recv(buf.count, size_of(buf.dtype));
  ledger().record({Collective::recv, ledger_members_, buf.dtype, buf.count, bytes.sent, bytes.recv,
                   Algorithm::direct, ReduceOp::sum, src, seq});
}

// ---- groups ----

std::unique_ptr<Communicator> MpiCommunicator::do_group(std::span<const int> ranks) {
  std::vector<int> world_members;
  int my_index = 0;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    world_members.push_back(members_[static_cast<std::size_t>(ranks[i])]);
    if (ranks[i] == rank_) my_index = static_cast<int>(i);
  }
  const int index = world_.next_group_index(world_members);
  return std::make_unique<MpiCommunicator>(world_, std::move(world_members), my_index, index);
}

}  // namespace shardcheck::mpi
