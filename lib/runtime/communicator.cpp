#include "runtime/communicator.hpp"

namespace shardcheck {

void Communicator::open(const CallDesc& call, const void* send, void* recv) {
  check_agreement(caller(), do_exchange(call, send, recv));
}

}  // namespace shardcheck
