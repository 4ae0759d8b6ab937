// net_af_packet on a veth pair whose peer is in a network namespace this test creates: every
// frame txbatch counts as sent is counted by the kernel on the far end. The namespace and the
// veth are removed when the test ends, also when it fails.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <tuple>

#include "tests/e2e/run_helper.h"

namespace txbatch::test {
namespace {

using nlohmann::json;

int Sh(const std::string& cmd) {
  const int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string ShOut(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[256];
    while (fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  return out;
}

// A veth pair: `host` here, `peer` inside namespace `ns`; both up, IPv6 off so the kernel sends
// nothing of its own on them. Removed on destruction (deleting one end deletes the pair).
class VethIntoNamespace {
 public:
  VethIntoNamespace() {
    const std::string tag = std::to_string(getpid());
    ns_ = "txb-ns-" + tag;
    host_ = "txbv" + tag + "a";
    peer_ = "txbv" + tag + "b";
    ok_ =
        Sh("ip netns add " + ns_) == 0 &&
        Sh("ip link add " + host_ + " type veth peer name " + peer_) == 0 &&
        Sh("ip link set " + peer_ + " netns " + ns_) == 0 &&
        Sh("sysctl -w net.ipv6.conf." + host_ + ".disable_ipv6=1") == 0 &&
        Sh("ip netns exec " + ns_ + " sysctl -w net.ipv6.conf." + peer_ + ".disable_ipv6=1") == 0 &&
        Sh("ip link set " + host_ + " up") == 0 &&
        Sh("ip netns exec " + ns_ + " ip link set " + peer_ + " up") == 0;
  }
  ~VethIntoNamespace() {
    Sh("ip link del " + host_);
    Sh("ip netns del " + ns_);
  }
  bool ok() const { return ok_; }
  const std::string& host() const { return host_; }
  uint64_t PeerRxPackets() const {
    return std::strtoull(
        ShOut("ip netns exec " + ns_ + " cat /sys/class/net/" + peer_ + "/statistics/rx_packets")
            .c_str(),
        nullptr, 10);
  }
  // What veth could not hand to the peer (its backlog full): counted on the sending end.
  uint64_t HostTxDropped() const {
    return std::strtoull(ShOut("cat /sys/class/net/" + host_ + "/statistics/tx_dropped").c_str(),
                         nullptr, 10);
  }

 private:
  std::string ns_, host_, peer_;
  bool ok_ = false;
};

TEST(AfPacket, KernelCountsEveryFrameSentThroughAVethIntoANamespace) {
  std::string ns_check;
  {
    VethIntoNamespace veth;
    ASSERT_TRUE(veth.ok()) << "could not create the namespace and veth pair (root and iproute2 "
                              "are required; scripts/setup.sh installs iproute2)";
    const uint64_t before = veth.PeerRxPackets();
    const auto run = RunTxbatch("run --driver ethdev:net_af_packet0,iface=" + veth.host() +
                                " --proto udp --size 64 --procs 2 --batch 1,32 --rate 20kpps "
                                "--duration 0.2 --warmup 0.05");
    ASSERT_EQ(run.status, 0) << run.err;
    uint64_t sent = 0;
    for (uint64_t s : SentByDriverCountedRecords(run.doc)) sent += s;
    ASSERT_GT(sent, 0u);
    EXPECT_EQ(veth.PeerRxPackets() - before, sent);
    ns_check = veth.host();
  }
  EXPECT_NE(Sh("ip link show " + ns_check), 0) << "the veth was not removed";
}

// Overload on a real kernel interface, on every qdisc shape, with stream and datagram producers
// flat out (1 and 8 of them): the books balance with every drop under its reason, stream
// producers behind a qdisc are never dropped, the pool never runs dry, the run ends on time, and
// the kernel accounts for every frame the PMD took (arrived on the far end, or dropped by veth).
using AfShape = std::tuple<const char*, const char*>;  // shapes (grid), producer

class AfPacketOverload : public ::testing::TestWithParam<AfShape> {};

TEST_P(AfPacketOverload, EveryFrameIsSentOrDroppedWithAReasonAndTheKernelCountsItAll) {
  const auto& [shapes, producer] = GetParam();
  VethIntoNamespace veth;
  ASSERT_TRUE(veth.ok());
  const uint64_t rx_before = veth.PeerRxPackets(), dropped_before = veth.HostTxDropped();
  double wall_s = 0;
  const auto run = RunTxbatchTimed("run --driver ethdev:net_af_packet0,iface=" + veth.host() + " " +
                                       shapes + " --producer " + producer +
                                       " --proto udp --size 64 --procs 1,8 --batch 32 --rounds 1 "
                                       "--duration 0.3 --warmup 0.1",
                                   &wall_s);
  ASSERT_EQ(run.status, 0) << run.err << run.out;
  EXPECT_LT(wall_s, 30.0);
  const bool queued = std::string(shapes).find("none") == std::string::npos;
  uint64_t pmd_sent = 0;
  for (const auto& [rec, r, a, cell] : Cells(run)) {
    ExpectBooksClosed(rec);
    EXPECT_GT(r["accounting"]["sent"].get<uint64_t>(), 0u) << cell;
    ExpectDropsHaveReasons(rec);
    if (queued && std::string(producer) == "stream") {
      EXPECT_EQ(r["drops_total"], 0) << cell;  // stream producers wait for room
    }
    const json& pmd = r["driver_counters"];
    ASSERT_TRUE(pmd.contains("pmd_opackets")) << pmd.dump();
    EXPECT_EQ(pmd["pmd_opackets"].get<uint64_t>() + pmd["pmd_oerrors"].get<uint64_t>(),
              r["accounting"]["sent"].get<uint64_t>())
        << cell << pmd.dump();
    pmd_sent += pmd["pmd_opackets"].get<uint64_t>();
  }
  const uint64_t far_end = veth.PeerRxPackets() - rx_before;
  const uint64_t veth_dropped = veth.HostTxDropped() - dropped_before;
  EXPECT_LE(far_end + veth_dropped, pmd_sent);
  if (veth_dropped == 0) {
    EXPECT_EQ(far_end, pmd_sent);  // what the PMD sent, the far end received: all of it
  } else {
    // A drop makes sendto fail with ENOBUFS, and the PMD counts the rest of its TX ring as sent;
    // after a cell's last burst nothing kicks those out again: at most a ring (512) per cell.
    EXPECT_GE(far_end + veth_dropped + 512 * run.doc["records"].size(), pmd_sent);
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryShape, AfPacketOverload,
    ::testing::Combine(::testing::Values("--qdisc pfifo_fast --sync rootlock,nolock "
                                         "--runner inline,dedicated",
                                         "--qdisc none"),
                       ::testing::Values("stream", "datagram")),
    [](const auto& info) {
      return std::string(std::string(std::get<0>(info.param)).find("none") == std::string::npos
                             ? "PfifoFastEverySyncAndRunner"
                             : "Noqueue") +
             "_" + std::get<1>(info.param);
    });

// Overload and an outage on a real kernel interface: datagram producers flat out, and the veth
// set down for 300 ms mid-run, then up again. The run goes on and ends on time, the books
// balance with every drop under its reason, and the outage shows in a counter: frames the kernel
// refused (the PMD's output errors), frames the qdisc dropped, or fewer frames on the far end
// than txbatch handed to the PMD.
TEST(AfPacket, OverloadAndALinkThatGoesDownAndUpAreCounted) {
  VethIntoNamespace veth;
  ASSERT_TRUE(veth.ok());
  const std::string dir = ::testing::TempDir();
  const std::string json_path = dir + "/outage.json";
  std::filesystem::remove(json_path);
  const uint64_t before = veth.PeerRxPackets();
  const std::string cmd = std::string(std::getenv("TXBATCH_BIN")) +
                          " run --driver ethdev:net_af_packet0,iface=" + veth.host() +
                          " --proto udp --size 64 --procs 1,8 --batch 32 --producer datagram "
                          "--rounds 1 --duration 1 --warmup 0.05 --json " +
                          json_path + " >/dev/null 2>&1";
  const auto t0 = std::chrono::steady_clock::now();
  std::thread run([&] { std::system(cmd.c_str()); });
  // Down in the first cell's window, up again 300 ms later.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(Sh("ip link set " + veth.host() + " down"), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(Sh("ip link set " + veth.host() + " up"), 0);
  run.join();
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(wall_s, 20.0);
  ASSERT_TRUE(std::filesystem::exists(json_path));
  std::ifstream in(json_path);
  const json doc = json::parse(in);
  ASSERT_EQ(doc["records"].size(), 2u);
  uint64_t sent = 0, dropped = 0, oerrors = 0;
  for (const json& rec : doc["records"]) {
    ExpectBooksClosed(rec);
    const json& r = rec["results"];
    uint64_t by_reason = 0;
    for (const auto& [reason, n] : r["drops"].items()) by_reason += n.get<uint64_t>();
    EXPECT_EQ(by_reason, r["drops_total"].get<uint64_t>());
    sent += r["accounting"]["sent"].get<uint64_t>();
    dropped += r["drops_total"].get<uint64_t>();
    ASSERT_TRUE(r["driver_counters"].contains("pmd_oerrors")) << r["driver_counters"].dump();
    oerrors += r["driver_counters"]["pmd_oerrors"].get<uint64_t>();
  }
  const uint64_t far_end = veth.PeerRxPackets() - before;
  EXPECT_LE(far_end, sent);
  EXPECT_TRUE(oerrors > 0 || dropped > 0 || far_end < sent)
      << "the outage left no trace: sent " << sent << ", far end " << far_end << ", dropped "
      << dropped << ", output errors " << oerrors;
  std::filesystem::remove(json_path);
}

}  // namespace
}  // namespace txbatch::test
