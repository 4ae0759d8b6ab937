// The VM lab: txbatch on DPDK's real PMDs inside QEMU guests (scripts/vm-lab.sh), every frame
// that left the emulated NIC checked on the host. A software vdev never reads an mbuf's IOVA; a
// NIC DMAs from it, so only a device model that really does DMA — QEMU's e1000, e1000e and
// virtio-net — tests the path txbatch takes on real hardware.
//
// Each case boots one guest (two for the two-host cases) that runs one txbatch command; QEMU's
// filter-dump writes what the NIC put on the wire to a pcap, read back here with libpcap: every
// frame txbatch's, its headers as FrameBuilder wrote them (MACs, IPv4 checksum, the flow's
// ports), its length the one the run's size gives, its L4 checksum valid (UDP: 0 or valid; TCP:
// always), each flow's sequence from 0 without a gap or repeat, and the count equal to the
// records' `sent` and to the PMD's own opackets.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pcap/pcap.h>
#include <rte_ip.h>
#include <rte_tcp.h>
#include <rte_udp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dataplane/frame.h"
#include "tests/test_files.h"

namespace txbatch::test {
namespace {

using nlohmann::json;

// The image (kernel + initramfs with the built txbatch), built once for the suite.
std::string ImageDir() { return EnvOr("TXBATCH_VM_DIR"); }
std::string LabScript() { return EnvOr("TXBATCH_SOURCE_ROOT") + "/scripts/vm-lab.sh"; }

class LabImage : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string cmd = "TXBATCH_BIN=" + EnvOr("TXBATCH_BIN") + " bash " + LabScript() +
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

// What the frames of a run must look like on the wire.
struct WireExpect {
  Proto proto = Proto::kUdp;
  unsigned size = 0;  // --size: bytes per application write (one write size per run)
  // TCP: frames shorter than a full MSS the run may send. A stream producer cuts its writes into
  // full-MSS segments and sends what is left (a partial segment) once, when it stops
  // (Segmenter::Flush): one such frame per producer per cell at most.
  uint64_t short_frames_max = 0;
};

// What reading a capture counts, whatever its frames carry: the frames, each flow's txbatch
// sequence (0, 1, 2, ... with no gap or repeat), and the first problem found.
struct CaptureTally {
  uint64_t frames = 0;  // every frame captured
  uint64_t gaps = 0;    // a flow's txbatch sequence (RoceWire: or a QP's PSN) out of step
  std::map<uint16_t, uint64_t> next_seq;  // per flow
  std::string first_problem;
  void Problem(uint64_t& count, const std::string& what) {
    ++count;
    if (first_problem.empty()) first_problem = "frame " + std::to_string(frames) + ": " + what;
  }
  // A frame of `flow` with sequence `seq`: a gap where it is not the flow's next.
  void Sequence(uint16_t flow, uint64_t seq) {
    uint64_t& next = next_seq[flow];
    if (seq != next)
      Problem(gaps, "flow " + std::to_string(flow) + ": seq " + std::to_string(seq) + " where " +
                        std::to_string(next) + " was next");
    next = seq + 1;
  }
};

// The capture at `pcap_path` opened for reading, or nullptr with pcap's reason as the first
// problem.
pcap_t* OpenCapture(const std::string& pcap_path, CaptureTally& tally) {
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline(pcap_path.c_str(), err);
  if (p == nullptr) tally.first_problem = err;
  return p;
}

struct Wire : CaptureTally {
  uint64_t not_ok = 0;
  uint64_t bad_headers = 0;   // VerifyHeaders failed: a MAC, the IPv4 checksum or a port
  uint64_t bad_length = 0;    // not the length the run's size gives, or bytes past the IP packet
  uint64_t bad_l4 = 0;        // UDP length or checksum, TCP checksum
  uint64_t short_frames = 0;  // TCP frames below a full MSS (WireExpect::short_frames_max)
  std::map<ParseStatus, uint64_t> statuses;
};

// Whether the IPv4 UDP or TCP checksum of the L4 segment at `l4` (its header's checksum in place)
// is valid: the one's-complement sum over the pseudo-header and the segment is 0xffff.
bool L4ChecksumValid(const rte_ipv4_hdr* ip, const uint8_t* l4, unsigned l4_len) {
  uint32_t sum = rte_raw_cksum(l4, l4_len) + rte_ipv4_phdr_cksum(ip, 0);
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return sum == 0xffff;
}

// Every frame in the capture: txbatch's and intact — its headers as FrameBuilder wrote them
// (VerifyHeaders: MACs, IPv4 checksum, the flow's ports), its length (Ethernet + the IP packet,
// nothing after; the payload the run's --size gives), its L4 length and checksum (UDP 0 or valid,
// TCP valid) — and each flow's sequence 0, 1, 2, ... with no gap or repeat.
Wire ReadWire(const std::string& pcap_path, const WireExpect& want) {
  Wire w;
  pcap_t* p = OpenCapture(pcap_path, w);
  if (p == nullptr) return w;
  const unsigned mss = MaxPayload(Proto::kTcp, 1500);  // the runs' MTU (txbatch's default)
  pcap_pkthdr* h;
  const u_char* data;
  while (pcap_next_ex(p, &h, &data) == 1) {
    ++w.frames;
    const ParsedFrame f = ParseFrame(data, h->caplen);
    if (f.status != ParseStatus::kOk || f.proto != want.proto || h->caplen != h->len) {
      ++w.statuses[f.status];
      w.Problem(w.not_ok, std::string(ParseStatusName(f.status)) + ", " +
                              std::string(ProtoName(f.proto)) + ", " + std::to_string(h->len) +
                              " bytes");
      continue;
    }
    if (!VerifyHeaders(data, h->caplen, f.flow))
      w.Problem(w.bad_headers,
                "headers not txbatch's (a MAC, the IPv4 checksum or a port of flow " +
                    std::to_string(f.flow) + ")");
    // The frame is the IP packet after its Ethernet header and nothing more (each frame here is
    // longer than Ethernet's 60-byte minimum, so no NIC pads it), and carries the payload the run
    // gives: UDP --size (a datagram a write, all sizes here under MTU - 28), TCP a full MSS or,
    // at most once per producer and cell, the partial segment it flushes as it stops.
    const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(data + kEthHeaderBytes);
    const unsigned ip_len = rte_be_to_cpu_16(ip->total_length);
    const bool is_short = want.proto == Proto::kTcp && f.payload < mss;
    w.short_frames += is_short;
    const bool payload_ok =
        want.proto == Proto::kUdp ? f.payload == want.size : f.payload == mss || is_short;
    if (h->len != kEthHeaderBytes + ip_len || h->len != FrameBytes(want.proto, f.payload) ||
        !payload_ok)
      w.Problem(w.bad_length, std::to_string(h->len) + " bytes, IP " + std::to_string(ip_len) +
                                  ", payload " + std::to_string(f.payload) + " (size " +
                                  std::to_string(want.size) + ")");
    const uint8_t* l4 = data + kEthHeaderBytes + kIpv4HeaderBytes;
    const unsigned l4_len = ip_len - kIpv4HeaderBytes;
    if (want.proto == Proto::kUdp) {
      const auto* udp = reinterpret_cast<const rte_udp_hdr*>(l4);
      if (rte_be_to_cpu_16(udp->dgram_len) != l4_len ||
          (udp->dgram_cksum != 0 && !L4ChecksumValid(ip, l4, l4_len)))
        w.Problem(w.bad_l4, "UDP length " + std::to_string(rte_be_to_cpu_16(udp->dgram_len)) +
                                " of " + std::to_string(l4_len) + ", or its checksum");
    } else if (!L4ChecksumValid(ip, l4, l4_len)) {
      const auto* tcp = reinterpret_cast<const rte_tcp_hdr*>(l4);
      w.Problem(w.bad_l4, "TCP checksum 0x" + fmt::format("{:04x}", rte_be_to_cpu_16(tcp->cksum)) +
                              " is not valid (a pseudo-header sum is 0x" +
                              fmt::format("{:04x}", rte_be_to_cpu_16(rte_ipv4_phdr_cksum(ip, 0))) +
                              ")");
    }
    w.Sequence(f.flow, f.seq);
  }
  pcap_close(p);
  return w;
}

// A count in a record: there, and a whole number. A field that is missing throws (the test
// fails naming the key); one that is null or not a count fails the test and reads as
// UINT64_MAX. (Read as 0, a missing field let every `== 0` check pass.)
uint64_t Count(const json& obj, const std::string& key) {
  const json& v = obj.at(key);
  if (!v.is_number_unsigned()) {
    ADD_FAILURE() << key << " is not a count: " << v.dump() << " in " << obj.dump();
    return UINT64_MAX;
  }
  return v.get<uint64_t>();
}
// A number in a record (avg_batch, doorbells_per_pkt): there and a number, else NaN (every
// comparison with it fails) and a failure.
double Real(const json& obj, const std::string& key) {
  const json& v = obj.at(key);
  if (!v.is_number()) {
    ADD_FAILURE() << key << " is not a number: " << v.dump() << " in " << obj.dump();
    return std::nan("");
  }
  return v.get<double>();
}

// How a cell's frames went to the driver, against what its policy makes of them. Each bar says
// how it was derived; a cell no bar covers (one inline producer: the empty-qdisc bypass sends
// most frames alone, the rest in bulks as large as the ring's back-pressure makes them) is only
// printed.
void CheckBatching(const json& config, const json& r) {
  const std::string policy = config.at("policy").get<std::string>();
  const uint64_t procs = Count(config, "procs");
  const bool dedicated = config.at("runner") == "dedicated";
  const double avg = Real(r, "avg_batch");
  const json& hist = r.at("batch_hist");
  const std::string cell = config.dump();
  std::printf("vm cell: %s procs %llu runner %s: avg_batch %.2f, batch_hist %s, bypassed %.0f\n",
              policy.c_str(), static_cast<unsigned long long>(procs),
              config.at("runner").get<std::string>().c_str(), avg, hist.dump().c_str(),
              Real(r, "bypassed"));
  if (policy == "count:1") {
    // count:1 dequeues one frame a run step: every handover is one frame, exactly.
    EXPECT_EQ(avg, 1.0) << cell << hist;
  } else if (policy.starts_with("count:") && (procs >= 4 || dedicated)) {
    // A backlog to bulk from: four producers keep the qdisc full while the run's driver call (a
    // doorbell: an MMIO exit under TCG) takes far longer than building a frame; a dedicated
    // runner wakes (a futex wake and a vCPU switch) while its producer enqueues a 64 KiB write,
    // 45 frames. A dequeue then takes the policy's N; one takes fewer only where the run
    // emptied the qdisc. What counts is the share of the frames the qdisc held — those that
    // took the empty-qdisc bypass (`bypassed`) go alone by the kernel's rule, however many the
    // guest's regime makes them — that went in full bulks (batch_hist buckets sizes by powers of
    // two: N's holds N alone). Against all frames it measured 92.5 % to 100 % over three runs of
    // every case, then 78.9 % in one CI run (e1000_uio count:32: 17465 lone frames of 83361, the
    // producers keeping no backlog on a busy host). Against the frames the qdisc held: 99.5 % to
    // 100 % in nine cells run by hand (the uio cases three times), whose lone frames were their
    // bypassed ones to within 12 — 99.8 % for that CI run's, were they the same. The bar, 80 %,
    // leaves room for a busier host still; a path that stopped bulking would be near 0 %.
    const unsigned n = static_cast<unsigned>(std::stoul(policy.substr(6)));
    const double frames = avg * [&] {
      double handovers = 0;
      for (const auto& [bucket, count] : hist.items()) handovers += count.get<double>();
      return handovers;
    }();
    const double held = frames - Real(r, "bypassed");
    // And the qdisc held most of them: four producers flat out, or a dedicated runner (no
    // bypass), leave few frames an empty qdisc — at least 79 % held in that CI run (no more
    // bypassed than its lone frames), 97 % to 100 % by hand. A path that sent nearly every frame by the bypass would pass the bar below
    // on the few left; at most half is refused.
    EXPECT_GE(held, 0.5 * frames) << cell << " (" << held << " of " << frames
                                  << " frames held by the qdisc, the rest bypassed)";
    const std::string key = std::to_string(n);
    const double full = hist.contains(key) ? n * hist.at(key).get<double>() : 0;
    EXPECT_GE(full, 0.8 * held) << cell << hist << " (" << full << " of the " << held
                                << " frames the qdisc held, of " << frames
                                << ", in bulks of " << n << ")";
  } else if (policy == "buffer:32") {
    // buffer:32 without a timer (the producer's own batch, --qdisc none) lets a batch go only
    // full — or once, when generation stops (`end`), after the window: every handover in the
    // window holds 32 frames, and the cell's frames are 32 a full flush plus that last one's.
    EXPECT_EQ(avg, 32.0) << cell << hist;
    const json& t = r.at("flush_triggers");
    const uint64_t sent = Count(r.at("accounting"), "sent");
    EXPECT_EQ(Count(t, "full"), sent / 32) << cell << t;
    EXPECT_EQ(Count(t, "end"), sent % 32 != 0 ? 1u : 0u) << cell << t;
    EXPECT_EQ(Count(t, "timer"), 0u) << cell << t;
    EXPECT_EQ(Count(t, "write_done"), 0u) << cell << t;
  }
}

// The run's records (`cells` of them) against the wire: books closed, nothing dropped, batching
// as each policy makes it, and what each cell sent is what its PMD counted; all cells together
// are what the capture holds, to the frame, each frame as `want` says. On virtio the device
// transmits from its ring after the doorbell, on its own time (QEMU's virtio-net, from a bottom
// half that TCG's busy vCPUs can hold off for milliseconds); what the ring still held when a
// cell's port stopped and closed was dropped by the device's reset: the tail of any cell could
// be missing from the capture (CI on 8187288: 50 frames of cell 3 of 4; the last cell's tail was
// tolerated until then), until the port lingered for the backend before it stops
// (ethdev_port.cc, SendsOnItsOwnTime).
void CheckRunAgainstWire(const Boot& b, const WireExpect& want, size_t cells) {
  ASSERT_EQ(b.lab_status, 0) << b.Console();
  ASSERT_EQ(b.job_status, 0) << b.Console();
  const std::string doc_text = Slurp(b.out + "/run.json");
  ASSERT_FALSE(doc_text.empty()) << b.Console();
  const json doc = json::parse(doc_text);
  ASSERT_EQ(doc.at("records").size(), cells) << b.Console();
  uint64_t sent = 0;
  for (const json& rec : doc.at("records")) {
    const json& r = rec.at("results");
    const json& a = r.at("accounting");
    const std::string cell = rec.at("config").dump();
    EXPECT_TRUE(a.at("balanced").get<bool>()) << cell << a.dump();
    EXPECT_EQ(Count(a, "queued"), 0u) << cell;
    // Stream producers wait for room in a full qdisc (and under --qdisc none nothing here
    // refuses a batch: an emulated NIC takes the ring's frames at the doorbell): no cell drops.
    EXPECT_EQ(Count(a, "dropped"), 0u) << cell << a.dump();
    EXPECT_EQ(Count(r, "mbufs_in_use_at_exit"), 0u) << cell;
    EXPECT_GT(Count(a, "sent"), 0u) << cell;
    EXPECT_EQ(r.at("counted_at"), "driver") << cell;
    // The PMD's own count of what it put in the ring, per cell.
    const json& pmd = r.at("driver_counters");
    EXPECT_EQ(Count(pmd, "pmd_opackets"), Count(a, "sent")) << cell << pmd;
    EXPECT_EQ(Count(pmd, "pmd_oerrors"), 0u) << cell;
    CheckBatching(rec.at("config"), r);
    sent += Count(a, "sent");
  }
  const Wire w = ReadWire(b.out + "/wire.pcap", want);
  std::printf(
      "vm wire: %llu frames: %llu not txbatch's %s, %llu bad headers, %llu bad length, "
      "%llu bad L4, %llu short, %llu gaps\n",
      static_cast<unsigned long long>(w.frames), static_cast<unsigned long long>(w.not_ok),
      std::string(ProtoName(want.proto)).c_str(), static_cast<unsigned long long>(w.bad_headers),
      static_cast<unsigned long long>(w.bad_length), static_cast<unsigned long long>(w.bad_l4),
      static_cast<unsigned long long>(w.short_frames), static_cast<unsigned long long>(w.gaps));
  EXPECT_EQ(w.not_ok, 0u) << w.first_problem;
  EXPECT_EQ(w.bad_headers, 0u) << w.first_problem;
  EXPECT_EQ(w.bad_length, 0u) << w.first_problem;
  EXPECT_EQ(w.bad_l4, 0u) << w.first_problem;
  EXPECT_LE(w.short_frames, want.short_frames_max) << w.first_problem;
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
  WireExpect wire;
  size_t cells;
};

// e1000 (82540EM) and e1000e (82574L) on net_e1000_em, virtio-net on net_virtio, under
// uio_pci_generic + hugepages (IOVA as PA); the e1000 under vfio-pci with IOVA as VA and no
// hugepages, where the IOMMU faults any DMA from an address the pool's memory was not mapped at.
// (Not the e1000e there: QEMU 7.2's e1000e maps a TX buffer in one piece, which behind an IOMMU
// fails for data crossing a page into one not physically next to it, and drops the frame — 18
// of 60723 in a run, a fault of the model and not of the spread pool.)
// The tcp cases: 64 KiB writes, full-MSS frames and at most one short one per producer and cell;
// their frames ask for TCP checksum offload, which e1000's PMD has and virtio's has not here
// (QEMU's virtio-net offers no checksum offload over a user netdev): txbatch writes it there.
const PmdCase kPmdCases[] = {
    {"e1000_uio",
     "e1000",
     false,
     "--proto udp --size 64 --batch 1,32 --procs 1,4",
     {Proto::kUdp, 64},
     4},
    {"e1000_dedicated_tcp",
     "e1000",
     false,
     "--runner dedicated --proto tcp --size 65536 --batch 1,32 --procs 1",
     {Proto::kTcp, 65536, /*short_frames_max=*/2 * 1},
     2},
    {"e1000_noqueue_buffer",
     "e1000",
     false,
     "--qdisc none --policy buffer:32 --proto udp --size 64 --procs 1",
     {Proto::kUdp, 64},
     1},
    {"e1000e_uio",
     "e1000e",
     false,
     "--proto udp --size 1400 --batch 1,32 --procs 4",
     {Proto::kUdp, 1400},
     2},
    {"e1000_vfio_iommu",
     "e1000",
     true,
     "--proto udp --size 64 --batch 1,32 --procs 4",
     {Proto::kUdp, 64},
     2},
    // Eight cells: seven ends of a cell where the port stops with the ring perhaps not yet sent
    // (on the code before the linger, 2 of 3 runs of these eight cells lost frames, 3 of 5 of
    // six).
    {"virtio_uio",
     "virtio-net-pci,disable-modern=off",
     false,
     "--proto udp --size 64 --batch 1,4,8,32 --procs 1,4",
     {Proto::kUdp, 64},
     8},
    {"virtio_dedicated_tcp",
     "virtio-net-pci,disable-modern=off",
     false,
     "--runner dedicated --proto tcp --size 65536 --batch 1,32 --procs 1",
     {Proto::kTcp, 65536, /*short_frames_max=*/2 * 1},
     2},
};

// One DMA translation by the emulated IOMMU (QEMU's trace event vtd_dmar_translate: "dev
// 00:04.00 iova 0x... -> gpa 0x... mask 0xfff"), of the NIC's accesses, in order; a page each.
struct Translation {
  uint64_t iova = 0, gpa = 0;
};
std::vector<Translation> NicTranslations(const std::string& trace) {
  std::vector<Translation> out;
  std::istringstream lines(trace);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string event, dev, bdf, iova_word, iova, arrow, gpa_word, gpa;
    if (!(f >> event >> dev >> bdf >> iova_word >> iova >> arrow >> gpa_word >> gpa) ||
        event != "vtd_dmar_translate" || bdf != "00:04.00")
      continue;
    out.push_back(
        {std::strtoull(iova.c_str(), nullptr, 16), std::strtoull(gpa.c_str(), nullptr, 16)});
  }
  return out;
}

// Under vfio: EAL chose IOVA as VA, the NIC addressed the pool by the process's virtual
// addresses (translated by the IOMMU), and the pool has the spread layout (dataplane/mempool.h)
// that IOVA as VA allows without hugepages.
void CheckIovaAsVaAndSpreadPool(const Boot& b) {
  // EAL's own word (its log at info level, asked for on this run's EAL line).
  EXPECT_NE(b.console.find("Selected IOVA mode 'VA'"), std::string::npos) << b.Console();
  const std::vector<Translation> t = NicTranslations(Slurp(b.out + "/iommu.log"));
  ASSERT_FALSE(t.empty()) << "QEMU traced no DMA translation of the NIC's";
  // IOVA as VA: the guest has 1 GiB of RAM (vm-lab.sh's -m default; all of it below 4 GiB on
  // q35), so a guest-physical address is under 1 GiB; the NIC was given addresses above that
  // (EAL maps its memory from 4 GiB up), which the IOMMU translated to guest-physical ones.
  constexpr uint64_t kGuestRam = uint64_t{1} << 30;
  uint64_t below = 0, untranslated = 0;
  for (const Translation& x : t) {
    below += x.iova < kGuestRam;
    untranslated += x.gpa >= kGuestRam;
  }
  EXPECT_EQ(below, 0u) << "DMA at guest-physical addresses: IOVA is not VA";
  EXPECT_EQ(untranslated, 0u) << "a translation outside the guest's RAM";
  // The spread layout lets mbufs cross 4 KB pages; DPDK's default layout under --no-huge puts
  // each ~2.3 KB mbuf alone in its page (ENV-NOTES), where no frame's data crosses one. The e1000
  // reads a frame's descriptor, then its data (the ring's pages in between every two frames), so
  // a frame whose data crosses a page is two translations in a row, of a page and the next, and
  // neither a ring page: those are read for every frame (each > 1 % of all translations; a data
  // page holds a few of the pool's thousands of mbufs). In the spread layout objects follow each
  // other every 37 cache lines, their data starting at all 64 cache-line offsets in a page: of
  // 106-byte frames, those at the last offset cross (1/64; measured 588 of 31540 frames). The
  // default layout has none: one is the proof.
  std::map<uint64_t, uint64_t> per_page;
  for (const Translation& x : t) ++per_page[x.iova];
  const auto ring = [&](uint64_t page) { return per_page[page] * 100 > t.size(); };
  uint64_t crossing = 0;
  for (size_t i = 1; i < t.size(); ++i)
    crossing += t[i].iova == t[i - 1].iova + 4096 && !ring(t[i].iova) && !ring(t[i - 1].iova);
  std::printf(
      "vm iommu: %zu translations of %zu pages, lowest IOVA 0x%llx, %llu frames' data "
      "across a page\n",
      t.size(), per_page.size(),
      static_cast<unsigned long long>(
          std::min_element(t.begin(), t.end(), [](auto& x, auto& y) { return x.iova < y.iova; })
              ->iova),
      static_cast<unsigned long long>(crossing));
  EXPECT_GT(crossing, 0u) << "no frame's data crosses a page: the pool is not spread";
}

class VmPmd : public ::testing::TestWithParam<PmdCase> {};

TEST_P(VmPmd, EveryFrameOnTheWireIsTxbatchsAndCounted) {
  const PmdCase& c = GetParam();
  const std::string out = ::testing::TempDir() + "/vm_" + c.name;
  // vfio: q35 with an IOMMU whose DMA translations are traced (QEMU's log backend writes its
  // events to -D).
  const std::string machine =
      c.vfio ? "-machine q35,kernel-irqchip=split -device intel-iommu,intremap=on,caching-mode=on "
               "-trace enable=vtd_dmar_translate -D " +
                   out + "/iommu.log "
             : "";
  if (c.vfio) setenv("TXBATCH_VM_CMDLINE", "intel_iommu=on", 1);
  const Boot b =
      BootGuest(c.name,
                RunJob(c.vfio ? kVfio : kUio,
                       "run --driver ethdev:port=0 " + std::string(c.args) + " " + kCells,
                       c.vfio ? "--no-huge -m 256 --log-level=lib.eal:info" : "--in-memory"),
                machine + Nic(c.nic, c.name, "user,id=n0,restrict=on"));
  unsetenv("TXBATCH_VM_CMDLINE");
  CheckRunAgainstWire(b, c.wire, c.cells);
  if (c.vfio) {
    // The IOMMU was on, and faulted no DMA (its faults are error lines: in the kernel's log,
    // which the guest sends, not on its quiet console).
    const std::string dmesg = Slurp(b.out + "/dmesg.txt");
    EXPECT_NE(dmesg.find("DMAR: IOMMU enabled"), std::string::npos) << dmesg;
    EXPECT_EQ(dmesg.find("DMAR: DRHD: handling fault"), std::string::npos) << dmesg;
    CheckIovaAsVaAndSpreadPool(b);
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

// The sink's record against the sender's: every frame sent arrived, none lost, repeated,
// reordered or foreign.
void CheckSinkGotEverything(const json& sink, const json& sender) {
  uint64_t sent = 0;
  for (const json& rec : sender.at("records"))
    sent += Count(rec.at("results").at("accounting"), "sent");
  const json& r = sink.at("results");
  EXPECT_GT(sent, 0u);
  EXPECT_EQ(Count(r, "received"), sent) << r;
  EXPECT_EQ(Count(r, "lost"), 0u) << r;
  EXPECT_EQ(Count(r, "duplicated"), 0u) << r;
  EXPECT_EQ(Count(r, "reordered"), 0u) << r;
  EXPECT_EQ(Count(r, "foreign"), 0u) << r;
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
  CheckRunAgainstWire(run, {Proto::kUdp, 256}, 2);
  ASSERT_EQ(b.lab_status, 0) << b.Console();
  ASSERT_EQ(b.job_status, 0) << b.Console();
  const std::string text = Slurp(b.out + "/sink.json");
  ASSERT_FALSE(text.empty()) << b.Console();
  CheckSinkGotEverything(json::parse(text), json::parse(Slurp(run.out + "/run.json")));
  EXPECT_NE(b.console.find("mbufs in use at exit: 0"), std::string::npos) << b.Console();
}

// Soft RoCE (rdma_rxe, a real libibverbs provider) on the guest's e1000, bound to the kernel's
// driver: the hardware suite, a run to a sink on the same port, and two guests.
// The guest's root qdisc is pfifo_fast, not Debian's default fq_codel: CoDel drops at dequeue,
// after ip_local_out told rxe the packet was sent, so a TCG guest that stalls its TX for more
// than CoDel's 100 ms interval loses a frame rxe completed and the books counted sent (once in
// five runs, 2026-12-06: PSN 75 of a UD QP missing from the cable after a 485 ms stall; a later
// run's fq_codel showed "dropped 1"). pfifo_fast drops only at enqueue, which rxe sees and retries.
const char kRxe[] =
    "modprobe e1000\nrxe_up eth0\n/usr/sbin/tc qdisc replace dev eth0 root pfifo_fast\n"
    "ip addr add 10.0.0.1/24 dev eth0\n";
// Where a guest's kernel may drop what rxe handed it, printed on its console after the run: the
// netdev's tx_dropped, the qdisc's drops and requeues, rxe's own counters (send_err among them).
const char kGuestTxDrops[] =
    "echo guest-tx-dropped $(cat /sys/class/net/eth0/statistics/tx_dropped)\n"
    "/usr/sbin/tc -s qdisc show dev eth0 | tr '\\n' ' ' | sed 's/^/guest-qdisc /'; echo\n"
    "for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do "
    "echo guest-rxe ${f##*/} $(cat $f); done\ntrue\n";
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
// the claim. Two producers, a dedicated runner, count:1 then buffer:32, datagrams of kRoceSize.
constexpr unsigned kRoceSize = 256;
const std::string kRocePaced = "--proto udp --size " + std::to_string(kRoceSize) +
                               " --runner dedicated --policy count:1,buffer:32 --procs 2 " +
                               "--rate 4kpps --rounds 1 " + kCells;
// rxe's active MTU on a 1500-byte netdev is 1024: 1020 bytes of IP (doc/drivers/verbs.md).
constexpr char kRxeMtu[] = "--mtu 1020";

TEST(VmRxe, TheHardwareSuitePassesOnSoftRoce) {
  if (EnvOr("TXBATCH_VM_BINS").find("hw_tests") == std::string::npos)
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

// The sender's records on RoCE: books closed, the mode named, and batching visible in the posts:
// count:1 is one ibv_post_send a frame; buffer:32 (a dedicated runner gathering 32 frames, which
// at a paced rate the qdisc alone would not hold) one a 32. Its runner takes a bulk only when 32
// are queued — or at the drain, after the window — so every bulk in the window holds 32: 32.00
// in every run measured (19 to 37 bulks a window). The bar, 30, passes one bulk short of 32
// among the fewest measured (18 x 32 + 1 over 19 is 30.4) and fails at two. (Before the
// runner's fix a run went on to what producers had queued during its post: 16.4 with the sink
// on the same 2 vCPUs, 29.3 between two guests, posts of 1..16 in the histogram.) Posts a frame,
// 1/32.0 measured, get the same bar: 1/30 (a post the send queue takes only in part is two).
// The same under fq_codel (the same-port run's qdisc): 32.00 in the three runs of 2026-12-07.
void CheckRoceSender(const json& doc) {
  ASSERT_EQ(doc.at("records").size(), 2u);
  for (const json& rec : doc.at("records")) {
    const json& r = rec.at("results");
    const std::string cell = rec.at("config").dump();
    EXPECT_TRUE(r.at("accounting").at("balanced").get<bool>()) << cell;
    EXPECT_EQ(Count(r, "mbufs_in_use_at_exit"), 0u) << cell;
    EXPECT_EQ(r.at("link_layer"), "roce_v2") << cell;
  }
  const json& off = doc["records"][0]["results"];
  const json& on = doc["records"][1]["results"];
  EXPECT_EQ(doc["records"][0]["config"].at("policy"), "count:1");
  EXPECT_EQ(doc["records"][1]["config"].at("policy"), "buffer:32");
  std::printf(
      "vm rxe: count:1 avg_batch %.2f doorbells_per_pkt %.4f; buffer:32 avg_batch %.2f "
      "doorbells_per_pkt %.4f batch_hist %s\n",
      Real(off, "avg_batch"), Real(off, "doorbells_per_pkt"), Real(on, "avg_batch"),
      Real(on, "doorbells_per_pkt"), on.at("batch_hist").dump().c_str());
  // count:1: a post a frame, exactly.
  EXPECT_EQ(Real(off, "avg_batch"), 1.0) << off.at("batch_hist");
  EXPECT_EQ(Real(off, "doorbells_per_pkt"), 1.0);
  EXPECT_GE(Real(on, "avg_batch"), 30.0) << on.at("batch_hist");
  EXPECT_LE(Real(on, "doorbells_per_pkt"), 1.0 / 30) << on.at("batch_hist");
}

// The run sends --flows 3 a producer through fq_codel (issue 46): the sink counts six flows, each
// a sequence of its own whose only gaps are what fq_codel dropped.
TEST(VmRxe, RunToASinkOnTheSamePortEveryFrameArrivesAndBatchingShowsInThePosts) {
  constexpr unsigned kFlowsEach = 3, kProcs = 2;  // kRocePaced's --procs
  // The sink prints its QP before "receiving"; the job waits for that line (up to 30 s).
  const std::string job =
      std::string(kRxe) + "txbatch sink --port verbs:rxe0:1,qkey=" + kQkey + " " + kRxeMtu +
      " --stats 0 --json /tmp/s.json > /tmp/sink.out 2>&1 &\npid=$!\n"
      "i=0; until grep -q receiving /tmp/sink.out; do i=$((i+1)); [ $i -lt 300 ]; sleep 0.1; done\n"
      "qpn=$(sed -n 's/.*senders give qpn=\\(0x[0-9a-f]*\\),.*/\\1/p' /tmp/sink.out)\n"
      "txbatch run --driver verbs:rxe0:1,qpn=$qpn,qkey=" +
      kQkey + ",gid=::ffff:10.0.0.1 " + kRxeMtu + " " + kRocePaced + " --qdisc fq_codel --flows " +
      std::to_string(kFlowsEach) +
      " --json /tmp/r.json\nkill -INT $pid\nwait $pid || st=$?\ncat /tmp/sink.out\n"
      "result run.json /tmp/r.json\nresult sink.json /tmp/s.json\nexit ${st:-0}\n";
  const Boot b = BootGuest("rxe_self", job,
                           "-netdev user,id=n0,restrict=on -device e1000,netdev=n0,addr=04.0");
  ASSERT_EQ(b.lab_status, 0) << b.Console();
  ASSERT_EQ(b.job_status, 0) << b.Console();
  const json sender = json::parse(Slurp(b.out + "/run.json"));
  CheckRoceSender(sender);
  const json sink = json::parse(Slurp(b.out + "/sink.json"));
  // Every frame the driver posted arrived; the sink's gaps are frames fq_codel dropped after
  // queueing them (CoDel's drops: a TCG guest that stalls its runner for more than 5 ms for
  // 100 ms sees them; none where it did not) — all of them but those at a flow's very end, which
  // no later frame reveals to a sink that is not told where the flows ended (RxSink::CloseFlows).
  uint64_t sent = 0, dropped_queued = 0, refused = 0;
  for (const json& rec : sender.at("records")) {
    const json& a = rec.at("results").at("accounting");
    sent += Count(a, "sent");
    dropped_queued += Count(a, "dropped_queued");
    // What left a flow short of its turns: the qdisc's drops, and a frame a producer could not
    // get an mbuf for (its turn passes on without it).
    refused += Count(rec.at("results"), "drops_total") + Count(rec.at("results"), "alloc_failures");
  }
  const json& r = sink.at("results");
  EXPECT_GT(sent, 0u);
  EXPECT_EQ(Count(r, "received"), sent) << r;
  EXPECT_LE(Count(r, "lost"), dropped_queued) << r;
  for (const char* k : {"duplicated", "reordered", "foreign"}) EXPECT_EQ(Count(r, k), 0u) << r;
  // Each producer writes a datagram to each of its flows in turn: in each of the two cells a
  // flow gets every third of its producer's frames, one more at most where the cell ended
  // mid-turn, so a producer's flows are within one frame a cell of each other — and of what the
  // qdisc dropped (drops_total: a datagram it refused or dropped is its flow's, built, never
  // received) and what never was built (alloc_failures).
  const json& flows = sink.at("results").at("per_flow");
  ASSERT_EQ(flows.size(), kProcs * kFlowsEach) << flows;
  for (unsigned p = 0; p < kProcs; ++p) {
    uint64_t lo = UINT64_MAX, hi = 0;
    for (unsigned k = 0; k < kFlowsEach; ++k) {
      const json& f = flows[p * kFlowsEach + k];
      EXPECT_EQ(f.at("flow"), p * kFlowsEach + k) << flows;
      lo = std::min(lo, Count(f, "received"));
      hi = std::max(hi, Count(f, "received"));
    }
    EXPECT_GT(lo, 0u) << flows;
    EXPECT_LE(hi - lo, sender.at("records").size() + refused) << "producer " << p << ": " << flows;
  }
}

// What a soft-RoCE sender put on its e1000's wire, read from QEMU's filter-dump: RoCE v2 is UDP
// to port 4791 carrying the InfiniBand transport headers, then the payload and a 4-byte ICRC. A
// UD SEND_ONLY (BTH opcode 0x64) to the sink's QP with a DETH holding the Q_Key, and as payload
// what the verbs driver posts: a 4-byte IPoIB header (the EtherType, 2 bytes reserved) and the
// frame's IP packet.
constexpr uint16_t kRoceV2Port = 4791;
constexpr unsigned kBthBytes = 12, kDethBytes = 8, kIcrcBytes = 4, kIpoibBytes = 4;
constexpr uint8_t kUdSendOnly = 0x64;

// frames: every frame captured (ARP, IPv6 and the ping's too).
struct RoceWire : CaptureTally {
  uint64_t roce = 0;                      // RoCE v2 frames
  uint64_t bad = 0;                       // RoCE v2 frames not as the run sends them
  std::map<uint32_t, uint32_t> next_psn;  // per source QP (a cell's)
};

uint32_t Be24(const uint8_t* p) { return uint32_t{p[0]} << 16 | uint32_t{p[1]} << 8 | p[2]; }
uint32_t Be32(const uint8_t* p) { return uint32_t{p[0]} << 24 | Be24(p + 1); }

// Every RoCE v2 frame: a UD SEND_ONLY to `dest_qpn` with `qkey`, its PSNs consecutive per source
// QP, its payload a txbatch UDP frame of `size` bytes of payload with its IP header intact, each
// flow's sequence 0, 1, 2, ... without a gap or repeat.
RoceWire ReadRoceWire(const std::string& pcap_path, uint32_t dest_qpn, uint32_t qkey,
                      unsigned size) {
  RoceWire w;
  pcap_t* p = OpenCapture(pcap_path, w);
  if (p == nullptr) return w;
  pcap_pkthdr* h;
  const u_char* data;
  std::vector<uint8_t> inner;
  while (pcap_next_ex(p, &h, &data) == 1) {
    ++w.frames;
    constexpr unsigned kOuter = kEthHeaderBytes + kIpv4HeaderBytes + kUdpHeaderBytes;
    if (h->caplen < kOuter || data[12] != 0x08 || data[13] != 0x00) continue;
    const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(data + kEthHeaderBytes);
    const auto* udp =
        reinterpret_cast<const rte_udp_hdr*>(data + kEthHeaderBytes + kIpv4HeaderBytes);
    if (ip->next_proto_id != IPPROTO_UDP || rte_be_to_cpu_16(udp->dst_port) != kRoceV2Port)
      continue;
    ++w.roce;
    const uint8_t* bth = data + kOuter;
    const unsigned udp_len = rte_be_to_cpu_16(udp->dgram_len);
    if (h->caplen != h->len || kEthHeaderBytes + rte_be_to_cpu_16(ip->total_length) != h->len ||
        udp_len != h->len - kEthHeaderBytes - kIpv4HeaderBytes ||
        udp_len < kUdpHeaderBytes + kBthBytes + kDethBytes + kIpoibBytes + kIcrcBytes) {
      w.Problem(w.bad, std::to_string(h->len) + " bytes: lengths do not add up");
      continue;
    }
    const uint8_t* deth = bth + kBthBytes;
    if (bth[0] != kUdSendOnly || Be24(bth + 5) != dest_qpn || Be32(deth) != qkey) {
      w.Problem(w.bad, fmt::format("opcode 0x{:02x}, QP 0x{:x}, Q_Key 0x{:x}", bth[0],
                                   Be24(bth + 5), Be32(deth)));
      continue;
    }
    const uint32_t src_qp = Be24(deth + 5), psn = Be24(bth + 9);
    if (auto it = w.next_psn.find(src_qp); it != w.next_psn.end() && it->second != psn)
      w.Problem(w.gaps,
                fmt::format("QP 0x{:x}: PSN {} where {} was next", src_qp, psn, it->second));
    w.next_psn[src_qp] = (psn + 1) & 0xffffff;
    // The payload: IPoIB's header, the IP packet; given back its Ethernet header (the one the
    // txbatch frame had: kTxbatch*Mac, what a receiver of a link without MACs gives it) to read.
    const uint8_t* ipoib = deth + kDethBytes;
    const unsigned packet =
        udp_len - kUdpHeaderBytes - kBthBytes - kDethBytes - kIpoibBytes - kIcrcBytes;
    inner.assign(kEthHeaderBytes, 0);
    std::memcpy(inner.data(), kTxbatchDstMac.addr_bytes, 6);
    std::memcpy(inner.data() + 6, kTxbatchSrcMac.addr_bytes, 6);
    inner[12] = ipoib[0];
    inner[13] = ipoib[1];
    inner.insert(inner.end(), ipoib + kIpoibBytes, ipoib + kIpoibBytes + packet);
    const ParsedFrame f = ParseFrame(inner.data(), inner.size());
    if (f.status != ParseStatus::kOk || f.proto != Proto::kUdp) {
      w.Problem(w.bad, std::string("its payload: ") + std::string(ParseStatusName(f.status)) +
                           ", " + std::to_string(packet) + " bytes of IP packet");
      continue;
    }
    if (f.payload != size || inner.size() != FrameBytes(Proto::kUdp, size) ||
        !VerifyHeaders(inner.data(), inner.size(), f.flow))
      w.Problem(w.bad, "its payload, a frame of flow " + std::to_string(f.flow) + " seq " +
                           std::to_string(f.seq) + ": IP header or length not as sent (" +
                           std::to_string(packet) + " bytes of IP packet)");
    w.Sequence(f.flow, f.seq);
  }
  pcap_close(p);
  return w;
}

// Two guests, each rxe0 on its own e1000, the NICs joined by a socket cable; A sends to B's QP by
// B's IPv4 RoCE v2 GID, paced at what a TCG guest receives (a UD datagram finding no posted
// receive is dropped: 0 lost is the claim at this rate). What A's NIC put on the cable is
// captured too (filter-dump) and read as RoCE v2 (ReadRoceWire). (The run to a sink on the same
// port has no such capture: rxe sends a datagram for its own GID back inside the kernel, never
// through the NIC.)
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
          " --json /tmp/r.json\nresult run.json /tmp/r.json\n" + kGuestTxDrops,
      "-netdev socket,id=n0,connect=" + cable +
          " -device e1000,netdev=n0,addr=04.0,mac=52:54:00:12:34:01"
          " -object filter-dump,id=f0,netdev=n0,queue=rx,file=" +
          ::testing::TempDir() + "/vm_rxe_two_run/wire.pcap");
  EXPECT_TRUE(sink.Tell("go")) << "the sink's guest is gone";
  const Boot b = sink.Wait();
  ASSERT_EQ(run.lab_status, 0) << run.Console();
  ASSERT_EQ(run.job_status, 0) << run.Console();
  ASSERT_EQ(b.lab_status, 0) << b.Console();
  ASSERT_EQ(b.job_status, 0) << b.Console();
  const json sender = json::parse(Slurp(run.out + "/run.json"));
  CheckRoceSender(sender);
  CheckSinkGotEverything(json::parse(Slurp(b.out + "/sink.json")), sender);
  // What A's NIC put on the cable: every RoCE v2 frame as the run sends it, as many as it sent.
  uint64_t sent = 0;
  for (const json& rec : sender.at("records"))
    sent += Count(rec.at("results").at("accounting"), "sent");
  const RoceWire w =
      ReadRoceWire(run.out + "/wire.pcap", static_cast<uint32_t>(std::stoul(qpn, nullptr, 16)),
                   static_cast<uint32_t>(std::stoul(kQkey, nullptr, 16)), kRoceSize);
  std::printf("vm rxe wire: %llu frames, %llu RoCE v2: %llu not as sent, %llu out of step\n",
              static_cast<unsigned long long>(w.frames), static_cast<unsigned long long>(w.roce),
              static_cast<unsigned long long>(w.bad), static_cast<unsigned long long>(w.gaps));
  EXPECT_EQ(w.bad, 0u) << w.first_problem;
  // On a gap, the guest's own drop counters (kGuestTxDrops) first: CI shows five lines.
  std::string drops;
  std::istringstream console(run.Console());
  for (std::string line; std::getline(console, line);) {
    line.erase(line.find_last_not_of("\r ") + 1);  // the serial console's CR
    if (line.starts_with("guest-tx-dropped") || line.starts_with("guest-qdisc") ||
        (line.starts_with("guest-rxe") && !line.ends_with(" 0")))
      drops += line + "; ";
  }
  std::printf("vm rxe guest A's drop counters (rxe's non-zero ones): %s\n", drops.c_str());
  EXPECT_EQ(w.gaps, 0u) << drops << w.first_problem;
  EXPECT_EQ(w.roce, sent) << drops << w.first_problem;
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
