#pragma once
// pfifo_fast under one root lock, the Linux model before 4.16: every enqueue and every dequeue
// takes the qdisc's root lock; the runner drops it around each driver call (sch_direct_xmit).
// Under heavy producer contention a priority-inheriting root lock's strict hand-over collapsed
// throughput (measured; doc/design.md), so root_lock_ is a plain mutex.

#include <memory>

#include "base/thread_annotations.h"
#include "dataplane/enqueue_step.h"
#include "dataplane/qdisc.h"
#include "dataplane/qdisc_run.h"
#include "dataplane/tx_queue.h"

namespace txbatch {

class RootlockTxQueue final : public TxQueue {
 public:
  RootlockTxQueue(TxDriver& driver, const FlushPolicy& policy, const TxQueueConfig& config,
                  const RunWindow& window);
  ~RootlockTxQueue() override;

  bool Send(rte_mbuf* m, int band, bool run) override;
  void RunQdisc() override;
  void Drain() override;
  void Abort() override;
  unsigned backlog() override;
  unsigned Purge() override;
  void set_tsq(TsqLedger* tsq) override {
    LockGuard root(root_lock_);
    qdisc_->set_tsq(tsq);
  }

 private:
  bool QdiscIdle() override;
  void Restart(bool resched) override;
  void RunnerTurnsUntilStopped() override;
  void WakeRunner() override;
  // __qdisc_run (QdiscRun's phases, the root lock dropped around the driver call). Called with
  // the root lock held and running_ set by the caller; clears running_.
  // `in_hand`: the run's first bulk is already in run_ (begun, a bypassed frame).
  void Run(bool in_hand = false) REQUIRES(root_lock_);
  // Runs the qdisc when nobody does (counted in `runs`).
  void RunIfIdle(Counter& runs) REQUIRES(root_lock_);
  // Why the dedicated runner should run the qdisc now, or until when it may sleep.
  RunnerTurn Look(Tsc now) const REQUIRES(root_lock_);

  // The qdisc's root lock (qdisc_lock): what is marked below is its, checked by clang's
  // analysis (base/thread_annotations.h). Let go around every driver call, so never held with
  // tx_lock_ (tx_queue.h's order). The lambdas handed to the shared steps (EnqueueStep's bypass
  // test, QdiscRun's waiters, RunnerTurns' parts) run inside its sections; the analysis does not
  // follow a lambda into its caller, so they are exempt, each where it is written.
  mutable Mutex root_lock_;
  CondVar space_cv_;
  std::unique_ptr<Qdisc> qdisc_ PT_GUARDED_BY(root_lock_);
  bool running_ GUARDED_BY(root_lock_) = false;          // __QDISC_STATE_RUNNING
  bool resched_pending_ GUARDED_BY(root_lock_) = false;  // the txirq asked for another pass
  bool aborted_ GUARDED_BY(root_lock_) = false;
  unsigned waiters_ GUARDED_BY(root_lock_) = 0;
  const EnqueueStep enqueue_;
  // The current runner's: whoever set running_ owns it, the root lock held or not (its batch
  // goes to the driver with the lock let go), so it is not the lock's to guard.
  QdiscRun<Qdisc> run_;
  // --runner dedicated: the runner sleeps on runner_cv_ while there is nothing to send.
  CondVar runner_cv_;
  bool runner_idle_ GUARDED_BY(root_lock_) = false;
  bool draining_ GUARDED_BY(root_lock_) = false;
  // When the backlog last became non-empty (buffer:N:T's timer).
  Tsc first_enqueued_ GUARDED_BY(root_lock_) = 0;
};

}  // namespace txbatch
