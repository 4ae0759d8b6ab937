// The bridge between two memif servers, with a `txbatch run` sending into A and a `txbatch sink`
// receiving from B, each in its own process. Both peers vanish mid-run (SIGKILL: no goodbye on
// the control channel, shared rings gone while the bridge polls them); the bridge carries on,
// forwards for a second pair of peers that connect to the same sockets, and ends on time with
// both directions' books balanced and every mbuf home. Each process is started and ended by
// its pid; the runtime directories of the killed ones are removed here.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
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

std::string RunCommand(const std::string& extra, const std::string& json_path) {
  return Txbatch() + " run --driver ethdev:net_memif0,role=client,socket=" + kSockA +
         " --proto udp --size 64 --procs 1 --batch 32 --rounds 1 --warmup 0 " + extra +
         (json_path.empty() ? "" : " --json " + json_path);
}

std::string SinkCommand(const std::string& json_path) {
  return Txbatch() + " sink --port net_memif0,role=client,socket=" + kSockB + " --stats 0 --json " +
         json_path;
}

TEST(MemifPeer, TheBridgeSurvivesPeersThatVanishAndForwardsForTheNextOnes) {
  const std::string dir = ::testing::TempDir();
  Process bridge(Txbatch() + " bridge --port-a net_memif0,role=server,socket=" + kSockA +
                     " --port-b net_memif1,role=server,socket=" + kSockB +
                     " --batch 32 --duration 9 --stats 1",
                 dir + "/vanish-bridge.log");
  // Its memif servers listen (abstract sockets, DPDK's default) before it waits for links.
  ASSERT_TRUE(bridge.WaitFor("waiting up to", 20)) << bridge.Log();

  // First pair: flat out, killed while sending.
  {
    KilledPeer sink(SinkCommand(dir + "/vanish-sink1.json"), dir + "/vanish-sink1.log");
    KilledPeer run(RunCommand("--duration 20", ""), dir + "/vanish-run1.log");
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

  // Second pair on the same sockets: paced, so nothing is dropped on the way.
  const std::string sink_json = dir + "/vanish-sink2.json", run_json = dir + "/vanish-run2.json";
  Process sink(SinkCommand(sink_json), dir + "/vanish-sink2.log");
  ASSERT_TRUE(sink.WaitFor("receiving", 20)) << sink.Log() << bridge.Log();
  Process run(RunCommand("--duration 1 --rate 200kpps", run_json), dir + "/vanish-run2.log");
  EXPECT_EQ(run.Wait(), 0) << run.Log();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  sink.Signal(SIGTERM);
  EXPECT_EQ(sink.Wait(), 0) << sink.Log();

  EXPECT_EQ(bridge.Wait(), 0) << bridge.Log();
  const std::string out = bridge.Log();
  EXPECT_NE(out.find("a>b books: "), std::string::npos) << out;
  EXPECT_EQ(out.find("NOT BALANCED"), std::string::npos) << out;
  EXPECT_NE(out.find("mbufs in use at exit: 0"), std::string::npos) << out;

  // The second sender's frames all crossed: what the bridge still held from the first pair
  // may arrive too (never fewer).
  const json run_doc = json::parse(Slurp(run_json)), sink_doc = json::parse(Slurp(sink_json));
  const uint64_t sent = run_doc["records"][0]["results"]["accounting"]["sent"].get<uint64_t>();
  EXPECT_GT(sent, 100000u);
  EXPECT_GE(sink_doc["results"]["received"].get<uint64_t>(), sent) << sink.Log() << out;
}

}  // namespace
}  // namespace txbatch
