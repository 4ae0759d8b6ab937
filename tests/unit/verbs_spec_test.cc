// Verbs driver specs: built with or without libibverbs, so a spec is checked either way.
#include <gtest/gtest.h>

#include <cstdio>

#include "dataplane/mempool.h"
#include "drivers/factory.h"
#include "drivers/verbs/verbs.h"
#include "results/record_reader.h"
#include "results/records.h"
#include "results/tables.h"

namespace txbatch::verbs {
namespace {

TEST(VerbsSpec, ALocalRouteWithEveryDefaultSpelledOut) {
  auto o = ParseVerbsSpec("verbs:mlx5_0:1,qpn=0x48,qkey=0x11111111,lid=3");
  ASSERT_TRUE(o) << o.error().message;
  EXPECT_EQ(o->device, "mlx5_0");
  EXPECT_EQ(o->port, 1u);
  EXPECT_EQ(o->qpn, 0x48u);
  EXPECT_EQ(o->qkey, 0x11111111u);
  EXPECT_EQ(o->lid, 3);
  EXPECT_FALSE(o->gid);
  EXPECT_EQ(o->ToString(),
            "verbs:mlx5_0:1,qpn=0x48,qkey=0x11111111,lid=3,sl=0,pkey_index=0,sq_depth=512,"
            "rq_depth=256,signal_every=16,inline_max=0");
  // The canonical form parses back to itself.
  auto again = ParseVerbsSpec(o->ToString());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->ToString(), o->ToString());
  // And through the driver factory.
  auto d = ParseDriverSpec("verbs:mlx5_0:1,qpn=72,qkey=1,lid=3");
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->emulated());
  EXPECT_EQ(d->ring(), 512u);  // the send queue; the receive buffers have a pool of their own
  EXPECT_EQ(d->own_pool_bytes(), PoolBytes(kSenderRqDepth + kReceivePoolSlack, 4096));
}

TEST(VerbsSpec, AGlobalRoute) {
  auto o = ParseVerbsSpec(
      "verbs:mlx4_0:2,qpn=0x1a2b,qkey=7,lid=9,gid=fe80::2:c903:1:1b2c,sgid_index=1,hop_limit=2,"
      "sl=3,"
      "pkey_index=1,sq_depth=1024,signal_every=64,inline_max=128");
  ASSERT_TRUE(o) << o.error().message;
  ASSERT_TRUE(o->gid);
  EXPECT_EQ((*o->gid)[0], 0xfe);
  EXPECT_EQ((*o->gid)[15], 0x2c);
  EXPECT_EQ(o->sgid_index, 1u);
  EXPECT_EQ(o->hop_limit, 2u);
  EXPECT_EQ(o->sl, 3u);
  EXPECT_EQ(o->sq_depth, 1024u);
  EXPECT_EQ(o->signal_every, 64u);
  EXPECT_EQ(o->inline_max, 128u);
  EXPECT_EQ(o->port, 2u);
  auto again = ParseVerbsSpec(o->ToString());
  ASSERT_TRUE(again) << o->ToString();
  EXPECT_EQ(again->ToString(), o->ToString());
}

// RoCE (issue 17): the peer by its GID alone; whether the port is RoCE is known at open, where
// an InfiniBand port still wants lid= (PlanPort). The sgid_index left out is chosen then too.
TEST(VerbsSpec, ARocePeerByGidAloneWithTheSgidIndexLeftToThePort) {
  auto o = ParseVerbsSpec("verbs:rxe0:1,qpn=0x11,qkey=0x11111111,gid=::ffff:10.0.0.2");
  ASSERT_TRUE(o) << o.error().message;
  EXPECT_FALSE(o->lid);
  EXPECT_FALSE(o->sgid_index);
  ASSERT_TRUE(o->gid);
  EXPECT_EQ((*o->gid)[10], 0xff);
  EXPECT_EQ((*o->gid)[15], 2);
  EXPECT_EQ(o->ToString(),
            "verbs:rxe0:1,qpn=0x11,qkey=0x11111111,gid=::ffff:10.0.0.2,hop_limit=64,sl=0,"
            "pkey_index=0,sq_depth=512,rq_depth=256,signal_every=16,inline_max=0");
  auto again = ParseVerbsSpec(o->ToString());
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->ToString(), o->ToString());
  // A lid= may be given (the same spec on both kinds of port); sgid_index= when given is kept.
  auto both = ParseVerbsSpec("verbs:rxe0:1,qpn=0x11,qkey=1,lid=3,gid=fe80::1,sgid_index=1");
  ASSERT_TRUE(both) << both.error().message;
  EXPECT_EQ(both->lid, 3);
  EXPECT_EQ(both->sgid_index, 1u);
  EXPECT_NE(both->ToString().find(",lid=3,gid=fe80::1,sgid_index=1,hop_limit=64,"),
            std::string::npos)
      << both->ToString();
}

TEST(VerbsSpec, AReceiverNeedsOnlyItsQKey) {
  auto o = ParseVerbsSpec("verbs:mlx5_0:1,qkey=0x11", /*peer_required=*/false);
  ASSERT_TRUE(o) << o.error().message;
  EXPECT_EQ(o->qkey, 0x11u);
  // No peer is made up for it (it sends to nobody): its spec names none.
  EXPECT_EQ(o->qpn, 0u);
  EXPECT_FALSE(o->lid);
  EXPECT_EQ(o->ToString(),
            "verbs:mlx5_0:1,qkey=0x11,sl=0,pkey_index=0,sq_depth=512,rq_depth=4096,"
            "signal_every=16,inline_max=0");
  EXPECT_FALSE(ParseVerbsSpec("verbs:mlx5_0:1,qkey=0x11"));  // a sender names its peer
  auto none = ParseVerbsSpec("verbs:mlx5_0:1", false);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("has no qkey="), std::string::npos);
}

// A sink measures what it receives, and a UD datagram that finds no receive posted is dropped
// silently (rxe's responder, an HCA's): its queue is deeper than a sender's, which keeps
// IPoIB's 256 (two TCG guests lost 72 of 2464 at 4 kpps to a sink posting 256). Given, it holds.
TEST(VerbsSpec, ASinkPostsADeeperReceiveQueueThanASenderUnlessTold) {
  auto sink = ParseVerbsSpec("verbs:rxe0:1,qkey=0x11", /*peer_required=*/false);
  auto sender = ParseVerbsSpec("verbs:rxe0:1,qpn=0x11,qkey=0x11,gid=::ffff:10.0.0.2");
  ASSERT_TRUE(sink && sender);
  EXPECT_EQ(sink->rq_depth, kReceiverRqDepth);
  EXPECT_EQ(sender->rq_depth, kSenderRqDepth);
  EXPECT_GT(kReceiverRqDepth, kSenderRqDepth);
  auto given = ParseVerbsSpec("verbs:rxe0:1,qkey=0x11,rq_depth=64", false);
  ASSERT_TRUE(given) << given.error().message;
  EXPECT_EQ(given->rq_depth, 64u);
  EXPECT_EQ(ParseVerbsSpec(given->ToString(), false)->rq_depth, 64u);
  // A sink's estimate: its queue, and the frames a link in front of it holds.
  EXPECT_EQ(ReceivePoolBytes(*given, 100), PoolBytes(64 + kReceivePoolSlack + 100, 4096));
  // The EAL estimate covers the receive buffers it keeps posted (their own pool).
  auto d = ParseDriverSpec("verbs:mlx5_0:1,qpn=72,qkey=1,lid=3,rq_depth=1024");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->ring(), 512u);
  EXPECT_EQ(d->own_pool_bytes(), PoolBytes(1024 + kReceivePoolSlack, 4096));
  EXPECT_GT(d->own_pool_bytes(), ParseDriverSpec("verbs:mlx5_0:1,qpn=72,qkey=1,lid=3")
                                     ->own_pool_bytes());
}

TEST(VerbsSpec, BadInputGetsOneSentenceNamingTheValidChoices) {
  const std::pair<const char*, const char*> bad[] = {
      {"verbs:mlx5_0", "not DEVICE:PORT"},
      {"verbs::1,qpn=1,qkey=1,lid=1", "not DEVICE:PORT"},
      {"verbs:mlx5_0:0,qpn=1,qkey=1,lid=1", "the port 1..255"},
      {"verbs:mlx5_0:1,qkey=1,lid=1", "qpn= and qkey= are required"},
      {"verbs:mlx5_0:1,qpn=1,lid=1", "qpn= and qkey= are required"},
      {"verbs:mlx5_0:1,qpn=1,qkey=1", "has no lid= and no gid="},
      {"verbs:rxe0:1,qpn=1,qkey=1,sgid_index=1", "has no lid= and no gid="},
      {"verbs:rxe0:1,qpn=1,qkey=1,gid=::ffff:10.0.0.2,sgid_index=256", "valid: 0..255"},
      {"verbs:mlx5_0:1,qpn=1,qkey=1,lid=1,hop_limit=3", "belong to a global route"},
      {"verbs:mlx5_0:1,qpn=0x1000000,qkey=1,lid=1", "valid: 1..16777215"},
      {"verbs:mlx5_0:1,qpn=1,qkey=1,lid=0xc000", "valid: 1..49151"},
      {"verbs:mlx5_0:1,qpn=1,qkey=1,gid=fe80::zz", "not a GID"},
      {"verbs:mlx5_0:1,qpn=1,qkey=1,lid=1,sl=16", "valid: 0..15"},
      {"verbs:mlx5_0:1,qpn=1,qkey=1,lid=1,sq_depth=8", "valid: 16..32768"},
      {"verbs:mlx5_0:1,qpn=1,qkey=1,lid=1,sq_depth=64,signal_every=65", "valid: 1..sq_depth"},
      {"verbs:mlx5_0:1,qpn=1,qkey=1,lid=1,rq_depth=40000", "valid: 16..32768"},
      {"verbs:mlx5_0:1,qpn=1,qkey=1,lid=1,inline_max=4096", "valid: 0..1024"},
      {"verbs:mlx5_0:1,qpn=1,qkey=1,lid=1,mtu=4096", "valid keys:"},
      {"verbs:mlx5_0:1,qpn=one,qkey=1,lid=1", "not a number"},
      {"verbs:mlx5_0:1,qpn,qkey=1,lid=1", "not key=value"},
  };
  for (const auto& [spec, why] : bad) {
    auto o = ParseVerbsSpec(spec);
    ASSERT_FALSE(o) << spec;
    EXPECT_NE(o.error().message.find(why), std::string::npos) << spec << ": " << o.error().message;
    EXPECT_EQ(o.error().message.find('\n'), std::string::npos) << spec;
  }
}

// The link layer a verbs port turned out to have (the driver's link_layer(), known at open) is
// in the record (results.link_layer, null for other drivers), read back by `report`, and named
// in the run header after the driver's spec.
TEST(VerbsRecord, TheLinkLayerIsInTheRecordTheReadBackAndTheHeader) {
  auto spec = ParseDriverSpec("verbs:rxe0:1,qpn=0x11,qkey=0x11111111,gid=::ffff:10.0.0.2");
  ASSERT_TRUE(spec) << spec.error().message;
  auto emu = ParseDriverSpec("emu:e1000");
  ASSERT_TRUE(emu);
  CellRecord roce, other;
  roce.config.driver_spec = *spec;
  roce.config.driver = spec->ToString();
  roce.result.link_layer = "roce_v2";
  other.config.driver_spec = *emu;
  other.config.driver = emu->ToString();
  RunEnv env;
  env.link_layers[spec->ToString()] = "roce_v2";
  const nlohmann::json doc = ToJson({roce, other}, env);
  EXPECT_EQ(doc["records"][0]["results"]["link_layer"], "roce_v2");
  EXPECT_TRUE(doc["records"][1]["results"]["link_layer"].is_null());
  auto back = ParseResults(doc.dump(), "test.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->records[0].result.link_layer, "roce_v2");
  EXPECT_EQ(back->records[1].result.link_layer, "");
  EXPECT_EQ(back->env.link_layers, env.link_layers);
  char* text = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&text, &size);
  ASSERT_NE(out, nullptr);
  PrintHeader(out, {roce.config, other.config}, back->env);
  std::fclose(out);
  const std::string header(text, size);
  std::free(text);
  EXPECT_NE(header.find("driver " + spec->ToString() + " on link layer roce_v2 (RoCE v2"),
            std::string::npos)
      << header;
  EXPECT_NE(header.find("driver " + emu->ToString() + "\n"), std::string::npos) << header;
}

}  // namespace
}  // namespace txbatch::verbs
