#pragma once
// pfifo_fast as Linux >= 4.16 runs it (TCQ_F_NOLOCK, with the MISSED and DRAINING notes of 5.14
// and the bypass for it): producers enqueue into lock-free bands without any qdisc lock, and the
// qdisc is run by whoever wins an exclusive run flag (qdisc_run_begin's spin_trylock on
// q->seqlock). A producer that loses leaves a note (__QDISC_STATE_MISSED) instead of waiting. The
// holder's run takes what producers enqueue meanwhile (an empty dequeue with a note clears it and
// looks once more, pfifo_fast_dequeue); a note still there when it lets the flag go — or a spent
// quota, or a requeue, which leave one — reschedules the qdisc through the txirq with a fresh
// quota (qdisc_run_end's __netif_schedule), so no frame is left behind. Frames the driver refused
// wait in the qdisc's private requeue slot.

#include <atomic>

#include "base/thread_annotations.h"
#include "dataplane/enqueue_step.h"
#include "dataplane/lockfree_pfifo.h"
#include "dataplane/qdisc_run.h"
#include "dataplane/tx_queue.h"

namespace txbatch {

class NolockTxQueue final : public TxQueue {
 public:
  NolockTxQueue(TxDriver& driver, const FlushPolicy& policy, const TxQueueConfig& config,
                const RunWindow& window);
  ~NolockTxQueue() override;

  bool Send(rte_mbuf* m, int band, bool run) override;
  void RunQdisc() override;
  void Drain() override;
  void Abort() override;
  unsigned backlog() override { return qdisc_.backlog(); }
  unsigned Purge() override { return qdisc_.Purge(); }

 private:
  bool QdiscIdle() override;
  void Restart(bool resched) override;
  void RunnerTurnsUntilStopped() override;
  void WakeRunner() override;
  // qdisc_run_begin / __qdisc_run / qdisc_run_end: runs the qdisc if the run flag is free
  // (counting the run in `runs`), else leaves the MISSED note for its holder; a note left when
  // the flag goes kicks the txirq to run it again. With `bypass`, a frame of `band` in no queue
  // yet: with the flag won, it goes to the driver as the run's first bulk if the qdisc still looks
  // empty, else into the qdisc for this run (returns true); with the flag taken, or its band
  // full, the caller enqueues it (false).
  bool TryRun(Counter& runs, rte_mbuf* bypass = nullptr, int band = 0);
  // QdiscRun's phases until the qdisc is empty, the queue stops, a requeue, or run_'s quota is
  // spent; returns how it ended (kReschedule: a note must be left). Run-flag holder only.
  // `in_hand`: the first bulk is already in run_ (a bypassed frame).
  RunNext Run(bool in_hand = false);
  // nolock_qdisc_is_empty and more: nothing queued, no MISSED or DRAINING note.
  bool LooksEmpty() const { return notes_.LooksEmpty(qdisc_.empty()); }
  // qdisc_maybe_clear_missed, for a run that found the queue stopped. Run-flag holder only.
  void NoteStopped() {
    notes_.QueueStopped([this] { return tx_stopped_.load(); });
  }
  // Why the dedicated runner should run the qdisc now, or until when it may sleep.
  RunnerTurn Look(Tsc now) const;
  // A stream producer's wait for room in `band` (or Abort).
  void WaitForSpace(int band);

  LockfreePfifo qdisc_;
  const EnqueueStep enqueue_;
  std::atomic<bool> running_{false};  // the run flag (q->seqlock)
  QdiscNotes<std::atomic<bool>> notes_;  // MISSED and DRAINING
  std::atomic<bool> aborted_{false};
  std::atomic<bool> draining_{false};   // generation ended (Drain): a dedicated runner sends all
  std::atomic<Tsc> first_enqueued_{0};  // when the backlog last became non-empty
  QdiscRun<LockfreePfifo> run_;         // the run-flag holder's

  // Blocked stream producers (the slow path only: a full band).
  // The two locks below guard only the sleeps: the state they wait on is atomic.
  Mutex space_mu_;
  CondVar space_cv_;
  std::atomic<unsigned> waiters_{0};

  // --runner dedicated: the runner sleeps here while there is nothing to send.
  Mutex runner_mu_;
  CondVar runner_cv_;
  std::atomic<bool> runner_idle_{false};
};

}  // namespace txbatch
