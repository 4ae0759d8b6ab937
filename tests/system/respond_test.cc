// `txbatch respond` on the host end of a veth whose other end is in a namespace the test makes:
// a flood ping from the namespace gets every reply, a UDP datagram comes back, and at SIGTERM the
// responder prints balanced books with every mbuf home. The namespace and the responder are
// removed (by the pid the test started) even when a check fails.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <regex>
#include <string>

#include "system_util.h"

namespace txbatch {
namespace {

using namespace system_test;

// A namespace `rspt` with 10.78.0.1 on rspt0, its peer rspt1 on the host, and the responder on
// rspt1 answering for 10.78.0.2.
class RespondRig {
 public:
  RespondRig() {
    Sh("ip netns del rspt 2>/dev/null; ip link del rspt1 2>/dev/null");  // a crashed run's
                                                                         // leftovers
    ok_ = Sh("ip netns add rspt").status == 0 &&
          Sh("ip link add rspt1 type veth peer name rspt0 netns rspt").status == 0 &&
          Sh("ip -n rspt addr add 10.78.0.1/24 dev rspt0").status == 0 &&
          Sh("ip -n rspt link set rspt0 up").status == 0 &&
          Sh("ip -n rspt link set lo up").status == 0 &&
          // UDP leaves a veth with only its pseudo-header summed (CHECKSUM_PARTIAL); an echo
          // would bring it back unfinished (doc/bridge.md).
          Sh("ip netns exec rspt ethtool -K rspt0 tx off").status == 0 &&
          Sh("ip link set rspt1 up").status == 0;
    if (!ok_) return;
    responder_.emplace(Txbatch() +
                           " respond --port net_af_packet0,iface=rspt1 --ip 10.78.0.2 "
                           "--udp-echo 7 --stats 0 --capture " +
                           capture_,
                       log_);
    ok_ = responder_->WaitFor("\nforwarding", 15);
  }
  ~RespondRig() {
    Stop();
    Sh("ip netns del rspt");
    Sh("ip link del rspt1");
    std::filesystem::remove(log_);
    std::filesystem::remove(capture_);
  }
  // SIGTERM to the responder; its exit status, and its output in `out`.
  int Stop(std::string* out = nullptr) {
    int status = -1;
    if (responder_) {
      responder_->Signal(SIGTERM);
      status = responder_->Wait();
      responder_.reset();
    }
    if (out) *out = Slurp(log_);
    return status;
  }
  bool ok() const { return ok_; }
  std::string log() const { return Slurp(log_); }
  const std::string& capture() const { return capture_; }

 private:
  bool ok_ = false;
  std::string log_ = ::testing::TempDir() + "/respond.log";
  std::string capture_ = ::testing::TempDir() + "/respond.pcapng";
  std::optional<Process> responder_;
};

TEST(Respond, AFloodPingToADpdkEndpointGetsEveryReply) {
  RespondRig rig;
  ASSERT_TRUE(rig.ok()) << rig.log();
  Sh("ip netns exec rspt ping -c 3 -i 0.05 -W 1 -q 10.78.0.2");  // ARP, answered by txbatch
  Ran ping = Sh("ip netns exec rspt ping -f -c 1000 -q 10.78.0.2");
  ASSERT_EQ(ping.status, 0) << ping.out;
  EXPECT_NE(ping.out.find("1000 packets transmitted, 1000 received, 0% packet loss"),
            std::string::npos)
      << ping.out;
  // UDP echo: a datagram to port 7 comes back with the same bytes.
  const std::string py =
      "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2); "
      "s.sendto(b'txbatch-echo', ('10.78.0.2', 7)); print(s.recvfrom(100)[0].decode())";
  const Ran echo = Sh("ip netns exec rspt python3 -c \"" + py + "\"");
  ASSERT_EQ(echo.status, 0) << echo.out;
  EXPECT_NE(echo.out.find("txbatch-echo"), std::string::npos) << echo.out;
  std::string log;
  EXPECT_EQ(rig.Stop(&log), 0) << log;
  EXPECT_NE(log.find("— balanced"), std::string::npos) << log;
  EXPECT_NE(log.find("mbufs in use at exit: 0"), std::string::npos) << log;
  EXPECT_NE(log.find("UDP echo 1;"), std::string::npos) << log;
  EXPECT_NE(log.find("ARP 1"), std::string::npos) << log;
  // --capture: the 1003 echo requests came in and their replies went out (pcapng direction 1
  // inbound, 2 outbound), and the UDP echo each way, as tshark reads the file.
  // One line a frame: "icmp-type udp-ports direction", counted by kind.
  const Ran read = Sh("tshark -r " + rig.capture() +
                      " -T fields -E separator=\\; -e icmp.type -e udp.port "
                      "-e frame.packet_flags_direction 2>/dev/null | sort | uniq -c");
  ASSERT_EQ(read.status, 0) << read.out;
  const auto count = [&](const std::string& kind) {
    std::smatch m;
    return std::regex_search(read.out, m, std::regex(" (\\d+) " + kind + "\n")) ? std::stoll(m[1])
                                                                                : 0;
  };
  EXPECT_EQ(count("8;;0x00000001"), 1003) << read.out;    // echo requests, inbound
  EXPECT_EQ(count("0;;0x00000002"), 1003) << read.out;    // echo replies, outbound
  EXPECT_EQ(count(";\\d+,7;0x00000001"), 1) << read.out;  // the UDP echo, in
  EXPECT_EQ(count(";7,\\d+;0x00000002"), 1) << read.out;  // and out
  EXPECT_NE(log.find("capture: "), std::string::npos) << log;
}

}  // namespace
}  // namespace txbatch
