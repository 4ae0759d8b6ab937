// The bridge between real hosts: `txbatch lab up` (two namespaces, two veth pairs, the bridge on
// net_af_packet), then unmodified ping and iperf3 through it, with and without impairments; the
// bridge's own books read from `lab down`. Every test removes its lab, and any iperf3 it started,
// even when it fails. Needs root (CI runs as root).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/math/distributions/binomial.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "system_util.h"

namespace txbatch {
namespace {

using namespace system_test;
using nlohmann::json;

// A lab for one test: up in the constructor, down (and its iperf3 server gone) in the destructor.
class Lab {
 public:
  Lab(std::string prefix, const std::string& bridge_args) : prefix_(std::move(prefix)) {
    up_ = Sh(Txbatch() + " lab up --prefix " + prefix_ + " " + bridge_args);
  }
  ~Lab() {
    if (!down_) Down();
    if (!server_pid_file_.empty()) {
      std::ifstream in(server_pid_file_);
      pid_t pid = 0;
      if (in >> pid && pid > 1) kill(pid, SIGTERM);
      std::filesystem::remove(server_pid_file_);
    }
  }
  bool up() const { return up_.status == 0; }
  const std::string& up_output() const { return up_.out; }
  // Runs `cmd` in namespace a (the client side) or b.
  Ran InA(const std::string& cmd) const { return Sh("ip netns exec " + prefix_ + "-a " + cmd); }
  Ran InB(const std::string& cmd) const { return Sh("ip netns exec " + prefix_ + "-b " + cmd); }
  // An iperf3 server in namespace b for one test, stopped by its pid whatever happens.
  bool StartIperfServer() {
    server_pid_file_ = ::testing::TempDir() + "/iperf3-" + prefix_ + ".pid";
    const Ran r = InB("iperf3 -s -1 -D --pidfile " + server_pid_file_);
    for (int i = 0; i < 50 && !std::filesystem::exists(server_pid_file_); ++i) usleep(20000);
    usleep(100000);
    return r.status == 0;
  }
  // iperf3 from namespace a to a server in b started for it, with `args` and a JSON report (-J);
  // a status of -1 when the server did not start.
  Ran Iperf(const std::string& args) {
    if (!StartIperfServer()) return {-1, "the iperf3 server in " + prefix_ + "-b did not start"};
    return InA("iperf3 -c 10.77.0.2 " + args + " -J");
  }
  // Side a takes 9000-byte packets (both ends of its veth), the bridge and side b what they had;
  // false when ip refused.
  bool JumboOnA() const {
    return Sh("ip -n " + prefix_ + "-a link set " + prefix_ + "-a0 mtu 9000 && ip link set " +
              prefix_ + "-a1 mtu 9000")
               .status == 0;
  }
  // Runs the Python `script` (written to `file` in the test's temp dir for the run) in namespace
  // a, its environment's DEV naming a's veth, with `args`.
  Ran PythonInA(const std::string& file, const std::string& script,
                const std::string& args = "") const {
    const std::string path = ::testing::TempDir() + "/" + file;
    std::ofstream(path) << script;
    Ran r = InA("env DEV=" + prefix_ + "-a0 python3 " + path + args);
    std::filesystem::remove(path);
    return r;
  }
  // Stops the bridge; returns what `lab down` printed (the bridge's books).
  std::string Down() {
    down_ = true;
    return Sh(Txbatch() + " lab down --prefix " + prefix_).out;
  }
  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
  Ran up_;
  bool down_ = false;
  std::string server_pid_file_;
};

// Nothing of the lab is left: namespaces, links, state, the bridge.
void ExpectGone(const std::string& prefix) {
  for (const char* ns : {"-a", "-b"})
    EXPECT_FALSE(std::filesystem::exists("/run/netns/" + prefix + ns)) << prefix << ns;
  for (const char* dev : {"-a1", "-b1"})
    EXPECT_FALSE(std::filesystem::exists("/sys/class/net/" + prefix + dev)) << prefix << dev;
  EXPECT_FALSE(std::filesystem::exists("/run/txbatch-lab/" + prefix));
  EXPECT_NE(
      Sh("pgrep -f '[t]xbatch bridge --port-a net_af_packet0,iface=" + prefix + "-a1'").status, 0);
}

// Whatever of `prefix` a test (or a txbatch without the fix under test) left behind, removed by
// name: the bridge of that prefix by its pid, the namespaces, links and state. Only names of the
// test's own prefix.
void ForceRemove(const std::string& prefix) {
  std::istringstream pids(
      Sh("pgrep -f '[t]xbatch bridge --port-a net_af_packet0,iface=" + prefix + "-a1'").out);
  pid_t pid = 0;
  while (pids >> pid)
    if (pid > 1) kill(pid, SIGKILL);
  for (const char* ns : {"-a", "-b"})
    if (std::filesystem::exists("/run/netns/" + prefix + ns))
      (void)Sh("ip netns del " + prefix + ns);
  for (const char* dev : {"-a1", "-b1"})
    if (std::filesystem::exists("/sys/class/net/" + prefix + dev))
      (void)Sh("ip link del " + prefix + dev);
  std::filesystem::remove_all("/run/txbatch-lab/" + prefix);
}
struct CleanupGuard {
  std::string prefix;
  ~CleanupGuard() { ForceRemove(prefix); }
};

// `cmd` run with its stdout returned and its stderr in `err`.
Ran ShSplit(const std::string& cmd, std::string* err) {
  const std::string path = ::testing::TempDir() + "/lab-stderr.txt";
  const Ran r = Sh("(" + cmd + " 2>" + path + ")");
  *err = Slurp(path);
  std::filesystem::remove(path);
  return r;
}

int Occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The bridge's books as `lab down` prints them: both directions balanced, no mbuf left.
void ExpectBooks(const std::string& down) {
  EXPECT_EQ(Occurrences(down, "— balanced"), 2) << down;
  EXPECT_EQ(down.find("NOT BALANCED"), std::string::npos) << down;
  EXPECT_NE(down.find("mbufs in use at exit: 0"), std::string::npos) << down;
}

// `body` on a lab brought up as `prefix` with `bridge_args`; then its books as `lab down` prints
// them must balance, and nothing of it may be left. A fatal failure in `body` ends the test there
// (the lab's destructor takes it down).
void InALab(const std::string& prefix, const std::string& bridge_args,
            const std::function<void(Lab&)>& body) {
  {
    Lab lab(prefix, bridge_args);
    ASSERT_TRUE(lab.up()) << lab.up_output();
    body(lab);
    if (::testing::Test::HasFatalFailure()) return;
    ExpectBooks(lab.Down());
  }
  ExpectGone(prefix);
}

struct PingStats {
  int sent = -1, received = -1;
  double min = -1, avg = -1, max = -1;
};

PingStats ParsePing(const std::string& out) {
  PingStats p;
  std::smatch m;
  if (std::regex_search(out, m, std::regex(R"((\d+) packets transmitted, (\d+) received)"))) {
    p.sent = std::stoi(m[1]);
    p.received = std::stoi(m[2]);
  }
  if (std::regex_search(out, m, std::regex(R"(= ([\d.]+)/([\d.]+)/([\d.]+)/)"))) {
    p.min = std::stod(m[1]);
    p.avg = std::stod(m[2]);
    p.max = std::stod(m[3]);
  }
  return p;
}

// "avg batch X, xmit calls per frame Y" for direction `dir` ("a>b") in the bridge's summary.
std::pair<double, double> Batching(const std::string& down, const std::string& dir) {
  std::smatch m;
  const std::regex re(dir + R"(: received .*avg batch ([\d.]+), xmit calls per frame ([\d.]+))");
  if (!std::regex_search(down, m, re)) return {-1, -1};
  return {std::stod(m[1]), std::stod(m[2])};
}

TEST(Lab, PingCrossesTheBridgeWithoutLossAndEverythingIsRemovedAfter) {
  InALab("tsys1", "", [&](Lab& lab) {
    EXPECT_NE(lab.up_output().find("TX checksum offload is off"), std::string::npos);
    const PingStats p = ParsePing(lab.InA("ping -c 50 -i 0.01 -q 10.77.0.2").out);
    EXPECT_EQ(p.sent, 50);
    EXPECT_EQ(p.received, 50);
  });
}

// Watched with the tools a DPDK user has (issue 20, items 1-3): while ping crosses the bridge,
// dpdk-telemetry.py reads its per-direction counters through the file prefix its header names;
// its --stats-json stream (every line read by jq) has a start event, interval events whose
// frames add up to the counters they carry, and an end event with balanced books; and its
// --capture file, read by tshark, holds each port's frames in each direction as the books count
// them, stamped with today's wall clock.
TEST(Lab, TelemetryTheStatsStreamAndTheCaptureShowWhatCrossesTheBridge) {
  CleanupGuard guard{"tsyst"};
  const std::string ndjson = ::testing::TempDir() + "/lab-stats.ndjson";
  const std::string pcapng = ::testing::TempDir() + "/lab-capture.pcapng";
  std::filesystem::remove(ndjson);
  std::filesystem::remove(pcapng);
  json stats;
  const auto started = std::chrono::system_clock::now();
  {
    Lab lab("tsyst", "--stats 50ms --stats-json " + ndjson + " --capture " + pcapng);
    ASSERT_TRUE(lab.up()) << lab.up_output();
    const PingStats p = ParsePing(lab.InA("ping -c 20 -i 0.01 -q 10.77.0.2").out);
    EXPECT_EQ(p.received, 20);
    std::smatch m;
    const std::string log = Slurp("/run/txbatch-lab/tsyst/bridge.log");
    ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(telemetry: dpdk-telemetry.py -f (\S+))")))
        << log;
    const std::string prefix = m[1];
    // Published every 0.1 s: asked until both directions show the pings (or 5 s pass).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      const Ran t = Sh("printf '/txbatch/stats\\n' | dpdk-telemetry.py -f " + prefix);
      const size_t brace = t.out.find('{');
      if (brace != std::string::npos) {
        const json reply = json::parse(t.out.substr(brace, t.out.rfind('}') - brace + 1), nullptr,
                                       /*allow_exceptions=*/false);
        if (reply.is_object() && reply.contains("/txbatch/stats")) stats = reply["/txbatch/stats"];
      }
      if (stats.value("a_b_rx", 0) >= 20 && stats.value("b_a_rx", 0) >= 20) break;
      usleep(100000);
    }
    ExpectBooks(lab.Down());
  }
  ASSERT_TRUE(stats.is_object()) << "dpdk-telemetry.py never answered";
  EXPECT_EQ(stats.value("state", ""), "running") << stats;
  EXPECT_GE(stats.value("a_b_rx", 0), 20) << stats;    // the requests (and ARP)
  EXPECT_GE(stats.value("b_a_sent", 0), 20) << stats;  // the replies
  ASSERT_EQ(Sh("jq -e . " + ndjson + " > /dev/null").status, 0) << Slurp(ndjson);
  std::vector<json> lines;
  {
    std::istringstream in(Slurp(ndjson));
    for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  }
  ASSERT_GE(lines.size(), 3u) << Slurp(ndjson);
  EXPECT_EQ(lines.front()["event"], "start");
  EXPECT_EQ(lines.front()["data"]["command"], "bridge");
  EXPECT_EQ(lines.back()["event"], "end");
  std::array<uint64_t, 2> sum{};
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    ASSERT_EQ(lines[i]["event"], "interval") << i;
    const json& dirs = lines[i]["data"]["directions"];
    ASSERT_EQ(dirs.size(), 2u);
    for (size_t d = 0; d < 2; ++d) {
      sum[d] += dirs[d]["interval"]["rx"].get<uint64_t>();
      EXPECT_EQ(sum[d], dirs[d]["rx"].get<uint64_t>()) << "interval " << i << " " << dirs[d];
    }
  }
  const json& end = lines.back()["data"];
  EXPECT_EQ(end["balanced"], true) << end;
  ASSERT_EQ(end["directions"].size(), 2u) << end;
  EXPECT_EQ(end["directions"][0]["name"], "a>b");
  EXPECT_GE(end["directions"][0]["rx"].get<uint64_t>(), std::max<uint64_t>(sum[0], 20));
  EXPECT_GE(end["directions"][1]["sent"].get<uint64_t>(), 20u);
  // The capture: port A (interface 0) received what a>b received and sent what b>a sent; B
  // (interface 1) the other way round.
  // Its stderr apart (Sh adds 2>&1): tshark warns that it runs as root.
  const Ran t = Sh("(tshark -r " + pcapng +
                   " -T fields -e frame.interface_id -e frame.packet_flags_direction "
                   "-e frame.time_epoch 2>/dev/null)");
  ASSERT_EQ(t.status, 0) << t.out;
  std::map<std::string, uint64_t> by;  // "interface direction" -> frames
  double first = 0;
  std::istringstream rows(t.out);
  for (std::string iface, dir, when; rows >> iface >> dir >> when;) {
    ++by[iface + " " + dir];
    if (first == 0) first = std::stod(when);
  }
  const auto& ab = end["directions"][0];
  const auto& ba = end["directions"][1];
  EXPECT_EQ(by["0 0x00000001"], ab["rx"].get<uint64_t>()) << t.out;
  EXPECT_EQ(by["1 0x00000002"], ab["sent"].get<uint64_t>()) << t.out;
  EXPECT_EQ(by["1 0x00000001"], ba["rx"].get<uint64_t>()) << t.out;
  EXPECT_EQ(by["0 0x00000002"], ba["sent"].get<uint64_t>()) << t.out;
  const double at = std::chrono::duration<double>(started.time_since_epoch()).count();
  EXPECT_GE(first, at - 1) << "first frame at " << first << ", the test began at " << at;
  EXPECT_LE(first, at + 60);
  std::filesystem::remove(ndjson);
  std::filesystem::remove(pcapng);
}

TEST(Lab, ADelayEachWayBoundsTheRoundTrip) {
  InALab("tsys2", "--link 'delay 5ms'", [&](Lab& lab) {
    (void)lab.InA("ping -c 1 -W 2 10.77.0.2");  // ARP resolved first: its own 2 x 5 ms
    const std::string out = lab.InA("ping -c 20 -i 0.05 -q 10.77.0.2").out;
    const PingStats p = ParsePing(out);
    EXPECT_EQ(p.received, 20) << out;
    EXPECT_GE(p.min, 10.0) << out;
    EXPECT_LE(p.avg, 11.0) << out;
  });
}

TEST(Lab, LossEachWayLandsInsideTheBinomialBounds) {
  // 5 % each way: a ping survives both with 0.95^2; 1000 of them lose a binomial count.
  const double p = 1 - 0.95 * 0.95;
  const boost::math::binomial_distribution<> dist(1000, p);
  const double lo = boost::math::quantile(dist, 0.0005);
  const double hi = boost::math::quantile(boost::math::complement(dist, 0.0005));
  {
    Lab lab("tsys3", "--link 'loss random 5% seed 11'");
    ASSERT_TRUE(lab.up()) << lab.up_output();
    (void)lab.InA("ping -c 3 -i 0.05 -W 1 10.77.0.2");  // ARP
    const std::string out = lab.InA("ping -f -c 1000 -q 10.77.0.2").out;
    const PingStats s = ParsePing(out);
    ASSERT_EQ(s.sent, 1000) << out;
    const int lost = s.sent - s.received;
    EXPECT_GE(lost, lo) << out;
    EXPECT_LE(lost, hi) << out;
    const std::string down = lab.Down();
    ExpectBooks(down);
    EXPECT_NE(down.find("lost on the link"), std::string::npos);
  }
  ExpectGone("tsys3");
}

TEST(Lab, IperfTcpThroughA100MbitLinkGetsTheRateTheHeadersLeave) {
  // 1514-byte frames (no FCS, as netem counts skb->len) carry 1448 bytes of TCP payload.
  const double expected = 100e6 * 1448 / 1514;
  InALab("tsys4", "--link 'rate 100mbit'", [&](Lab& lab) {
    const Ran r = lab.Iperf("-t 4 -O 1");
    ASSERT_EQ(r.status, 0) << r.out;
    const auto doc = nlohmann::json::parse(r.out);
    const double got = doc["end"]["sum_received"]["bits_per_second"].get<double>();
    EXPECT_NEAR(got, expected, expected * 0.05) << "goodput " << got / 1e6 << " Mbit/s";
  });
}

TEST(Lab, IperfUdpAtHalfTheLinkRateLosesUnderOnePercent) {
  InALab("tsys5", "--link 'rate 100mbit'", [&](Lab& lab) {
    const Ran r = lab.Iperf("-u -b 50M -t 3");
    ASSERT_EQ(r.status, 0) << r.out;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_LT(doc["end"]["sum"]["lost_percent"].get<double>(), 1.0) << doc["end"]["sum"].dump();
  });
}

TEST(Lab, HostileFramesAreForwardedOrCountedAndTheBridgeCarriesOn) {
  // From namespace a, on a raw socket: runts, random bytes of every length up to the MTU,
  // truncated IPv4/ARP headers and frames larger than the other side's MTU (a0/a1 at 9000).
  const std::string py = R"PY(
import os, random, socket, struct
random.seed(3)
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((os.environ['DEV'], 0))
dst, src = bytes.fromhex('ffffffffffff'), bytes.fromhex('020000000009')
IP4, ARP = bytes.fromhex('0800'), bytes.fromhex('0806')
sent = 0
def send(frame):
    global sent
    try:
        s.send(frame); sent += 1
    except OSError:
        pass
for i in range(3000):
    kind = i % 5
    if kind == 0: frame = dst + src + IP4 + os.urandom(random.randrange(0, 8))
    elif kind == 1: frame = dst + src + os.urandom(random.randrange(2, 1500))
    elif kind == 2: frame = dst + src + IP4 + bytes.fromhex('45') + os.urandom(random.randrange(0, 19))
    elif kind == 3: frame = dst + src + ARP + os.urandom(random.randrange(0, 27))
    else: frame = dst + src + IP4 + os.urandom(random.randrange(1600, 8000))
    send(frame)
print('sent', sent)
)PY";
  {
    Lab lab("tsys7", "");
    ASSERT_TRUE(lab.up()) << lab.up_output();
    ASSERT_TRUE(lab.JumboOnA());
    const Ran r = lab.PythonInA("hostile.py", py);
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("sent "), std::string::npos) << r.out;
    const PingStats p = ParsePing(lab.InA("ping -c 10 -i 0.05 -q 10.77.0.2").out);
    EXPECT_EQ(p.received, 10) << "the bridge still forwards";
    const std::string down = lab.Down();
    EXPECT_NE(down.find("bridge pid"), std::string::npos) << "it was still running: " << down;
    ExpectBooks(down);
  }
  ExpectGone("tsys7");
}

TEST(Lab, BatchOneAndThirtyTwoBothForwardEverythingAndBatchAsTheyShould) {
  for (const char* batch : {"1", "32"}) {
    Lab lab(std::string("tsys6") + batch, std::string("--batch ") + batch);
    ASSERT_TRUE(lab.up()) << lab.up_output();
    const Ran r = lab.Iperf("-t 2");
    ASSERT_EQ(r.status, 0) << r.out;
    const std::string down = lab.Down();
    ExpectBooks(down);
    EXPECT_NE(down.find("a>b: received"), std::string::npos) << down;
    // The bridge itself drops nothing; what af_packet's kernel ring dropped under iperf3's full
    // rate (~1 % here, 2026-12-06: iperf3's retransmits) is booked as dropped before the PMD
    // (issue 44, item 1), and the books above balance with it.
    EXPECT_NE(down.find("qdisc full 0, by the qdisc after queueing 0, noqueue 0, lost on the "
                        "link 0, link limit 0, oversize 0"),
              std::string::npos)
        << down;
    const auto [avg, calls] = Batching(down, "a>b");
    if (std::string(batch) == "1") {
      EXPECT_DOUBLE_EQ(avg, 1.0) << down;
      EXPECT_DOUBLE_EQ(calls, 1.0) << down;
    } else {
      EXPECT_GT(avg, 1.5) << down;  // a burst of TCP segments leaves as one batch
      EXPECT_LT(calls, 1.0) << down;
    }
  }
  ExpectGone("tsys61");
  ExpectGone("tsys632");
}

// fq_codel as the bridge's qdisc (issue 46): four TCP streams (iperf3 -P 4, four 5-tuples the
// qdisc hashes apart) cross it, paced by a 100 Mbit/s link in front of it (RX, link, qdisc, TX:
// the backlog builds in the link, so fq_codel seldom drops here); each stream delivers, both
// directions' books balance — what fq_codel dropped after queueing counted in them — and the
// bridge says which qdisc it ran, in tc's words.
TEST(Lab, FourStreamsCrossAnFqCodelBridgeAndItsBooksBalance) {
  InALab("tsysf", "--qdisc fq_codel --link 'rate 100mbit'", [&](Lab& lab) {
    const Ran r = lab.Iperf("-t 2 -P 4");
    ASSERT_EQ(r.status, 0) << r.out;
    const auto doc = nlohmann::json::parse(r.out);
    ASSERT_EQ(doc["end"]["streams"].size(), 4u) << r.out;
    for (const auto& st : doc["end"]["streams"])
      EXPECT_GT(st["receiver"]["bytes"].get<double>(), 0) << st.dump();
    const std::string log = Slurp("/run/txbatch-lab/tsysf/bridge.log");
    EXPECT_NE(log.find("fq_codel limit 10240p flows 1024 target 5ms interval 100ms"),
              std::string::npos)
        << log;
  });
}

TEST(Lab, DownAsANormalUserIsRefusedAndChangesNothing) {
  CleanupGuard guard{"tsys8"};
  InALab("tsys8", "", [&](Lab& lab) {
    std::string err;
    const Ran r = ShSplit("setpriv --reuid=nobody --regid=nogroup --clear-groups " + Txbatch() +
                              " lab down --prefix tsys8",
                          &err);
    EXPECT_EQ(r.status, 2) << r.out << err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(Occurrences(err, "\n"), 1) << err;
    EXPECT_NE(err.find("needs root"), std::string::npos) << err;
    for (const char* ns : {"/run/netns/tsys8-a", "/run/netns/tsys8-b", "/sys/class/net/tsys8-a1",
                           "/run/txbatch-lab/tsys8/state"})
      EXPECT_TRUE(std::filesystem::exists(ns)) << ns;
    const PingStats p = ParsePing(lab.InA("ping -c 3 -i 0.05 -q 10.77.0.2").out);
    EXPECT_EQ(p.received, 3) << "the bridge still forwards";
  });
}

TEST(Lab, DownWaitsForWhatTheLinkHoldsThenPrintsTheBooks) {
  CleanupGuard guard{"tsysd"};
  {
    Lab lab("tsysd", "--link 'delay 3s'");
    ASSERT_TRUE(lab.up()) << lab.up_output();
    // An ARP request that nothing answers within 0.3 s: it spends 3 s in link a>b.
    (void)lab.InA("timeout 0.3 ping -c 1 10.77.0.2");
    const std::string down = lab.Down();
    EXPECT_NE(down.find("the bridge delivers what its links hold first"), std::string::npos)
        << down;
    ExpectBooks(down);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(
        down, m,
        std::regex(R"(a>b books: arrived (\d+) \(received \d+ \+ dropped before the PMD 0\) )"
                   R"(\+ duplicated 0 = sent (\d+) \+ dropped 0 \+ queued 0 \+ in the link 0 )")))
        << down;
    EXPECT_GE(std::stoi(m[1]), 1) << down;
    EXPECT_EQ(m[1], m[2]) << "what the link held was delivered: " << down;
    EXPECT_EQ(down.find("were freed"), std::string::npos) << down;
  }
  ExpectGone("tsysd");
}

TEST(Lab, DownWithoutALabSaysSoAndRemovesNothing) {
  // A namespace of the lab's naming that no lab made.
  CleanupGuard guard{"tsysq"};
  ASSERT_EQ(Sh("ip netns add tsysq-a").status, 0);
  std::string err;
  const Ran r = ShSplit(Txbatch() + " lab down --prefix tsysq", &err);
  EXPECT_EQ(r.status, 2) << r.out << err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(Occurrences(err, "\n"), 1) << err;
  EXPECT_NE(err.find("there is no lab with prefix 'tsysq'"), std::string::npos) << err;
  EXPECT_TRUE(std::filesystem::exists("/run/netns/tsysq-a"));
}

TEST(Lab, DownEndsTheProcessesLeftInItsNamespaces) {
  CleanupGuard guard{"tsysp"};
  {
    Lab lab("tsysp", "");
    ASSERT_TRUE(lab.up()) << lab.up_output();
    Process sleeper("ip netns exec tsysp-b sleep 600", ::testing::TempDir() + "/sleeper.log");
    const std::string pid = std::to_string(sleeper.pid());
    bool inside = false;
    for (int i = 0; i < 250 && !inside; ++i) {
      std::istringstream pids(Sh("ip netns pids tsysp-b").out);
      inside =
          std::find(std::istream_iterator<std::string>(pids), std::istream_iterator<std::string>(),
                    pid) != std::istream_iterator<std::string>();
      if (!inside) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_TRUE(inside) << "sleep " << pid << " in tsysp-b";
    const std::string down = lab.Down();
    EXPECT_NE(down.find("process " + pid + " (sleep) in tsysp-b"), std::string::npos) << down;
    ASSERT_TRUE(sleeper.EndsWithin(5)) << "sleep " << pid << " still runs after lab down";
    EXPECT_EQ(sleeper.Wait(), -SIGTERM);
  }
  ExpectGone("tsysp");
}

TEST(Lab, ASignalDuringUpUndoesWhatItMade) {
  // Once the first namespace is there, the first and second veth pairs, the bridge's log (it
  // starts). SIGHUP (a terminal that closed) is a stop as the others are (issue 44, item 14: it
  // left the namespaces, veths and a running bridge).
  const std::pair<std::string, int> moments[] = {{"/run/netns/tsysi-a", SIGINT},
                                                 {"/sys/class/net/tsysi-a1", SIGHUP},
                                                 {"/sys/class/net/tsysi-b1", SIGTERM},
                                                 {"/run/txbatch-lab/tsysi/bridge.log", SIGINT},
                                                 {"/run/txbatch-lab/tsysi/bridge.log", SIGHUP}};
  for (const auto& [moment, sig] : moments) {
    CleanupGuard guard{"tsysi"};
    Process up(Txbatch() + " lab up --prefix tsysi", ::testing::TempDir() + "/up-signal.log");
    bool reached = false;
    for (int i = 0; i < 10000 && !reached; ++i) {
      reached = std::filesystem::exists(moment);
      if (!reached) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_TRUE(reached) << moment << ": " << up.Log();
    up.Signal(sig);
    EXPECT_EQ(up.Wait(), 128 + sig) << moment << ": " << up.Log();
    EXPECT_NE(up.Log().find("lab up was interrupted"), std::string::npos) << up.Log();
    ExpectGone("tsysi");
  }
}

// Sends frames of the given total lengths (EtherType 0x88b5, local experimental) from DEV, a
// millisecond apart (af_packet's RX ring keeps up); prints how many.
constexpr const char* kSendFrames = R"PY(
import os, socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((os.environ['DEV'], 0))
n = 0
for size in [int(x) for x in sys.argv[1:]]:
    s.send(bytes.fromhex('ffffffffffff020000000009' + '88b5') + bytes(size - 14))
    n += 1
    time.sleep(0.001)
print('sent', n)
)PY";

// Receives EtherType 0x88b5 frames on DEV until COUNT arrived or a second passes without one;
// prints their lengths.
constexpr const char* kReceiveFrames = R"PY(
import os, socket
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x88b5))
s.bind((os.environ['DEV'], 0x88b5))
s.settimeout(5.0)  # a frame the bridge is slow to forward still counts
print('ready', flush=True)
sizes = []
try:
    while len(sizes) < int(os.environ['COUNT']):
        sizes.append(len(s.recv(65536)))
except socket.timeout:
    pass
print('sizes', ' '.join(map(str, sizes)), 'end', flush=True)
)PY";

// The a>b summary's numbers: received, sent, oversize (-1 when absent).
std::array<long, 3> AToB(const std::string& down) {
  std::array<long, 3> n = {-1, -1, -1};
  std::smatch m;
  if (std::regex_search(down, m, std::regex(R"(a>b: received (\d+) .*, sent (\d+), )"))) {
    n[0] = std::stol(m[1]);
    n[1] = std::stol(m[2]);
  }
  if (std::regex_search(down, m, std::regex(R"(a>b: received .*oversize (\d+)\))")))
    n[2] = std::stol(m[1]);
  return n;
}

TEST(Lab, FramesOverTheEgressMtuAreDroppedAndCountedOversize) {
  CleanupGuard guard{"tsysm"};
  {
    Lab lab("tsysm", "");
    ASSERT_TRUE(lab.up()) << lab.up_output();
    // Side a takes 9000-byte packets, side b (and the bridge) 1500.
    ASSERT_TRUE(lab.JumboOnA());
    std::string sizes;
    int big = 0;
    for (int i = 0; i < 150; ++i) {
      const bool over = i % 3 == 0;
      sizes += over ? " 3000" : (i % 3 == 1 ? " 1514" : " 1000");
      big += over;
    }
    const Ran r = lab.PythonInA("send_frames.py", kSendFrames, sizes);
    ASSERT_EQ(r.status, 0) << r.out;
    // What left b1: its peer's kernel counter.
    const long arrived =
        std::stol(lab.InB("cat /sys/class/net/tsysm-b0/statistics/rx_packets").out);
    const std::string down = lab.Down();
    ExpectBooks(down);
    const auto [received, sent, oversize] = AToB(down);
    EXPECT_EQ(oversize, big) << down;
    EXPECT_EQ(sent, arrived) << "every frame the bridge sent left the veth: " << down;
    EXPECT_EQ(received, 150) << down;
  }
  ExpectGone("tsysm");
}

// Sends COUNT frames of SIZE bytes (EtherType 0x88b5) from DEV as fast as Python goes; prints
// how many.
constexpr const char* kSendBurst = R"PY(
import os, socket
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((os.environ['DEV'], 0))
frame = bytes.fromhex('ffffffffffff020000000009' + '88b5') + bytes(int(os.environ['SIZE']) - 14)
n = 0
for _ in range(int(os.environ['COUNT'])):
    s.send(frame)
    n += 1
print('sent', n)
)PY";

// Issue 44 item 1: frames the kernel drops on the af_packet socket's full ring (the bridge busy,
// or here stopped) were in no book: `lab down` said "received … dropped 0 … balanced" while the
// veth had taken ~5 % more. With the bridge stopped (SIGSTOP) a burst of 2000 frames meets a
// ring of 512 (22.11's af_packet: 4096-byte blocks of two 2048-byte frames, framecnt 512), so
// at least 1488 are dropped there; the books must say arrived = what the kernel's veth took
// (rx_packets of the bridge's end), received + dropped before the PMD = arrived, and balance.
TEST(Lab, FramesTheKernelDropsBeforeTheBridgeAreInItsBooks) {
  CleanupGuard guard{"tsysk"};
  {
    Lab lab("tsysk", "");
    ASSERT_TRUE(lab.up()) << lab.up_output();
    EXPECT_NE(lab.up_output().find("TCP congestion control: "), std::string::npos)
        << lab.up_output();
    const auto veth_rx = [] {
      return std::stol(Slurp("/sys/class/net/tsysk-a1/statistics/rx_packets"));
    };
    pid_t bridge = 0;
    std::ifstream("/run/txbatch-lab/tsysk/bridge.pid") >> bridge;
    ASSERT_GT(bridge, 1);
    const long before = veth_rx();
    ASSERT_EQ(kill(bridge, SIGSTOP), 0);
    const Ran r = lab.InA("env DEV=tsysk-a0 COUNT=2000 SIZE=200 python3 -c \"" +
                          std::string(kSendBurst) + "\"");
    const long taken = veth_rx() - before;
    ASSERT_EQ(kill(bridge, SIGCONT), 0);
    ASSERT_EQ(r.status, 0) << r.out;
    ASSERT_NE(r.out.find("sent 2000"), std::string::npos) << r.out;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // it takes what the ring holds
    const std::string down = lab.Down();
    ExpectBooks(down);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(
        down, m,
        std::regex(R"(a>b books: arrived (\d+) \(received (\d+) \+ dropped before the PMD (\d+)\))")))
        << down;
    const long arrived = std::stol(m[1]), received = std::stol(m[2]), missed = std::stol(m[3]);
    EXPECT_EQ(taken, 2000) << "the veth took every frame the burst sent";
    EXPECT_EQ(arrived, taken) << down;
    EXPECT_EQ(received + missed, arrived) << down;
    EXPECT_GE(missed, 2000 - 512) << down;
    EXPECT_NE(down.find("before the PMD " + std::to_string(missed)), std::string::npos) << down;
  }
  ExpectGone("tsysk");
}

TEST(Lab, AtMtu9000FramesUpToTheMtuCrossWhole) {
  CleanupGuard guard{"tsysj"};
  {
    Lab lab("tsysj", "--mtu 9000");
    ASSERT_TRUE(lab.up()) << lab.up_output();
    EXPECT_NE(lab.up_output().find("MTU 9000"), std::string::npos) << lab.up_output();
    // Unfragmented pings of IP packets from 2000 bytes to the MTU.
    (void)lab.InA("ping -c 1 -W 2 10.77.0.2");  // ARP
    for (const char* payload : {"1972", "3972", "8972"}) {
      const std::string out =
          lab.InA(std::string("ping -c 3 -i 0.05 -W 2 -M do -q -s ") + payload + " 10.77.0.2").out;
      EXPECT_EQ(ParsePing(out).received, 3) << payload << ": " << out;
    }
    // Frames of these lengths arrive with these lengths.
    const std::string receive = ::testing::TempDir() + "/receive_frames.py";
    std::ofstream(receive) << kReceiveFrames;
    Process receiver("ip netns exec tsysj-b env DEV=tsysj-b0 COUNT=4 python3 " + receive,
                     ::testing::TempDir() + "/receive_frames.log");
    ASSERT_TRUE(receiver.WaitFor("ready", 10)) << receiver.Log();
    const Ran r = lab.PythonInA("send_frames.py", kSendFrames, " 2000 4000 8000 9014");
    ASSERT_EQ(r.status, 0) << r.out;
    ASSERT_TRUE(receiver.WaitFor("end", 10)) << receiver.Log();
    EXPECT_NE(receiver.Log().find("sizes 2000 4000 8000 9014 end"), std::string::npos)
        << receiver.Log();
    std::filesystem::remove(receive);
    const std::string down = lab.Down();
    ExpectBooks(down);
    EXPECT_EQ(AToB(down)[2], 0) << down;
  }
  ExpectGone("tsysj");
}

// Issue 44, item 21: `lab down` after the bridge had ended (a crash, an OOM kill, a SIGTERM from
// elsewhere) said nothing of it, exit 0, and deleted bridge.log with its last words. Now one
// sentence on stderr says how it ended (its watcher reaped it: the exit status or the signal),
// the exit status is 1 (nothing crossed the lab after it), the log is kept as bridge-PID.log —
// the one thing of the lab left — and the books are printed where it wrote them (a SIGTERM).
TEST(Lab, DownAfterTheBridgeEndedSaysHowAndKeepsItsLog) {
  for (const int sig : {SIGKILL, SIGTERM}) {
    CleanupGuard guard{"tsysz"};
    const Ran up = Sh(Txbatch() + " lab up --prefix tsysz");
    ASSERT_EQ(up.status, 0) << up.out;
    pid_t bridge = 0;
    std::ifstream("/run/txbatch-lab/tsysz/bridge.pid") >> bridge;
    ASSERT_GT(bridge, 1);
    const std::string proc = "/proc/" + std::to_string(bridge);
    ASSERT_EQ(kill(bridge, sig), 0);
    for (int i = 0; i < 500 && std::filesystem::exists(proc); ++i)  // reaped by its watcher
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_FALSE(std::filesystem::exists(proc)) << "the bridge still runs, or was not reaped";
    std::string err;
    const Ran down = ShSplit(Txbatch() + " lab down --prefix tsysz", &err);
    const std::string kept = "/run/txbatch-lab/tsysz/bridge-" + std::to_string(bridge) + ".log";
    EXPECT_EQ(down.status, 1) << down.out << err;
    EXPECT_EQ(Occurrences(err, "\n"), 1) << err;
    EXPECT_EQ(err, "txbatch: lab tsysz: the bridge (pid " + std::to_string(bridge) +
                       ") had ended before lab down, " +
                       (sig == SIGKILL ? "killed by signal 9 (SIGKILL): its books are lost"
                                       : "with exit status 0: its books above are from then") +
                       "; its log is kept: " + kept + "\n")
        << down.out;
    if (sig == SIGTERM) ExpectBooks(down.out);
    EXPECT_NE(down.out.find("lab tsysz removed: "), std::string::npos) << down.out;
    EXPECT_NE(Slurp(kept).find("\nforwarding"), std::string::npos) << kept;
    // The rest of the lab is gone; the folder holds the kept log alone.
    for (const char* ns : {"-a", "-b"})
      EXPECT_FALSE(std::filesystem::exists(std::string("/run/netns/tsysz") + ns)) << ns;
    for (const char* dev : {"-a1", "-b1"})
      EXPECT_FALSE(std::filesystem::exists(std::string("/sys/class/net/tsysz") + dev)) << dev;
    ASSERT_TRUE(std::filesystem::is_directory("/run/txbatch-lab/tsysz"));
    std::vector<std::string> left;
    for (const auto& e : std::filesystem::directory_iterator("/run/txbatch-lab/tsysz"))
      left.push_back(e.path().string());
    EXPECT_EQ(left, std::vector<std::string>{kept});
    // A second down finds no lab, and leaves the log.
    EXPECT_EQ(Sh(Txbatch() + " lab down --prefix tsysz").status, 2);
    EXPECT_TRUE(std::filesystem::exists(kept));
  }
}

}  // namespace
}  // namespace txbatch
