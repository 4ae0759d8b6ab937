// The spine end to end on the emulated NIC, through the real binary and real EAL: every model,
// procs 1 and 8, under forced --no-huge and (where hugepages are free) --in-memory. The wire
// model is checked against the wall clock, not against itself.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "dataplane/tx_driver.h"
#include "tests/e2e/run_helper.h"

namespace txbatch::test {
namespace {

using nlohmann::json;

// Drain: once producers stop, qdisc and ring are empty within 10 ms of the moment the wire
// could have sent the last frame.
constexpr double kDrainSlackS = 0.010;

void CheckBooksAndDrain(const json& rec) {
  const json& r = rec["results"];
  const std::string cell = rec["config"].dump();
  const json& a = r["accounting"];
  EXPECT_TRUE(a["balanced"].get<bool>()) << cell << a.dump();
  EXPECT_EQ(a["generated"].get<uint64_t>(),
            a["sent"].get<uint64_t>() + a["dropped"].get<uint64_t>() + a["queued"].get<uint64_t>())
      << cell;
  EXPECT_EQ(a["sent"].get<uint64_t>(), a["received"].get<uint64_t>()) << cell;
  EXPECT_EQ(a["queued"], 0) << cell;
  EXPECT_EQ(a["in_flight"], 0) << cell;
  EXPECT_EQ(a["lost"], 0) << cell;
  EXPECT_EQ(r["mbufs_in_use_at_exit"], 0) << cell;
  EXPECT_GT(r["packets"].get<uint64_t>(), 0u) << cell;
  const json& m = r["model_checks"];
  EXPECT_EQ(m["arrival_before_tx"], 0) << cell;
  const double could_end =
      std::max(m["stopped_at_s"].get<double>(), m["last_departure_s"].get<double>());
  EXPECT_LE(m["drained_at_s"].get<double>() - could_end, kDrainSlackS) << cell << m.dump();
  ASSERT_FALSE(r["latency_ns"].is_null()) << cell;
  EXPECT_GT(r["latency_ns"]["min"].get<double>(), 0) << cell;
}

// The wire's model, checked for honesty on a real run: never busier than the clock allows, never
// past its ceiling, its busy time and the host's stalls within the window, its modelled end
// close behind the wall time at which it was seen.
//
// How near the ceiling a full-load cell gets on this shared 2-vCPU machine is NOT asserted here
// (issue 44, item 5): the host stops txbatch's threads for milliseconds at a time (a clean CI,
// 2026-12-05: the txirq ~20 ms late in all five runs of an e1000 cell, 0.90-0.95 of the wire),
// and the check that excused those idles — any idle of a millisecond or more, five attempts,
// up to a quarter of the window — could not tell a host's stall from txbatch's own lost wake-up.
// The share is a benchmark (tests/bench/wire_share.sh, doc/perf.md "The wire at full load"), and
// the invariant behind it — the txirq keeps a full wire busy, never idle while frames wait — is
// tested on the virtual clock, where no host stalls anything, with the same NIC model
// (tests/unit/sim_engine_test.cc: SimEngine.AFullE1000WireNeverIdlesWhileFramesWait,
// AWireBoundCellSitsAtTheCeiling, GsoFramesFillTheWireWithADoorbellEach).
void CheckWireIsHonest(const json& rec) {
  const json& r = rec["results"];
  const std::string cell = rec["config"].dump() + " " + r["model_checks"].dump();
  ASSERT_FALSE(r["link_ceiling"].is_null()) << cell;
  const double ceiling = r["link_ceiling"]["mb_per_s"].get<double>();
  EXPECT_LE(r["mb_per_s"].get<double>(), ceiling * (1 + 1e-3)) << cell;
  // The modelled wire keeps pace with the clock: busy for at most the window, and its busy time
  // and the idle stretches it books as the host's (wire_stalled_us) fit in the window together.
  const double utilisation = r["link_utilisation"].get<double>();
  EXPECT_LE(utilisation, 1.0 + 1e-6) << cell;
  EXPECT_GT(utilisation, 0) << cell;
  const double window_us = r["window_s"].get<double>() * 1e6;
  const double stalled_us = r["model_checks"]["wire_stalled_us"].get<double>();
  EXPECT_LE(utilisation * window_us + stalled_us, window_us * (1 + 1e-6)) << cell;
  // The modelled end (last departure) is within 2 % of the wall time at which it was seen.
  const json& m = r["model_checks"];
  const double end = m["last_departure_s"].get<double>();
  const double wall = m["drained_at_s"].get<double>();
  EXPECT_LE(end, wall) << cell;
  EXPECT_LE(wall - end, 0.02 * wall) << cell;
}

using Case = std::tuple<std::string, int, std::string>;  // model, procs, eal memory

class EmuRun : public ::testing::TestWithParam<Case> {};

TEST_P(EmuRun, BooksBalanceDrainsAndTheWireIsHonest) {
  const auto& [model, procs, memory] = GetParam();
  if (memory == "in-memory" && !HugepagesAvailable())
    GTEST_SKIP() << "no free hugepages reserved (echo 256 > /proc/sys/vm/nr_hugepages; .ci/run "
                    "reserves them), or ulimit -f below a hugepage";
  const auto run = RunTxbatch("run --driver emu:" + model + " --procs " + std::to_string(procs) +
                                     " --size 65536 --offload none --batch 1,32 --duration 0.4 "
                                     "--warmup 0.1 --eal-memory " +
                                     memory);
  ASSERT_EQ(run.status, 0) << run.err << run.out;
  ASSERT_TRUE(run.doc.is_object()) << run.err;
  ASSERT_EQ(run.doc["records"].size(), 2u);
  EXPECT_NE(run.out.find("EAL " + memory), std::string::npos) << run.out;
  for (const json& rec : run.doc["records"]) {
    EXPECT_EQ(rec["env"]["eal_mode"], memory);
    CheckBooksAndDrain(rec);
    if (model != "null") CheckWireIsHonest(rec);
    const json& reclaims = rec["results"]["completions"];
    if (model == "null") {
      EXPECT_TRUE(rec["results"]["link_ceiling"].is_null());
      EXPECT_TRUE(reclaims.is_null()) << reclaims.dump();  // it completes inside the call
    } else {
      // The txirq reclaimed the full ring in bulk (free_thresh 32; ~20 per reclaim measured, as
      // kicks when the queue stops wake it early), not frame by frame, and that took time.
      ASSERT_TRUE(reclaims.is_object()) << rec["results"].dump();
      EXPECT_GT(reclaims["frames_per_call"].get<double>(), 2.0) << reclaims.dump();
      EXPECT_GT(reclaims["cycles_per_call"].get<double>(), 0.0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, EmuRun,
                         ::testing::Combine(::testing::Values("null", "e1000", "ixgbe"),
                                            ::testing::Values(1, 8),
                                            ::testing::Values("no-huge", "in-memory")),
                         [](const auto& info) {
                           std::string mem =
                               std::get<2>(info.param) == "no-huge" ? "NoHuge" : "InMemory";
                           return std::get<0>(info.param) + "_procs" +
                                  std::to_string(std::get<1>(info.param)) + "_" + mem;
                         });

class HalfLoad : public ::testing::TestWithParam<int> {};

TEST_P(HalfLoad, E1000LinkUtilisationIsHalf) {
  const int procs = GetParam();
  const auto run =
      RunTxbatch("run --driver emu:e1000 --rate 500mbit --procs " + std::to_string(procs) +
                 " --size 1400 --proto udp --batch 1 --duration 1 --warmup 0.1");
  ASSERT_EQ(run.status, 0) << run.err;
  const json& rec = run.doc["records"][0];
  CheckBooksAndDrain(rec);
  EXPECT_NEAR(rec["results"]["link_utilisation"].get<double>(), 0.50, 0.01);
  EXPECT_FALSE(rec["results"]["link_bound"].get<bool>());
  // Each producer kept its pace (the self-check's 1 %): the wire, not txbatch, was half idle.
  EXPECT_GE(rec["results"]["model_checks"]["producer_rate_share"].get<double>(), 0.99)
      << rec["results"].dump();
}

INSTANTIATE_TEST_SUITE_P(Procs, HalfLoad, ::testing::Values(1, 8));

TEST(Batching, E1000DoorbellsPerPacketMoveWithTheBatch) {
  // --tsq 0: TCP Small Queues keep one stream ~50 MSS frames below its socket (its pacing
  // rate's millisecond), which the 256-descriptor ring absorbs; the qdisc backlog these
  // batches need comes from a stream without TSQ (the kernel before 3.6).
  const auto run = RunTxbatch(
      "run --driver emu:e1000 --procs 1 --size 65536 --offload none --tsq 0 --batch 1,32 "
      "--duration 0.4 "
      "--warmup 0.1");
  ASSERT_EQ(run.status, 0) << run.err;
  const json& off = Results(run, 0);
  const json& on = Results(run, 1);
  EXPECT_DOUBLE_EQ(off["doorbells_per_pkt"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(off["avg_batch"].get<double>(), 1.0);
  EXPECT_GE(on["avg_batch"].get<double>(), 16.0);
  EXPECT_LE(on["doorbells_per_pkt"].get<double>(), 1.0 / 16);
  EXPECT_LT(on["cycles_per_pkt"].get<double>(), off["cycles_per_pkt"].get<double>());
}

// A tcp stream on the emulated NICs by default: GSO frames cut by the NIC (TSO), or by the stack
// before the driver (gso), under TCP Small Queues' 1 MiB. The wire is honest, the books count
// the MSS frames the receiver gets, TSQ (not the 1000-frame band) holds the streams back, and
// with TSO a driver call takes a 45-segment GSO frame: a doorbell per 45 frames at batch 1.
TEST(Offload, TsoAndGsoCountWireFrames) {
  for (const std::string offload : {"tso", "gso"}) {
    const auto run = RunTxbatch("run --driver emu:e1000 --size 65536 --procs 1,8 --batch 1,32 "
        "--offload " +
            offload + " --duration 0.3 --warmup 0.1");
    ASSERT_TRUE(WroteCells(run, 4));
    EXPECT_NE(run.out.find("offload " + offload + ": GSO frames of up to 45 x 1448 B"),
              std::string::npos)
        << run.out;
    for (const json& rec : run.doc["records"]) {
      SCOPED_TRACE(offload + " " + rec["config"].dump());
      EXPECT_EQ(rec["config"]["offload"], offload);
      EXPECT_EQ(rec["config"]["tsq"], 1048576);
      CheckBooksAndDrain(rec);
      CheckWireIsHonest(rec);
      const json& r = rec["results"];
      EXPECT_EQ(r["accounting"]["received"], r["accounting"]["sent"]);
      EXPECT_EQ(r["accounting"]["lost"], 0);
      EXPECT_GT(r["tsq_waits"].get<uint64_t>(), 0u);
      // TSQ, not the band, held the streams back; with gso the segments a full ring refused
      // are requeued and count towards the band's length each (a 4.x+ dev_requeue_skb).
      if (offload == "tso") {
        EXPECT_EQ(r["producer_waits"], 0);
      }
      if (offload == "tso" && rec["config"]["batch"] == 1) {
        EXPECT_NEAR(r["doorbells_per_pkt"].get<double>(), 1.0 / 45, 0.005);
      }
    }
  }
}

// TCP Small Queues on the real engine: one stream of 64 KiB writes on the 1 Gb/s e1000 with a
// 128 KiB limit keeps ~90 frames below its socket (~1 ms of wire), where without TSQ it fills
// the 1000-frame band (~13 ms: 1000 x 12.3 us, and the ring).
TEST(Offload, TsqKeepsAStreamsQueueShort) {
  std::map<std::string, json> res;
  for (const std::string tsq : {"131072", "0"}) {
    const auto run = RunTxbatch(
        "run --driver emu:e1000 --size 65536 --procs 1 --batch 1 "
        "--offload none --duration 0.3 --warmup 0.1 --tsq " +
        tsq);
    ASSERT_EQ(run.status, 0) << run.err << run.out;
    const json& rec = run.doc["records"][0];
    CheckBooksAndDrain(rec);
    res[tsq] = rec["results"];
    EXPECT_EQ(rec["config"]["tsq"], tsq == "0" ? json(nullptr) : json(131072));
  }
  EXPECT_GT(res["131072"]["tsq_waits"].get<uint64_t>(), 0u);
  EXPECT_EQ(res["0"]["tsq_waits"], 0);
  EXPECT_EQ(res["131072"]["producer_waits"], 0);
  EXPECT_GT(res["0"]["producer_waits"].get<uint64_t>(), 0u);
  EXPECT_LT(res["131072"]["latency_ns"]["p50"].get<double>(), 3e6) << res["131072"].dump();
  EXPECT_GT(res["0"]["latency_ns"]["p50"].get<double>(), 10e6) << res["0"].dump();
}

// Under --qdisc none TSQ charges a producer's own batch when it goes below the socket: a batch
// of 8 GSO frames over a 128 KiB limit once slept for ever on bytes nothing would release.
TEST(Offload, TsqWithAProducersOwnBatches) {
  const auto run = RunTxbatch(
      "run --driver emu:e1000 --qdisc none --policy buffer:8 --tsq 131072 "
      "--size 65536 --procs 2 --duration 0.2 --warmup 0.05");
  ASSERT_EQ(run.status, 0) << run.err << run.out;
  const json& rec = run.doc["records"][0];
  CheckBooksAndDrain(rec);
  EXPECT_GT(rec["results"]["packets"].get<uint64_t>(), 1000u);
  EXPECT_GT(rec["results"]["tsq_waits"].get<uint64_t>(), 0u);
}

TEST(Workload, DatagramProducersDropOnAFullQdiscAndTheBooksSayWhy) {
  const auto run = RunTxbatch("run --driver emu:e1000 --producer datagram --proto udp --size 1400 "
      "--procs 4 --batch 1,32 --duration 0.3 --warmup 0.1");
  ASSERT_EQ(run.status, 0) << run.err;
  for (const auto& [rec, r, a, cell] : Cells(run)) {
    CheckBooksAndDrain(rec);
    EXPECT_GT(r["drops"]["qdisc_full"].get<uint64_t>(), 0u);  // offered far above 1 Gb/s
    EXPECT_EQ(r["drops_total"], r["accounting"]["dropped"]);
    // The point here is the drops. Four producers spinning on 2 vCPUs preempt whichever of them
    // runs the qdisc (Linux runs it with BH disabled; userspace cannot), so the wire is held
    // only to the model's honesty.
    CheckWireIsHonest(rec);
  }
}

TEST(Workload, SmallestUdpFramesOnNull) {
  const auto run = RunTxbatch(
      "run --driver emu:null --proto udp --size 18 --procs 2 --batch 1,32 "
      "--duration 0.3 --warmup 0.1");
  ASSERT_EQ(run.status, 0) << run.err;
  for (const auto& [rec, r, a, cell] : Cells(run)) {
    CheckBooksAndDrain(rec);
    // 18 bytes of payload per 60-byte frame: MB/s is exactly 18 bytes per packet.
    EXPECT_NEAR(r["mb_per_s"].get<double>(), r["mpps"].get<double>() * 18, 1e-6);
  }
}

TEST(Workload, JumboFramesHaveTheirCeiling) {
  const auto run = RunTxbatch("run --driver emu:ixgbe --mtu 9000 --size 65536 --procs 1 "
      "--batch 32 --duration 0.3 --warmup 0.1");
  ASSERT_EQ(run.status, 0) << run.err;
  const json& rec = run.doc["records"][0];
  CheckBooksAndDrain(rec);
  CheckWireIsHonest(rec);
  // Full 8948-byte segments (MTU 9000 - 52): 9038 bytes on the wire each.
  EXPECT_NEAR(rec["results"]["link_ceiling"]["mb_per_s"].get<double>(),
              1e10 / 8 / 9038 * 8948 / 1e6, 0.5);
}

// Starts `txbatch ARGS` (stdout to `out_path`, unbuffered) and returns its pid once the run
// header is out (EAL is up, the first cell starting; within a second here, 30 s at most), or -1.
pid_t StartRunUntilHeader(const std::vector<std::string>& args, const std::string& out_path) {
  const char* bin = std::getenv("TXBATCH_BIN");
  std::vector<char*> argv{const_cast<char*>(bin)};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (!freopen(out_path.c_str(), "w", stdout)) _exit(126);
    setvbuf(stdout, nullptr, _IONBF, 0);
    execv(bin, argv.data());
    _exit(127);
  }
  const auto header_out = [&] {
    std::ifstream in(out_path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text.find("each cell:") != std::string::npos;
  };
  for (int i = 0; i < 300 && !header_out(); ++i) usleep(100 * 1000);
  return header_out() ? pid : -1;
}

// The --json and stdout files of a run a test signals, NAME.json and NAME.out in its temp dir;
// the --json one removed before (a run that writes none must not pass on an earlier one's) and
// both after.
struct SignalledRunFiles {
  explicit SignalledRunFiles(const std::string& name)
      : json_path(::testing::TempDir() + "/" + name + ".json"),
        out_path(::testing::TempDir() + "/" + name + ".out") {
    std::filesystem::remove(json_path);
  }
  ~SignalledRunFiles() {
    std::filesystem::remove(json_path);
    std::filesystem::remove(out_path);
  }
  const std::string json_path, out_path;
};

TEST(Signals, SigintStopsPrintsWritesAndCleansUp) {
  const SignalledRunFiles files("sigint");
  // Signalled once the header is out; the run would take a minute.
  const pid_t pid =
      StartRunUntilHeader({"run", "--driver", "emu:e1000", "--procs", "2", "--size", "4096",
                           "--batch", "1", "--duration", "60", "--json", files.json_path},
                          files.out_path);
  ASSERT_GT(pid, 0);
  usleep(300 * 1000);  // into the first window (warm-up 0.2 s); a signal in warm-up works too
  ASSERT_EQ(kill(pid, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 4);  // interrupted: distinct from a complete run
  ASSERT_TRUE(std::filesystem::exists(files.json_path));
  std::ifstream in(files.json_path);
  const json doc = json::parse(in);
  ASSERT_EQ(doc["records"].size(), 1u);
  EXPECT_TRUE(doc["records"][0]["results"]["interrupted"].get<bool>());
  EXPECT_TRUE(doc["records"][0]["results"]["accounting"]["balanced"].get<bool>());
  EXPECT_FALSE(std::filesystem::exists("/var/run/dpdk/txbatch-" + std::to_string(pid)));
}

// A host stall made on purpose: the whole process stopped (SIGSTOP) for 100 ms inside the window
// of an e1000 cell at full load. Its wire idles for that time less what the ring held (3.1 ms),
// and the record says so: wire_stalled_us, wire_max_idle_us, and a busy wire that with the stall
// fills no more than the window.
TEST(Signals, AStoppedProcessShowsAsAHostStallOnTheWire) {
  const SignalledRunFiles files("sigstop");
  const pid_t pid =
      StartRunUntilHeader({"run", "--driver", "emu:e1000", "--procs", "2", "--size", "65536",
                           "--offload", "none", "--batch", "32", "--duration", "1.5", "--warmup",
                           "0.2", "--rounds", "1", "--json", files.json_path},
                          files.out_path);
  ASSERT_GT(pid, 0);
  usleep(700 * 1000);  // the window runs from 0.2 s to 1.7 s after the cell starts
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  usleep(100 * 1000);
  ASSERT_EQ(kill(pid, SIGCONT), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  std::ifstream in(files.json_path);
  const json doc = json::parse(in);
  ASSERT_EQ(doc["records"].size(), 1u);
  const json& r = doc["records"][0]["results"];
  const json& m = r["model_checks"];
  const double window_us = r["window_s"].get<double>() * 1e6;
  const double stalled_us = m["wire_stalled_us"].get<double>();
  EXPECT_GE(stalled_us, 100e3 - 3.2e3) << m.dump();
  EXPECT_GE(m["wire_max_idle_us"].get<double>(), 100e3 - 3.2e3) << m.dump();
  EXPECT_LE(m["wire_max_idle_us"].get<double>(), stalled_us) << m.dump();
  // Busy and stalled are apart: together no more than the window.
  EXPECT_LE(r["link_utilisation"].get<double>() * window_us + stalled_us, window_us * (1 + 1e-6))
      << r.dump();
  // The emulator's self-check: 96.8 ms of a 1.5 s window stalled (6 %, over its 1 %) with the
  // txirq as late (it was stopped too): the machine, not the model, set this cell's rate.
  EXPECT_TRUE(r["emulator_bound"].get<bool>()) << r.dump();
  EXPECT_NE(r["emulator_bound_why"].get<std::string>().find("the machine, not the model"),
            std::string::npos)
      << r.dump();
  ExpectBooksClosed(doc["records"][0]);
}

// The emulator's self-check on the case issue 48 names: 64-byte frames (88 bytes on the wire),
// every one stamped, from one producer, on an emu:ixgbe made 100 GbE (142 Mpps of them). Offered
// 30 Mpps (33 ns a frame), which the model's own costs leave room for (its descriptor write and
// doorbell at buffer:32, ~15 ns a frame: model_checks' excuse does not apply) but one producer
// here cannot make (7.6 Mpps measured with every frame stamped, doc/perf.md; a TSC read alone is
// 9 ns), the cell is marked and the tables say so. Offered 100 kpps (10 us a frame, ~75x what it
// needs) it keeps its pace within the check's 1 %, and is not marked unless the machine stalled
// the wire (the other rule, whose reason then says so).
TEST(EmulatorCheck, ARateNoProducerCanMakeIsMarkedAndOneItCanIsNot) {
  const std::string cell =
      "run --driver emu:ixgbe,rate_mbps=100000 --qdisc none --policy buffer:32 --proto udp "
      "--size 22 --procs 1 --duration 1 --warmup 0.1 --rounds 1 ";
  const auto fast = RunTxbatch(cell + "--rate 30mpps");
  ASSERT_TRUE(WroteCells(fast, 1));
  const json& r = Results(fast, 0);
  ExpectBooksClosed(fast.doc["records"][0]);
  EXPECT_TRUE(r["emulator_bound"].get<bool>()) << r.dump();
  EXPECT_NE(r["emulator_bound_why"].get<std::string>().find("producer 0 made"), std::string::npos)
      << r.dump();
  EXPECT_LT(r["model_checks"]["producer_rate_share"].get<double>(), 0.99) << r.dump();
  EXPECT_NE(fast.out.find("(emulator-bound)"), std::string::npos) << fast.out;
  EXPECT_NE(fast.out.find("emulator-bound: 1 of 1 cell runs"), std::string::npos) << fast.out;

  const auto modest = RunTxbatch(cell + "--rate 100kpps --latency-sample 64");
  ASSERT_TRUE(WroteCells(modest, 1));
  const json& m = Results(modest, 0);
  ExpectBooksClosed(modest.doc["records"][0]);
  EXPECT_GE(m["model_checks"]["producer_rate_share"].get<double>(), 0.99) << m.dump();
  if (m["emulator_bound"].get<bool>())
    EXPECT_NE(m["emulator_bound_why"].get<std::string>().find("the machine, not the model"),
              std::string::npos)
        << m.dump();
  else
    EXPECT_TRUE(m["emulator_bound_why"].is_null()) << m.dump();
}

TEST(Eal, UserArgumentsReplaceTheDefaults) {
  const std::string prefix = "txbatch-user-" + std::to_string(getpid());
  const auto run =
      RunTxbatch("run --driver emu:null --size 1000 --batch 8 --procs 1 --duration 0.1 --warmup 0" +
                 UserEalArgs(prefix));
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("EAL user"), std::string::npos);
  EXPECT_EQ(run.doc["records"][0]["env"]["eal_mode"], "user");
  EXPECT_FALSE(std::filesystem::exists("/var/run/dpdk/" + prefix));
}

TEST(Eal, BadEalArgumentsExitTwoWithOneSentence) {
  const auto run = RunTxbatch("run --driver emu:null --duration 0.1 -- --no-such-eal-flag");
  EXPECT_EQ(run.status, 2);
  EXPECT_TRUE(run.doc.is_null());
  EXPECT_NE(run.err.find("EAL failed to start"), std::string::npos) << run.err;
}

// Why EAL refused is in the sentence (it was only "Invalid argument": EAL's own log went nowhere
// until after rte_eal_init, and a guest without /var/run could not tell what was missing), and a
// user who asks for EAL's log sees its start-up too. lcore 4095 is above RTE_MAX_LCORE, a build
// constant: refused the same way on every machine.
TEST(Eal, EalsOwnReasonIsInTheSentenceAndItsLogShowsWhenAskedFor) {
  const auto run = RunTxbatch("run --driver emu:null --duration 0.1 -- -l 4095");
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.err.find("EAL failed to start (Invalid argument: lcore 4095 >= RTE_MAX_LCORE"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  const auto logged =
      RunTxbatch("run --driver emu:null --duration 0.1 -- -l 4095 --log-level=eal,info");
  EXPECT_EQ(logged.status, 2);
  EXPECT_NE(logged.err.find("EAL: Detected CPU lcores"), std::string::npos) << logged.err;
}

// --runner dedicated: producers only enqueue, one runner thread sends. Behind its producers it
// forms batches by itself and drains (buffer:N without a timer included:
// Drain() releases what it holds back).
TEST(DedicatedRunner, FormsBatchesAndDrains) {
  // --tsq 0: TCP Small Queues keep one stream ~50 MSS frames below its socket (its pacing
  // rate's millisecond), which the 256-descriptor ring absorbs; the qdisc backlog these
  // batches need comes from a stream without TSQ (the kernel before 3.6).
  const auto run = RunTxbatch("run --runner dedicated --driver emu:e1000 --size 65536 --offload none --tsq 0 "
      "--procs 1,8 --batch 1,32 --duration 0.4 --warmup 0.1");
  ASSERT_TRUE(WroteCells(run, 4));
  for (const json& rec : run.doc["records"]) {
    EXPECT_EQ(rec["config"]["runner"], "dedicated");
    CheckBooksAndDrain(rec);
    CheckWireIsHonest(rec);
    if (rec["config"]["batch"] == 32) {
      EXPECT_GE(rec["results"]["avg_batch"].get<double>(), 16.0);
    }
  }
  const auto buffered = RunTxbatch(
      "run --runner dedicated --driver emu:null --policy buffer:64 "
      "--proto udp --size 18 --procs 2 --duration 0.2 --warmup 0.05");
  ASSERT_EQ(buffered.status, 0) << buffered.err;
  CheckBooksAndDrain(buffered.doc["records"][0]);
  // buffer:64 without a timer hands over only full bulks of 64 but the drain's last one; two
  // producers flat out on emu:null fill thousands of bulks in the window, so a partial bulk or
  // two cannot pull the mean below 64 - 4 — only bulks that are not full as a rule can.
  EXPECT_GE(Results(buffered, 0)["avg_batch"].get<double>(), 60.0);
}

// The record's context switches are the cell's threads' sleeps and preemptions in the window: a
// paced producer and the dedicated runner it wakes sleep between frames (measured 0.75-0.85
// each a frame at 20 kpps, a late wake-up sometimes leaving nothing to wait for; 10 kpps here);
// a producer flat out on a NIC with no wire and no queue almost never sleeps (0.001 a frame;
// alone: two contend for the priority-inheriting TX lock, whose waiter sleeps when its holder
// is not running, 0.056 a frame once in CI on a busy host).
TEST(DedicatedRunner, ItsSleepsAreTheRecordsVoluntaryContextSwitches) {
  const auto paced = RunTxbatch(
      "run --runner dedicated --driver emu:null --policy count:1 --proto udp --size 18 "
      "--procs 1 --rate 10000pps --duration 0.2 --warmup 0.05");
  ASSERT_EQ(paced.status, 0) << paced.err;
  ExpectBooksClosed(paced.doc["records"][0]);
  const json& x = Results(paced, 0);
  const double packets = x["packets"].get<double>();
  ASSERT_GT(packets, 1000);
  EXPECT_GT(x["voluntary_ctxsw"].get<double>(), 0.5 * packets) << x.dump();
  const auto flat = RunTxbatch(
      "run --driver emu:null --qdisc none --policy buffer:8 --proto udp --size 18 --procs 1 "
      "--duration 0.2 --warmup 0.05");
  ASSERT_EQ(flat.status, 0) << flat.err;
  ExpectBooksClosed(flat.doc["records"][0]);
  const json& y = Results(flat, 0);
  EXPECT_LT(y["voluntary_ctxsw"].get<double>(), 0.05 * y["packets"].get<double>()) << y.dump();
}

// --queues: each queue its own qdisc, runner and txirq, the rings sharing one wire. Full load
// never goes past that wire's ceiling (rings with a wire each would send up to queues x the
// ceiling), and every queue's books close into the cell's.
TEST(Queues, RingsShareOneWireNeverPastItsCeiling) {
  const auto run = RunTxbatch("run --driver emu:e1000 --size 65536 --procs 2,4 --queues 2,4 --batch 32 "
      "--duration 0.4 --warmup 0.1");
  ASSERT_TRUE(WroteCells(run, 4));
  // Two producers on four queues leave two idle, and the header says so (only for that pair).
  EXPECT_NE(run.out.find("note: procs 2 with --queues 4: queues 2..3 carry no producer"),
            std::string::npos)
      << run.out;
  EXPECT_EQ(run.out.find("note: procs 4"), std::string::npos) << run.out;
  for (const json& rec : run.doc["records"]) {
    CheckBooksAndDrain(rec);
    CheckWireIsHonest(rec);
    const json& x = rec["results"];
    EXPECT_LE(x["mb_per_s"].get<double>(), x["link_ceiling"]["mb_per_s"].get<double>() * 1.001)
        << rec["config"].dump();
    EXPECT_LE(x["link_utilisation"].get<double>(), 1.001) << rec["config"].dump();
  }
}

}  // namespace
}  // namespace txbatch::test
