#include "engine/cost_model_fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <map>
#include <span>

#include "base/median.h"
#include "dataplane/tx_queue.h"
#include "drivers/factory.h"

namespace txbatch {
namespace {

// A wire-less NIC with no injected costs: only software is measured.
constexpr const char* kNullNic = "emu:null,doorbell_ns=0,desc_ns=0";
constexpr const char* kNullPort = "ethdev:net_null0";
// A NIC with a ring and a 10 GbE wire, still no injected costs: the txirq reclaims what it
// sent, so the completion series can time reclaims.
constexpr const char* kRingNic = "emu:ixgbe,doorbell_ns=0,desc_ns=0,ring=1024";

CellConfig BaseCell(const char* driver, Engine engine, const CostModel& cost, double duration_s,
                    double warmup_s) {
  CellConfig c;
  c.driver = driver;
  c.driver_spec = *ParseDriverSpec(driver);  // constant specs: they parse
  c.proto = Proto::kUdp;
  c.size = kTxbatchHeaderBytes;  // 60-byte frames: the per-frame work, not bytes
  c.procs = 1;
  c.duration_s = duration_s;
  c.warmup_s = warmup_s;
  c.engine = engine;
  c.cost = cost;
  return c;
}

std::string SeriesOf(const CellConfig& c) {
  if (!c.driver_spec.emulated()) return "net_null";
  if (c.driver == kRingNic) return "completion";
  if (c.shape.noqueue) return "none";
  if (c.shape.dedicated) return "dedicated";
  return c.bypass ? "bypass" : "inline";
}

}  // namespace

std::string CalibrationSeries(const CellConfig& c) {
  if (c.driver != kNullNic && c.driver != kNullPort && c.driver != kRingNic) return "";
  return SeriesOf(c);
}

LinearFit FitLine(std::span<const double> x, std::span<const double> y) {
  LinearFit f;
  const size_t n = std::min(x.size(), y.size());
  if (n == 0) return f;
  // Least squares of the relative errors (weights 1/y²): the simulation is judged by ratios
  // (sim/real), and a bulk of one — batching off — counts as much as one of 256. Plain least
  // squares let the large bulks' cycles decide the line, and it missed the bulk of one by 1.8x
  // (the dedicated series on this project's 2-vCPU guest, 2026-12-04).
  // A point at or below zero has no relative error: with one, every point counts alike (plain
  // least squares), so that none drops out of the fit or its R².
  const bool relative =
      std::all_of(y.begin(), y.begin() + static_cast<ptrdiff_t>(n), [](double v) { return v > 0; });
  std::vector<double> w(n);
  double sw = 0, mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) {
    w[i] = relative ? 1 / (y[i] * y[i]) : 1;
    sw += w[i], mx += w[i] * x[i], my += w[i] * y[i];
  }
  mx /= sw;
  my /= sw;
  double sxx = 0, sxy = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxx += w[i] * (x[i] - mx) * (x[i] - mx);
    sxy += w[i] * (x[i] - mx) * (y[i] - my);
    syy += w[i] * (y[i] - my) * (y[i] - my);
  }
  f.slope = sxx > 0 ? sxy / sxx : 0;
  f.intercept = my - f.slope * mx;
  // A cost is not negative: where the free line's fixed part is, the best line through the origin
  // (the per-frame part alone); where its slope is, the mean (the fixed part alone). Noise large
  // next to a small fixed cost (a sanitizer build, a shared machine) gives the first.
  if (f.intercept < 0) {
    double x2 = 0, xy = 0;
    for (size_t i = 0; i < n; ++i) x2 += w[i] * x[i] * x[i], xy += w[i] * x[i] * y[i];
    f.intercept = 0;
    f.slope = x2 > 0 ? std::max(0.0, xy / x2) : 0;
    f.bounded = "fixed_cycles";
  } else if (f.slope < 0) {
    f.slope = 0;
    f.intercept = std::max(0.0, my);
    f.bounded = "per_frame_cycles";
  }
  // Residuals in cycles; R² of the weighted fit (of the relative errors).
  double sse = 0;
  for (size_t i = 0; i < n; ++i) {
    const double r = y[i] - (f.intercept + f.slope * x[i]);
    f.residuals.push_back(r);
    sse += w[i] * r * r;
  }
  f.r2 = syy > 0 ? 1 - sse / syy : 1;
  return f;
}

std::vector<CellConfig> CalibrationCells(const std::vector<unsigned>& batches, Engine engine,
                                         const CostModel& base, double duration_s,
                                         double warmup_s) {
  std::vector<CellConfig> cells;
  for (unsigned n : batches) {
    CellConfig none = BaseCell(kNullNic, engine, base, duration_s, warmup_s);
    none.shape.noqueue = true;
    none.stream = false;
    none.policy = {PolicyKind::kBuffer, static_cast<uint16_t>(n)};
    cells.push_back(none);
    CellConfig dedicated = BaseCell(kNullNic, engine, base, duration_s, warmup_s);
    dedicated.shape.dedicated = true;
    dedicated.policy = {PolicyKind::kBuffer, static_cast<uint16_t>(n)};
    cells.push_back(dedicated);
    // The completion series: one frame per call, paced below the wire and the producer's speed:
    // each frame leaves at once, the ring runs dry, and the txirq reclaims at its idle poll what
    // left meanwhile — about n frames at n per poll interval (more when it wakes late: the fit
    // uses the frames it reclaimed).
    CellConfig ring = BaseCell(kRingNic, engine, base, duration_s, warmup_s);
    ring.shape.noqueue = true;
    ring.stream = false;
    ring.policy = {PolicyKind::kCount, 1};
    ring.rate = {RateSpec::Unit::kPps, n / std::chrono::duration<double>(kIrqIdlePoll).count()};
    cells.push_back(ring);
    if (engine == Engine::kReal) {
      CellConfig port = none;
      port.driver = kNullPort;
      port.driver_spec = *ParseDriverSpec(kNullPort);
      cells.push_back(port);
    }
  }
  CellConfig inline_cell = BaseCell(kNullNic, engine, base, duration_s, warmup_s);
  inline_cell.policy = {PolicyKind::kCount, 1};
  // The qdisc's costs are fitted from frames that go through it: one producer inline would
  // otherwise take the empty-qdisc bypass with every frame (no enqueue, no dequeue to measure).
  inline_cell.bypass = false;
  cells.push_back(inline_cell);
  // And with it: what the bypass's path costs in place of them.
  CellConfig bypass_cell = inline_cell;
  bypass_cell.bypass = true;
  cells.push_back(bypass_cell);
  return cells;
}

namespace {

// The medians over rounds of each cell's measurement: a point of its series.
std::vector<CalibrationPoint> PointsOf(const std::vector<CellRecord>& records, double tsc_hz) {
  std::vector<CalibrationPoint> points;
  // Medians over rounds, per cell.
  std::map<int, std::vector<const CellRecord*>> by_cell;
  for (const auto& r : records) by_cell[r.cell].push_back(&r);
  for (const auto& [index, runs] : by_cell) {
    const CellConfig& c = runs.front()->config;
    const bool completion = SeriesOf(c) == "completion";
    std::vector<double> avg, per_call, per_frame, receiver;
    for (const CellRecord* r : runs) {
      if (r->result.packets == 0) continue;
      receiver.push_back(r->result.receiver ? r->result.receiver->cycles_per_pkt : 0);
      if (completion) {
        // Per reclaim: frames and the txirq's cycles under the TX lock.
        if (!r->result.completion_frames_per_call) continue;
        avg.push_back(*r->result.completion_frames_per_call);
        per_call.push_back(r->result.completion_cycles_per_call.value_or(0));
      } else {
        avg.push_back(r->result.avg_batch);
        per_call.push_back(r->result.cycles_per_pkt * r->result.avg_batch);
      }
      per_frame.push_back(tsc_hz / (r->result.mpps * 1e6));
    }
    if (avg.empty()) continue;
    // The completion series' limit: the frames sent per idle-poll interval it was paced at.
    const unsigned limit =
        completion ? static_cast<unsigned>(std::lround(
                         c.rate.value * std::chrono::duration<double>(kIrqIdlePoll).count()))
                   : c.policy.frames;
    points.push_back(
        {SeriesOf(c), limit, Median(avg), Median(per_call), Median(per_frame), Median(receiver)});
  }
  return points;
}

// The points of one series.
std::vector<const CalibrationPoint*> Series(const Calibration& cal, const std::string& name) {
  std::vector<const CalibrationPoint*> out;
  for (const auto& p : cal.points)
    if (p.series == name) out.push_back(&p);
  return out;
}

// A series' receiver: its cycles a call (results.receiver x avg batch) against avg batch.
LinearFit ReceiverLine(const Calibration& cal, const std::string& name) {
  std::vector<double> x, y;
  for (const auto* p : Series(cal, name))
    x.push_back(p->avg_batch), y.push_back(p->receiver_cycles * p->avg_batch);
  return FitLine(x, y);
}

// A series' cycles a call against its average batch (`max_limit`: only the points of batch
// limits up to it); a sentence where fewer than two points are there.
Status FitSeries(const Calibration& cal, const std::string& name, LinearFit* f,
                 unsigned max_limit = kMaxBatch) {
  std::vector<double> x, y;
  for (const auto* p : Series(cal, name))
    if (p->batch <= max_limit) x.push_back(p->avg_batch), y.push_back(p->cycles_per_call);
  if (x.size() < 2)
    return MakeError(
        EINVAL,
        fmt::format("calibrate needs at least two batch limits{} to fit the {} series, "
                    "and {} measured; valid: --batch with two or more values{}",
                    max_limit < kMaxBatch ? fmt::format(" of at most {}", max_limit) : "", name,
                    x.size(), max_limit < kMaxBatch ? fmt::format(" up to {}", max_limit) : ""));
  *f = FitLine(x, y);
  return {};
}

// The model's costs from the fitted lines and points (`base`'s where they cannot be separated).
Status DeriveModel(Calibration& cal, double tsc_hz, const CostModel& base) {
  const auto series = [&cal](const std::string& name) { return Series(cal, name); };
  CostModel& m = cal.model;
  m = base;
  m.tsc_hz = tsc_hz;
  const auto floor0 = [](double v) { return std::max(0.0, v); };
  // The driver: fixed = TX lock + call (the lock alone is not separable here: the base's value
  // stays); per frame = the call's own work. A PMD's per-frame work (net_null's slope) is the
  // driver's share. Handing frames to the sink, which emu:null does after each call, is the
  // receiver's, timed apart (results.receiver): its cycles a call = its lock + deliver x n.
  // What emu:null's call does a frame beyond net_null's is charged to deliver too, so emu:null's
  // whole frame costs what it measured.
  m.xmit_call = floor0(cal.none.intercept - m.lock);
  if (!cal.net_null.residuals.empty()) m.xmit_frame = floor0(cal.net_null.slope);
  cal.receiver = ReceiverLine(cal, "none");
  const double emu_extra = floor0(cal.none.slope - m.xmit_frame);
  m.deliver = floor0(cal.receiver.slope + emu_extra);
  // The producer: what each frame costs beyond its share of the driver call and the receiver's
  // (one write per 60-byte datagram, so write + frame together; the base's write stays).
  std::vector<double> producer;
  for (const auto* p : series("none"))
    producer.push_back(p->cycles_per_frame - p->cycles_per_call / p->avg_batch -
                       p->receiver_cycles);
  cal.producer_cycles = Median(producer);
  m.frame = std::max(1.0, cal.producer_cycles - m.write);
  // The qdisc, from one producer running it inline at count:1: each frame alone goes through the
  // root lock + enqueue, one run of one frame (the dequeue under the same hold of the lock, then
  // the driver's call: its TX path), and the dequeue that finds the qdisc empty and ends the run
  // (the root lock again).
  // The dequeue's split into per bulk and per frame is not separable here: the base's per-frame
  // share stays.
  const auto in = series("inline");
  if (in.empty())
    return MakeError(EINVAL, "calibrate needs the inline series to fit the qdisc's costs");
  cal.inline_frame = in.front()->cycles_per_frame;
  cal.inline_call = in.front()->cycles_per_call;
  cal.inline_receiver = in.front()->receiver_cycles;
  const double driver_one = cal.none.intercept + cal.none.slope;  // TX lock + a call of 1
  // A bypassed frame's TX path is the run's handover and the call, no dequeue: what it has beyond
  // the TX lock and a call of one is the handover's (run_xmit), charged to every bulk a run hands
  // the driver. Without a bypass point the base's run_xmit stays.
  const auto by = series("bypass");
  if (!by.empty()) {
    cal.bypass = *by.front();
    m.run_xmit = floor0(cal.bypass->cycles_per_call - driver_one);
  }
  // The TX path's time starts with the root lock held (the dequeue's), on both engines.
  m.dequeue = floor0(cal.inline_call - driver_one - m.run_xmit - m.dequeue_frame);
  m.enqueue = floor0(cal.inline_frame - cal.inline_receiver - cal.producer_cycles -
                     cal.inline_call - 2 * m.lock);
  // The bypass, likewise: each frame alone through the root lock's look, the run around the
  // frame in hand, its TX path (the handover, the TX lock and the call) and the empty dequeue
  // ending the run.
  if (cal.bypass)
    m.bypass = floor0(cal.bypass->cycles_per_frame - cal.bypass->receiver_cycles -
                      cal.producer_cycles - cal.bypass->cycles_per_call - 2 * m.lock);
  // The frames' move between CPUs, from a dedicated runner (on another CPU than the producer)
  // against the same driver calls made by the producer itself (the none series): its call is
  // the dequeue of a bulk the producer wrote, then the same TX lock and call, so what its line
  // has beyond none's and the dequeue's is the cross-CPU part — per bulk (the qdisc's lines)
  // and per frame (the frame's). Fitted over bulks up to kHandoverFitLimit (cost_model_fit.h).
  m.handover_bulk = floor0(cal.dedicated.intercept - cal.none.intercept - m.dequeue - m.run_xmit);
  m.handover = floor0(cal.dedicated.slope - cal.none.slope - m.dequeue_frame);
  // The txirq: per reclaim = completion + completion_frame x frames reclaimed, timed inside the
  // TX lock (the NIC model hands what it reclaims to the sink after it). The simulation charges
  // `deliver` a frame there, not what the receiver measured in the reclaims (its own line, on
  // the txirq's colder cache, and deliver holds emu:null's call's extra): completion_frame gives
  // the difference back, so a reclaimed frame costs what it measured.
  if (!cal.completion.residuals.empty()) {
    cal.completion_receiver = ReceiverLine(cal, "completion");
    m.completion = floor0(cal.completion.intercept);
    // A reclaimed frame's receiver measured its slope there; the simulation charges deliver.
    m.completion_frame = floor0(cal.completion.slope + cal.completion_receiver.slope - m.deliver);
  }
  return {};
}

}  // namespace

Result<Calibration> FitCostModel(const std::vector<CellRecord>& records, double tsc_hz,
                                 const CostModel& base) {
  Calibration cal;
  cal.points = PointsOf(records, tsc_hz);
  if (Status s = FitSeries(cal, "none", &cal.none); !s) return s.error();
  if (Status s = FitSeries(cal, "dedicated", &cal.dedicated, kHandoverFitLimit); !s)
    return s.error();
  if (!Series(cal, "net_null").empty())
    if (Status s = FitSeries(cal, "net_null", &cal.net_null); !s) return s.error();
  if (!Series(cal, "completion").empty())
    if (Status s = FitSeries(cal, "completion", &cal.completion); !s) return s.error();
  if (Status s = DeriveModel(cal, tsc_hz, base); !s) return s.error();
  return cal;
}

namespace {
// --min-r2 0 accepts any fit, a line held at 0 whose R² is negative included.
bool Poor(const LinearFit& f, double min_r2) {
  return min_r2 > 0 && !f.residuals.empty() && !(f.r2 >= min_r2);
}
// R² cut down, never rounded up: "R² 0.950, below --min-r2 0.95" cannot be printed.
double R2Down(double r2) { return std::floor(r2 * 1000) / 1000; }

struct NamedFit {
  const char* name;  // "<series>'s fit (<what it gives>)"
  const LinearFit* fit;
};
// The fit of `fits` below `min_r2` that explains least; null when every one passes.
const NamedFit* WorstPoor(std::span<const NamedFit> fits, double min_r2) {
  const NamedFit* worst = nullptr;
  for (const NamedFit& f : fits)
    if (Poor(*f.fit, min_r2) && (worst == nullptr || f.fit->r2 < worst->fit->r2)) worst = &f;
  return worst;
}
}  // namespace

std::vector<std::string> KeepPoorLeafFits(Calibration& cal, const CostModel& base, double min_r2) {
  // Each leaf series: its lines, its two costs and what keeping them means.
  struct Leaf {
    std::vector<NamedFit> fits;
    double CostModel::*fixed;
    double CostModel::*per_frame;
    const char *fixed_name, *per_frame_name, *meaning;
  };
  const Leaf leaves[] = {
      {{{"dedicated series' fit (handover, handover_bulk)", &cal.dedicated}},
       &CostModel::handover,
       &CostModel::handover_bulk,
       "handover",
       "handover_bulk",
       "dedicated-runner cells move frames between CPUs"},
      {{{"completion series' fit (the txirq's reclaim)", &cal.completion},
        {"completion series' receiver fit (the txirq's reclaim)", &cal.completion_receiver}},
       &CostModel::completion,
       &CostModel::completion_frame,
       "completion",
       "completion_frame",
       "txirq reclaims"}};
  std::vector<std::string> said;
  for (const Leaf& l : leaves) {
    const NamedFit* poor = WorstPoor(l.fits, min_r2);
    if (poor == nullptr) continue;
    cal.model.*l.fixed = base.*l.fixed;
    cal.model.*l.per_frame = base.*l.per_frame;
    cal.kept_poor.insert(cal.kept_poor.end(), {l.fixed_name, l.per_frame_name});
    said.push_back(fmt::format(
        "the {} has R² {:.3f}, below --min-r2 {:g}: {} and {} are kept from the base model ({:.0f} "
        "and {:.0f} cycles), the rest is fitted; the simulation's {} at the base's cost, not this "
        "machine's",
        poor->name, R2Down(poor->fit->r2), min_r2, l.fixed_name, l.per_frame_name, base.*l.fixed,
        base.*l.per_frame, l.meaning));
  }
  return said;
}

std::optional<std::string> PoorFit(const Calibration& cal, double min_r2) {
  const NamedFit fits[] = {{"none series' fit (the driver call)", &cal.none},
                           {"net_null series' fit (a PMD's burst)", &cal.net_null},
                           {"receiver's fit (deliver)", &cal.receiver}};
  const NamedFit* worst = WorstPoor(fits, min_r2);
  if (worst == nullptr) return std::nullopt;
  const double r2 = worst->fit->r2;
  return fmt::format(
      "the {} has R² {:.3f}, below --min-r2 {:g}: the measurement was too noisy to fit, and no "
      "cost model was written; run calibrate again on an idle machine, with more --rounds or a "
      "longer --duration (or accept the fit with --min-r2 {:g})",
      worst->name, R2Down(r2), min_r2, std::max(0.0, std::floor(r2 * 100) / 100));
}

double KernelSliceS(unsigned cpus) {
  const unsigned counted = std::clamp(cpus, 1u, 8u);
  return 0.75e-3 * std::bit_width(counted);  // 1 + floor(log2(counted))
}

void ApplyScheduler(const SchedulerProbe& probe, Calibration& cal) {
  CostModel& m = cal.model;
  m.cpus = probe.cpus;
  m.futex = probe.futex;
  m.context_switch = probe.context_switch();
  m.wakeup = probe.wakeup();
  m.remote_wake = probe.remote_wake();
  m.halt_after = probe.halt_after();
  m.remote_wake_halted = probe.remote_wake_halted();
  m.wakeup_halted = probe.wakeup_halted();
  m.timer_arm = probe.timer_arm();
  m.timer_wake = probe.timer_wake();
  m.timer_irq = probe.timer_irq();
  m.tick = probe.tick_lost;
  m.tick_interval = probe.tick_interval;
  m.pi_unlock = probe.pi_unlock;
  m.pi_handover = probe.pi_handover;
  m.slice = KernelSliceS(probe.cpus) * m.tsc_hz;
  // A lock's line from another core: what lock_contended charges (sim_queue.h, SimLock).
  if (probe.line_pass > 0) m.lock_contended = probe.line_pass;
  cal.scheduler = probe;
}

void ApplyRecycle(const RecycleProbe& probe, Calibration& cal) {
  cal.model.recycle = probe.recycle();
  cal.model.deliver_remote = probe.deliver_remote();
  cal.recycle = probe;
}

nlohmann::json Calibration::Json() const {
  const auto line = [](const LinearFit& f) {
    return nlohmann::json{
        {"fixed_cycles", f.intercept},
        {"per_frame_cycles", f.slope},
        {"r2", f.r2},
        {"residuals", f.residuals},
        {"bounded_at_0", f.bounded.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.bounded)}};
  };
  nlohmann::json pts = nlohmann::json::array();
  for (const auto& p : points)
    pts.push_back({{"series", p.series},
                   {"batch", p.batch},
                   {"avg_batch", p.avg_batch},
                   {"cycles_per_call", p.cycles_per_call},
                   {"cycles_per_frame", p.cycles_per_frame},
                   {"receiver_cycles", p.receiver_cycles}});
  return {
      {"none", line(none)},
      {"receiver", line(receiver)},
      {"dedicated", line(dedicated)},
      {"net_null", net_null.residuals.empty() ? nlohmann::json(nullptr) : line(net_null)},
      {"completion", completion.residuals.empty() ? nlohmann::json(nullptr) : line(completion)},
      {"completion_receiver",
       completion_receiver.residuals.empty() ? nlohmann::json(nullptr) : line(completion_receiver)},
      {"producer_cycles", producer_cycles},
      {"inline",
       {{"cycles_per_frame", inline_frame},
        {"cycles_per_call", inline_call},
        {"receiver_cycles", inline_receiver}}},
      {"bypass", bypass ? nlohmann::json{{"cycles_per_frame", bypass->cycles_per_frame},
                                         {"cycles_per_call", bypass->cycles_per_call},
                                         {"receiver_cycles", bypass->receiver_cycles}}
                        : nlohmann::json(nullptr)},
      {"not_fitted",
       [&] {
         nlohmann::json kept = {"write", "lock"};
         if (!LineMeasured()) kept.push_back("lock_contended");
         kept.push_back("dequeue_frame");
         if (completion.residuals.empty()) {
           kept.push_back("completion");
           kept.push_back("completion_frame");
         }
         return kept;
       }()},
      {"kept_below_min_r2", kept_poor},
      {"scheduler",
       !scheduler
           ? nlohmann::json(nullptr)
           : nlohmann::json{{"cpus", scheduler->cpus},
                            {"futex_cycles", scheduler->futex},
                            {"same_cpu_handoff_cycles", scheduler->same_cpu_handoff},
                            {"cross_cpu_handoff_cycles", scheduler->cross_cpu_handoff},
                            {"cross_cpu_wake_call_cycles", scheduler->cross_cpu_wake_call},
                            {"line_pass_cycles", scheduler->line_pass},
                            // since 2026-12-08: timed from both threads on their CPUs
                            {"line_pass_from_ready", true},
                            {"timed_wait_cycles", scheduler->timed_wait},
                            {"same_cpu_handoff_armed_cycles", scheduler->same_cpu_handoff_armed},
                            {"preempting_wait_cycles",
                             scheduler->preempting_measured
                                 ? nlohmann::json(scheduler->preempting_wait)
                                 : nlohmann::json(nullptr)},
                            {"tick_lost_cycles", scheduler->tick_lost},
                            {"tick_interval_cycles", scheduler->tick_interval},
                            {"pi_unlock_cycles", scheduler->pi_unlock},
                            {"pi_handover_cycles", scheduler->pi_handover},
                            {"slice_s", KernelSliceS(scheduler->cpus)}}},
      {"recycle", !recycle ? nlohmann::json(nullptr)
                           : nlohmann::json{{"build_local_cycles", recycle->build_local},
                                            {"build_remote_cycles", recycle->build_remote},
                                            {"receive_local_cycles", recycle->receive_local},
                                            {"receive_remote_cycles", recycle->receive_remote}}},
      {"points", pts}};
}

}  // namespace txbatch
