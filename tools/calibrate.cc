#include "tools/calibrate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "base/median.h"
#include "engine/cost_model_file.h"
#include "results/records.h"
#include "results/summary.h"
#include "results/tables.h"
#include "tools/run_options.h"
#include "tools/session.h"

namespace txbatch {

namespace {

// calibrate's options, checked before anything runs: the batch limits (two or more: a line is
// fitted through them), EAL's memory and the base model (the costs it cannot fit, and on the
// sim engine the machine it simulates).
struct CalibrateInputs {
  std::vector<unsigned> batches;
  EalMemory memory{};
  CostModel base;
};

Result<CalibrateInputs> CheckCalibrateArgs(const CalibrateArgs& args) {
  CalibrateInputs in;
  auto batches = ParseUnsignedList("--batch", args.batch, 1, kMaxBatch);
  if (!batches) return batches.error();
  if (batches->size() < 2)
    return Error{EINVAL,
                 "calibrate fits a line through the batch limits, and one was given; valid: "
                 "--batch with two or more values, e.g. 1,8,32,256"};
  in.batches = *batches;
  if (args.engine != "real" && args.engine != "sim")
    return Error{EINVAL, fmt::format("--engine '{}' is not valid; valid: real, sim", args.engine)};
  if (!(args.duration_s >= 0.01 && args.duration_s <= 60))
    return Error{ERANGE, fmt::format("--duration {} is out of range; valid: 0.01..60 seconds",
                                     args.duration_s)};
  if (!(args.min_r2 >= 0 && args.min_r2 <= 1))
    return Error{ERANGE, fmt::format("--min-r2 {} is out of range; valid: 0..1 (0 accepts any "
                                     "fit)",
                                     args.min_r2)};
  if (args.rounds < 1 || args.rounds > 100)
    return Error{ERANGE,
                 fmt::format("--rounds {} is out of range; valid: 1..100", args.rounds)};
  auto memory = ParseEalMemory(args.eal_memory);
  if (!memory) return memory.error();
  in.memory = *memory;
  if (!args.cost_model.empty()) {
    auto loaded = LoadCostModel(args.cost_model);
    if (!loaded) return loaded.error();
    in.base = *loaded;
  }
  if (args.strict && !args.check)
    return Error{EINVAL,
                 "--strict judges what --check finds, and --check was not given; valid: --check "
                 "--strict"};
  if (args.check && args.rounds < 2)
    return Error{ERANGE, fmt::format("--check needs two or more --rounds (the real engine's "
                                     "spread and batching's verdict), and {} was given; valid: "
                                     "2..100",
                                     args.rounds)};
  if (args.check && args.engine != "real")
    return Error{EINVAL, "--check runs both engines itself; valid: --check without --engine"};
  return in;
}

// The machine itself, on the real engine: its CPUs and what passing a futex between threads
// costs on them, and the pool's recycling across two CPUs; what could not be measured is kept
// from the base model, and said.
void MeasureMachine(const Session& session, int rounds, double tsc_hz, Calibration& cal) {
  if (auto probe = ProbeScheduler(session.env.cpus, rounds, tsc_hz))
    ApplyScheduler(*probe, cal);
  else
    std::fprintf(stderr,
                 "txbatch: calibrate could not pin a thread to the CPUs it may run on: the "
                 "machine's costs (cpus, futex, context_switch, wakeup, remote_wake, "
                 "halt_after, remote_wake_halted, wakeup_halted, timer_arm, timer_wake, "
                 "timer_irq, tick, tick_interval, pi_unlock, pi_handover, slice, "
                 "lock_contended) are kept "
                 "from the base model\n");
  // The pool's recycling across two CPUs (none with one CPU: the base's stays, 0 built in).
  if (auto recycle = ProbeRecycle(session.pool.get(), session.env.cpus, rounds))
    ApplyRecycle(*recycle, cal);
  else if (session.env.cpus.size() > 1)
    std::fprintf(stderr,
                 "txbatch: calibrate could not pass mbufs between two CPUs (a thread not "
                 "pinned or registered with EAL, or its ring not made): recycle and "
                 "deliver_remote are kept from the base model\n");
}

// The model's `source`: where and how it was measured, what was fitted and what kept.
std::string ModelSource(const CalibrateArgs& args, const RunEnv& env, double tsc_hz,
                        const Calibration& cal) {
  const bool reclaims = !cal.completion.residuals.empty();
  const auto kept = [&cal](const char* cost) {
    return std::find(cal.kept_poor.begin(), cal.kept_poor.end(), cost) != cal.kept_poor.end();
  };
  const bool handover = !kept("handover"), reclaim_fitted = reclaims && !kept("completion");
  return fmt::format(
      "txbatch calibrate ({} engine) on {}, TSC {:.0f} MHz, {}; fitted: frame, xmit_call, "
      "xmit_frame (net_null's), deliver, enqueue, dequeue, run_xmit, bypass{}{}; kept from the "
      "base: write, lock, {}dequeue_frame{}{}; {}",
      args.engine, env.cpu, tsc_hz / 1e6, env.started_at,
      handover ? ", handover, handover_bulk" : "",
      reclaim_fitted ? ", completion, completion_frame" : "",
      cal.LineMeasured() ? "" : "lock_contended, ",
      reclaims ? "" : ", completion, completion_frame (no reclaim was measured)",
      cal.kept_poor.empty() ? std::string()
                            : fmt::format(", {} (their series' fit below --min-r2 {:g})",
                                          fmt::join(cal.kept_poor, ", "), args.min_r2),
      cal.scheduler
          ? fmt::format("the machine measured: {} CPUs, futex, context_switch, wakeup and "
                        "remote_wake from a futex ping-pong, halt_after, remote_wake_halted and "
                        "wakeup_halted from it with idle gaps, timer_arm and timer_wake from timed "
                        "futex waits, timer_irq from a spinner beside a SCHED_FIFO thread's timed "
                        "waits, tick and tick_interval from it alone, pi_unlock and pi_handover "
                        "from a priority-inheriting mutex "
                        "passed across two CPUs, lock_contended from a cache line's, slice the "
                        "kernel's default{}",
                        cal.scheduler->cpus,
                        cal.recycle ? ", recycle and deliver_remote from mbufs passed across "
                                      "two CPUs against one"
                                    : "; recycle and deliver_remote kept from the base")
          : std::string("the machine's (cpus, futex, context_switch, wakeup, remote_wake, "
                        "halt_after, remote_wake_halted, wakeup_halted, timer_arm, timer_wake, "
                        "timer_irq, tick, tick_interval, pi_unlock, "
                        "pi_handover, slice, lock_contended, recycle, deliver_remote) kept from "
                        "the base"));
}

// Each series' points (with their residuals) and the lines fitted through them.
void PrintFits(const Calibration& cal) {
  const bool reclaims = !cal.completion.residuals.empty();
  fmt::print("\n{:<10} {:>6} {:>9} {:>12} {:>11} {:>12} {:>15}\n", "series", "limit", "avg batch",
             "cycles/call", "residual", "cycles/frame", "receiver/frame");
  std::map<std::string, size_t> next;
  for (const auto& p : cal.points) {
    const LinearFit* f = p.series == "none"         ? &cal.none
                         : p.series == "dedicated"  ? &cal.dedicated
                         : p.series == "net_null"   ? &cal.net_null
                         : p.series == "completion" ? &cal.completion
                                                    : nullptr;
    const size_t i = next[p.series]++;
    const std::string residual =
        f != nullptr && i < f->residuals.size() ? fmt::format("{:+.1f}", f->residuals[i]) : "-";
    fmt::print("{:<10} {:>6} {:>9.2f} {:>12.1f} {:>11} {:>12.1f} {:>15.1f}\n", p.series, p.batch,
               p.avg_batch, p.cycles_per_call, residual, p.cycles_per_frame, p.receiver_cycles);
  }
  const auto show = [](const char* what, const LinearFit& f) {
    fmt::print(
        "{:<44} {:8.1f} + {:6.2f} x n cycles, R² {:.4f}{}\n", what, f.intercept, f.slope, f.r2,
        f.bounded.empty() ? ""
                          : fmt::format(" ({} held at 0: the free line's was below)",
                                        f.bounded == "fixed_cycles" ? "fixed" : "per-frame"));
  };
  fmt::print("\ncycles per driver call = fixed + per-frame x n:\n");
  show("  none (TX lock + emu:null call)", cal.none);
  show("  dedicated (dequeue + the call, on another CPU)", cal.dedicated);
  if (!cal.net_null.residuals.empty())
    show("  net_null (TX lock + the PMD's burst)", cal.net_null);
  show("  receiver (its lock + the sink, after the call)", cal.receiver);
  fmt::print("cycles per txirq reclaim = fixed + per-frame x n (n: frames reclaimed):\n");
  if (reclaims) {
    show("  completion (emu:ixgbe's ring, inside the TX lock)", cal.completion);
    show("  its receiver (the sink, after the reclaim)", cal.completion_receiver);
  } else {
    fmt::print("  completion: no reclaim was measured; the base's costs are kept\n");
  }
  fmt::print("  producer per frame (write + build): {:.1f} cycles\n", cal.producer_cycles);
  fmt::print(
      "  inline, count:1: {:.1f} cycles/frame, of which the TX path {:.1f}, the receiver {:.1f}, "
      "the producer {:.1f}; the rest is the enqueue and the empty dequeue ending each run\n",
      cal.inline_frame, cal.inline_call, cal.inline_receiver, cal.producer_cycles);
  if (cal.bypass)
    fmt::print(
        "  inline with the bypass, count:1: {:.1f} cycles/frame, of which the TX path {:.1f}, the "
        "receiver {:.1f}; the rest is the run around each frame in hand (bypass {:.1f}); its TX "
        "path beyond the TX "
        "lock and call is the run's handover (run_xmit {:.1f})\n",
        cal.bypass->cycles_per_frame, cal.bypass->cycles_per_call, cal.bypass->receiver_cycles,
        cal.model.bypass, cal.model.run_xmit);
}

// What the probes found of the machine: the scheduler's costs, the CPUs' halt, the pool's
// recycling; `line_before`: a cache line's pass as the cells began (0: not measured).
void PrintMachine(const Calibration& cal, double tsc_hz, double line_before) {
  if (cal.scheduler) {
    const SchedulerProbe& p = *cal.scheduler;
    fmt::print(
        "the scheduler ({} CPUs): a futex call {:.0f} cycles; a futex handoff {:.0f} cycles on one "
        "CPU (context_switch {:.0f}) and {:.0f} across two, of which the waker's call {:.0f} "
        "(remote_wake {:.0f}) and the wait after it (wakeup {:.0f}); a handoff on one CPU with "
        "the sleeper's timer armed {:.0f} (timer_arm {:.0f}); a wait its timer ends {:.0f} "
        "(timer_wake); what such a wait at SCHED_FIFO costs a thread spinning on its CPU {} "
        "(timer_irq {:.0f}); a thread spinning alone there loses {:.0f} cycles every {:.0f} (tick, "
        "tick_interval: {:.1f} %); a priority-inheriting mutex across two: the unlock with a "
        "waiter "
        "{:.0f} (pi_unlock), the waiter's return after it began {:.0f} (pi_handover); a cache "
        "line across two {:.0f}{}; slice {:.2f} ms\n",
        p.cpus, p.futex, p.same_cpu_handoff, p.context_switch(), p.cross_cpu_handoff,
        p.cross_cpu_wake_call, p.remote_wake(), p.wakeup(), p.same_cpu_handoff_armed, p.timer_arm(),
        p.timer_wake(),
        p.preempting_measured
            ? fmt::format("{:.0f}", p.preempting_wait)
            : std::string("(not measured: SCHED_FIFO not permitted or a thread not pinned)"),
        p.timer_irq(), p.tick_lost, p.tick_interval,
        p.tick_interval > 0 ? 100 * p.tick_lost / p.tick_interval : 0.0, p.pi_unlock, p.pi_handover,
        p.line_pass,
        line_before > 0 ? fmt::format(" ({:.0f} as the cells began)", line_before) : std::string(),
        KernelSliceS(p.cpus) * 1e3);
    if (!p.idle_wake_calls.empty()) {
      std::string scan;
      for (size_t i = 0; i < p.idle_gaps.size(); ++i)
        scan += fmt::format("{}{:.0f} us {:.0f}", i == 0 ? "" : ", ", p.idle_gaps[i] / tsc_hz * 1e6,
                            p.idle_wake_calls[i]);
      fmt::print(
          "the halt: the wake across two CPUs after the sleeper's CPU idled {} cycles; {}\n", scan,
          p.halts() ? fmt::format("a CPU idle past {:.0f} us is halted (halt_after {:.0f}): a wake "
                                  "there costs its waker {:.0f} (remote_wake_halted) and the "
                                  "sleeper runs {:.0f} after it (wakeup_halted)",
                                  p.halt_after() / tsc_hz * 1e6, p.halt_after(),
                                  p.remote_wake_halted(), p.wakeup_halted())
                    : std::string("no CPU halts (the longest idle's wake costs less than 1.5 "
                                  "times the ping-pong's): halt_after 0"));
    }
  }
  if (cal.recycle) {
    const RecycleProbe& r = *cal.recycle;
    fmt::print(
        "the pool across two CPUs: an mbuf allocated and written {:.0f} cycles when it was freed "
        "on the other CPU, {:.0f} on the same (recycle {:.0f}); read and freed {:.0f} when written "
        "on the other CPU, {:.0f} on the same (deliver_remote {:.0f})\n",
        r.build_remote, r.build_local, r.recycle(), r.receive_remote, r.receive_local,
        r.deliver_remote());
  }
}

// Why no model is written: a fit below --min-r2, or the machine changed while it was measured
// (`probes_line`: a cache line's pass between the first two CPUs, `line_before` as the cells
// began, against the scheduler probe's after them, not within kMachineStateFactor: a guest's
// vCPUs moved between near and far host cores, two machines that no one model is); nothing
// where it is written. With --min-r2 0, which accepts any fit, the change is said and the model
// written anyway.
std::optional<std::string> WhyNotWritten(const Calibration& cal, double min_r2,
                                         const std::vector<int>& cpus, bool probes_line,
                                         double line_before) {
  std::optional<std::string> poor = PoorFit(cal, min_r2);
  const double line_after = cal.scheduler ? cal.scheduler->line_pass : 0;
  if (poor || !probes_line || !(line_after > 0) || AsCalibrated(line_after, line_before))
    return poor;
  const std::string changed = fmt::format(
      "the machine changed while it was measured: a cache line passed between CPUs {} and {} "
      "in {:.0f} cycles as the cells began and {:.0f} after them (a factor of {} or more; a "
      "guest's vCPUs moved between near and far host cores)",
      cpus[0], cpus[1], line_before, line_after, kMachineStateFactor);
  if (min_r2 > 0) return changed + "; no cost model written: calibrate again";
  std::fprintf(stderr, "txbatch: calibrate: %s; written anyway (--min-r2 0)\n", changed.c_str());
  return std::nullopt;
}

}  // namespace

int CalibrateCommand(const CalibrateArgs& args, const EalUserArgs& eal_user_args, RunEnv env) {
  auto in = CheckCalibrateArgs(args);
  if (!in) return Fail(kExitBadInput, in.error());
  if (args.check) {
    auto json = PrepareOutput(args.json);
    if (!json) return Fail(kExitBadInput, json.error());
    return CheckCommand(args, eal_user_args, std::move(env), in->memory, *json);
  }
  auto model_out = OutputFile::Check(args.out, "--out file");
  if (!model_out) return Fail(kExitBadInput, model_out.error());
  auto json = PrepareOutput(args.json);
  if (!json) return Fail(kExitBadInput, json.error());
  if (model_out->to_stdout() && *json && (*json)->to_stdout())
    return Fail(kExitBadInput, Error{EINVAL,
                                     "--out and --json both name standard output; valid: "
                                     "at most one of them -"});
  model_out->ClaimStdout();
  const Engine engine = args.engine == "sim" ? Engine::kSim : Engine::kReal;

  RunPlan plan;
  plan.cells = CalibrationCells(in->batches, engine, in->base, args.duration_s, args.warmup_s);
  plan.rounds = args.rounds;
  plan.policies = {PolicySpec{PolicyKind::kCount, 1}};
  int status = kExitOk;
  auto session = StartSession(plan.cells, in->memory, eal_user_args, std::move(env), &status);
  if (!session) return Fail(status, session.error());
  std::vector<CellRecord> records;
  bool balanced = true;
  // The machine's state as the cells begin (AsCalibrated): a cache line between the first two
  // CPUs, against the scheduler probe's after them.
  const std::vector<int>& cpus = session->env.cpus;
  const bool probes_line = engine == Engine::kReal && cpus.size() > 1;
  double line_before = 0;
  if (probes_line) {
    std::vector<double> passes;
    for (int i = 0; i < 3; ++i) passes.push_back(ProbeLinePass(cpus[0], cpus[1]));
    line_before = Median(passes);
  }
  MeasureGrid(plan.cells, plan.rounds, *session, 0, records, &status, &balanced);
  if (status != kExitOk) return status;
  // The measured records to --json (whether a model was written or not) and the exit status.
  const auto finish = [&] {
    const nlohmann::json records_doc = ToJson(records, session->env);
    session->pool.reset();
    return Finish(*json, records_doc, status, balanced);
  };
  if (StopRequested()) {  // what was measured is written; a fit of part of it is not
    std::fprintf(stderr, "txbatch: calibrate was interrupted: no cost model was written\n");
    return finish();
  }
  const double tsc_hz = engine == Engine::kSim ? in->base.tsc_hz : session->env.tsc_hz;
  auto cal = FitCostModel(records, tsc_hz, in->base);
  if (!cal) return Fail(kExitBadInput, cal.error());
  // A poor fit of a series no other cost comes from keeps the base's costs for it (said once
  // the model is written); one the others come from refuses the model (WhyNotWritten).
  const std::vector<std::string> kept = KeepPoorLeafFits(*cal, in->base, args.min_r2);
  // The sim engine calibrates the simulation of the base model, whose machine stays.
  if (engine == Engine::kReal) MeasureMachine(*session, args.rounds, tsc_hz, *cal);
  cal->model.source = ModelSource(args, session->env, tsc_hz, *cal);

  fmt::print("calibrate: {} rounds of {} cells, {} engine, TSC {:.0f} MHz ({})\n", args.rounds,
             plan.cells.size(), args.engine, tsc_hz / 1e6, session->env.cpu);
  PrintFits(*cal);
  PrintMachine(*cal, tsc_hz, line_before);
  if (const auto poor = WhyNotWritten(*cal, args.min_r2, cpus, probes_line, line_before)) {
    std::fprintf(stderr, "txbatch: calibrate: %s\n", poor->c_str());
    const int written = finish();
    return written == kExitOk ? kExitPoorFit : written;
  }
  std::fflush(stdout);  // the notes below after the tables, not inside a line of them
  for (const std::string& note : kept)
    std::fprintf(stderr, "txbatch: calibrate: %s\n", note.c_str());
  nlohmann::json doc = CostModelJson(cal->model);
  doc["fit"] = cal->Json();
  fmt::print("\ncost model ({}):\n{}\n", args.out, CostModelJson(cal->model)["cycles"].dump());
  if (Status s = model_out->Write(doc.dump(2) + "\n"); !s) return Fail(kExitBadInput, s.error());
  return finish();
}

}  // namespace txbatch
