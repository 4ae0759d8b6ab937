// A two-process run over a memif cable: `txbatch sink` (memif server) in one process, `txbatch
// run` (memif client) in another. Without a link the sink counts exactly what run sent, in order;
// with a lossy link on the sink's side, what was sent is exactly what arrived plus what the link
// lost, and the losses show as sequence gaps. The sink is started and stopped by its pid.
#include <gtest/gtest.h>

#include <boost/math/distributions/binomial.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "system_util.h"

namespace txbatch {
namespace {

using namespace system_test;
using nlohmann::json;

struct Exchange {
  int run_status = -1, sink_status = -1;
  std::string run_out, sink_out;
  json run_doc, sink_doc;
};

// Starts the sink, waits until it receives, runs the sender, then stops the sink by its pid.
// `sink_stats`: the sink's --stats (and --stats-json) options.
Exchange RunThroughMemif(const std::string& sink_extra, const std::string& run_extra,
                         const std::string& sink_stats = "--stats 0") {
  const std::string dir = ::testing::TempDir();
  const std::string sock = "/tmp/txbatch-sink-test.sock";
  const std::string sink_log = dir + "/sink.log", sink_json = dir + "/sink.json";
  std::filesystem::remove(sink_json);
  Exchange x;
  Process sink(Txbatch() + " sink --port net_memif0,role=server,socket=" + sock + " " + sink_stats +
                   " --json " + sink_json + " " + sink_extra,
               sink_log);
  sink.WaitFor("waiting up to", 10);
  // Every caller's run_extra sets --rounds, so RunTxbatch adds only the --json file.
  const TxbatchRun ran =
      RunTxbatch("run --driver ethdev:net_memif0,role=client,socket=" + sock +
                 " --proto udp --size 1000 --procs 2 --duration 0.3 --warmup 0.05 " + run_extra);
  x.run_status = ran.status;
  x.run_out = ran.out + ran.err;
  x.run_doc = ran.doc;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the last frames cross
  sink.Signal(SIGTERM);
  x.sink_status = sink.Wait();
  x.sink_out = sink.Log();
  if (std::filesystem::exists(sink_json)) x.sink_doc = json::parse(Slurp(sink_json));
  std::filesystem::remove(sock);
  return x;
}

uint64_t Sent(const json& run_doc) {
  uint64_t sent = 0;
  for (const json& r : run_doc["records"])
    sent += r["results"]["accounting"]["sent"].get<uint64_t>();
  return sent;
}

// Four cells (two policies, two rounds): each flow's sequence goes on from cell to cell, so the
// sink sees neither restarts (duplicates) nor gaps.
TEST(Sink, CountsExactlyWhatAnotherProcessSentOverMemif) {
  const Exchange x = RunThroughMemif("--per-flow --clocks-synchronised", "--batch 1,32 --rounds 2");
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
  // Per flow (issue 20, item 7): run's two producers are flows 0 and 1, each with its own
  // count and one-way latency, adding up to the totals; --per-flow prints a row each.
  const json& flows = s["per_flow"];
  ASSERT_EQ(flows.size(), 2u) << s;
  uint64_t received = 0;
  for (unsigned f = 0; f < 2; ++f) {
    EXPECT_EQ(flows[f]["flow"], f);
    EXPECT_GT(flows[f]["received"].get<uint64_t>(), 0u);
    EXPECT_EQ(flows[f]["lost"], 0);
    ASSERT_TRUE(flows[f]["latency_ns"].is_object()) << flows[f];
    EXPECT_EQ(flows[f]["latency_ns"]["count"], flows[f]["received"]);
    EXPECT_LE(flows[f]["latency_ns"]["p50"].get<double>(),
              flows[f]["latency_ns"]["p99"].get<double>());
    received += flows[f]["received"].get<uint64_t>();
    EXPECT_TRUE(std::regex_search(
        x.sink_out,
        std::regex("\\n +" + std::to_string(f) + " +" +
                   std::to_string(flows[f]["received"].get<uint64_t>()) + " +0 +0 +0 ")))
        << x.sink_out;
  }
  EXPECT_EQ(received, s["received"].get<uint64_t>());
  // Every frame has a one-way latency: none stamped on arrival before it was sent (the arrival
  // stamp was read before the receive call, so a frame sent meanwhile was left out).
  ASSERT_TRUE(s["latency_ns"].is_object()) << s;
  EXPECT_EQ(s["latency_ns"]["count"], s["received"]) << s;
}

// Issue 44 item 15: a --no-timing sender stamps no frame (kNoTxStamp, 0), and a
// --clocks-synchronised sink read the receiver's uptime (126 111 s) as their one-way latency.
// Frames without a stamp are counted (unstamped: every one here) and left out: latency null,
// each flow's too, and one sentence saying why, in the record and on stdout. Paced too: --rate
// reads the clock a frame, and its reading was the stamp of --no-timing frames.
TEST(Sink, FramesFromANoTimingSenderHaveNoLatencyAndTheSinkSaysWhy) {
  for (const std::string pace : {"", " --rate 200kpps"}) {
    const Exchange x =
        RunThroughMemif("--clocks-synchronised", "--batch 32 --rounds 1 --no-timing" + pace);
    ASSERT_EQ(x.run_status, 0) << pace << x.run_out;
    ASSERT_EQ(x.sink_status, 0) << pace << x.sink_out;
    const json& s = x.sink_doc["results"];
    ASSERT_GT(s["received"].get<uint64_t>(), 0u) << pace << x.sink_out;
    EXPECT_TRUE(s["latency_ns"].is_null()) << pace << s["latency_ns"];
    EXPECT_EQ(s["unstamped"], s["received"]) << pace << s;
    ASSERT_TRUE(s["latency_why"].is_string()) << pace << s;
    EXPECT_NE(s["latency_why"].get<std::string>().find("--no-timing"), std::string::npos) << s;
    for (const json& f : s["per_flow"]) EXPECT_TRUE(f["latency_ns"].is_null()) << pace << f;
    EXPECT_NE(x.sink_out.find("one-way latency: not reported: none of the"), std::string::npos)
        << pace << x.sink_out;
  }
}

TEST(Sink, ALinkOnTheWayLosesFramesThatShowAsSequenceGaps) {
  const Exchange x = RunThroughMemif("--link 'loss random 2% seed 5'", "--batch 32 --rounds 1");
  ASSERT_EQ(x.run_status, 0) << x.run_out;
  ASSERT_EQ(x.sink_status, 0) << x.sink_out;
  const json& s = x.sink_doc["results"];
  const uint64_t sent = Sent(x.run_doc), lost = s["link_lost"].get<uint64_t>();
  EXPECT_EQ(s["received"].get<uint64_t>() + lost, sent) << x.sink_out;
  // The sink's link draws each frame's loss on its own (loss random 2 %): what it lost is
  // Binomial(sent, 0.02), inside the bounds it leaves with probability 1e-6 (5e-7 each side,
  // rounded outwards; ~2 % +- 0.3 % at the ~50 000 frames a run sends). Half of them lost, or
  // 1 %, lands far outside.
  ASSERT_GT(sent, 1000u) << x.run_out;
  const boost::math::binomial_distribution<> dist(static_cast<double>(sent), 0.02);
  const double lo = boost::math::quantile(dist, 5e-7);
  const double hi = boost::math::quantile(boost::math::complement(dist, 5e-7));
  EXPECT_GE(static_cast<double>(lost), lo) << lost << " of " << sent << "\n" << x.sink_out;
  EXPECT_LE(static_cast<double>(lost), hi) << lost << " of " << sent << "\n" << x.sink_out;
  // Every loss is a gap but those after a flow's last arrival, at most a few per flow.
  EXPECT_LE(s["lost"].get<uint64_t>(), lost);
  EXPECT_GE(s["lost"].get<uint64_t>() + 20, lost) << x.sink_out;
}

// --stats-json and --capture (issue 20, items 2 and 3) with real traffic: NDJSON lines, each
// parsed as it came; the interval events count what arrived in each interval, adding up to the
// running total they carry, and the end event is the --json record (every frame run sent); the
// pcapng file holds every frame the port received, inbound, as tshark reads it.
TEST(Sink, TheStatsStreamCountsWhatArrivesIntervalByIntervalAndTheCaptureHoldsIt) {
  const std::string ndjson = ::testing::TempDir() + "/sink-stats.ndjson";
  const std::string pcapng = ::testing::TempDir() + "/sink-capture.pcapng";
  std::filesystem::remove(ndjson);
  std::filesystem::remove(pcapng);
  // The sink without hugepages (as where none are reserved; CI reserves some): its pages are
  // 4 KiB, each faulted in on first touch, which is what made a capture's start slow.
  const Exchange x =
      RunThroughMemif("--eal-memory no-huge", "--batch 32 --rounds 1",
                      "--stats 50ms --stats-json " + ndjson + " --capture " + pcapng);
  ASSERT_EQ(x.run_status, 0) << x.run_out;
  ASSERT_EQ(x.sink_status, 0) << x.sink_out;
  const Ran events = Sh("jq -r .event " + ndjson);
  ASSERT_EQ(events.status, 0) << events.out;  // every line JSON
  std::vector<json> lines;
  {
    std::istringstream in(Slurp(ndjson));
    for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  }
  ASSERT_GE(lines.size(), 4u) << Slurp(ndjson);  // start, intervals, end
  EXPECT_EQ(lines.front()["event"], "start");
  EXPECT_EQ(lines.front()["data"]["command"], "sink");
  EXPECT_EQ(lines.back()["event"], "end");
  uint64_t sum = 0, total = 0, nonzero = 0;
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    ASSERT_EQ(lines[i]["event"], "interval") << i;
    const uint64_t got = lines[i]["data"]["received"].get<uint64_t>();
    sum += got;
    nonzero += got > 0;
    total = lines[i]["data"]["received_total"].get<uint64_t>();
    EXPECT_EQ(sum, total) << "interval " << i;
  }
  EXPECT_GE(nonzero, 2u) << Slurp(ndjson);  // the run's 0.35 s spans several intervals
  // The sink polled from the moment the link came up: a sink that was not yet polling held the
  // run to what memif's ring (1024) and a qdisc band (1000) take — 2026 frames, when the
  // capture's pool was made (0.6 s of page faults without hugepages) and its file truncated
  // after the link came up.
  EXPECT_GT(Sent(x.run_doc), 4u * (1024 + 1000)) << x.run_out;
  const json& end = lines.back()["data"];
  EXPECT_EQ(end["results"], x.sink_doc["results"]);
  EXPECT_EQ(end["results"]["received"].get<uint64_t>(), Sent(x.run_doc));
  EXPECT_GE(end["results"]["received"].get<uint64_t>(), total);
  EXPECT_EQ(end["mbufs_in_use_at_exit"], 0);
  const Ran inbound = Sh("tshark -r " + pcapng +
                         " -Y 'frame.interface_id == 0 && frame.packet_flags_direction == 1' "
                         "2>/dev/null | wc -l");
  ASSERT_EQ(inbound.status, 0);
  // At memif's full speed the writer may fall behind: what the capture's pool could not take is
  // dropped and counted, never waited for. Every frame received is in the file or counted so.
  const std::optional<CaptureSaid> said = CaptureLine(x.sink_out);
  ASSERT_TRUE(said) << x.sink_out;
  const uint64_t written = said->written, dropped = said->dropped;
  EXPECT_GT(written, 0u);
  EXPECT_EQ(std::stoull(inbound.out), written) << x.sink_out;
  EXPECT_EQ(written + dropped, end["results"]["received"].get<uint64_t>()) << x.sink_out;
  std::filesystem::remove(ndjson);
  std::filesystem::remove(pcapng);
}

// A capture whose port never came up leaves no file: the file, opened before the wait so that
// nothing slow is left between the link coming up and the first poll, is removed again. respond
// waits 3 s for its link; a memif server nobody connects to never has one.
TEST(Capture, APortWhoseLinkNeverCameUpLeavesNoCaptureFile) {
  const std::string pcapng = ::testing::TempDir() + "/respond-unstarted.pcapng";
  const std::string sock = "/tmp/txbatch-respond-unstarted.sock";
  std::filesystem::remove(pcapng);
  const Ran r = Sh(Txbatch() + " respond --port net_memif0,role=server,socket=" + sock +
                   " --ip 10.79.0.2 --capture " + pcapng);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("did not come up"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(pcapng)) << r.out;
  std::filesystem::remove(sock);
}

}  // namespace
}  // namespace txbatch
