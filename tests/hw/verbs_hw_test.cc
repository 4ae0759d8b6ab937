// The verbs driver on a real HCA: two UD queue pairs on the first active port — InfiniBand, or
// RoCE with a RoCE v2 GID (a ConnectX in Ethernet mode, soft RoCE `rxe`) — one sending to the
// other (the HCA loops datagrams to its own LID, or to its own GID), with the real libibverbs
// calls behind the seam. Skipped, with the reason, where there is no RDMA device (here: the
// kernel has no RDMA support and ibv_get_device_list fails with ENOSYS) or no active port.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "dataplane/frame.h"
#include "dataplane/rx_sink.h"
#include "drivers/verbs/ud_qp.h"
#include "drivers/verbs/verbs_tx.h"
#include "tests/unit/test_eal.h"

namespace txbatch::verbs {
namespace {

using txbatch::test::Pool;
using txbatch::test::TscHz;

struct Port {
  std::string device;
  unsigned port = 0;
  uint16_t lid = 0;
  std::optional<std::array<uint8_t, 16>> roce_gid;  // RoCE: the port's first RoCE v2 GID
  unsigned active_mtu = 0;
};

// The first RoCE v2 GID of `port`, if any.
std::optional<std::array<uint8_t, 16>> RoceV2Gid(ibv_context* ctx, unsigned port, int table) {
  for (int i = 0; i < table; ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx, port, static_cast<uint32_t>(i), &e, 0) == 0 &&
        e.gid_type == IBV_GID_TYPE_ROCE_V2) {
      std::array<uint8_t, 16> g;
      std::memcpy(g.data(), e.gid.raw, 16);
      return g;
    }
  }
  return std::nullopt;
}

// The first active InfiniBand port or RoCE port with a RoCE v2 GID, or why there is none.
std::optional<Port> FindPort(std::string* why) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    *why = list == nullptr ? std::string("ibv_get_device_list failed: ") + std::strerror(errno)
                           : "ibv_get_device_list found no device";
    if (list) ibv_free_device_list(list);
    return std::nullopt;
  }
  std::optional<Port> found;
  for (int i = 0; i < n && !found; ++i) {
    ibv_context* ctx = ibv_open_device(list[i]);
    if (ctx == nullptr) continue;
    ibv_device_attr da{};
    if (ibv_query_device(ctx, &da) == 0)
      for (unsigned p = 1; p <= da.phys_port_cnt && !found; ++p) {
        ibv_port_attr pa{};
        if (ibv_query_port(ctx, static_cast<uint8_t>(p), &pa) != 0 || pa.state != IBV_PORT_ACTIVE)
          continue;
        const unsigned mtu = 128u << pa.active_mtu;  // IBV_MTU_256 = 1
        if (pa.link_layer != IBV_LINK_LAYER_ETHERNET) {
          found = Port{ibv_get_device_name(list[i]), p, pa.lid, std::nullopt, mtu};
        } else if (auto gid = RoceV2Gid(ctx, p, pa.gid_tbl_len)) {
          found = Port{ibv_get_device_name(list[i]), p, 0, gid, mtu};
        }
      }
    ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  if (!found)
    *why =
        "no active port (InfiniBand, or RoCE with a RoCE v2 GID: `rdma link` shows the ports, "
        "`ibv_devinfo -v` their GIDs)";
  return found;
}

TEST(HardwareVerbs, AQueuePairSendsToAnotherThroughTheHca) {
  std::string why;
  const auto port = FindPort(&why);
  if (!port)
    GTEST_SKIP() << "no RDMA hardware: " << why
                 << "; this suite needs an InfiniBand HCA or a RoCE device (rxe will do)";
  // The IP MTU that fits the port (1020 on rxe over a 1500-byte netdev).
  const unsigned mtu = std::min(1500u, port->active_mtu - kIpoibHeaderBytes);

  VerbsOptions o;
  o.device = port->device;
  o.port = port->port;
  o.qkey = 0x11111111;
  auto rx_qp = OpenUdQueuePair(o);  // a receiver: qpn 0, no peer, no address handle
  ASSERT_TRUE(rx_qp) << rx_qp.error().message;
  const uint32_t rx_qpn = (*rx_qp)->info().qpn;
  const std::string rx_describe = (*rx_qp)->info().describe;
  RunWindow window;
  RxSink rx_sink(window, TscHz(), 1), tx_sink(window, TscHz(), 1);
  auto rx = CreateVerbsTx(o, std::move(*rx_qp), Pool(), mtu, rx_sink, window, TscHz());
  ASSERT_TRUE(rx) << rx.error().message;

  o.qpn = rx_qpn;
  if (port->roce_gid) {
    o.gid = port->roce_gid;  // to itself, by its own RoCE v2 GID
  } else {
    o.lid = port->lid;
  }
  auto tx_qp = OpenUdQueuePair(o);
  ASSERT_TRUE(tx_qp) << tx_qp.error().message;
  EXPECT_EQ((*tx_qp)->info().link_layer,
            port->roce_gid ? LinkLayer::kRoceV2 : LinkLayer::kInfiniband);
  EXPECT_NE(rx_describe.find(fmt::format("QP {:#x}; senders give qpn={:#x}", rx_qpn, rx_qpn)),
            std::string::npos)
      << rx_describe;
  auto tx = CreateVerbsTx(o, std::move(*tx_qp), Pool(), mtu, tx_sink, window, TscHz());
  ASSERT_TRUE(tx) << tx.error().message;
  EXPECT_EQ((*tx)->link_layer(), port->roce_gid ? "roce_v2" : "ib");

  constexpr unsigned kFrames = 3200, kBatch = 32;
  FrameBuilder b(Proto::kUdp, 0, false);
  unsigned sent = 0;
  // Xmit calls that took frames, and batches the send queue took in more than one.
  unsigned taking_calls = 0, split_batches = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (sent < kFrames && std::chrono::steady_clock::now() < deadline) {
    std::array<rte_mbuf*, kBatch> batch;
    for (auto& m : batch) {
      m = rte_pktmbuf_alloc(Pool());
      ASSERT_NE(m, nullptr);
      b.Build(m, 100, Now());
    }
    unsigned off = 0, calls = 0;
    while (off < kBatch && std::chrono::steady_clock::now() < deadline) {
      const uint16_t took = (*tx)->Xmit(std::span(batch).subspan(off));
      calls += took > 0;
      off += took;
      (void)(*tx)->Complete(Now());
      (void)(*rx)->Complete(Now());
    }
    taking_calls += calls;
    split_batches += calls > 1;
    for (unsigned i = off; i < kBatch; ++i) rte_pktmbuf_free(batch[i]);
    sent += off;
  }
  while (rx_sink.counts().received < sent && std::chrono::steady_clock::now() < deadline) {
    (void)(*tx)->Complete(Now());
    (void)(*rx)->Complete(Now());
  }
  EXPECT_EQ(sent, kFrames);
  EXPECT_EQ(rx_sink.counts().received, sent);
  EXPECT_EQ(rx_sink.counts().lost, 0u);
  const auto& c = static_cast<VerbsTx&>(**tx).verbs_counters();
  EXPECT_EQ(c.work_requests.Get(), sent);
  // VerbsTx chains a call's work requests into one ibv_post_send: one post (and one doorbell)
  // for each Xmit call that took frames. 100 batches of 32: 100 posts where the send queue had
  // room for each whole batch, and one more for each further part of a batch it took in parts.
  EXPECT_EQ(c.posts.Get(), taking_calls)
      << split_batches << " of " << kFrames / kBatch << " batches were taken in parts";
  EXPECT_EQ(static_cast<VerbsTx&>(**tx).counters().doorbells.Get(), c.posts.Get());
  EXPECT_GE(c.posts.Get(), kFrames / kBatch);
  if (split_batches == 0) {
    EXPECT_EQ(c.posts.Get(), kFrames / kBatch) << "one post per batch of 32";
  }
  for (size_t s = 0; s < kWcStatuses; ++s) EXPECT_EQ(c.wc_errors[s].Get(), 0u) << s;
}

}  // namespace
}  // namespace txbatch::verbs
