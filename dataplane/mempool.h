#pragma once
// Packet pools laid out so batching is measured fairly without hugepages.
//
// With --no-huge the default pktmbuf pool puts every ~2.3 KB mbuf in its own 4 KB page: every
// header then sits at the same offset modulo 4096, in one L1 set, and a burst of 32 costs ~3x
// what it should (ENV-NOTES). RTE_MEMPOOL_F_NO_IOVA_CONTIG lets objects straddle pages, so
// consecutive mbufs walk through the cache sets. Every mbuf still has its real IOVA (a NIC DMAs
// from it): the spread layout is used where IOVA is VA (--no-huge, vfio), where memory that is
// contiguous in VA is contiguous for the device; in IOVA-as-PA mode, which needs hugepages, the
// default layout already packs objects within a page and the pool falls back to it.

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstdint>
#include <memory>
#include <string>

#include "base/error.h"

namespace txbatch {

// Mempool handler: DPDK's lock-free stack. rte_ring's multi-producer/consumer modes make every
// thread spin while a peer preempted between its head and tail updates is off the CPU; with more
// producers than CPUs and a SCHED_FIFO txirq spinning on the same CPU as that peer, a run stalled
// for tens of milliseconds (seen here). A lock-free stack never waits on another thread.
inline constexpr char kPoolOps[] = "lf_stack";

// Per-lcore cache: large enough that a burst of 32 allocs/frees rarely touches the shared ring.
inline constexpr unsigned kPoolCache = 256;

// The default layout of rte_pktmbuf_pool_create (kept only for the benchmark that shows the trap).
enum class PoolLayout { kSpread, kDpdkDefault };

struct PoolDeleter {
  void operator()(rte_mempool* mp) const { rte_mempool_free(mp); }
};
using PoolPtr = std::unique_ptr<rte_mempool, PoolDeleter>;

// Data room for frames up to `mtu` bytes of L3 (plus Ethernet header and headroom).
uint16_t DataRoomForMtu(unsigned mtu);

// Bytes a pool of `n` mbufs for `mtu` will take (for the EAL memory estimate).
uint64_t PoolBytes(unsigned n, unsigned mtu);

// Creates a pktmbuf pool of `n` mbufs able to hold one `mtu` frame each. Control plane.
Result<PoolPtr> CreatePacketPool(const std::string& name, unsigned n, unsigned mtu,
                                 PoolLayout layout = PoolLayout::kSpread);

// Number of distinct L1 data-cache sets (64-byte lines, `sets` sets) the headers of `count`
// consecutively allocated mbufs fall into. Frees what it allocated.
unsigned DistinctL1Sets(rte_mempool* mp, unsigned count, unsigned sets = 64);

}  // namespace txbatch
