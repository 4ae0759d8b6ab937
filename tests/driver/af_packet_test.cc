// net_af_packet on a veth pair whose peer is in a network namespace this test creates: every
// frame txbatch counts as sent is counted by the kernel on the far end. The namespace and the
// veth are removed when the test ends, also when it fails.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/driver/run_helper.h"

namespace txbatch::test {
namespace {

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

}  // namespace
}  // namespace txbatch::test
