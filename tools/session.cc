#include "tools/session.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "base/json_text.h"
#include "base/stop_signals.h"
#include "dataplane/mempool.h"
#include "dataplane/telemetry.h"
#include "drivers/factory.h"
#include "engine/real_engine.h"
#include "engine/sim_engine.h"

namespace txbatch {
namespace {

std::atomic<bool> g_stop{false};

// The first stop signal (SIGINT, SIGTERM or SIGHUP) asks for a clean stop (the window ends, the
// drain runs, what was measured is written); a second one — a drain waiting out a long --link,
// say — takes the signal's default action at once (the next txbatch removes the EAL folder it
// leaves).
extern "C" void OnSignal(int sig) {
  GiveUpOnStalledReaders();  // a stalled reader no longer holds up the writes that end the run
  if (g_stop.exchange(true)) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

// SIGPIPE's handler: nothing. The write that raised it fails with EPIPE, which its caller sees.
extern "C" void OnBrokenPipe(int) {}

// MemAvailable from /proc/meminfo, in bytes; 0 if unknown.
uint64_t AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

}  // namespace

bool StopRequested() { return g_stop.load(); }

void CatchStopSignals() {
  for (int sig : kStopSignals) std::signal(sig, OnSignal);
}

void IgnoreBrokenPipes() {
  // A handler rather than SIG_IGN: an ignored SIGPIPE survives exec, and the programs txbatch
  // starts (ip and ethtool for `lab`, txbatch-plot) would inherit it; a handler is reset there.
  struct sigaction sa {};
  sa.sa_handler = OnBrokenPipe;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPIPE, &sa, nullptr);
  // The same for a write past the file size limit (RLIMIT_FSIZE, `ulimit -f`): EFBIG for the
  // writer to say, not SIGXFSZ ending txbatch with a core and its output cut mid-block.
  sigaction(SIGXFSZ, &sa, nullptr);
}

int SayIfStdoutCutShort(int status) {
  const bool flushed = std::fflush(stdout) == 0;
  const int flush_err = errno;
  if (flushed && !std::ferror(stdout)) return status;
  // A pipe (or socket) whose reader went away polls as an error on the writing end.
  pollfd out{.fd = STDOUT_FILENO, .events = POLLOUT, .revents = 0};
  const bool reader_gone = poll(&out, 1, 0) == 1 && (out.revents & POLLERR) != 0;
  if (reader_gone) {
    // A reader that left on purpose (`| head -1`): what it wanted it got.
    std::fprintf(stderr,
                 "txbatch: standard output was closed by its reader (EPIPE): what was printed "
                 "there is cut short, and nothing else is (the files written, --json and --out, "
                 "are whole; the exit status, %d, is the command's own)\n",
                 status);
    return status;
  }
  // A full disk or a device that refuses (`>/dev/full`): the tables are lost, and a script must
  // not read exit 0 as "all written" — 2, as for any named output that could not be written.
  std::fprintf(stderr,
               "txbatch: standard output could not be written (%s): the tables printed there are "
               "lost; the files written, --json and --out, are whole (exit 2 unless the command "
               "had failed already)\n",
               flushed ? "an earlier write failed" : std::strerror(flush_err));
  return status == kExitOk ? kExitBadInput : status;
}

int Fail(int code, const Error& e) {
  std::fprintf(stderr, "txbatch: %s\n", e.message.c_str());
  return code;
}

// Starts a session for `cells`; on failure returns the exit status, the sentence printed.
Result<Session> StartSession(const std::vector<CellConfig>& cells, EalMemory memory,
                             const EalUserArgs& eal_user_args, RunEnv env, int* exit_code,
                             int* capture_fd, const std::string& capture_name) {
  const bool capturing = capture_fd != nullptr && *capture_fd >= 0;
  const auto fail = [&](int code, const Error& e) {
    *exit_code = code;
    return e;
  };
  // Signals are ours from here on: one during EAL's start-up is seen once it is up, and the run
  // then stops cleanly (EAL torn down, what was measured — nothing — written).
  CatchStopSignals();
  // Size one pool for the largest cell; the EAL memory estimate follows from it.
  const unsigned lcores = static_cast<unsigned>(AllowedCpus().size());
  unsigned pool_size = 0;
  for (const auto& c : cells)
    pool_size = std::max(pool_size, c.pool_size > 0 ? c.pool_size : PoolSizeFor(c, lcores));
  const unsigned mtu = cells.front().mtu;
  // Every frame that can be queued, in a ring or held by a link has an mbuf: say so when the
  // machine cannot hold them, rather than let EAL fail to reserve the memory.
  if (const uint64_t need = PoolBytes(pool_size, mtu), avail = AvailableMemoryBytes();
      avail > 0 && need > avail / 10 * 8) {
    unsigned link_limit = 0;
    for (const auto& c : cells) link_limit = std::max(link_limit, c.link ? c.link->limit : 0u);
    return fail(kExitBadInput,
                Error{ENOMEM, fmt::format("the mbuf pool needs {} MB ({} frames: the qdisc, the "
                                          "rings{} and the producers' caches) but {} MB of memory "
                                          "are available; valid: a smaller --txqueuelen or "
                                          "--link limit",
                                          need >> 20, pool_size,
                                          link_limit ? fmt::format(", {} in the link", link_limit)
                                                     : std::string(),
                                          avail >> 20)});
  }
  // Besides the pool, what the drivers take for themselves (a verbs queue's receive buffers).
  uint64_t own_bytes = 0;
  for (const auto& c : cells)
    own_bytes = std::max(own_bytes, c.driver_spec.own_pool_bytes() * std::max(1u, c.queues));
  if (capturing) own_bytes += Capture::PoolBytes(mtu);
  auto eal_plan = PlanEal(PoolBytes(pool_size, mtu) + own_bytes, eal_user_args, memory);
  if (!eal_plan) return fail(kExitBadInput, eal_plan.error());
  env.eal_args.assign(eal_plan->args.begin() + 1, eal_plan->args.end());
  env.eal_mode = eal_plan->mode;
  env.eal_why = eal_plan->why;

  auto eal = Eal::Start(*eal_plan);
  if (!eal) return fail(kExitBadInput, eal.error());
  env.tsc_hz = (*eal)->tsc_hz();
  env.cpus = (*eal)->cpus();
  unsigned max_procs = 0;
  for (const auto& c : cells) max_procs = std::max(max_procs, Producers(c));
  env.pinning = DescribePinning(max_procs, env.cpus);
  // Cut where DPDK would drop it unmarked: the words that fit, and how many did not.
  const TelemetryFit command_line =
      FitTelemetryString(env.command_line, kTelemetryCommandLineBytes);
  PublishTelemetryInfo({{"command_line", command_line.text},
                        {"command_line_words_left_out", command_line.words_left_out},
                        {"pid", static_cast<uint64_t>(getpid())},
                        {"dpdk", env.dpdk_version},
                        {"eal_mode", env.eal_mode},
                        {"cells", static_cast<uint64_t>(cells.size())},
                        {"engine_sim_cells", static_cast<uint64_t>(std::count_if(
                                                 cells.begin(), cells.end(), [](const auto& c) {
                                                   return c.engine == Engine::kSim;
                                                 }))}});

  auto pool = CreatePacketPool("txbatch_pool", pool_size, mtu);
  if (!pool) return fail(kExitInternal, pool.error());
  Result<PoolPtr> capture_pool = PoolPtr();
  if (capturing) capture_pool = Capture::MakePool(mtu);
  if (!capture_pool) return fail(kExitInternal, capture_pool.error());
  std::unique_ptr<Capture> capture;
  // Fault every page in now (pool, EAL heap) rather than on a frame's first use mid-window.
  // Not MCL_FUTURE: it would pin every thread's 8 MiB stack as well. Best effort (RLIMIT).
  // Simulated cells have no real-time window to protect: without one, it is start-up time spent
  // for nothing.
  if (std::any_of(cells.begin(), cells.end(),
                  [](const CellConfig& c) { return c.engine == Engine::kReal; }))
    (void)mlockall(MCL_CURRENT);

  // Every device must exist and start before anything is measured: a missing one is bad input
  // (exit 2), with nothing printed or written but the sentence.
  std::set<std::pair<std::string, unsigned>> checked;
  RunWindow window;
  RxSink sink(window, env.tsc_hz, 1);
  for (const CellConfig& cell : cells) {
    if (!checked.insert({cell.driver_spec.ToString(), cell.queues}).second) continue;
    // With every queue the cell asks for: a port with fewer is bad input, found before anything
    // runs.
    const std::vector<FrameReceiver*> sinks(std::max(1u, cell.queues), &sink);
    auto d = CreateDrivers(cell.driver_spec, pool->get(), cell.mtu, sinks, window, env.tsc_hz);
    if (!d) return fail(kExitBadInput, d.error());
    if (std::string ll = d->front()->link_layer(); !ll.empty())
      env.link_layers[cell.driver_spec.ToString()] = std::move(ll);
    if (capturing && !capture) {
      auto c = Capture::Start(std::exchange(*capture_fd, -1), std::move(*capture_pool), mtu);
      if (!c)
        return fail(kExitBadInput,
                    Error{c.error().err,
                          fmt::format("--capture '{}': {}", capture_name, c.error().message)});
      capture = std::move(*c);
    }
  }
  return Session{std::move(*eal), std::move(*pool), std::move(env), {}, 0, {}, std::move(capture)};
}

// Runs one cell; on failure prints the sentence and sets the exit status (a device that vanished
// mid-run is a missing device (2), a drain that did not finish a bug (1)).
std::optional<CellResult> MeasureCell(const CellConfig& cell, Session& s, int* status) {
  const auto started = std::chrono::steady_clock::now();
  // A long drain is said before it first starts, so a quiet terminal is not taken for a hang.
  if (const double hold = cell.link ? cell.link->MaxHoldS(cell.mtu + kEthHeaderBytes) : 0;
      cell.engine == Engine::kReal && hold >= 1 && hold > s.drain_said_s) {
    std::fprintf(stderr,
                 "txbatch: after each window the drain waits up to %.0f s for the frames the "
                 "link holds (a second SIGINT, SIGTERM or SIGHUP ends txbatch at once)\n",
                 hold);
    s.drain_said_s = hold;
  }
  auto r = cell.engine == Engine::kSim
               ? SimulateCell(cell, s.pool.get(), &s.flow_seq)
               : RunCell(cell, s.pool.get(), s.env.tsc_hz, s.env.cpus, g_stop, &s.flow_seq);
  if (!r) {
    std::fprintf(stderr, "txbatch: %s\n", r.error().message.c_str());
    *status = r.error().err == EIO ? kExitInternal : kExitBadInput;
    return std::nullopt;
  }
  r->wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!r->books.balanced)
    std::fprintf(stderr, "txbatch: the books do NOT balance for %s %s size %u procs %u\n",
                 cell.driver.c_str(), cell.policy.ToString().c_str(), cell.size, cell.procs);
  return *r;
}

Result<std::optional<OutputFile>> PrepareOutput(const std::string& path, const std::string& what) {
  if (path.empty()) return std::optional<OutputFile>();
  auto out = OutputFile::Check(path, what);
  if (!out) return out.error();
  out->ClaimStdout();
  return std::optional<OutputFile>(std::move(*out));
}

// Writes the JSON document (if asked) and turns the outcome into the exit status.
int Finish(const std::optional<OutputFile>& json, const nlohmann::json& doc, int status,
           bool balanced) {
  if (json) {
    if (Status s = json->Write(DumpDocument(doc)); !s) return Fail(kExitBadInput, s.error());
  }
  if (status != kExitOk) return status;
  if (!balanced) {
    std::fprintf(stderr, "txbatch: the books do not balance (see above): exit 3\n");
    return kExitUnbalanced;
  }
  return StopRequested() ? kExitInterrupted : kExitOk;
}

// Runs every cell of `plan` once per round (interleaved), appending to `records` (cells numbered
// from `first_cell`). Stops at a signal or a failed cell (status set). A progress line with an
// ETA goes to stderr when it is a terminal.
void MeasureGrid(const std::vector<CellConfig>& cells, int rounds, Session& session, int first_cell,
                 std::vector<CellRecord>& records, int* status, bool* balanced,
                 const std::function<void(size_t, bool)>& around_cell) {
  const size_t total = cells.size() * static_cast<size_t>(rounds);
  const bool tty = isatty(fileno(stderr));
  const auto started = std::chrono::steady_clock::now();
  size_t done = 0;
  double last_line_s = 0;  // when the last progress line went to a stderr that is no terminal
  // /txbatch/stats: where the grid is, and the last cell measured.
  TelemetryDict last_cell;
  const auto publish = [&](const char* state, int round) {
    const double at =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    TelemetryDict d{
        {"state", std::string(state)},           {"at_s", fmt::format("{:.3f}", at)},
        {"cell_runs_done", uint64_t{done}},      {"cell_runs", uint64_t{total}},
        {"round", static_cast<uint64_t>(round)}, {"rounds", static_cast<uint64_t>(rounds)}};
    d.insert(d.end(), last_cell.begin(), last_cell.end());
    PublishTelemetryStats(std::move(d));
  };
  publish("running", 1);
  for (int round = 1; round <= rounds && *status == kExitOk && !StopRequested(); ++round) {
    for (size_t i = 0; i < cells.size() && !StopRequested(); ++i) {
      if (around_cell) around_cell(i, false);
      auto r = MeasureCell(cells[i], session, status);
      if (!r) break;
      *balanced &= r->books.balanced;
      records.push_back(
          {cells[i], *r, rounds > 1 ? round : 0, "", first_cell + static_cast<int>(i)});
      if (around_cell) around_cell(i, true);
      if (session.on_record) session.on_record(records.back());
      ++done;
      last_cell = {{"last_cell", static_cast<uint64_t>(first_cell + static_cast<int>(i))},
                   {"last_driver", cells[i].driver},
                   {"last_policy", cells[i].policy.ToString()},
                   {"last_procs", uint64_t{cells[i].procs}},
                   {"last_size", uint64_t{cells[i].size}},
                   {"last_engine", std::string(cells[i].engine == Engine::kSim ? "sim" : "real")},
                   {"last_packets", r->packets},
                   {"last_mpps", fmt::format("{:.4f}", r->mpps)},
                   {"last_avg_batch", fmt::format("{:.2f}", r->avg_batch)},
                   {"last_balanced", std::string(r->books.balanced ? "true" : "false")}};
      publish("running", round);
      const double spent =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      const double eta = spent / static_cast<double>(done) * (total - done);
      if (tty) {
        std::fprintf(stderr, "\rcell %zu/%zu (round %d/%d), ETA %.0f s   ", done, total, round,
                     rounds, eta);
      } else if (spent >= last_line_s + kProgressLineS) {
        // Under CI or tee: whole lines, rate-limited, so a long sweep is not silent.
        std::fprintf(stderr, "txbatch: cell %zu/%zu (round %d/%d), %.0f s so far, ETA %.0f s\n",
                     done, total, round, rounds, spent, eta);
        last_line_s = spent;
      }
    }
  }
  publish(StopRequested() ? "interrupted" : *status == kExitOk ? "done" : "failed", rounds);
  if (tty) std::fprintf(stderr, "\r%50s\r", "");
  if (StopRequested())
    std::printf("\ninterrupted by a signal: %zu of %zu cell runs measured\n", done, total);
}

void PrintTelemetryLine(const RunEnv& env) {
  if (const std::string line = TelemetryLine(env.eal_args); !line.empty())
    std::printf("%s\n", line.c_str());
}

}  // namespace txbatch
