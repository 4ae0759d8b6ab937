// net_pcap end to end: txbatch writes a capture through the ethdev driver; libpcap reads it
// back. Every frame is there, with its length and headers, and the tcp framing decodes as one
// stream per producer: txbatch sequence numbers contiguous from 0, TCP sequence numbers
// advancing by exactly each segment's payload (what tshark needs to follow the stream), and a
// valid TCP checksum (net_pcap has no checksum offload: txbatch writes the checksum before the
// burst, where a capture held the pseudo-header sum a NIC's offload starts from).
#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_tcp.h>

#include <filesystem>
#include <map>
#include <string>

#include "dataplane/frame.h"
#include "tests/e2e/run_helper.h"

namespace txbatch::test {
namespace {

struct FlowState {
  uint64_t next_seq = 0;
  uint32_t next_tcp_seq = 0;
  bool started = false;
};

TEST(Pcap, CaptureHoldsEveryFrameAndDecodesAsOneTcpStreamPerProducer) {
  const std::string cap = ::testing::TempDir() + "/txbatch_test.pcap";
  std::filesystem::remove(cap);
  // Paced, so the capture stays a few MB (net_pcap writes ~400 MB/s unpaced).
  const auto run = RunTxbatch("run --driver ethdev:net_pcap0,tx_pcap=" + cap +
                              " --proto tcp --size 4096 --procs 2 --batch 1,32 --rate 20kpps "
                              "--duration 0.2 --warmup 0.05");
  ASSERT_EQ(run.status, 0) << run.err;
  const std::vector<uint64_t> sent_per_cell = SentByDriverCountedRecords(run.doc);
  ASSERT_FALSE(sent_per_cell.empty());
  const uint64_t sent = sent_per_cell.back();  // each cell rewrites the capture: the last one's
  ASSERT_GT(sent, 0u);

  char err[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline(cap.c_str(), err);
  ASSERT_NE(p, nullptr) << err;
  EXPECT_EQ(pcap_datalink(p), DLT_EN10MB);
  std::map<uint16_t, FlowState> flows;
  uint64_t frames = 0;
  pcap_pkthdr* h;
  const u_char* data;
  while (pcap_next_ex(p, &h, &data) == 1) {
    ++frames;
    ASSERT_EQ(h->caplen, h->len);
    const ParsedFrame f = ParseFrame(data, h->caplen);
    ASSERT_EQ(f.status, ParseStatus::kOk) << "frame " << frames;
    ASSERT_EQ(f.proto, Proto::kTcp);
    EXPECT_EQ(h->len, FrameBytes(Proto::kTcp, f.payload));
    const auto* tcp =
        reinterpret_cast<const rte_tcp_hdr*>(data + kEthHeaderBytes + kIpv4HeaderBytes);
    const uint32_t tcp_seq = rte_be_to_cpu_32(tcp->sent_seq);
    const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(data + kEthHeaderBytes);
    uint32_t sum = rte_raw_cksum(tcp, rte_be_to_cpu_16(ip->total_length) - kIpv4HeaderBytes) +
                   rte_ipv4_phdr_cksum(ip, 0);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    EXPECT_EQ(sum, 0xffffu) << "frame " << frames << ": TCP checksum 0x" << std::hex
                            << rte_be_to_cpu_16(tcp->cksum);
    FlowState& s = flows[f.flow];
    // A flow's sequence goes on from the cells before (their frames used the numbers below);
    // within the capture it has no gap.
    if (s.started) {
      EXPECT_EQ(f.seq, s.next_seq) << "flow " << f.flow;
      EXPECT_EQ(tcp_seq, s.next_tcp_seq) << "flow " << f.flow;
    } else {
      EXPECT_GT(f.seq, 0u) << "flow " << f.flow << ": the first cell's frames came before";
    }
    s.started = true;
    s.next_seq = f.seq + 1;
    s.next_tcp_seq = tcp_seq + f.payload;
  }
  pcap_close(p);
  EXPECT_EQ(frames, sent);
  EXPECT_EQ(flows.size(), 2u);  // one stream per producer
  std::filesystem::remove(cap);
}

}  // namespace
}  // namespace txbatch::test
