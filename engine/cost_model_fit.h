#pragma once
// The simulation engine's cost model fitted to measurements (engine/cost_model.h): the cells
// `txbatch calibrate` runs, and the fit of their records. No command line, no printing: the
// command (tools/calibrate.cc) runs the cells and writes the model.
//
// Series, one producer of 60-byte UDP frames on a wire-less NIC (emu:null, no injected costs),
// each at batch limits N (default 1 … 256):
// * `none`      — --qdisc none --policy buffer:N: cycles per driver call against frames in it
//                 gives the driver's fixed and per-frame cost; the receiver's time (emu:null
//                 hands each frame to the sink after the call, timed apart) gives `deliver`; the
//                 rest of a frame's time is the producer's;
// * `net_null`  — the same on ethdev:net_null0: a DPDK PMD's per-frame work, taken as the
//                 driver's share of the per-frame cost (`xmit_frame`; the rest is `deliver`);
// * `inline`    — an inline runner at count:1, flat out: each frame alone through enqueue, a
//                 run of one and the empty dequeue that ends it: the qdisc's costs;
// * `bypass`    — the same with the empty-qdisc bypass: each frame straight to the driver as
//                 the run's first bulk (`bypass`, the run's path around it);
// * `dedicated` — a dedicated runner with buffer:N, flat out, on another CPU than the producer:
//                 its line beyond `none`'s and the dequeue's is the frames' move between CPUs
//                 (`handover_bulk` fixed, `handover` per frame), fitted over the limits up to
//                 kHandoverFitLimit;
// Costs the series cannot separate (the lock from the driver call, the dequeue's per-frame
// share, completions, contention) keep the base model's values, and the file says so.

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/cell.h"
#include "engine/cost_model.h"
#include "engine/record.h"
#include "engine/sched_probe.h"

namespace txbatch {

// The dedicated series is fitted over batch limits up to this: a frame's move between CPUs costs
// less the longer ago its producer wrote it (measured on a 2-vCPU guest, cycles a frame of a
// call beyond none's: ~360 at 1, ~220 at 32, ~85 at 256, as the producer's cache lets go of the
// lines), and the check's grid (batch 1 and 32) and most runners' bulks lie below it.
inline constexpr unsigned kHandoverFitLimit = 32;

// Least squares of the relative errors (weights 1/y²) y = intercept + slope * x, the weighted
// fit's R² and each point's residual in cycles (y - fit), with
// neither part below 0 (both are costs): where the free line's would be, that part is held at 0
// and the other fitted alone, and `bounded` names it ("fixed_cycles" or "per_frame_cycles").
struct LinearFit {
  double intercept = 0, slope = 0, r2 = 0;
  std::vector<double> residuals;
  std::string bounded;
};
LinearFit FitLine(std::span<const double> x, std::span<const double> y);

// One series point, medians over the rounds.
struct CalibrationPoint {
  std::string series;
  unsigned batch = 0;
  double avg_batch = 0;
  double cycles_per_call = 0;   // TX path (dequeue + driver call) per handover (the completion
                                // series: per reclaim, avg_batch its frames)
  double cycles_per_frame = 0;  // the whole path: TSC per frame at the measured rate
  // The receiver's TSC per frame it was handed (results.receiver), out of cycles_per_call but
  // inside cycles_per_frame: on emu the sink runs in the driver's call, on the sender's core.
  double receiver_cycles = 0;
};

struct Calibration {
  CostModel model;
  std::vector<CalibrationPoint> points;
  LinearFit none, dedicated, net_null;
  // The none series' receiver: its cycles a call (results.receiver x avg batch) = its lock +
  // deliver x n.
  LinearFit receiver;
  LinearFit completion;           // the txirq's cycles per reclaim against the frames it reclaimed
  LinearFit completion_receiver;  // the receiver's cycles per reclaim, likewise (completion_frame)
  double producer_cycles = 0;     // write + frame, from the none series
  // The inline point (count:1): cycles per frame, and its TX path per call.
  double inline_frame = 0, inline_call = 0, inline_receiver = 0;
  // The bypass point (count:1, every frame bypassed), likewise; absent from older measurements.
  std::optional<CalibrationPoint> bypass;
  // The real engine's machine: its CPUs and scheduler (ApplyScheduler); absent on the sim engine.
  std::optional<SchedulerProbe> scheduler;
  // The pool's recycling across two CPUs (ApplyRecycle): absent on the sim engine, with one CPU.
  std::optional<RecycleProbe> recycle;
  // Whether a cache line's move between CPUs was measured (lock_contended and handover).
  bool LineMeasured() const { return scheduler && scheduler->line_pass > 0; }
  // Costs whose series' fit fell below --min-r2 and were set back to the base model's
  // (KeepPoorLeafFits), in the order the series are judged (the dedicated runner's first).
  std::vector<std::string> kept_poor;
  nlohmann::json Json() const;  // the "fit" object written with the model
};

// The series a cell of CalibrationCells belongs to — "none", "dedicated", "completion",
// "net_null", "inline" or "bypass" — or empty for a cell calibrate does not run (another driver):
// the cells the model is fitted on, against which calibrate --check holds out its grid.
std::string CalibrationSeries(const CellConfig& c);

// The cells calibrate runs (every series at every limit in `batches`), on `engine`.
std::vector<CellConfig> CalibrationCells(const std::vector<unsigned>& batches, Engine engine,
                                         const CostModel& base, double duration_s, double warmup_s);

// Fits the model from the records of CalibrationCells (any number of rounds), at `tsc_hz` (the
// clock the records' cycles count). Costs it cannot fit keep `base`'s values. Fails with a
// sentence when a series has too few points.
Result<Calibration> FitCostModel(const std::vector<CellRecord>& records, double tsc_hz,
                                 const CostModel& base);

// The series whose costs no other cost is fitted from — the dedicated runner's (handover,
// handover_bulk) and the txirq's reclaims with their receiver (completion, completion_frame) —
// whose line explains less of its points than `min_r2`: their costs are set back to `base`'s
// and named in cal.kept_poor, and each such series is said in one sentence (the fit, its R²,
// the costs kept and what that means for the simulation). A poor fit is not a reason to refuse
// the whole model when the base's value can stand in for the costs it alone gives.
std::vector<std::string> KeepPoorLeafFits(Calibration& cal, const CostModel& base, double min_r2);

// Whether a fit the other costs are fitted from (the none series', net_null's, the receiver's)
// explains less of its points than `min_r2`: the worst such fit in words (its series, R², and
// what to do), or nothing when every one passes. (The others: KeepPoorLeafFits.)
std::optional<std::string> PoorFit(const Calibration& cal, double min_r2);

// The kernel's time slice for threads sharing a CPU on a machine of `cpus` CPUs, in seconds:
// EEVDF's base slice (sysctl_sched_base_slice, 0.75 ms) scaled as the kernel scales it by
// default (SCHED_TUNABLESCALING_LOG: 1 + log2 of the CPUs, counted up to 8).
double KernelSliceS(unsigned cpus);

// Writes what `probe` measured into `m` (cpus, futex, context_switch, wakeup, remote_wake,
// timer_arm, timer_wake, timer_irq, tick, tick_interval, pi_unlock, pi_handover, lock_contended
// where a line's move was measured, and the kernel's slice at m.tsc_hz) and remembers it in
// `cal`.
void ApplyScheduler(const SchedulerProbe& probe, Calibration& cal);

// Writes what the pool's recycling probe measured (recycle, deliver_remote) into `cal`'s model
// and remembers it.
void ApplyRecycle(const RecycleProbe& probe, Calibration& cal);

}  // namespace txbatch
