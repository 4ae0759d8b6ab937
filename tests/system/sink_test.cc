// A two-process run over a memif cable: `txbatch sink` (memif server) in one process, `txbatch
// run` (memif client) in another. Without a link the sink counts exactly what run sent, in order;
// with a lossy link on the sink's side, what was sent is exactly what arrived plus what the link
// lost, and the losses show as sequence gaps. The sink is started and stopped by its pid.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

namespace txbatch {
namespace {

using nlohmann::json;

std::string Bin() {
  const char* bin = std::getenv("TXBATCH_BIN");
  return bin ? bin : "txbatch";
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Exchange {
  int run_status = -1, sink_status = -1;
  std::string run_out, sink_out;
  json run_doc, sink_doc;
};

// Starts the sink, waits until it receives, runs the sender, then stops the sink by its pid.
Exchange RunThroughMemif(const std::string& sink_extra, const std::string& run_extra) {
  const std::string dir = ::testing::TempDir();
  const std::string sock = "/tmp/txbatch-sink-test.sock";
  const std::string sink_log = dir + "/sink.log", sink_json = dir + "/sink.json";
  const std::string run_json = dir + "/run.json", run_log = dir + "/run.log";
  std::filesystem::remove(sink_json);
  std::filesystem::remove(run_json);
  Exchange x;
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(sink_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    const std::string cmd = Bin() + " sink --port net_memif0,role=server,socket=" + sock +
                            " --stats 0 --json " + sink_json + " " + sink_extra;
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), nullptr);
    _exit(127);
  }
  for (int i = 0; i < 500 && Slurp(sink_log).find("waiting up to") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::string run = Bin() + " run --driver ethdev:net_memif0,role=client,socket=" + sock +
                          " --proto udp --size 1000 --procs 2 --duration 0.3 --warmup 0.05 " +
                          run_extra + " --json " + run_json + " >" + run_log + " 2>&1";
  const int st = std::system(run.c_str());
  x.run_status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  x.run_out = Slurp(run_log);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the last frames cross
  kill(pid, SIGTERM);
  int sst = 0;
  waitpid(pid, &sst, 0);
  x.sink_status = WIFEXITED(sst) ? WEXITSTATUS(sst) : -1;
  x.sink_out = Slurp(sink_log);
  if (std::filesystem::exists(run_json)) x.run_doc = json::parse(Slurp(run_json));
  if (std::filesystem::exists(sink_json)) x.sink_doc = json::parse(Slurp(sink_json));
  std::filesystem::remove(sock);
  return x;
}

uint64_t Sent(const json& run_doc) {
  uint64_t sent = 0;
  for (const json& r : run_doc["records"]) sent += r["results"]["accounting"]["sent"].get<uint64_t>();
  return sent;
}

// Four cells (two policies, two rounds): each flow's sequence goes on from cell to cell, so the
// sink sees neither restarts (duplicates) nor gaps.
TEST(Sink, CountsExactlyWhatAnotherProcessSentOverMemif) {
  const Exchange x = RunThroughMemif("", "--batch 1,32 --rounds 2");
  ASSERT_EQ(x.run_status, 0) << x.run_out;
  ASSERT_EQ(x.sink_status, 0) << x.sink_out;
  const json& s = x.sink_doc["results"];
  EXPECT_EQ(x.run_doc["records"].size(), 4u);
  EXPECT_GT(Sent(x.run_doc), 0u);
  EXPECT_EQ(s["received"].get<uint64_t>(), Sent(x.run_doc)) << x.sink_out;
  EXPECT_EQ(s["lost"], 0) << x.sink_out;
  EXPECT_EQ(s["duplicated"], 0);
  EXPECT_EQ(s["foreign"], 0);
  EXPECT_NE(x.sink_out.find("mbufs in use at exit: 0"), std::string::npos) << x.sink_out;
}

TEST(Sink, ALinkOnTheWayLosesFramesThatShowAsSequenceGaps) {
  const Exchange x = RunThroughMemif("--link 'loss random 2% seed 5'", "--batch 32 --rounds 1");
  ASSERT_EQ(x.run_status, 0) << x.run_out;
  ASSERT_EQ(x.sink_status, 0) << x.sink_out;
  const json& s = x.sink_doc["results"];
  const uint64_t sent = Sent(x.run_doc), lost = s["link_lost"].get<uint64_t>();
  EXPECT_EQ(s["received"].get<uint64_t>() + lost, sent) << x.sink_out;
  EXPECT_GT(lost, sent / 100) << x.sink_out;  // ~2 %
  // Every loss is a gap but those after a flow's last arrival, at most a few per flow.
  EXPECT_LE(s["lost"].get<uint64_t>(), lost);
  EXPECT_GE(s["lost"].get<uint64_t>() + 20, lost) << x.sink_out;
}

}  // namespace
}  // namespace txbatch
