// `txbatch respond` on the host end of a veth whose other end is in a namespace the test makes:
// a flood ping from the namespace gets every reply, a UDP datagram comes back, and at SIGTERM the
// responder prints balanced books with every mbuf home. The namespace and the responder are
// removed (by the pid the test started) even when a check fails.
#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace txbatch {
namespace {

int Sh(const std::string& cmd, std::string* out = nullptr) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  std::string text;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  const int st = pclose(p);
  if (out) *out = text;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A namespace `rspt` with 10.78.0.1 on rspt0, its peer rspt1 on the host, and the responder on
// rspt1 answering for 10.78.0.2.
class RespondRig {
 public:
  RespondRig() {
    Sh("ip netns del rspt; ip link del rspt1");  // a crashed run's leftovers
    ok_ = Sh("ip netns add rspt") == 0 &&
          Sh("ip link add rspt1 type veth peer name rspt0 netns rspt") == 0 &&
          Sh("ip -n rspt addr add 10.78.0.1/24 dev rspt0") == 0 &&
          Sh("ip -n rspt link set rspt0 up") == 0 && Sh("ip -n rspt link set lo up") == 0 &&
          // UDP leaves a veth with only its pseudo-header summed (CHECKSUM_PARTIAL); an echo
          // would bring it back unfinished (doc/bridge.md).
          Sh("ip netns exec rspt ethtool -K rspt0 tx off") == 0 &&
          Sh("ip link set rspt1 up") == 0;
    if (!ok_) return;
    const char* bin = std::getenv("TXBATCH_BIN");
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      execl(bin ? bin : "txbatch", "txbatch", "respond", "--port", "net_af_packet0,iface=rspt1",
            "--ip", "10.78.0.2", "--udp-echo", "7", "--stats", "0", nullptr);
      _exit(127);
    }
    for (int i = 0; i < 300 && Slurp(log_).find("\nforwarding") == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ok_ = Slurp(log_).find("\nforwarding") != std::string::npos;
  }
  ~RespondRig() {
    Stop();
    Sh("ip netns del rspt");
    Sh("ip link del rspt1");
    std::filesystem::remove(log_);
  }
  // SIGTERM to the responder; its exit status, and its output in `out`.
  int Stop(std::string* out = nullptr) {
    int status = -1;
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int st = 0;
      waitpid(pid_, &st, 0);
      status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      pid_ = -1;
    }
    if (out) *out = Slurp(log_);
    return status;
  }
  bool ok() const { return ok_; }
  std::string log() const { return Slurp(log_); }

 private:
  bool ok_ = false;
  pid_t pid_ = -1;
  std::string log_ = ::testing::TempDir() + "/respond.log";
};

TEST(Respond, AFloodPingToADpdkEndpointGetsEveryReply) {
  RespondRig rig;
  ASSERT_TRUE(rig.ok()) << rig.log();
  std::string out;
  Sh("ip netns exec rspt ping -c 3 -i 0.05 -W 1 -q 10.78.0.2");  // ARP, answered by txbatch
  ASSERT_EQ(Sh("ip netns exec rspt ping -f -c 1000 -q 10.78.0.2", &out), 0) << out;
  EXPECT_NE(out.find("1000 packets transmitted, 1000 received, 0% packet loss"),
            std::string::npos)
      << out;
  // UDP echo: a datagram to port 7 comes back with the same bytes.
  const std::string py =
      "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2); "
      "s.sendto(b'txbatch-echo', ('10.78.0.2', 7)); print(s.recvfrom(100)[0].decode())";
  ASSERT_EQ(Sh("ip netns exec rspt python3 -c \"" + py + "\"", &out), 0) << out;
  EXPECT_NE(out.find("txbatch-echo"), std::string::npos) << out;
  std::string log;
  EXPECT_EQ(rig.Stop(&log), 0) << log;
  EXPECT_NE(log.find("— balanced"), std::string::npos) << log;
  EXPECT_NE(log.find("mbufs in use at exit: 0"), std::string::npos) << log;
  EXPECT_NE(log.find("UDP echo 1;"), std::string::npos) << log;
  EXPECT_NE(log.find("ARP 1"), std::string::npos) << log;
}

}  // namespace
}  // namespace txbatch
