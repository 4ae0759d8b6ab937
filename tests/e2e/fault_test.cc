// Faults (issue 9): a ring that stalls, a pool too small for the load, signals at any moment of a
// run, and a second txbatch alongside the first. Each time: no crash, the books balance, every
// mbuf comes home, what was measured is written as valid JSON, and EAL leaves nothing behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/run_helper.h"
#include "tests/test_files.h"

namespace txbatch::test {
namespace {

using nlohmann::json;

// Starts `txbatch <args>` with stdout to `out` and stderr to `err`, or with stdout the write end
// of the pipe `out_pipe` (its read end closed in the child); returns its pid.
pid_t Spawn(const std::vector<std::string>& args, const std::string& out,
            const std::string& err = "/dev/null", const int* out_pipe = nullptr) {
  const char* bin = std::getenv("TXBATCH_BIN");
  const pid_t pid = fork();
  if (pid == 0) {
    if (out_pipe != nullptr) {
      if (dup2(out_pipe[1], STDOUT_FILENO) < 0) _exit(126);
      close(out_pipe[0]);
      close(out_pipe[1]);
    } else if (!freopen(out.c_str(), "w", stdout)) {
      _exit(126);
    }
    if (!freopen(err.c_str(), "w", stderr)) _exit(126);
    // The signals' default actions, whatever this test inherited: an ignored SIGINT (a shell's
    // background job, nohup) survives exec, and one sent before txbatch's main took it over
    // (its start-up under ASan outlasts 40 ms) was lost, so the run went on to exit 0. SIGPIPE's
    // default is what a shell's `| head` gives txbatch.
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) std::signal(sig, SIG_DFL);
    std::vector<char*> argv = {const_cast<char*>(bin)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(bin, argv.data());
    _exit(127);
  }
  return pid;
}

bool Contains(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.find(what) != std::string::npos;
}

// Waits up to 10 s (500 looks 20 ms apart) for `what` in the file at `path`, a process's output:
// whether it came. A header or a ready line is out once EAL is up (~0.3 s here, several under
// ASan).
bool ComesWithin10s(const std::string& path, const std::string& what) {
  for (int i = 0; i < 500 && !Contains(path, what); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return Contains(path, what);
}

// EAL's runtime directory of that process (its --file-prefix is txbatch-<pid>).
bool EalFilesLeft(pid_t pid) {
  return std::filesystem::exists("/var/run/dpdk/txbatch-" + std::to_string(pid));
}

// Four cells (procs 1 and 4, batch 1 and 32) of full TCP segments on the emulated e1000 with
// `fault` in its spec, on `engine` (real or sim); every record's books closed. Returns the
// records. TCP Small Queues off (--tsq 0): with them each stream keeps two or three GSO frames
// below it, at most 12 for the four (204 of the ring's 256 descriptors), and the ring would
// never fill. A qdisc of 100 frames (55 ms of wire), not 1000: the pool for 1000 GSO frames of
// 45 mbufs took seconds to set up in each cell.
json RunE1000WithFault(const std::string& fault, const std::string& engine) {
  const auto run = RunTxbatch("run --engine " + engine + " --driver emu:e1000," + fault +
                              " --size 65536 --procs 1,4 --batch 1,32 --tsq 0 --txqueuelen 100 "
                              "--duration 0.5 --warmup 0.1");
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.doc["records"].size(), 4u) << run.err;
  for (const json& rec : run.doc["records"]) ExpectBooksClosed(rec);
  return run.doc["records"];
}

// The wire of those runs. An MSS frame is 1448 bytes of payload + 32 of TCP (timestamps) + 20 of
// IP = the MTU's 1500, + 14 of Ethernet header, 4 of FCS, 8 of preamble and 12 of gap = 1538
// bytes on the wire: 12.304 us at the e1000's 1 Gb/s. A --size 65536 producer writes GSO
// frames of TCP's size goal, 45 x 1448 (dataplane/gso.h), which the NIC sends as 45 MSS frames
// back to back: 553.68 us of wire each, freed whole (one descriptor chain).
inline constexpr double kMssFrameWireS = 1538 * 8 / 1e9;
inline constexpr unsigned kMssFramesPerGso = 45;
inline constexpr double kGsoFrameWireS = kMssFramesPerGso * kMssFrameWireS;

// The wire's idle time beyond the fault's that a window may hold: none on the simulation's clock,
// where nothing else runs. On the real engine the ring holds 8 ms of wire (15 GSO frames) and the
// qdisc 55 ms more, so the wire idles only where the host holds up the ring's refill (the
// SCHED_FIFO completion role, or the whole process) over 8 ms, or every producer over 60 ms:
// 0 in 71 of 72 cells here with a qdisc of 1000, once 15.5 ms (wire_max_idle_us; the run's stop
// 25 ms late too), and 0 in 46 of 48 with 100 (0.6 and 5.2 ms in the others), with other
// engineers' builds on the 2 CPUs (load average 3-7). Allowed: 25 ms, 5 % of the 0.5-s window;
// the simulation's runs pin the rest.
double HostIdleAllowedS(const std::string& engine) { return engine == "sim" ? 0 : 0.025; }

// The wire stops sending for 150 ms in the middle of the window: completions stop, the ring fills
// and the queue stops; then it resumes. Nothing is lost, the stall shows as idle wire, and the run
// ends on time.
//
// The utilisation, derived: the stall [S, S + 150 ms) begins 250 ms after the NIC is made, inside
// the window (0.1 s of warm-up, then 0.5 s). The wire starts no frame in it; the GSO frame that
// began before S ends at most 553.68 us into it, so the wire is idle at least 150 ms - 553.68 us =
// 149.446 ms of the window: utilisation <= 1 - 0.149446 / window_s (0.70111 at 0.5 s). Outside the
// stall the wire is busy throughout (the full ring leaves back to back when the stall ends) but for
// the host's idle time, HostIdleAllowedS at most: utilisation >= 1 - (0.150 + HostIdleAllowedS) /
// window_s, 0.70 on the simulation's clock (measured 0.700499 in every cell), 0.65 on the real
// engine (0.6992-0.7014 in 60 cells). A stall a fifth shorter (0.76) or longer (0.64) fails both;
// the old bounds (0.4, 0.8) took either.
TEST(Faults, ARingThatStallsLosesNothingAndResumes) {
  constexpr double kStallS = 0.150;
  for (const std::string engine : {"sim", "real"}) {
    SCOPED_TRACE(engine + " engine");
    const double idle_allowed_s = HostIdleAllowedS(engine);
    for (const json& rec : RunE1000WithFault("stall_at_ms=250,stall_ms=150", engine)) {
      const json& r = rec["results"];
      const json& a = r["accounting"];
      const std::string cell = rec["config"].dump();
      EXPECT_EQ(a["received"], a["sent"]) << cell;  // stream producers: nothing dropped or lost
      EXPECT_EQ(a["dropped"], 0) << cell;
      EXPECT_GT(r["queue_stops"].get<uint64_t>(), 0u) << cell;  // the ring filled in the stall
      const double window_s = r["window_s"].get<double>();
      const double utilisation = r["link_utilisation"].get<double>();
      EXPECT_LE(utilisation, 1 - (kStallS - kGsoFrameWireS) / window_s)
          << cell << ": the wire was busy for more than the window less the stall";
      EXPECT_GE(utilisation, 1 - (kStallS + idle_allowed_s) / window_s)
          << cell << ": the wire was idle for more than the stall and " << idle_allowed_s * 1e3
          << " ms (its longest idle: " << r["model_checks"]["wire_max_idle_us"] << " us)";
    }
  }
}

// The emulated link goes down for 100 ms mid-window and comes back: what left the wire meanwhile is
// lost, counted by the NIC (link_down_lost), and the receiver's sequence gaps — an independent
// count — agree with it exactly; the run goes on and the books balance.
//
// The count, derived: a GSO frame whose last bit leaves in [D, D + 100 ms) is lost whole, its 45
// MSS frames counted. A wire busy throughout departs one every 553.68 us: 100 ms / 553.68 us =
// 180.6, so 180 or 181 of them, 8100 or 8145 MSS frames (the issue's 1e9 / 8 x 0.1 / 1538 = 8127,
// in whole GSO frames); never more than 181 (departures are at least a frame's wire time apart).
// Fewer only where the host left the wire idle inside the 100 ms, HostIdleAllowedS at most: none on
// the simulation's clock (8100 at least; measured 8145 in every cell), 25 ms on the real engine,
// 45 x floor(75 ms / 553.68 us) = 45 x 135 = 6075 (measured 8100 or 8145 in 59 cells of 60, 7380
// in the one with 15.5 ms idle). A link down for half the time (4050) or sending at 1.5 times the
// rate (12195) fails both; the old bound (> 500) took either.
TEST(Faults, AnEmulatedLinkThatGoesDownLosesWhatItCarriedAndCountsIt) {
  constexpr double kDownS = 0.100;
  const auto most = static_cast<uint64_t>(kMssFramesPerGso * std::ceil(kDownS / kGsoFrameWireS));
  for (const std::string engine : {"sim", "real"}) {
    SCOPED_TRACE(engine + " engine");
    const auto fewest = static_cast<uint64_t>(
        kMssFramesPerGso * std::floor((kDownS - HostIdleAllowedS(engine)) / kGsoFrameWireS));
    for (const json& rec : RunE1000WithFault("down_at_ms=250,down_ms=100", engine)) {
      const json& r = rec["results"];
      const json& a = r["accounting"];
      const std::string cell = rec["config"].dump();
      ASSERT_TRUE(r["driver_counters"].contains("link_down_lost")) << cell;
      const uint64_t down_lost = r["driver_counters"]["link_down_lost"].get<uint64_t>();
      EXPECT_EQ(down_lost % kMssFramesPerGso, 0u) << cell << ": a GSO frame lost in part";
      EXPECT_LE(down_lost, most) << cell;
      EXPECT_GE(down_lost, fewest)
          << cell << " (the wire's longest idle: " << r["model_checks"]["wire_max_idle_us"]
          << " us)";
      EXPECT_EQ(a["lost"].get<uint64_t>(), down_lost) << cell;
      EXPECT_EQ(a["received"].get<uint64_t>() + down_lost, a["sent"].get<uint64_t>()) << cell;
    }
  }
}

// A pool far smaller than the qdisc and ring could hold: producers find it empty and wait
// (counted), nothing crashes, the books balance and every mbuf comes home. MSS frames: a
// 45-mbuf GSO frame never finds 45 free in a pool of 400 whose per-lcore caches hold up to 384.
// --tsq 0: TCP Small Queues would keep each stream ~50 MSS frames below its socket, 100 mbufs
// in all, which such a pool holds.
TEST(Faults, APoolTooSmallMakesProducersWaitAndLeaksNothing) {
  const auto run = RunTxbatch(
      "run --driver emu:e1000 --size 65536 --procs 2 --batch 1,32 --pool-size 400 --tsq 0 "
      "--offload none --duration 0.3 --warmup 0.05");
  ASSERT_TRUE(WroteCells(run, 2));
  for (const json& rec : run.doc["records"]) {
    ExpectBooksClosed(rec);
    EXPECT_EQ(rec["config"]["pool_size"], 400);
    EXPECT_GT(rec["results"]["alloc_failures"].get<uint64_t>(), 0u) << rec["config"].dump();
    EXPECT_GT(rec["results"]["packets"].get<uint64_t>(), 0u) << rec["config"].dump();
  }
  // The same on the simulation engine: its producers back off on an empty pool too.
  const auto sim = RunTxbatch(
      "run --engine sim --driver emu:e1000 --size 65536 --procs 2 --batch 32 --pool-size 400 "
      "--tsq 0 --duration 0.1 --warmup 0.01");
  ASSERT_EQ(sim.status, 0) << sim.err;
  ExpectBooksClosed(sim.doc["records"][0]);
  EXPECT_GT(Results(sim, 0)["alloc_failures"].get<uint64_t>(), 0u);
}

// SIGINT and SIGTERM at moments spread over a run — during EAL's start-up, in the first cell,
// in a later one, in the drain behind a long link — each: exit 4 with what was measured written
// as valid JSON with balanced books, or (a signal before txbatch took them over) killed with
// nothing written; either way EAL's runtime directory is gone.
TEST(Faults, SignalsAtAnyMomentLeaveValidResultsAndNoEalFiles) {
  const std::string dir = ::testing::TempDir();
  struct Moment {
    const char* what;
    int delay_ms;  // after the process starts
  };
  const Moment moments[] = {{"start-up", 40},
                            {"start-up", 120},
                            {"first cell", 450},
                            {"later cell", 1100},
                            {"drain", 1650}};
  int n = 0;
  for (const int sig : {SIGINT, SIGTERM})
    for (const Moment& m : moments) {
      const std::string json_path = dir + "/signal" + std::to_string(n) + ".json";
      const std::string out = dir + "/signal" + std::to_string(n++) + ".out";
      std::filesystem::remove(json_path);
      // Four cells of 0.3 s; a 300 ms link delay makes each drain last that long.
      const pid_t pid = Spawn({"run", "--driver", "emu:e1000", "--size", "4096", "--procs", "1",
                               "--batch", "1,32", "--rounds", "2", "--duration", "0.3", "--warmup",
                               "0.05", "--link", "delay 300ms", "--json", json_path},
                              out);
      ASSERT_GT(pid, 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(m.delay_ms));
      ASSERT_EQ(kill(pid, sig), 0);
      int status = 0;
      ASSERT_EQ(waitpid(pid, &status, 0), pid);
      const std::string where = std::string(m.what) + " " + strsignal(sig);
      if (WIFSIGNALED(status)) {
        // Only before txbatch took the signals over: nothing can have been written.
        EXPECT_EQ(WTERMSIG(status), sig) << where;
        EXPECT_FALSE(std::filesystem::exists(json_path)) << where;
      } else {
        ASSERT_TRUE(WIFEXITED(status)) << where;
        EXPECT_EQ(WEXITSTATUS(status), 4) << where;  // interrupted, what was measured written
        ASSERT_TRUE(std::filesystem::exists(json_path)) << where;
        std::ifstream in(json_path);
        const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
        ASSERT_FALSE(doc.is_discarded()) << where << ": not JSON";
        ASSERT_TRUE(doc["records"].is_array()) << where;
        for (const json& rec : doc["records"]) ExpectBooksClosed(rec);
      }
      EXPECT_FALSE(EalFilesLeft(pid)) << where;
      std::filesystem::remove(json_path);
      std::filesystem::remove(out);
    }
}

// The drain after a window waits for what a long link holds (here up to 30 s, said on stderr);
// a second signal is the way out: it ends txbatch at once, by that signal. SIGHUP (a terminal
// that closed) is taken as SIGINT is: the first stops the window, the second ends the drain.
TEST(Faults, ASecondSignalEndsALongDrainAtOnce) {
  const std::string dir = ::testing::TempDir();
  for (const int sig : {SIGINT, SIGHUP}) {
    const std::string out = dir + "/second_signal_" + std::to_string(getpid()) + ".out";
    const pid_t pid = Spawn({"run", "--driver", "emu:e1000", "--size", "4096", "--procs", "1",
                             "--batch", "32", "--rounds", "1", "--duration", "0.2", "--warmup",
                             "0.05", "--link", "delay 30s"},
                            out);
    ASSERT_GT(pid, 0);
    // The header is out once EAL is up and the cell starts.
    ASSERT_TRUE(ComesWithin10s(out, "each cell:"));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_EQ(kill(pid, sig), 0);  // the first: stop measuring, drain (up to 30 s)
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, WNOHANG), 0)
        << strsignal(sig) << ": ended before the second signal";
    const auto second = std::chrono::steady_clock::now();
    ASSERT_EQ(kill(pid, sig), 0);
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    // "At once": well inside the 30 s the drain would wait for the link (a process killed by its
    // signal exits in milliseconds; 5 s leaves a busy 2-vCPU host room and still tells them apart).
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - second).count(),
              5.0);
    ASSERT_TRUE(WIFSIGNALED(status)) << strsignal(sig);
    EXPECT_EQ(WTERMSIG(status), sig);
    std::filesystem::remove(out);
    std::filesystem::remove_all("/var/run/dpdk/txbatch-" + std::to_string(pid));
  }
}

// An interrupted calibrate exits 4 (it exited 1, an internal error) and writes the records it
// measured; a cost model fitted to part of them is not written.
//
// The signal goes once calibrate has said it measured cells, not after a sleep (1.5 s was not
// always "a cell or two" under load). calibrate has no telemetry and prints nothing on stdout
// before the end, but to a standard error that is no terminal it writes a progress line every
// kProgressLineS (5 s), "txbatch: cell N/M ...", after the N-th cell's record is kept: the N it
// names are the records the interrupted run must write, at least.
TEST(Faults, AnInterruptedCalibrateWritesItsRecordsAndNoModel) {
  const std::string dir = ::testing::TempDir();
  const std::string tag = std::to_string(getpid());
  const std::string out = dir + "/cal_" + tag + ".out", err = dir + "/cal_" + tag + ".err",
                    records = dir + "/cal_" + tag + ".json",
                    model = dir + "/cal_" + tag + "_model.json";
  for (const auto& f : {records, model}) std::filesystem::remove(f);
  // 3 rounds of the calibration grid's 38 cells at 0.3 s each: over 30 s, so the first progress
  // line (at 5 s) comes long before the end.
  const pid_t pid =
      Spawn({"calibrate", "--duration", "0.3", "--rounds", "3", "--json", records, "--out", model},
            out, err);
  ASSERT_GT(pid, 0);
  // Up to 60 s for the line: EAL's start-up under ASan on a busy machine, and 5 s of cells.
  const std::regex progress(R"(txbatch: cell (\d+)/(\d+) )");
  std::smatch m;
  std::string said;
  int status = 0;
  bool ended = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    said = Slurp(err);
    if (std::regex_search(said, m, progress)) break;
    if ((ended = waitpid(pid, &status, WNOHANG) == pid)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!ended && m.empty()) {  // no line in 60 s: the process is not left behind
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    std::filesystem::remove_all("/var/run/dpdk/txbatch-" + std::to_string(pid));
  }
  ASSERT_FALSE(ended) << "calibrate ended before it said it had measured a cell: " << said;
  ASSERT_FALSE(m.empty()) << "in 60 s calibrate never said it had measured a cell (no "
                             "\"txbatch: cell N/M\" line on stderr): "
                          << said;
  const uint64_t measured = std::stoull(m[1].str());
  ASSERT_LT(measured, std::stoull(m[2].str())) << "the grid ended before the signal: " << said;
  ASSERT_EQ(kill(pid, SIGINT), 0);
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 4) << Slurp(err);
  EXPECT_FALSE(std::filesystem::exists(model));
  ASSERT_TRUE(std::filesystem::exists(records));
  std::ifstream in(records);
  const json doc = json::parse(in);
  ASSERT_TRUE(doc["records"].is_array());
  EXPECT_GE(doc["records"].size(), measured) << "stderr said " << m[0];
  for (const json& rec : doc["records"]) ExpectBooksClosed(rec);
  EXPECT_FALSE(EalFilesLeft(pid));
  for (const auto& f : {out, err, records, model}) std::filesystem::remove(f);
}

// A second txbatch started while one runs: each has its own EAL file prefix, so both run, and
// both balance their books.
TEST(Faults, ASecondTxbatchRunsAlongsideTheFirst) {
  const std::string dir = ::testing::TempDir();
  std::vector<pid_t> pids;
  std::vector<std::string> jsons;
  for (int i = 0; i < 2; ++i) {
    jsons.push_back(dir + "/second" + std::to_string(i) + ".json");
    std::filesystem::remove(jsons.back());
    pids.push_back(Spawn({"run", "--driver", i == 0 ? "emu:e1000" : "ethdev:net_ring0", "--size",
                          "4096", "--procs", "1", "--batch", "1,32", "--rounds", "1", "--duration",
                          "0.5", "--warmup", "0.05", "--json", jsons.back()},
                         dir + "/second" + std::to_string(i) + ".out"));
    ASSERT_GT(pids.back(), 0);
    // The second starts while the first is running (its header is out).
    if (i == 0)
      for (int k = 0; k < 300 && !Contains(dir + "/second0.out", "each cell:"); ++k)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    ASSERT_EQ(waitpid(pids[i], &status, 0), pids[i]);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "txbatch " << i;
    std::ifstream in(jsons[i]);
    const json doc = json::parse(in);
    ASSERT_EQ(doc["records"].size(), 2u);
    for (const json& rec : doc["records"]) ExpectBooksClosed(rec);
    EXPECT_FALSE(EalFilesLeft(pids[i]));
    std::filesystem::remove(jsons[i]);
    std::filesystem::remove(dir + "/second" + std::to_string(i) + ".out");
  }
}

// Whether process `pid` catches `sig` (a handler installed: SigCgt in /proc/PID/status).
bool Catches(pid_t pid, int sig) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("SigCgt:"))
      return (std::stoull(line.substr(7), nullptr, 16) >> (sig - 1)) & 1;
  return false;
}

// Whether `pid` runs the txbatch binary yet (not the test's fork before its exec).
bool RunsTxbatch(pid_t pid) {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
  return !ec && std::filesystem::equivalent(exe, std::getenv("TXBATCH_BIN"), ec);
}

// The forwarding commands on ports whose link is up at once and that receive nothing, with an
// EAL that leaves a runtime folder (no-huge), until a signal.
const std::vector<std::vector<std::string>>& ForwardingCommands() {
  static const std::vector<std::vector<std::string>> commands = {
      {"bridge", "--port-a", "net_null0,no-rx=1", "--port-b", "net_null1,no-rx=1", "--eal-memory",
       "no-huge", "--stats", "0"},
      {"respond", "--port", "net_null0,no-rx=1", "--ip", "10.9.9.9", "--eal-memory", "no-huge",
       "--stats", "0"},
      {"sink", "--port", "net_null0,no-rx=1", "--eal-memory", "no-huge", "--stats", "0"}};
  return commands;
}

// Issue 16 item 19: bridge, respond and sink take SIGINT, SIGTERM (and SIGHUP) over at their first
// instruction. A signal at any early moment — right after the fork, 20, 60, 120 ms later (the
// options, EAL's start-up), and the moment EAL's runtime folder appears — ends them with exit 0
// and their books, and leaves no /var/run/dpdk/txbatch-PID. The only exception is a signal before
// txbatch's main could run at all (the fork not yet exec'd, the loader still at work): then the
// process did not catch it, it dies by it, and there is no folder either.
TEST(Faults, ForwardingCommandsStopCleanlyAtASignalFromTheirFirstInstruction) {
  const std::string dir = ::testing::TempDir();
  int n = 0;
  for (const auto& cmd : ForwardingCommands()) {
    for (const auto& [sig, delay_ms] :
         {std::pair{SIGTERM, 0}, {SIGTERM, 20}, {SIGTERM, 60}, {SIGTERM, 120}, {SIGINT, 60},
          {SIGHUP, 60}}) {
      const std::string out = dir + "/early" + std::to_string(n++) + ".out";
      const pid_t pid = Spawn(cmd, out);
      ASSERT_GT(pid, 0);
      if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      const bool caught = RunsTxbatch(pid) && Catches(pid, sig);
      ASSERT_EQ(kill(pid, sig), 0);
      int status = 0;
      ASSERT_EQ(waitpid(pid, &status, 0), pid);
      const std::string where = cmd[0] + " " + strsignal(sig) + " after " +
                                std::to_string(delay_ms) + " ms" + (caught ? " (caught)" : "");
      if (caught || !WIFSIGNALED(status)) {
        ASSERT_TRUE(WIFEXITED(status)) << where;
        EXPECT_EQ(WEXITSTATUS(status), 0) << where << ": " << Slurp(out);
        EXPECT_NE(Slurp(out).find("mbufs in use at exit: 0"), std::string::npos) << where;
      } else {
        EXPECT_EQ(WTERMSIG(status), sig) << where;
      }
      EXPECT_FALSE(EalFilesLeft(pid)) << where;
      std::filesystem::remove(out);
    }
    // The moment EAL has made its runtime folder, in the middle of its start-up: the signals
    // are taken over already, and a SIGTERM then ends the command cleanly, the folder removed.
    const std::string out = dir + "/early" + std::to_string(n++) + ".out";
    const pid_t pid = Spawn(cmd, out);
    ASSERT_GT(pid, 0);
    bool seen = false;
    for (int i = 0; i < 50000 && !(seen = EalFilesLeft(pid)); ++i)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    ASSERT_TRUE(seen) << cmd[0] << ": EAL's runtime folder never appeared";
    EXPECT_TRUE(Catches(pid, SIGTERM) && Catches(pid, SIGINT) && Catches(pid, SIGHUP))
        << cmd[0] << ": EAL started before txbatch took the signals over";
    ASSERT_EQ(kill(pid, SIGTERM), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << cmd[0] << " at EAL's start-up: killed by the signal";
    EXPECT_EQ(WEXITSTATUS(status), 0) << cmd[0] << ": " << Slurp(out);
    EXPECT_FALSE(EalFilesLeft(pid)) << cmd[0];
    std::filesystem::remove(out);
  }
}

// A signal while a forwarding command waits for its peer's link (up to 60 s: a memif server
// nobody connects to) ends the wait and the command cleanly, exit 0 with its books, rather than
// a minute later with "did not come up" (exit 2).
TEST(Faults, ASignalWhileASinkWaitsForItsPeerEndsItCleanly) {
  const std::string dir = ::testing::TempDir();
  const std::string socket = "/run/txbatch-test-waiting-" + std::to_string(getpid()) + ".memif";
  const pid_t pid = Spawn({"sink", "--port", "net_memif0,role=server,socket=" + socket,
                           "--eal-memory", "no-huge", "--stats", "0"},
                          dir + "/waiting.out");
  ASSERT_GT(pid, 0);
  for (int i = 0;
       i < 1000 && Slurp(dir + "/waiting.out").find("waiting up to") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_NE(Slurp(dir + "/waiting.out").find("waiting up to"), std::string::npos);
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << Slurp(dir + "/waiting.out");
  EXPECT_NE(Slurp(dir + "/waiting.out").find("received 0 txbatch frames"), std::string::npos);
  EXPECT_FALSE(EalFilesLeft(pid));
  std::filesystem::remove(socket);
  std::filesystem::remove(dir + "/waiting.out");
}

// A SIGKILLed txbatch cannot remove its runtime folder; the next txbatch to start EAL removes
// it, and keeps the folder of a txbatch-<pid> whose process still runs.
TEST(Faults, EalStartRemovesTheRuntimeFolderOfAKilledTxbatchAndKeepsALiveOnes) {
  const std::string dir = ::testing::TempDir();
  const auto& bridge = ForwardingCommands().front();
  const pid_t killed = Spawn(bridge, dir + "/killed.out");
  ASSERT_GT(killed, 0);
  for (int i = 0; i < 1000 && Slurp(dir + "/killed.out").find("forwarding") == std::string::npos;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(kill(killed, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(killed, &status, 0), killed);
  ASSERT_TRUE(EalFilesLeft(killed)) << "a SIGKILLed txbatch leaves its folder (what is cleared)";
  // A process that lives on, with a folder of txbatch's name.
  const pid_t live = fork();
  if (live == 0) {
    pause();
    _exit(0);
  }
  ASSERT_GT(live, 0);
  const std::string live_dir = "/var/run/dpdk/txbatch-" + std::to_string(live);
  std::filesystem::create_directories(live_dir);

  std::vector<std::string> next = bridge;
  next.insert(next.end(), {"--duration", "0.05"});
  const pid_t pid = Spawn(next, dir + "/next.out");
  ASSERT_GT(pid, 0);
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << Slurp(dir + "/next.out");
  EXPECT_FALSE(EalFilesLeft(killed)) << "the killed txbatch's folder is still there";
  EXPECT_TRUE(std::filesystem::exists(live_dir)) << "a live process's folder was removed";
  kill(live, SIGKILL);
  waitpid(live, &status, 0);
  std::filesystem::remove(live_dir);
  std::filesystem::remove(dir + "/killed.out");
  std::filesystem::remove(dir + "/next.out");
}

// Issue 44 item 14: SIGHUP — a terminal closing, an ssh session dropping — killed a run by the
// signal: no books, no --json, EAL's runtime folder left. It is taken as SIGTERM is: a run stops
// its window, writes what it measured and exits 4; bridge, respond and sink end with their books
// and exit 0; either way the folder is gone.
TEST(Faults, AHangupStopsACommandCleanlyAsSigtermDoes) {
  const std::string dir = ::testing::TempDir();
  const std::string tag = std::to_string(getpid());
  const std::string out = dir + "/hangup_" + tag + ".out",
                    json_path = dir + "/hangup_" + tag + ".json";
  std::filesystem::remove(json_path);
  // Two cells of 1 s: the hangup lands in the first, 300 ms after the header (EAL up, the first
  // window running: the header is printed just before it starts).
  const pid_t run = Spawn({"run", "--driver", "emu:e1000", "--size", "4096", "--procs", "1",
                           "--batch", "1,32", "--rounds", "1", "--duration", "1", "--warmup",
                           "0.05", "--json", json_path},
                          out);
  ASSERT_GT(run, 0);
  ASSERT_TRUE(ComesWithin10s(out, "each cell:"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(Catches(run, SIGHUP)) << "run does not catch SIGHUP";
  ASSERT_EQ(kill(run, SIGHUP), 0);
  int status = 0;
  ASSERT_EQ(waitpid(run, &status, 0), run);
  ASSERT_TRUE(WIFEXITED(status)) << "run killed by " << strsignal(WTERMSIG(status));
  EXPECT_EQ(WEXITSTATUS(status), 4) << Slurp(out);
  ASSERT_TRUE(std::filesystem::exists(json_path));
  {
    std::ifstream in(json_path);
    const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(doc.is_object() && doc["records"].is_array() && !doc["records"].empty());
    for (const json& rec : doc["records"]) ExpectBooksClosed(rec);
  }
  EXPECT_FALSE(EalFilesLeft(run));
  for (const auto& cmd : ForwardingCommands()) {
    const std::string out = dir + "/hangup_" + tag + "_" + cmd[0] + ".out";
    const pid_t pid = Spawn(cmd, out);
    ASSERT_GT(pid, 0);
    // Its "SIGINT or SIGTERM stops it" line is out once its ports are up.
    ASSERT_TRUE(ComesWithin10s(out, "stops it")) << cmd[0];
    ASSERT_EQ(kill(pid, SIGHUP), 0);
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << cmd[0] << " killed by " << strsignal(WTERMSIG(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << cmd[0] << ": " << Slurp(out);
    EXPECT_NE(Slurp(out).find("mbufs in use at exit: 0"), std::string::npos) << cmd[0];
    EXPECT_FALSE(EalFilesLeft(pid)) << cmd[0];
    std::filesystem::remove(out);
  }
  std::filesystem::remove(out);
  std::filesystem::remove(json_path);
}

// Issue 44 item 14: `txbatch run ... --json p.json | head -1` ended by SIGPIPE (exit 141), with
// no p.json and EAL's folder left. A standard output whose reader went away now loses only what
// would have been printed there: the run goes on, writes its --json, removes its folder, says
// in one sentence on stderr that its output was cut short, and exits with its own status (0).
// The same for a sink writing its --stats lines.
TEST(Faults, AStandardOutputWhoseReaderLeftCutsOnlyWhatIsPrinted) {
  const std::string dir = ::testing::TempDir();
  const std::string tag = std::to_string(getpid());
  const std::string err = dir + "/epipe_" + tag + ".err";
  const std::vector<std::vector<std::string>> commands = {
      // Two cells of 0.2 s: the table is printed at the end, long after the reader left.
      {"run", "--driver", "emu:null", "--size", "64", "--procs", "1", "--batch", "1,32",
       "--rounds", "1", "--duration", "0.2", "--warmup", "0.05"},
      // A stats line every 50 ms for 1 s: ~20 lines after the reader left.
      {"sink", "--port", "net_null0,no-rx=1", "--eal-memory", "no-huge", "--stats", "0.05",
       "--duration", "1"}};
  for (std::vector<std::string> cmd : commands) {
    const std::string json_path = dir + "/epipe_" + tag + "_" + cmd[0] + ".json";
    std::filesystem::remove(json_path);
    cmd.insert(cmd.end(), {"--json", json_path});
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = Spawn(cmd, "", err, fds);
    ASSERT_GT(pid, 0);
    close(fds[1]);
    // `head -1`: the first line, then the reader goes away.
    std::string first;
    char c = 0;
    while (read(fds[0], &c, 1) == 1 && c != '\n') first += c;
    close(fds[0]);
    EXPECT_FALSE(first.empty()) << cmd[0];
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << cmd[0] << " killed by " << strsignal(WTERMSIG(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << cmd[0] << ": " << Slurp(err);
    ASSERT_TRUE(std::filesystem::exists(json_path)) << cmd[0] << ": " << Slurp(err);
    std::ifstream in(json_path);
    const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(doc.is_object()) << cmd[0] << ": not JSON";
    if (cmd[0] == "run") {
      ASSERT_EQ(doc["records"].size(), 2u);
      for (const json& rec : doc["records"]) ExpectBooksClosed(rec);
    }
    EXPECT_NE(Slurp(err).find("standard output was closed by its reader (EPIPE)"),
              std::string::npos)
        << cmd[0] << ": " << Slurp(err);
    EXPECT_FALSE(EalFilesLeft(pid)) << cmd[0];
    std::filesystem::remove(json_path);
  }
  std::filesystem::remove(err);
}

}  // namespace
}  // namespace txbatch::test
