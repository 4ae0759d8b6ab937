#pragma once
// The verbs driver over a UdQueuePair (ud_qp.h). Xmit: one chain of send work requests per call,
// one ibv_post_send (one doorbell). Each request has two SGEs: the 4-byte IPoIB header from a
// registered per-slot array (the frame itself is never rewritten, so a frame requeued after a
// partial post is posted again unchanged) and the IP packet in place in its mbuf (the pool's
// memory is registered chunk by chunk: no payload copy). Small frames may go inline
// (inline_max): the provider copies them at post time and the mbuf is freed at once.
//
// Signalling (sq_sig_all = 0): a request is signalled when signal_every requests have gone
// unsignalled, and the last request of every post is signalled, so a queue that goes idle is
// always reclaimed (at batch 1 every request is signalled, as Linux's ipoib_send does). The send
// queue completes in order: a completion frees its slot and every unsignalled slot before it.
// Completions are reaped 64 at a time and counted by ibv_wc_status; their frames are freed
// (counted sent: the HCA took them).
//
// Failures: ENOMEM from the post (the send queue fuller than counted) returns the accepted
// prefix, stopped until completions free slots. Any other refusal of requests built within the
// QP's limits means the QP is broken: what was refused is dropped and counted, the QP flushed,
// and from then on every frame is dropped and counted (the run goes on and its books close). A
// send completion with an error puts a UD QP in SQE: the driver stops posting, reaps the
// flushed requests behind it, and takes the QP back to RTS.
//
// On a RoCE v2 port the datagrams are the same (IPoIB header + IP packet) inside UDP/IP over
// Ethernet; only the address (always global), the MTU and the wire bytes differ (PlanPort).
//
// Receive: UD datagrams land, behind the 40-byte GRH slot, in buffers from the driver's own pool
// (sized for the port's MTU, registered too); each is given an Ethernet header (txbatch's MACs,
// the IPoIB header's EtherType) in the bytes the GRH slot leaves free and goes to the FrameReceiver
// or to Receive()'s caller, so `run` and `sink` read IPoIB traffic as they read Ethernet.

#include <rte_mempool.h>

#include <array>
#include <memory>
#include <vector>

#include "dataplane/mempool.h"
#include "drivers/verbs/ud_qp.h"

namespace txbatch::verbs {

// ibv_wc_status values counted one by one; larger ones in the last slot.
inline constexpr size_t kWcStatuses = 24;

struct VerbsCounters {
  Counter posts;                 // ibv_post_send calls that posted at least one request
  Counter work_requests;         // send requests posted
  Counter signalled;             // signalled send requests posted
  Counter send_completions;      // send completions reaped (signalled ones and errors)
  Counter inline_sends;          // requests sent inline (their mbufs freed at post)
  Counter post_errors;           // requests a broken QP refused (dropped)
  Counter dropped_broken;        // frames dropped because the QP had broken
  Counter unregistered;          // frames outside registered memory (dropped)
  Counter recoveries;            // SQE -> RTS after a send error
  Counter recv_completions;      // datagrams received (successful receive completions)
  Counter recv_errors;           // receive completions with an error status
  Counter recv_refill_failures;  // receive buffers that could not be posted
  Counter purge_timeouts;        // teardowns that gave up waiting for the flush
  std::array<Counter, kWcStatuses> wc_errors;  // send completions by error status
};

class VerbsTx final : public TxDriver, public VerbsReceiver {
 public:
  // `sink` may be null: received frames are then only taken with Receive().
  VerbsTx(const VerbsOptions& options, std::unique_ptr<UdQueuePair> qp, FrameReceiver* sink,
          const RunWindow& window, double tsc_hz);
  ~VerbsTx() override;
  VerbsTx(const VerbsTx&) = delete;
  VerbsTx& operator=(const VerbsTx&) = delete;

  // Checks `mtu` against the port's IPoIB MTU, registers `pool`'s memory and the header array,
  // creates the receive pool (receive buffers for the port's MTU, and `rx_extra` frames more for
  // a caller that holds received frames, e.g. behind a link) and posts the receive buffers.
  // Control plane: one sentence on failure.
  Status Init(rte_mempool* pool, unsigned mtu, unsigned rx_extra = 0);

  [[nodiscard]] uint16_t XmitAt(std::span<rte_mbuf* const> frames, Tsc now) override;
  unsigned FreeSlots() const override { return info_.sq_depth - Outstanding(); }
  bool Stopped() const override { return stopped_; }
  unsigned Complete(Tsc now) override;
  Tsc NextCompletion() const override;
  unsigned InFlight() const override { return Outstanding(); }
  unsigned Purge() override;
  std::optional<WireSpec> Wire() const override { return std::nullopt; }
  CountedAt counted_at() const override { return CountedAt::kDriver; }
  bool owns_doorbell() const override { return true; }
  std::string Describe() const override;
  std::string link_layer() const override;  // "ib", "roce_v2"
  uint16_t Receive(std::span<rte_mbuf*> out) override;
  std::map<std::string, uint64_t> ExtraCounters() const override;

  const VerbsCounters& verbs_counters() const { return vc_; }
  bool broken() const { return broken_; }

 private:
  static constexpr unsigned kPollBatch = 64;  // completions reaped per ibv_poll_cq
  unsigned Outstanding() const { return static_cast<unsigned>(head_ - tail_); }
  Status RegisterPool(rte_mempool* pool);
  // lkey of the registered chunk holding `addr`, or nullopt.
  std::optional<uint32_t> LkeyOf(const void* addr) const;
  // Frees slots from the tail through the one with counter `upto` (inclusive).
  unsigned ReleaseThrough(uint64_t upto);
  unsigned ReapSend();
  void Break();  // the QP refused what it must take: flush it, drop from now on
  // The chain of send requests for frames[first…], at most `room`, stopping at a frame outside
  // registered memory: one UD send each (the IPoIB header and the IP packet, inline where it
  // fits), linked, every signal_every-th and the last signalled. Returns how many were built.
  unsigned BuildChain(std::span<rte_mbuf* const> frames, size_t first, unsigned room);
  void PostRecvBuffers();
  void FreeAllRecvSlots();  // every receive slot unposted (at construction and after a purge)

  VerbsOptions options_;
  std::unique_ptr<UdQueuePair> qp_;
  UdQueueInfo info_;
  FrameReceiver* sink_;
  const RunWindow& window_;
  double tsc_hz_;
  Tsc poll_interval_;

  struct Region {
    uintptr_t start, end;
    uint32_t lkey;
  };
  std::vector<Region> regions_;                                  // sorted by start
  std::vector<std::array<uint8_t, kIpoibHeaderBytes>> headers_;  // one per send slot
  uint32_t header_lkey_ = 0;

  std::vector<rte_mbuf*> slots_;  // send slot -> its mbuf (null: inline, already freed)
  uint64_t head_ = 0, tail_ = 0;  // counters of the next slot to post and the oldest in flight
  unsigned since_signal_ = 0;     // requests posted since the last signalled one
  unsigned wake_threshold_;
  bool stopped_ = false;
  bool recovering_ = false;  // a send error put the QP in SQE: no posting until RTS again
  bool broken_ = false;

  std::vector<ibv_send_wr> wrs_;
  std::vector<std::array<ibv_sge, 2>> sges_;

  PoolPtr rx_pool_;
  std::vector<rte_mbuf*> recv_slots_;  // receive slot -> its posted mbuf (null: not posted)
  // The slots not posted, refilled from the back: a refill costs the frames taken, not a walk
  // over rq_depth slots (a sink's 4096). Its capacity is rq_depth: pushing never allocates.
  std::vector<uint32_t> recv_free_;
  unsigned recv_posted_ = 0;
  VerbsCounters vc_;
};

}  // namespace txbatch::verbs
