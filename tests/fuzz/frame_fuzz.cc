// Frames from the wire: the sink's and the bridge's parse/validate (ParseFrame, the header
// check) and the responder's ARP/ICMP/UDP answers, on any bytes. A frame is received into an
// mbuf; here a bare one is laid over a copy of the input (no pool, no EAL).
#include <rte_mbuf.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "dataplane/frame.h"
#include "dataplane/responder.h"

namespace {

// Headroom ahead of the frame, as a pool's mbuf has.
constexpr size_t kHeadroom = RTE_PKTMBUF_HEADROOM;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace txbatch;
  if (size > 9018) return 0;  // no frame is longer than a jumbo MTU's
  const ParsedFrame f = ParseFrame(data, size);
  if (f.status == ParseStatus::kOk) (void)VerifyHeaders(data, size, f.flow);

  std::vector<uint8_t> buf(kHeadroom + size + 64);
  std::memcpy(buf.data() + kHeadroom, data, size);
  rte_mbuf m{};
  m.buf_addr = buf.data();
  m.buf_len = static_cast<uint16_t>(buf.size());
  m.data_off = kHeadroom;
  m.data_len = static_cast<uint16_t>(size);
  m.pkt_len = static_cast<uint32_t>(size);
  m.nb_segs = 1;
  const rte_ether_addr mac = {{0x02, 0, 0, 0, 0, 1}};
  Responder responder(mac, /*ip=*/rte_cpu_to_be_32(0x0a4d0002), /*udp_echo_port=*/7);
  Ignored why;
  (void)responder.Answer(&m, &why);
  return 0;
}
