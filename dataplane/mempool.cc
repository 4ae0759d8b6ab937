#include "dataplane/mempool.h"

#include <fmt/format.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_memory.h>
#include <rte_memzone.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

#include "base/tsan.h"

namespace txbatch {
namespace {

// The pool's handler. Under ThreadSanitizer: kPoolOps wrapped so that every object put into the
// shared stack is released and every one taken out acquired (tsan.h) — the hand-over between
// threads DPDK's uninstrumented lock-free stack does and TSan cannot see. Everywhere else:
// kPoolOps itself.
#if defined(__SANITIZE_THREAD__)
rte_mempool_enqueue_t g_inner_enqueue = nullptr;
rte_mempool_dequeue_t g_inner_dequeue = nullptr;

int TsanEnqueue(rte_mempool* mp, void* const* objs, unsigned n) {
  for (unsigned i = 0; i < n; ++i) TsanRelease(objs[i]);
  return g_inner_enqueue(mp, objs, n);
}

int TsanDequeue(rte_mempool* mp, void** objs, unsigned n) {
  const int rc = g_inner_dequeue(mp, objs, n);
  if (rc == 0)
    for (unsigned i = 0; i < n; ++i) TsanAcquire(objs[i]);
  return rc;
}

const char* PoolOps() {
  static const char* const name = [] {
    static rte_mempool_ops ops;
    for (unsigned i = 0; i < rte_mempool_ops_table.num_ops; ++i)
      if (std::strcmp(rte_mempool_ops_table.ops[i].name, kPoolOps) == 0)
        ops = rte_mempool_ops_table.ops[i];
    g_inner_enqueue = ops.enqueue;
    g_inner_dequeue = ops.dequeue;
    std::strncpy(ops.name, "txb_tsan_lf_stack", sizeof(ops.name) - 1);
    ops.enqueue = TsanEnqueue;
    ops.dequeue = TsanDequeue;
    (void)rte_mempool_register_ops(&ops);
    return "txb_tsan_lf_stack";
  }();
  return name;
}
#else
const char* PoolOps() { return kPoolOps; }
#endif

// Frees a chunk's memzone when its pool is freed.
void FreeChunk(rte_mempool_memhdr*, void* memzone) {
  rte_memzone_free(static_cast<const rte_memzone*>(memzone));
}

// Populates `mp` (IOVA-as-VA mode, RTE_MEMPOOL_F_NO_IOVA_CONTIG) from memzones, objects packed
// across page boundaries, each chunk with its IOVA. Returns 0 or a negative errno.
int PopulateSpread(rte_mempool* mp) {
  for (unsigned chunk = 0; mp->populated_size < mp->size; ++chunk) {
    size_t min_chunk = 0, align = 0;
    const ssize_t want = rte_mempool_op_calc_mem_size_default(mp, mp->size - mp->populated_size, 0,
                                                              &min_chunk, &align);
    if (want < 0) return static_cast<int>(want);
    const std::string mz_name = fmt::format("MP_{}_{}", mp->name, chunk);
    const rte_memzone* mz =
        rte_memzone_reserve_aligned(mz_name.c_str(), want, mp->socket_id, 0, align);
    // Fragmented memory: the largest free block, if it holds at least one object.
    if (mz == nullptr)
      mz = rte_memzone_reserve_aligned(mz_name.c_str(), 0, mp->socket_id, 0, align);
    if (mz == nullptr) return -rte_errno;
    if (mz->len < min_chunk) {
      rte_memzone_free(mz);
      return -ENOMEM;
    }
    const rte_iova_t iova = rte_mem_virt2iova(mz->addr);
    if (iova == RTE_BAD_IOVA) {
      rte_memzone_free(mz);
      return -EFAULT;
    }
    const int added = rte_mempool_populate_iova(mp, static_cast<char*>(mz->addr), iova, mz->len,
                                                FreeChunk, const_cast<rte_memzone*>(mz));
    if (added <= 0) {
      rte_memzone_free(mz);
      return added < 0 ? added : -ENOMEM;
    }
  }
  return 0;
}

}  // namespace

uint16_t DataRoomForMtu(unsigned mtu) {
  // L2 header (14) + VLAN room (4) + MTU, rounded up to a cache line, plus headroom.
  unsigned room = RTE_ALIGN_CEIL(mtu + 18, RTE_CACHE_LINE_SIZE) + RTE_PKTMBUF_HEADROOM;
  if (room < RTE_MBUF_DEFAULT_BUF_SIZE) room = RTE_MBUF_DEFAULT_BUF_SIZE;
  return static_cast<uint16_t>(room);
}

uint64_t PoolBytes(unsigned n, unsigned mtu) {
  const uint64_t elt = sizeof(rte_mbuf) + DataRoomForMtu(mtu) + 64;  // + mempool header
  return n * elt + (4u << 20);
}

Result<PoolPtr> CreatePacketPool(const std::string& name, unsigned n, unsigned mtu,
                                 PoolLayout layout) {
  const uint16_t room = DataRoomForMtu(mtu);
  // DPDK refuses a cache larger than n / 1.5 (its flush threshold multiplier).
  const unsigned cache = std::min(kPoolCache, n * 2 / 3);
  if (layout == PoolLayout::kDpdkDefault) {
    rte_mempool* mp =
        rte_pktmbuf_pool_create_by_ops(name.c_str(), n, cache, 0, room, rte_socket_id(), PoolOps());
    if (mp == nullptr)
      return MakeError(rte_errno, fmt::format("cannot create mbuf pool '{}' of {} mbufs: {}", name,
                                              n, rte_strerror(rte_errno)));
    return PoolPtr(mp);
  }
  // In IOVA-as-PA mode memory is hugepages (EAL has no physical addresses without them), where
  // DPDK's own layout already packs objects within a page and gives each its page's IOVA.
  if (rte_eal_iova_mode() != RTE_IOVA_VA)
    return CreatePacketPool(name, n, mtu, PoolLayout::kDpdkDefault);
  // rte_pktmbuf_pool_create_by_ops, plus the one flag that spreads objects across pages. With it
  // rte_mempool_populate_default gives every object RTE_BAD_IOVA (a NIC then DMAs from near
  // address 0), so the pool is populated here: chunks of memzone memory, each VA-contiguous and,
  // IOVA being VA, IOVA-contiguous, with the chunk's real IOVA.
  rte_pktmbuf_pool_private priv{};
  priv.mbuf_data_room_size = room;
  priv.mbuf_priv_size = 0;
  const unsigned elt_size = sizeof(rte_mbuf) + room;
  PoolPtr mp(rte_mempool_create_empty(name.c_str(), n, elt_size, cache,
                                      sizeof(rte_pktmbuf_pool_private), rte_socket_id(),
                                      RTE_MEMPOOL_F_NO_IOVA_CONTIG));
  if (!mp)
    return MakeError(rte_errno, fmt::format("cannot create mbuf pool '{}' of {} mbufs: {}", name, n,
                                            rte_strerror(rte_errno)));
  if (int rc = rte_mempool_set_ops_byname(mp.get(), PoolOps(), nullptr); rc != 0)
    return MakeError(-rc,
                     fmt::format("cannot set mempool ops for '{}': {}", name, rte_strerror(-rc)));
  rte_pktmbuf_pool_init(mp.get(), &priv);
  // rte_mempool_create_empty marks the pool "not for IO" until a populate gives it IOVAs, and
  // under RTE_MEMPOOL_F_NO_IOVA_CONTIG DPDK never lifts the mark; every object here has its IOVA,
  // so it goes (PMDs that register pools for DMA, mlx5 and sfc, skip a NON_IO one).
  mp->flags &= ~RTE_MEMPOOL_F_NON_IO;
  if (int rc = PopulateSpread(mp.get()); rc < 0)
    return MakeError(-rc, fmt::format("cannot populate mbuf pool '{}' ({} mbufs of {} bytes): {}; "
                                      "give EAL more memory (-m) or reserve hugepages",
                                      name, n, elt_size, rte_strerror(-rc)));
  rte_mempool_obj_iter(mp.get(), rte_pktmbuf_init, nullptr);
  return mp;
}

unsigned DistinctL1Sets(rte_mempool* mp, unsigned count, unsigned sets) {
  std::vector<rte_mbuf*> bufs(count);
  if (rte_pktmbuf_alloc_bulk(mp, bufs.data(), count) != 0) return 0;
  std::set<uintptr_t> seen;
  for (rte_mbuf* m : bufs) seen.insert((reinterpret_cast<uintptr_t>(m) >> 6) % sets);
  rte_pktmbuf_free_bulk(bufs.data(), count);
  return static_cast<unsigned>(seen.size());
}

}  // namespace txbatch
