// DPDK telemetry (issue 20, item 1): while a command runs, dpdk-telemetry.py — the tool a DPDK
// user already has — reads EAL's /ethdev/* and txbatch's own /txbatch/info and /txbatch/stats
// through the file prefix the header names; the runtime folder (the socket included) is gone
// at exit; --no-telemetry leaves no socket and no header line.
#include "dataplane/telemetry.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/run_helper.h"
#include "tests/test_files.h"

namespace txbatch::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// dpdk-telemetry.py's replies to `commands` (one a line), in order; empty where it could not
// connect.
std::vector<json> AskTelemetryInOrder(const std::string& prefix, const std::string& commands) {
  const std::string cmd = "printf '" + commands + "' | dpdk-telemetry.py -f " + prefix + " 2>&1";
  std::vector<json> replies;
  std::FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return replies;
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  pclose(p);
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const size_t brace = line.find('{');  // after the tool's prompt, where it prints one
    if (brace == std::string::npos) continue;
    json reply = json::parse(line.substr(brace), nullptr, /*allow_exceptions=*/false);
    if (reply.is_object()) replies.push_back(std::move(reply));
  }
  return replies;
}

// The same by command (a later reply to one name replaces an earlier).
json AskTelemetry(const std::string& prefix, const std::string& commands) {
  json replies = json::object();
  for (const json& r : AskTelemetryInOrder(prefix, commands)) replies.update(r);
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

// Issue 44, item 12: DPDK 22.11's own /eal/heap_info and /eal/memzone_info took the client's
// number as an array index unchecked — each of these killed the process (SIGSEGV in the
// telemetry thread; a lab bridge died with its books) or spun the thread (heap_info,32). The
// sink must answer null to each, go on answering (/txbatch/stats after them), end with exit 0,
// and still give a heap's and a memzone's info for numbers that name one.
TEST(Telemetry, OutOfRangeEalQueriesAreAnsweredNullAndTheProcessLives) {
  const std::string prefix = "txbatch-telemetry-bad-" + std::to_string(getpid());
  TxbatchRun run;
  std::thread sink([&] {
    run = RunTxbatch("sink --port net_null0 --duration 4 --stats 0 --eal-extra --file-prefix=" +
                     prefix);
  });
  const char* bad[] = {"/eal/heap_info,999999", "/eal/heap_info,-5",      "/eal/heap_info,32",
                       "/eal/heap_info,1x",     "/eal/memzone_info,2560", "/eal/memzone_info,5000",
                       "/eal/memzone_info,-1",  "/eal/heap_info"};
  std::string ask;
  for (const char* q : bad) ask += std::string(q) + "\\n";
  ask += "/eal/heap_list\\n/eal/heap_info,0\\n/eal/memzone_list\\n/eal/memzone_info,0\\n"
         "/txbatch/stats\\n";
  std::vector<json> in_order;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists("/var/run/dpdk/" + prefix + "/dpdk_telemetry.v2")) {
      in_order = AskTelemetryInOrder(prefix, ask);
      if (!in_order.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  sink.join();
  EXPECT_EQ(run.status, 0) << run.err;
  // Every question answered, in order: the bad ones with null.
  const size_t n_bad = std::size(bad);
  ASSERT_EQ(in_order.size(), n_bad + 5) << json(in_order).dump() << run.err;
  for (size_t i = 0; i < n_bad; ++i) {
    const std::string name = std::string(bad[i]).substr(0, std::string(bad[i]).find(','));
    EXPECT_TRUE(in_order[i].contains(name) && in_order[i][name].is_null())
        << bad[i] << ": " << in_order[i].dump();
  }
  json replies = json::object();
  for (size_t i = n_bad; i < in_order.size(); ++i) replies.update(in_order[i]);
  EXPECT_EQ(replies["/txbatch/stats"].value("state", ""), "running") << replies.dump();
  EXPECT_EQ(replies["/eal/heap_list"], json::array({0})) << replies.dump();
  EXPECT_EQ(replies["/eal/heap_info"].value("Heap_id", -1), 0) << replies.dump();
  EXPECT_GT(replies["/eal/heap_info"].value("Heap_size", uint64_t{0}), 0u) << replies.dump();
  ASSERT_TRUE(replies["/eal/memzone_list"].is_array()) << replies.dump();
  EXPECT_FALSE(replies["/eal/memzone_list"].empty()) << replies.dump();
  EXPECT_GT(replies["/eal/memzone_info"].value("Length", uint64_t{0}), 0u) << replies.dump();
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

// Issue 44 item 17: Eal::~Eal unlinked <runtime dir>/dpdk_telemetry.v2 whoever had bound it. A
// run given the --file-prefix of a running txbatch (its socket then dpdk_telemetry.v2:1, DPDK
// 22.11.11's next free name) deleted the first one's socket at exit: dpdk-telemetry.py could no
// longer reach it. Only the socket a process bound is its to remove: the sink's stays, the same
// file, and answers; the second run's own is gone; at the sink's exit the folder goes too.
TEST(Telemetry, ARunSharingAnotherTxbatchsFilePrefixLeavesItsSocketAlone) {
  const std::string prefix = "txbatch-telemetry-shared-" + std::to_string(getpid());
  const std::string dir = "/var/run/dpdk/" + prefix, socket = dir + "/dpdk_telemetry.v2";
  const std::string out = ::testing::TempDir() + "/" + prefix + ".out";
  const char* bin = std::getenv("TXBATCH_BIN");
  const pid_t sink = fork();
  ASSERT_GE(sink, 0);
  if (sink == 0) {
    if (!freopen(out.c_str(), "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(126);
    // Stopped by SIGTERM below; the duration only bounds a sink the test lost track of.
    execl(bin, bin, "sink", "--port", "net_null0,no-rx=1", "--eal-memory", "no-huge", "--stats",
          "0", "--duration", "60", "--eal-extra", ("--file-prefix=" + prefix).c_str(), nullptr);
    _exit(127);
  }
  // A failed assertion below returns at once: the sink is ended then too, its folder removed.
  struct EndSink {
    pid_t pid;
    std::string dir;
    ~EndSink() {
      if (kill(pid, SIGKILL) == 0) waitpid(pid, nullptr, 0);
      fs::remove_all(dir);
    }
  } end_sink{sink, dir};
  // Up to 10 s for the sink's socket (EAL starts in ~0.3 s here, several under ASan).
  struct stat before {};
  for (int i = 0; i < 100 && stat(socket.c_str(), &before) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(S_ISSOCK(before.st_mode)) << Slurp(out);
  const TxbatchRun second = RunTxbatch(
      "run --driver emu:null --procs 1 --batch 1 --duration 0.05 --warmup 0.01 --eal-extra "
      "--file-prefix=" +
      prefix);
  EXPECT_EQ(second.status, 0) << second.err;
  struct stat after {};
  ASSERT_EQ(stat(socket.c_str(), &after), 0) << "the second run removed the sink's socket";
  EXPECT_TRUE(S_ISSOCK(after.st_mode) && after.st_ino == before.st_ino &&
              after.st_dev == before.st_dev);
  EXPECT_FALSE(fs::exists(socket + ":1")) << "the second run's own socket was left";
  const json replies = AskTelemetry(prefix, "/txbatch/info\\n");
  ASSERT_TRUE(replies.contains("/txbatch/info")) << replies.dump();
  EXPECT_EQ(replies["/txbatch/info"].value("pid", 0), sink) << replies.dump();
  ASSERT_EQ(kill(sink, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(sink, &status, 0), sink);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << Slurp(out);
  EXPECT_FALSE(fs::exists(dir)) << "the sink left its folder";
  fs::remove(out);
}

// Issue 44, item 21: a command line past DPDK's 16 KB reply lost without a mark what did not fit:
// at ~19 KB DPDK dropped the 127-byte pieces past the buffer but took the last, shorter one (the
// joined line not even a prefix) and the keys after it (engine_sim_cells); at ~21 KB, as here,
// the whole command_line. Now /txbatch/info carries the words that fit and how many were left
// out, and every key is there.
TEST(Telemetry, InfoMarksWhereALongCommandLineIsCut) {
  const std::string prefix = "txbatch-telemetry-long-" + std::to_string(getpid());
  std::string extra = "--file-prefix=" + prefix;
  for (int i = 0; i < 800; ++i) extra += " --log-level=lib.eal:notice";  // ~21 KB in all
  TxbatchRun run;
  std::thread runner([&] {
    run = RunTxbatch(
        "run --driver emu:null --proto udp --size 64 --procs 1 --batch 1 --duration 3 "
        "--warmup 0 --eal-extra '" +
        extra + "'");
  });
  json info;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists("/var/run/dpdk/" + prefix + "/dpdk_telemetry.v2")) {
      json replies = AskTelemetry(prefix, "/txbatch/info\\n");
      if (replies.contains("/txbatch/info") && replies["/txbatch/info"].contains("pid")) {
        info = replies["/txbatch/info"];
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  runner.join();
  ASSERT_EQ(run.status, 0) << run.err;
  ASSERT_TRUE(info.is_object()) << run.out;
  const std::string whole = run.doc["records"][0]["env"]["command_line"].get<std::string>();
  ASSERT_GT(whole.size(), kTelemetryReplyBytes);
  ASSERT_TRUE(info["command_line"].is_array()) << info;
  std::string given;
  for (const json& piece : info["command_line"]) given += piece.get<std::string>();
  // Whole words from the start, as many as fit its share, and the count of the rest.
  ASSERT_EQ(whole.rfind(given + " ", 0), 0u) << given;
  EXPECT_GT(given.size(), kTelemetryCommandLineBytes - 1024);
  const std::string rest = whole.substr(given.size() + 1);
  ASSERT_TRUE(info["command_line_words_left_out"].is_number_unsigned()) << info;
  EXPECT_EQ(info["command_line_words_left_out"].get<size_t>(),
            1 + static_cast<size_t>(std::count(rest.begin(), rest.end(), ' ')))
      << info["command_line_words_left_out"];
  for (const char* key : {"pid", "dpdk", "eal_mode", "cells", "engine_sim_cells"})
    EXPECT_TRUE(info.contains(key)) << key << " is missing: " << info.dump().substr(0, 200);
  EXPECT_GT(info.value("pid", 0), 0) << info.dump().substr(0, 200);
  // A short one is whole, with 0 left out.
  EXPECT_EQ(FitTelemetryString("txbatch run --driver emu:null", 200).words_left_out, 0u);
  EXPECT_EQ(FitTelemetryString("txbatch run --driver emu:null", 200).text,
            "txbatch run --driver emu:null");
  EXPECT_EQ(FitTelemetryString("txbatch run --driver emu:null", 20).text, "txbatch run");
  EXPECT_EQ(FitTelemetryString("txbatch run --driver emu:null", 20).words_left_out, 2u);
}

}  // namespace
}  // namespace txbatch::test
