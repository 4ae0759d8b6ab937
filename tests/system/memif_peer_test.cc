// The bridge between two memif servers, with a `txbatch run` sending into A and a `txbatch sink`
// receiving from B, each in its own process. Both peers vanish mid-run (SIGKILL: no goodbye on
// the control channel, shared rings gone while the bridge polls them); the bridge carries on,
// forwards for a second pair of peers that connect to the same sockets the other way round
// (sender on B, receiver on A: the b>a books are the second pair's alone), and ends on time with
// both directions' books balanced and every mbuf home. Each process is started and ended by
// its pid; the runtime directories of the killed ones are removed here.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <thread>

#include "system_util.h"

namespace txbatch {
namespace {

using namespace system_test;
using nlohmann::json;

// Abstract socket names (memif's default): nothing on the file system to clean up.
constexpr const char* kSockA = "txbatch-vanish-a";
constexpr const char* kSockB = "txbatch-vanish-b";

// A peer this test kills: EAL's runtime directory it cannot remove itself (txbatch-<pid>) is
// removed here once it is gone, whatever the test's outcome.
struct KilledPeer {
  KilledPeer(const std::string& cmd, const std::string& log)
      : process(cmd, log), pid(process.pid()) {}
  ~KilledPeer() {
    process.Signal(SIGKILL);
    process.Wait();
    std::error_code ec;
    std::filesystem::remove_all("/var/run/dpdk/txbatch-" + std::to_string(pid), ec);
  }
  Process process;
  const pid_t pid;
};

std::string RunCommand(const char* sock, const std::string& extra, const std::string& json_path) {
  return Txbatch() + " run --driver ethdev:net_memif0,role=client,socket=" + sock +
         " --proto udp --size 64 --procs 1 --batch 32 --rounds 1 --warmup 0 " + extra +
         (json_path.empty() ? "" : " --json " + json_path);
}

// On a CPU of its own: beside the bridge's poller on one CPU, the bridge forwarded ~3 kpps of
// the 100 kpps offered (doc/bridge.md).
std::string SinkCommand(const char* sock, const std::string& json_path) {
  return OnLastCpu() + Txbatch() + " sink --port net_memif0,role=client,socket=" + sock +
         " --stats 0 --json " + json_path;
}

// The bridge's end-of-run line for one direction: "b>a: received R (…), sent S, dropped D (…".
struct DirectionSummary {
  uint64_t received = 0, sent = 0, dropped = 0;
};
std::optional<DirectionSummary> Summary(const std::string& log, const std::string& dir) {
  const std::regex line(dir + R"(: received (\d+) \(\d+ bytes\), sent (\d+), dropped (\d+) )");
  std::smatch m;
  if (!std::regex_search(log, m, line)) return std::nullopt;
  return DirectionSummary{std::stoull(m[1]), std::stoull(m[2]), std::stoull(m[3])};
}

TEST(MemifPeer, TheBridgeSurvivesPeersThatVanishAndForwardsForTheNextOnes) {
  const std::string dir = ::testing::TempDir();
  Process bridge(Txbatch() + " bridge --port-a net_memif0,role=server,socket=" + kSockA +
                     " --port-b net_memif1,role=server,socket=" + kSockB +
                     " --batch 32 --duration 9 --stats 1 --txqueuelen 20000",
                 dir + "/vanish-bridge.log");
  // Its memif servers listen (abstract sockets, DPDK's default) before it waits for links.
  ASSERT_TRUE(bridge.WaitFor("waiting up to", 20)) << bridge.Log();

  // First pair: flat out, killed while sending.
  {
    KilledPeer sink(SinkCommand(kSockB, dir + "/vanish-sink1.json"), dir + "/vanish-sink1.log");
    KilledPeer run(RunCommand(kSockA, "--duration 20", ""), dir + "/vanish-run1.log");
    ASSERT_TRUE(bridge.WaitFor("\nforwarding", 20))
        << bridge.Log() << run.process.Log() << sink.process.Log();
    ASSERT_TRUE(run.process.WaitFor("each cell:", 20)) << run.process.Log();
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // its port up, sending
    run.process.Signal(SIGKILL);
    EXPECT_EQ(run.process.Wait(), -SIGKILL) << run.process.Log();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    sink.process.Signal(SIGKILL);
    EXPECT_EQ(sink.process.Wait(), -SIGKILL) << sink.process.Log();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));

  // Second pair on the same sockets, the other way round, paced: four busy pollers share two
  // CPUs here, so the bridge may still have to drop (counted) while the sink is descheduled.
  const std::string sink_json = dir + "/vanish-sink2.json", run_json = dir + "/vanish-run2.json";
  Process sink(SinkCommand(kSockA, sink_json), dir + "/vanish-sink2.log");
  ASSERT_TRUE(sink.WaitFor("receiving", 20)) << sink.Log() << bridge.Log();
  Process run(RunCommand(kSockB, "--duration 1 --rate 100kpps", run_json),
              dir + "/vanish-run2.log");
  // The bridge's log too: whether it was still reading B is what a failed drain turns on.
  EXPECT_EQ(run.Wait(), 0) << run.Log() << bridge.Log();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  sink.Signal(SIGTERM);
  EXPECT_EQ(sink.Wait(), 0) << sink.Log();

  EXPECT_EQ(bridge.Wait(), 0) << bridge.Log();
  const std::string out = bridge.Log();
  EXPECT_NE(out.find("a>b books: "), std::string::npos) << out;
  EXPECT_EQ(out.find("NOT BALANCED"), std::string::npos) << out;
  EXPECT_NE(out.find("mbufs in use at exit: 0"), std::string::npos) << out;

  // Every frame of the second sender crossed or was dropped by the bridge with its reason:
  // nothing vanished between the processes, and drops stayed rare. (at(): a run that failed
  // writes no record, and a missing key must fail the test, not crash it.)
  const json run_doc = json::parse(Slurp(run_json)), sink_doc = json::parse(Slurp(sink_json));
  ASSERT_EQ(run_doc.at("records").size(), 1u) << run.Log();
  const uint64_t sent =
      run_doc.at("records").at(0).at("results").at("accounting").at("sent").get<uint64_t>();
  const uint64_t received = sink_doc.at("results").at("received").get<uint64_t>();
  const auto ba = Summary(out, "b>a");
  ASSERT_TRUE(ba) << out;
  // Frames crossed (100k offered): how many is not what this test is about, the books below are.
  // (A landing CI saw 8591 once, with the sink polling on the bridge's CPU: doc/bridge.md.)
  EXPECT_GT(sent, 1000u) << run_doc.at("records").at(0).at("results").dump() << run.Log() << out;
  EXPECT_EQ(ba->received, sent) << out;
  EXPECT_EQ(received, ba->sent) << sink.Log() << out;
  EXPECT_EQ(ba->sent + ba->dropped, sent) << out;
  EXPECT_LT(ba->dropped, sent / 10) << out;
  // Drops show as the sink's sequence gaps, except any at the very end (no later frame).
  EXPECT_LE(sink_doc.at("results").at("lost").get<uint64_t>(), ba->dropped) << sink.Log() << out;
}

// A peer that stops reading (SIGSTOP: alive, its rings mapped, nothing taken from them) leaves
// the sender's memif ring full and its drain unfinished: `run` fails, and its sentence says that
// the port refused frames to the end, why, and what was freed, not that txbatch has a bug.
// The stopped peer is then killed, not resumed: DPDK's memif PMD (22.11 up to its main branch)
// unmaps a port's shared rings on the EAL interrupt thread when the other end goes, without
// waiting for a receive burst in progress, and a peer stopped inside one (its sender gone while
// it was stopped) crashed in rte_eth_rx_burst on resuming, 2 times in ~150 here and once in CI
// (doc/drivers/ethdev.md, "A memif peer that vanishes").
TEST(MemifPeer, APeerThatStopsReadingFailsTheDrainAndSaysTheRingStayedFull) {
  const std::string dir = ::testing::TempDir();
  constexpr const char* kSock = "txbatch-stalled-peer";
  KilledPeer peer(Txbatch() + " sink --port net_memif0,role=server,socket=" + kSock + " --stats 0",
                  dir + "/stalled-sink.log");
  Process& sink = peer.process;
  ASSERT_TRUE(sink.WaitFor("waiting", 20)) << sink.Log();
  Process run(RunCommand(kSock, "--duration 1 --rate 100kpps", ""), dir + "/stalled-run.log");
  ASSERT_TRUE(run.WaitFor("each cell:", 20)) << run.Log() << sink.Log();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // its link up, frames crossing
  sink.Signal(SIGSTOP);
  const int status = run.Wait();
  const std::string out = run.Log();
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("refused frames to the end (its ring stayed full: whatever takes frames "
                     "from it (the NIC, or the peer process of a memif port) stopped)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("txbatch bug"), std::string::npos) << out;
  sink.Signal(SIGKILL);
  EXPECT_EQ(sink.Wait(), -SIGKILL) << sink.Log();
}

}  // namespace
}  // namespace txbatch
