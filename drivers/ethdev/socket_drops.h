#pragma once
// Frames the kernel side of a socket PMD dropped before the PMD could take them. net_af_packet
// (DPDK 22.11) receives through a TPACKET_V2 ring that the kernel fills; when the ring is full
// the kernel drops the frame and counts it on the socket (PACKET_STATISTICS' tp_drops), but the
// PMD never reads that count (its imissed stays 0), so a bridge's books balanced while ~5 % of
// a TCP stream was lost there (issue 44, item 1). Internal to drivers/ethdev.

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace txbatch::ethdev {

class SocketDrops {
 public:
  // The AF_PACKET sockets this process holds bound to interface `if_index`: the PMD's, made
  // when the port was probed (one per queue pair). None found: Total() stays 0.
  static SocketDrops Find(unsigned if_index);

  // Frames dropped on those sockets since they were made. PACKET_STATISTICS clears what it
  // reports, so the counts are added up here; nothing else in the process reads them (the PMD
  // calls no getsockopt). A socket that is gone (its descriptor now something else) is skipped.
  // Called by one thread at a time.
  uint64_t Total();
  bool empty() const { return sockets_.empty(); }

 private:
  struct Socket {
    int fd;
    ino_t inode;  // the socket's, to tell it from whatever reuses the descriptor later
  };
  std::vector<Socket> sockets_;
  uint64_t total_ = 0;
};

}  // namespace txbatch::ethdev
