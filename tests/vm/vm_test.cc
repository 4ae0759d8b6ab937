// The VM lab: txbatch on DPDK's real PMDs inside QEMU guests (scripts/vm-lab.sh), every frame
// that left the emulated NIC checked on the host. A software vdev never reads an mbuf's IOVA; a
// NIC DMAs from it, so only a device model that really does DMA — QEMU's e1000, e1000e and
// virtio-net — tests the path txbatch takes on real hardware.
//
// Each case boots one guest (two for the two-host cases) that runs one txbatch command; QEMU's
// filter-dump writes what the NIC put on the wire to a pcap, read back here with libpcap: every
// frame txbatch's, its IPv4 checksum right, each flow's sequence from 0 without a gap or repeat,
// and the count equal to the records' `sent` and to the PMD's own opackets.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pcap/pcap.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/frame.h"
#include "tests/test_files.h"

namespace txbatch::test {
namespace {

using nlohmann::json;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The image (kernel + initramfs with the built txbatch), built once for the suite.
std::string ImageDir() { return Env("TXBATCH_VM_DIR"); }
std::string LabScript() { return Env("TXBATCH_SOURCE_ROOT") + "/scripts/vm-lab.sh"; }

class LabImage : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string cmd = "TXBATCH_BIN=" + Env("TXBATCH_BIN") + " bash " + LabScript() +
                            " image " + ImageDir() + " >" + ImageDir() + ".log 2>&1";
    std::filesystem::create_directories(std::filesystem::path(ImageDir()).parent_path());
    const int rc = std::system(cmd.c_str());
    ASSERT_EQ(rc, 0) << Slurp(ImageDir() + ".log");
  }
};

struct Boot {
  std::string out;      // the guest's folder: console.log, the files the job sent, wire.pcap
  int lab_status = -1;  // vm-lab.sh boot's: 0 when the guest ran its job and powered off
  int job_status = -1;  // the job's, as the guest said
  std::string console;
  std::string Console() const {
    return console.substr(console.size() > 6000 ? console.size() - 6000 : 0);
  }
};

// The guests' folders of the test running now: removed when it passes (a tcp capture is tens of
// MB), kept for a look when it fails.
std::vector<std::string>& Folders() {
  static std::vector<std::string> folders;
  return folders;
}

class RemoveFoldersOfPassedTests : public ::testing::EmptyTestEventListener {
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Passed())
      for (const std::string& f : Folders()) std::filesystem::remove_all(f);
    Folders().clear();
  }
};

// `timeout_s`: how long the guest may run (vm-lab.sh's default: 300 s).
std::string BootCommand(const std::string& out, const std::string& job,
                        const std::string& qemu_args, int timeout_s = 300) {
  std::filesystem::remove_all(out);
  std::filesystem::create_directories(out);
  Folders().push_back(out);
  std::ofstream(out + "/job.sh") << job;
  return "TXBATCH_VM_TIMEOUT=" + std::to_string(timeout_s) + " bash " + LabScript() + " boot " +
         ImageDir() + " " + out + "/job.sh " + out + " -- " + qemu_args + " >" + out +
         "/lab.log 2>&1";
}

Boot Finished(const std::string& out, int rc) {
  Boot b;
  b.out = out;
  b.lab_status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  b.console = Slurp(out + "/console.log") + Slurp(out + "/lab.log");
  if (std::filesystem::exists(out + "/exit")) b.job_status = std::stoi(Slurp(out + "/exit"));
  return b;
}

Boot BootGuest(const std::string& name, const std::string& job, const std::string& qemu_args) {
  const std::string out = ::testing::TempDir() + "/vm_" + name;
  return Finished(out, std::system(BootCommand(out, job, qemu_args).c_str()));
}

// A NIC of `model` at PCI 00:04.0 on netdev n0, with what it sends dumped to out/wire.pcap.
std::string Nic(const std::string& model, const std::string& out_name, const std::string& netdev) {
  const std::string out = ::testing::TempDir() + "/vm_" + out_name;
  return "-netdev " + netdev + " -device " + model + ",netdev=n0,addr=04.0" +
         " -object filter-dump,id=f0,netdev=n0,queue=rx,file=" + out + "/wire.pcap";
}

// The guest's side of a run on the NIC at 00:04.0, bound to `driver`, its JSON sent back.
std::string RunJob(const std::string& bind, const std::string& args, const std::string& eal) {
  return bind + "\ntxbatch " + args + (args.starts_with("run") ? " --rounds 1" : "") +
         " --json /tmp/r.json -- -l 0-1 -a 0000:00:04.0 " + eal + "\nresult run.json /tmp/r.json\n";
}
const char kUio[] = "hugepages 64\nbind 0000:00:04.0 uio_pci_generic";
const char kVfio[] = "bind 0000:00:04.0 vfio-pci";

struct Wire {
  uint64_t frames = 0, not_ok = 0, gaps = 0;
  std::map<ParseStatus, uint64_t> statuses;
  std::map<uint16_t, uint64_t> next_seq;  // per flow
  std::string first_problem;
};

// Every frame in the capture: txbatch's and intact (ParseFrame checks the headers: MACs, IPv4
// checksum, the flow's ports), each flow's sequence 0, 1, 2, ... with no gap or repeat.
Wire ReadWire(const std::string& pcap_path, Proto proto) {
  Wire w;
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline(pcap_path.c_str(), err);
  if (p == nullptr) {
    w.first_problem = err;
    return w;
  }
  pcap_pkthdr* h;
  const u_char* data;
  while (pcap_next_ex(p, &h, &data) == 1) {
    ++w.frames;
    const ParsedFrame f = ParseFrame(data, h->caplen);
    if (f.status != ParseStatus::kOk || f.proto != proto || h->caplen != h->len) {
      ++w.not_ok;
      ++w.statuses[f.status];
      if (w.first_problem.empty())
        w.first_problem = "frame " + std::to_string(w.frames) + ": " +
                          std::string(ParseStatusName(f.status)) + ", " + std::to_string(h->len) +
                          " bytes";
      continue;
    }
    uint64_t& next = w.next_seq[f.flow];
    if (f.seq != next) {
      ++w.gaps;
      if (w.first_problem.empty())
        w.first_problem = "flow " + std::to_string(f.flow) + ": seq " + std::to_string(f.seq) +
                          " where " + std::to_string(next) + " was next";
    }
    next = f.seq + 1;
  }
  pcap_close(p);
  return w;
}

uint64_t U(const json& v) { return v.is_number() ? v.get<uint64_t>() : 0; }

// The run's records (`cells` of them) against the wire: books closed, and what each cell sent is
// what its PMD counted; all cells together are what the capture holds, to the frame. On virtio
// the device transmits from its ring after the doorbell, on its own time (QEMU's virtio-net, from
// a bottom half that TCG's busy vCPUs can hold off for milliseconds); what the ring still held
// when a cell's port stopped and closed was dropped by the device's reset: the tail of any cell
// could be missing from the capture (CI on 8187288: 50 frames of cell 3 of 4; the last cell's
// tail was tolerated until then), until the port lingered for the backend before it stops
// (ethdev_port.cc, SendsOnItsOwnTime).
void CheckRunAgainstWire(const Boot& b, Proto proto, size_t cells) {
  ASSERT_EQ(b.lab_status, 0) << b.Console();
  ASSERT_EQ(b.job_status, 0) << b.Console();
  const std::string doc_text = Slurp(b.out + "/run.json");
  ASSERT_FALSE(doc_text.empty()) << b.Console();
  const json doc = json::parse(doc_text);
  ASSERT_EQ(doc["records"].size(), cells) << b.Console();
  uint64_t sent = 0;
  for (const json& rec : doc["records"]) {
    const json& r = rec["results"];
    const json& a = r["accounting"];
    const std::string cell = rec["config"].dump();
    EXPECT_TRUE(a["balanced"].get<bool>()) << cell << a.dump();
    EXPECT_EQ(U(a["queued"]), 0u) << cell;
    EXPECT_EQ(U(r["mbufs_in_use_at_exit"]), 0u) << cell;
    EXPECT_GT(U(a["sent"]), 0u) << cell;
    EXPECT_EQ(r["counted_at"], "driver") << cell;
    // The PMD's own count of what it put in the ring, per cell.
    EXPECT_EQ(U(r["driver_counters"]["pmd_opackets"]), U(a["sent"]))
        << cell << r["driver_counters"];
    EXPECT_EQ(U(r["driver_counters"]["pmd_oerrors"]), 0u) << cell;
    // Four producers keep the qdisc full: batch 32 hands the PMD many frames a call (measured
    // 24-32 on these guests), the path a one-frame test never takes.
    if (rec["config"]["batch"] == 32 && U(rec["config"]["procs"]) >= 4) {
      EXPECT_GE(r["avg_batch"].get<double>(), 4.0) << cell << r["batch_hist"];
    }
    sent += U(a["sent"]);
  }
  const Wire w = ReadWire(b.out + "/wire.pcap", proto);
  EXPECT_EQ(w.not_ok, 0u) << w.first_problem;
  EXPECT_EQ(w.gaps, 0u) << w.first_problem;
  EXPECT_EQ(w.frames, sent) << w.first_problem;
}

// Short cells: under TCG a guest sends ~10^5 frames/s; each cell is a few 10^4 frames.
const char kCells[] = "--duration 0.25 --warmup 0.05";

// One guest, one NIC, one run: the NIC's model, how it is bound, the run and what it must show.
struct PmdCase {
  const char* name;
  const char* nic;   // QEMU's -device model
  bool vfio;         // vfio-pci behind an emulated IOMMU (q35, intel_iommu=on), else uio
  const char* args;  // txbatch run's, before kCells
  Proto proto;
  size_t cells;
};

// e1000 (82540EM) and e1000e (82574L) on net_e1000_em, virtio-net on net_virtio, under
// uio_pci_generic + hugepages (IOVA as PA); the e1000 under vfio-pci with IOVA as VA and no
// hugepages, where the IOMMU faults any DMA from an address the pool's memory was not mapped at.
const PmdCase kPmdCases[] = {
    {"e1000_uio", "e1000", false, "--proto udp --size 64 --batch 1,32 --procs 1,4", Proto::kUdp, 4},
    {"e1000_dedicated_tcp", "e1000", false,
     "--runner dedicated --proto tcp --size 65536 --batch 1,32 --procs 1", Proto::kTcp, 2},
    {"e1000_noqueue_buffer", "e1000", false,
     "--qdisc none --policy buffer:32 --proto udp --size 64 --procs 1", Proto::kUdp, 1},
    {"e1000e_uio", "e1000e", false, "--proto udp --size 1400 --batch 1,32 --procs 4", Proto::kUdp,
     2},
    {"e1000_vfio_iommu", "e1000", true, "--proto udp --size 64 --batch 1,32 --procs 4", Proto::kUdp,
     2},
    // Eight cells: seven ends of a cell where the port stops with the ring perhaps not yet sent
    // (on the code before the linger, 2 of 3 runs of these eight cells lost frames, 3 of 5 of
    // six).
    {"virtio_uio", "virtio-net-pci,disable-modern=off", false,
     "--proto udp --size 64 --batch 1,4,8,32 --procs 1,4", Proto::kUdp, 8},
};

class VmPmd : public ::testing::TestWithParam<PmdCase> {};

TEST_P(VmPmd, EveryFrameOnTheWireIsTxbatchsAndCounted) {
  const PmdCase& c = GetParam();
  const std::string machine =
      c.vfio ? "-machine q35,kernel-irqchip=split -device intel-iommu,intremap=on,caching-mode=on "
             : "";
  if (c.vfio) setenv("TXBATCH_VM_CMDLINE", "intel_iommu=on", 1);
  const Boot b =
      BootGuest(c.name,
                RunJob(c.vfio ? kVfio : kUio,
                       "run --driver ethdev:port=0 " + std::string(c.args) + " " + kCells,
                       c.vfio ? "--no-huge -m 256" : "--in-memory"),
                machine + Nic(c.nic, c.name, "user,id=n0,restrict=on"));
  unsetenv("TXBATCH_VM_CMDLINE");
  CheckRunAgainstWire(b, c.proto, c.cells);
  if (c.vfio) {
    // The IOMMU was on, and faulted no DMA (its faults are error lines: in the kernel's log,
    // which the guest sends, not on its quiet console).
    const std::string dmesg = Slurp(b.out + "/dmesg.txt");
    EXPECT_NE(dmesg.find("DMAR: IOMMU enabled"), std::string::npos) << dmesg;
    EXPECT_EQ(dmesg.find("DMAR: DRHD: handling fault"), std::string::npos) << dmesg;
  }
}

INSTANTIATE_TEST_SUITE_P(Nics, VmPmd, ::testing::ValuesIn(kPmdCases),
                         [](const auto& info) { return std::string(info.param.name); });

// A TCP port on loopback nobody listens on now, for the guests' socket netdev.
int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0) return -1;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  close(fd);
  return ok ? ntohs(a.sin_port) : -1;
}

// The address of a socket netdev cable between two guests ("127.0.0.1:PORT"), on a free port;
// empty when there is none.
std::string LoopbackCable() {
  const int port = FreeLoopbackPort();
  return port > 0 ? "127.0.0.1:" + std::to_string(port) : std::string();
}

// A guest booting in the background; its job may wait for a line on its third serial port
// (/dev/ttyS2), which Tell sends.
class BackgroundGuest {
 public:
  // It may run 600 s: it waits for the other guest's boot and run, each up to 300 s.
  BackgroundGuest(const std::string& name, const std::string& job, const std::string& qemu_args)
      : out_(::testing::TempDir() + "/vm_" + name), pipe_(out_ + "/ctl") {
    const std::string cmd = BootCommand(out_, job, qemu_args + " -serial pipe:" + pipe_, 600);
    mkfifo((pipe_ + ".in").c_str(), 0600);
    mkfifo((pipe_ + ".out").c_str(), 0600);
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);  // its own group: the shell, vm-lab.sh, timeout and QEMU end together
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    if (pid_ > 0) setpgid(pid_, pid_);
  }
  ~BackgroundGuest() {
    if (pid_ > 0 && !reaped_) {
      kill(-pid_, SIGTERM);  // a test that stopped early: the guest's whole group, QEMU included
      (void)Wait();
    }
  }
  // Waits (up to `limit_s`) until the guest's console shows `text`.
  bool AwaitConsole(const std::string& text, double limit_s) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
    while (std::chrono::steady_clock::now() < end) {
      if (Slurp(out_ + "/console.log").find(text) != std::string::npos) return true;
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        reaped_ = true;
        status_ = st;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  // Sends `line` to the guest's /dev/ttyS2; false when its QEMU is gone (nobody reads the pipe).
  bool Tell(const std::string& line) {
    const int fd = open((pipe_ + ".in").c_str(), O_WRONLY | O_NONBLOCK);
    if (fd < 0) return false;
    const std::string text = line + "\n";
    const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    close(fd);
    return ok;
  }
  Boot Wait() {
    if (!reaped_) {
      (void)waitpid(pid_, &status_, 0);
      reaped_ = true;
    }
    return Finished(out_, status_);
  }
  const std::string& out() const { return out_; }

 private:
  std::string out_, pipe_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = -1;
};

// A guest job: after `setup`, `txbatch sink OPTIONS` in the background (its record to
// /tmp/s.json, EAL arguments `eal` if any), until the host says go (BackgroundGuest::Tell); then
// SIGINT stops it and its record comes back as sink.json.
std::string SinkUntilGo(const std::string& setup, const std::string& options,
                        const std::string& eal = "") {
  return setup + "txbatch sink " + options + " --stats 0 --json /tmp/s.json" +
         (eal.empty() ? "" : " -- " + eal) +
         " &\npid=$!\nread go < /dev/ttyS2\nkill -INT $pid\nwait $pid || st=$?\n"
         "result sink.json /tmp/s.json\nexit ${st:-0}\n";
}

// Two hosts: guest B's txbatch sink on its e1000, guest A's txbatch run on its own, the two NICs
// joined by a QEMU socket netdev (a cable over loopback). Every frame A put on the wire reached
// B's sink, in order per flow, and both sides' books close.
TEST(VmTwoHosts, RunOnOneE1000SinkOnAnotherEveryFrameArrives) {
  const std::string cable = LoopbackCable();
  ASSERT_FALSE(cable.empty());
  BackgroundGuest sink(
      "two_sink",
      SinkUntilGo(std::string(kUio) + "\n", "--port ethdev:port=0",
                  "-l 0-1 -a 0000:00:04.0 --in-memory"),
      "-netdev socket,id=n0,listen=" + cable + " -device e1000,netdev=n0,addr=04.0");
  ASSERT_TRUE(sink.AwaitConsole("receiving; SIGINT or SIGTERM stops it", 180))
      << Slurp(sink.out() + "/console.log");
  // Paced at what a TCG guest receives without falling behind: 0 lost is then the claim.
  const Boot run =
      BootGuest("two_run",
                RunJob(kUio,
                       std::string("run --driver ethdev:port=0 --proto udp --size 256 --batch 1,32 "
                                   "--procs 2 --rate 20kpps ") +
                           kCells,
                       "--in-memory"),
                Nic("e1000", "two_run", "socket,id=n0,connect=" + cable));
  EXPECT_TRUE(sink.Tell("go")) << "the sink's guest is gone";
  const Boot b = sink.Wait();
  CheckRunAgainstWire(run, Proto::kUdp, 2);
  ASSERT_EQ(b.lab_status, 0) << b.Console();
  ASSERT_EQ(b.job_status, 0) << b.Console();
  const std::string text = Slurp(b.out + "/sink.json");
  ASSERT_FALSE(text.empty()) << b.Console();
  const json s = json::parse(text);
  uint64_t sent = 0;
  const json sender = json::parse(Slurp(run.out + "/run.json"));
  for (const json& rec : sender["records"]) sent += U(rec["results"]["accounting"]["sent"]);
  const json& r = s["results"];
  EXPECT_EQ(U(r["received"]), sent) << r;
  EXPECT_EQ(U(r["lost"]), 0u) << r;
  EXPECT_EQ(U(r["duplicated"]), 0u) << r;
  EXPECT_EQ(U(r["reordered"]), 0u) << r;
  EXPECT_EQ(U(r["foreign"]), 0u) << r;
  EXPECT_NE(b.console.find("mbufs in use at exit: 0"), std::string::npos) << b.Console();
}

// Soft RoCE (rdma_rxe, a real libibverbs provider) on the guest's e1000, bound to the kernel's
// driver: the hardware suite, a run to a sink on the same port, and two guests.
const char kRxe[] = "modprobe e1000\nrxe_up eth0\nip addr add 10.0.0.1/24 dev eth0\n";
// The sink's own QP, from its banner ("senders give qpn=0x11,qkey=...").
std::string SinkQpn(const std::string& console) {
  const std::string key = "senders give qpn=";
  const size_t at = console.find(key);
  if (at == std::string::npos) return "";
  const size_t from = at + key.size();
  return console.substr(from, console.find(',', from) - from);
}
constexpr char kQkey[] = "0x11111111";
// Paced at what a TCG guest's sink receives without falling behind (a UD datagram that finds no
// receive posted is dropped: unpaced, a sink on the same 2 vCPUs lost a third): 0 lost is then
// the claim. Two producers, a dedicated runner, count:1 then buffer:32.
const std::string kRocePaced = std::string("--proto udp --size 256 --runner dedicated ") +
                               "--policy count:1,buffer:32 --procs 2 --rate 4kpps --rounds 1 " +
                               kCells;
// rxe's active MTU on a 1500-byte netdev is 1024: 1020 bytes of IP (doc/drivers/verbs.md).
constexpr char kRxeMtu[] = "--mtu 1020";

TEST(VmRxe, TheHardwareSuitePassesOnSoftRoce) {
  if (Env("TXBATCH_VM_BINS").find("hw_tests") == std::string::npos)
    GTEST_FAIL() << "the vm suite was built without libibverbs: no hw_tests for the guest";
  const Boot b = BootGuest("rxe_hw",
                           std::string(kRxe) +
                               "grep ' eth0$' /proc/net/if_inet6 > /tmp/inet6.txt\n"
                               "result inet6.txt /tmp/inet6.txt\n"
                               "hw_tests > /tmp/hw.txt 2>&1 || st=$?\n"
                               "result hw.txt /tmp/hw.txt\nexit ${st:-0}\n",
                           "-netdev user,id=n0,restrict=on -device e1000,netdev=n0,addr=04.0");
  ASSERT_EQ(b.lab_status, 0) << b.Console();
  // rxe_up returned with eth0's IPv6 addresses usable (its RoCE v2 GIDs): none tentative, the
  // link-local one there. An address handle to a tentative GID timed out (ETIMEDOUT) when the
  // suite ran within duplicate address detection's second.
  const std::string inet6 = Slurp(b.out + "/inet6.txt");
  std::istringstream lines(inet6);
  bool link_local = false;
  for (std::string addr, index, prefix, scope, flags, dev;
       lines >> addr >> index >> prefix >> scope >> flags >> dev;) {
    EXPECT_EQ(std::stoul(flags, nullptr, 16) & 0x40, 0u) << "tentative: " << inet6;
    link_local |= scope == "20";
  }
  EXPECT_TRUE(link_local) << inet6;
  const std::string hw = Slurp(b.out + "/hw.txt");
  EXPECT_EQ(b.job_status, 0) << hw << b.Console();
  EXPECT_NE(hw.find("[       OK ] HardwareVerbs."), std::string::npos) << hw;
  EXPECT_EQ(hw.find("SKIPPED"), std::string::npos) << hw;
  EXPECT_EQ(hw.find("FAILED"), std::string::npos) << hw;
}

// The sink's record against the sender's: every frame sent arrived, none lost, repeated,
// reordered or foreign.
void CheckSinkGotEverything(const json& sink, const json& sender) {
  uint64_t sent = 0;
  for (const json& rec : sender["records"]) sent += U(rec["results"]["accounting"]["sent"]);
  const json& r = sink["results"];
  EXPECT_GT(sent, 0u);
  EXPECT_EQ(U(r["received"]), sent) << r;
  EXPECT_EQ(U(r["lost"]), 0u) << r;
  EXPECT_EQ(U(r["duplicated"]), 0u) << r;
  EXPECT_EQ(U(r["reordered"]), 0u) << r;
  EXPECT_EQ(U(r["foreign"]), 0u) << r;
}

// The sender's records on RoCE: books closed, the mode named, and batching visible in the posts:
// count:1 is one ibv_post_send a frame; buffer:32 (a dedicated runner gathering 32 frames, which
// at a paced rate the qdisc alone would not hold) far fewer. Not one per 32 exactly: measured
// 29.3 frames a post between two guests, 16.4 with the sink on the same 2 vCPUs, where the
// histogram also holds posts of 1..16 (noted as an open question in the closing note); the bar is
// 8, a batching effect no per-frame post can fake.
void CheckRoceSender(const json& doc) {
  ASSERT_EQ(doc["records"].size(), 2u);
  for (const json& rec : doc["records"]) {
    const json& r = rec["results"];
    const std::string cell = rec["config"].dump();
    EXPECT_TRUE(r["accounting"]["balanced"].get<bool>()) << cell;
    EXPECT_EQ(U(r["mbufs_in_use_at_exit"]), 0u) << cell;
    EXPECT_EQ(r["link_layer"], "roce_v2") << cell;
  }
  const json& off = doc["records"][0]["results"];
  const json& on = doc["records"][1]["results"];
  EXPECT_EQ(doc["records"][1]["config"]["policy"], "buffer:32");
  EXPECT_DOUBLE_EQ(off["doorbells_per_pkt"].get<double>(), 1.0);
  EXPECT_GE(on["avg_batch"].get<double>(), 8.0) << on["batch_hist"];
  EXPECT_LE(on["doorbells_per_pkt"].get<double>(), 1.0 / 8) << on["batch_hist"];
}

TEST(VmRxe, RunToASinkOnTheSamePortEveryFrameArrivesAndBatchingShowsInThePosts) {
  // The sink prints its QP before "receiving"; the job waits for that line (up to 30 s).
  const std::string job =
      std::string(kRxe) + "txbatch sink --port verbs:rxe0:1,qkey=" + kQkey + " " + kRxeMtu +
      " --stats 0 --json /tmp/s.json > /tmp/sink.out 2>&1 &\npid=$!\n"
      "i=0; until grep -q receiving /tmp/sink.out; do i=$((i+1)); [ $i -lt 300 ]; sleep 0.1; done\n"
      "qpn=$(sed -n 's/.*senders give qpn=\\(0x[0-9a-f]*\\),.*/\\1/p' /tmp/sink.out)\n"
      "txbatch run --driver verbs:rxe0:1,qpn=$qpn,qkey=" +
      kQkey + ",gid=::ffff:10.0.0.1 " + kRxeMtu + " " + kRocePaced +
      " --json /tmp/r.json\nkill -INT $pid\nwait $pid || st=$?\ncat /tmp/sink.out\n"
      "result run.json /tmp/r.json\nresult sink.json /tmp/s.json\nexit ${st:-0}\n";
  const Boot b = BootGuest("rxe_self", job,
                           "-netdev user,id=n0,restrict=on -device e1000,netdev=n0,addr=04.0");
  ASSERT_EQ(b.lab_status, 0) << b.Console();
  ASSERT_EQ(b.job_status, 0) << b.Console();
  const json sender = json::parse(Slurp(b.out + "/run.json"));
  CheckRoceSender(sender);
  CheckSinkGotEverything(json::parse(Slurp(b.out + "/sink.json")), sender);
}

// Two guests, each rxe0 on its own e1000, the NICs joined by a socket cable; A sends to B's QP by
// B's IPv4 RoCE v2 GID, paced at what a TCG guest receives (a UD datagram finding no posted
// receive is dropped: 0 lost is the claim at this rate).
TEST(VmRxe, TwoGuestsOverASocketCableEveryFrameArrives) {
  const std::string cable = LoopbackCable();
  ASSERT_FALSE(cable.empty());
  BackgroundGuest sink(
      "rxe_two_sink",
      SinkUntilGo("modprobe e1000\nrxe_up eth0\nip addr add 10.0.0.2/24 dev eth0\n",
                  "--port verbs:rxe0:1,qkey=" + std::string(kQkey) + " " + kRxeMtu),
      "-netdev socket,id=n0,listen=" + cable +
          " -device e1000,netdev=n0,addr=04.0,mac=52:54:00:12:34:02");
  ASSERT_TRUE(sink.AwaitConsole("receiving; SIGINT or SIGTERM stops it", 180))
      << Slurp(sink.out() + "/console.log");
  const std::string qpn = SinkQpn(Slurp(sink.out() + "/console.log"));
  ASSERT_FALSE(qpn.empty()) << Slurp(sink.out() + "/console.log");
  const Boot run = BootGuest(
      "rxe_two_run",
      std::string(kRxe) + "ping -c 1 -W 5 10.0.0.2\ntxbatch run --driver verbs:rxe0:1,qpn=" + qpn +
          ",qkey=" + kQkey + ",gid=::ffff:10.0.0.2 " + kRxeMtu + " " + kRocePaced +
          " --json /tmp/r.json\nresult run.json /tmp/r.json\n",
      "-netdev socket,id=n0,connect=" + cable +
          " -device e1000,netdev=n0,addr=04.0,mac=52:54:00:12:34:01");
  EXPECT_TRUE(sink.Tell("go")) << "the sink's guest is gone";
  const Boot b = sink.Wait();
  ASSERT_EQ(run.lab_status, 0) << run.Console();
  ASSERT_EQ(run.job_status, 0) << run.Console();
  ASSERT_EQ(b.lab_status, 0) << b.Console();
  ASSERT_EQ(b.job_status, 0) << b.Console();
  const json sender = json::parse(Slurp(run.out + "/run.json"));
  CheckRoceSender(sender);
  CheckSinkGotEverything(json::parse(Slurp(b.out + "/sink.json")), sender);
}

}  // namespace
}  // namespace txbatch::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new txbatch::test::LabImage);
  ::testing::UnitTest::GetInstance()->listeners().Append(
      new txbatch::test::RemoveFoldersOfPassedTests);
  return RUN_ALL_TESTS();
}
