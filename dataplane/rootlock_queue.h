#pragma once
// pfifo_fast under one root lock, the Linux model before 4.16: every enqueue and every dequeue
// takes the qdisc's root lock; the runner drops it around each driver call (sch_direct_xmit).
// Under heavy producer contention a priority-inheriting root lock's strict hand-over collapsed
// throughput (measured; doc/design.md), so root_lock_ is a plain mutex.

#include <condition_variable>
#include <memory>
#include <mutex>

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
  void set_tsq(TsqLedger* tsq) override { qdisc_->set_tsq(tsq); }

 private:
  bool QdiscIdle() override;
  void Restart(bool resched) override;
  void RunnerTurnsUntilStopped() override;
  void WakeRunner() override;
  // __qdisc_run (QdiscRun's phases, the root lock dropped around the driver call). Called with
  // root held and running_ set by the caller; clears running_.
  // `in_hand`: the run's first bulk is already in run_ (begun, a bypassed frame).
  void Run(std::unique_lock<std::mutex>& root, bool in_hand = false);
  // Runs the qdisc when nobody does (counted in `runs`), under root.
  void RunIfIdle(std::unique_lock<std::mutex>& root, Counter& runs);
  // Why the dedicated runner should run the qdisc now, or until when it may sleep. Under
  // root_lock_.
  RunnerTurn Look(Tsc now) const;

  std::mutex root_lock_;
  std::condition_variable space_cv_;
  std::unique_ptr<Qdisc> qdisc_;
  bool running_ = false;          // __QDISC_STATE_RUNNING
  bool resched_pending_ = false;  // the txirq asked for another pass while a runner ran
  bool aborted_ = false;
  unsigned waiters_ = 0;
  const EnqueueStep enqueue_;
  QdiscRun<Qdisc> run_;  // the current runner's
  // --runner dedicated: the runner sleeps on runner_cv_ while there is nothing to send.
  std::condition_variable runner_cv_;
  bool runner_idle_ = false;
  bool draining_ = false;
  Tsc first_enqueued_ = 0;  // when the backlog last became non-empty (buffer:N:T's timer)
};

}  // namespace txbatch
