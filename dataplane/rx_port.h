#pragma once
// The receive side between the dataplane and the drivers, in both directions, so that neither
// knows the other's types:
// * RxPort, pulled: the RX half of a port beside its TX half (TxDriver), as BESS keeps
//   Port::RecvPackets beside SendPackets. The bridge, the responder and the sink receive through
//   it; drivers/ethdev (an ethdev RX queue) and drivers/verbs (a UD receive queue) implement it.
// * FrameReceiver, pushed: where a driver that delivers (emu's wire, a loopback's RX, a verbs
//   receive queue on the sending host) hands what arrived. RxSink implements it.

#include <rte_mbuf.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "base/counters.h"
#include "base/pi_mutex.h"
#include "base/thread_annotations.h"
#include "base/tsc.h"

namespace txbatch {

class RxPort {
 public:
  virtual ~RxPort() = default;
  // Receives up to out.size() frames (at most 65535) into `out`, without waiting; ownership of
  // those frames passes to the caller. Returns how many. Called by one thread at a time.
  virtual uint16_t Receive(std::span<rte_mbuf*> out) = 0;
  // Frames that reached the port but were lost before Receive could take them, since the port
  // was opened: a full RX ring — the NIC's (ethdev's imissed), or the kernel's ring behind a
  // socket PMD (af_packet's socket drops). 0 where the port cannot know. Called by the thread
  // that receives.
  virtual uint64_t DroppedBeforeReceive() { return 0; }
};

class FrameReceiver {
 public:
  virtual ~FrameReceiver() = default;
  // Takes `frames` (ownership moves: the receiver frees them), which arrived at `arrival` (TSC,
  // one per frame). Called by one thread at a time.
  virtual void Receive(std::span<rte_mbuf* const> frames, std::span<const Tsc> arrival) = 0;
};

// The emulated receiver's hand-off. Emu's NIC delivers inside its call or reclaim, under the TX
// lock; a receiver doing its work there (the sink: parse, sequence, histograms, free) would hold
// the TX lock for it — ~30 us for a 512-frame reclaim, the producers blocked meanwhile — where on
// Linux the TX completion frees without HARD_TX_LOCK and receiving is another context's. So the
// driver's deliveries are only staged here (Receive, under the TX lock), and the TX queue hands
// them on (Flush) after its window, outside the TX lock. Two locks, neither held with the TX lock
// taken after it: a short one over what is staged, and the receiver's, held while it works. A
// thread hands on everything staged when it gets the receiver's lock, so frames reach the
// receiver in the order they were staged (the TX lock's order) whichever thread hands them on.
// The receiver's time is timed there and booked apart (rx_cycles, rx_frames): `cycles/pkt` and
// `CPU ns` are the TX path's alone. It still runs on the delivering thread's core.
class DeferredReceiver final : public FrameReceiver {
 public:
  // `inherit`: both locks inherit priority, as the TX lock does where it does
  // (TxQueueConfig::tx_lock_inherits: not with --qdisc none, nor for inline producers no more
  // than the CPUs, where producers contend for both).
  DeferredReceiver(FrameReceiver& inner, bool inherit)
      : inner_(inner), staged_mu_(inherit), rx_mu_(inherit) {}
  // Whatever is still staged (a queue torn down mid-call) goes back to the pool.
  ~DeferredReceiver() override {
    if (!staged_.empty())
      rte_pktmbuf_free_bulk(staged_.data(), static_cast<unsigned>(staged_.size()));
  }
  DeferredReceiver(const DeferredReceiver&) = delete;
  DeferredReceiver& operator=(const DeferredReceiver&) = delete;
  // The driver's side, under the TX lock.
  void Receive(std::span<rte_mbuf* const> frames, std::span<const Tsc> arrival) override {
    LockGuard s(staged_mu_);
    staged_.insert(staged_.end(), frames.begin(), frames.end());
    staged_at_.insert(staged_at_.end(), arrival.begin(), arrival.end());
    any_staged_.store(!staged_.empty(), std::memory_order_release);
  }
  // Under the TX lock: whether a Flush has anything to hand on — no lock taken, on every TX-lock
  // section. What this thread staged it sees; false only once a Flush took it; a stale true
  // costs a Flush that finds nothing.
  bool HasStaged() const { return any_staged_.load(std::memory_order_acquire); }
  // Called holding the TX lock: lets it go (`unlock_tx`), takes the receiver's lock (a thread
  // handing on meanwhile is waited for without the TX lock, asleep) and hands on what is staged
  // then — this thread's frames, or none if that thread took them with its own. Adds the TSC
  // that took (once the lock is held: a wait for it is no CPU) and the frame count to `cycles`
  // and `frames` (written under the receiver's lock only).
  template <class UnlockTx>
  void Flush(UnlockTx&& unlock_tx, Counter& cycles, Counter& frames) {
    unlock_tx();
    LockGuard rx(rx_mu_);
    const Tsc t0 = Now();
    {
      LockGuard s(staged_mu_);
      if (staged_.empty()) return;
      std::swap(staged_, handing_);
      std::swap(staged_at_, handing_at_);
      any_staged_.store(false, std::memory_order_release);
    }
    inner_.Receive(handing_, handing_at_);
    cycles.Add(Now() - t0);
    frames.Add(handing_.size());
    handing_.clear();
    handing_at_.clear();
  }
  // Nothing staged and nothing being handed on (waits for a Flush under way).
  bool Idle() {
    LockGuard rx(rx_mu_);
    LockGuard s(staged_mu_);
    return staged_.empty();
  }

 private:
  FrameReceiver& inner_;
  // Over staged_ and staged_at_: taken under the TX lock or the receiver's, nothing under it.
  PiMutex staged_mu_;
  // Held while the receiver works (over handing_ and handing_at_); the TX lock is never taken
  // under it.
  PiMutex rx_mu_ ACQUIRED_BEFORE(staged_mu_);
  std::vector<rte_mbuf*> staged_ GUARDED_BY(staged_mu_);
  std::vector<Tsc> staged_at_ GUARDED_BY(staged_mu_);
  std::vector<rte_mbuf*> handing_ GUARDED_BY(rx_mu_);
  std::vector<Tsc> handing_at_ GUARDED_BY(rx_mu_);
  std::atomic<bool> any_staged_{false};  // !staged_.empty(), written under staged_mu_
};

}  // namespace txbatch
