// DPDK telemetry (issue 20, item 1): while a command runs, dpdk-telemetry.py — the tool a DPDK
// user already has — reads EAL's /ethdev/* and txbatch's own /txbatch/info and /txbatch/stats
// through the file prefix the header names; the runtime folder (the socket included) is gone
// at exit; --no-telemetry leaves no socket and no header line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "tests/driver/run_helper.h"

namespace txbatch::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// dpdk-telemetry.py's replies to `commands` (one a line), by command; empty where it could not
// connect.
json AskTelemetry(const std::string& prefix, const std::string& commands) {
  const std::string cmd = "printf '" + commands + "' | dpdk-telemetry.py -f " + prefix + " 2>&1";
  std::FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return json::object();
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  pclose(p);
  json replies = json::object();
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const size_t brace = line.find('{');  // after the tool's prompt, where it prints one
    if (brace == std::string::npos) continue;
    const json reply = json::parse(line.substr(brace), nullptr, /*allow_exceptions=*/false);
    if (reply.is_object()) replies.update(reply);
  }
  return replies;
}

TEST(Telemetry, DpdkTelemetryPyReadsTxbatchsOwnCommandsWhileASinkRuns) {
  // Its own prefix (EAL takes the last --file-prefix), so the test knows where to ask.
  const std::string prefix = "txbatch-telemetry-test-" + std::to_string(getpid());
  TxbatchRun run;
  std::thread sink([&] {
    // A link makes the header's first line longer than a telemetry string holds (127 bytes).
    run = RunTxbatch(
        "sink --port net_null0 --duration 4 --stats 0 --link 'delay 1ms' "
        "--eal-extra --file-prefix=" +
        prefix);
  });
  json replies;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists("/var/run/dpdk/" + prefix + "/dpdk_telemetry.v2")) {
      replies = AskTelemetry(prefix, "/txbatch/info\\n/txbatch/stats\\n/ethdev/list\\n");
      if (replies.contains("/txbatch/stats") &&
          replies["/txbatch/stats"].value("state", "") == "running")
        break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  sink.join();
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("telemetry: dpdk-telemetry.py -f " + prefix + " "), std::string::npos)
      << run.out;
  ASSERT_TRUE(replies.contains("/txbatch/info")) << replies.dump() << run.out;
  const json& info = replies["/txbatch/info"];
  // Over 127 bytes: an array of pieces, whole when joined.
  ASSERT_TRUE(info["about"].is_array()) << info;
  std::string about;
  for (const json& piece : info["about"]) about += piece.get<std::string>();
  EXPECT_EQ(about.rfind("txbatch sink: ethdev:net_null0", 0), 0u) << about;
  EXPECT_NE(about.find("; link delay 1ms"), std::string::npos) << about;
  EXPECT_NE(run.out.find(about + "\n"), std::string::npos) << about << "\n" << run.out;
  EXPECT_GT(info.value("pid", 0), 0) << info;
  const json& stats = replies["/txbatch/stats"];
  EXPECT_EQ(stats.value("state", ""), "running") << stats;
  for (const char* key : {"at_s", "received", "lost", "duplicated", "reordered", "foreign"})
    EXPECT_TRUE(stats.contains(key)) << key << ": " << stats;
  EXPECT_EQ(replies["/ethdev/list"], json::array({0})) << replies;
  // The folder and the socket DPDK would have unlinked only after it: gone.
  EXPECT_FALSE(fs::exists("/var/run/dpdk/" + prefix));
}

TEST(Telemetry, NoTelemetryLeavesNoSocketAndNoHeaderLine) {
  const auto run = RunTxbatch(
      "run --driver emu:null --proto udp --size 64 --procs 1 --batch 1 --duration 20ms "
      "--warmup 0 --no-telemetry");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out.find("telemetry:"), std::string::npos) << run.out;
  const auto eal = run.doc["records"][0]["config"]["eal"].get<std::vector<std::string>>();
  EXPECT_NE(std::find(eal.begin(), eal.end(), "--no-telemetry"), eal.end());
  // And by default a run keeps it, and says where.
  const auto on = RunTxbatch(
      "run --driver emu:null --proto udp --size 64 --procs 1 --batch 1 --duration 20ms "
      "--warmup 0");
  ASSERT_EQ(on.status, 0) << on.err;
  EXPECT_NE(on.out.find("telemetry: dpdk-telemetry.py -f txbatch-"), std::string::npos) << on.out;
}

}  // namespace
}  // namespace txbatch::test
