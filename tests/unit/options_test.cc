// Option validation: every bad input is rejected up front with one sentence naming the valid
// choices; the binary exits 2 and writes nothing.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "drivers/factory.h"
#include "engine/cell.h"
#include "tests/txbatch_bin.h"
#include "tests/txbatch_run.h"
#include "tools/run_options.h"

namespace txbatch {
namespace {

TEST(RunPlan, DefaultIsTheBwTcpGridInterleaved) {
  auto plan = BuildRunPlan(RunArgs{});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ASSERT_EQ(plan->cells.size(), 20u);  // 5 sizes x 2 procs x batch 1, 32
  EXPECT_EQ(plan->cells[0].policy.frames, 1);
  EXPECT_EQ(plan->cells[1].policy.frames, 32);
  EXPECT_EQ(plan->cells[0].size, plan->cells[1].size);
  EXPECT_EQ(plan->cells[0].driver_spec.ToString().rfind("emu:e1000", 0), 0u);
  EXPECT_EQ(plan->cells[0].proto, Proto::kTcp);
  EXPECT_EQ(plan->cells[0].procs, 1u);
  EXPECT_EQ(plan->cells.back().procs, 8u);
  EXPECT_EQ(plan->cells.back().size, 262144u);
  // As the 2007 thread's kernel on its e1000: TSO, and TCP Small Queues at 5.0's limit.
  EXPECT_EQ(plan->cells[0].offload, Offload::kTso);
  EXPECT_EQ(plan->cells[0].tsq, kDefaultTsqBytes);
}

// --offload auto: TSO where the driver has it, for a TCP stream; none elsewhere.
TEST(RunPlan, OffloadAutoIsTsoWhereTheNicHasIt) {
  const auto offload = [](const char* driver, const char* proto) {
    RunArgs a;
    a.drivers = {driver};
    a.proto = proto;
    auto plan = BuildRunPlan(a);
    EXPECT_TRUE(plan.ok()) << driver;
    return plan.ok() ? plan->cells.front().offload : Offload::kGso;
  };
  EXPECT_EQ(offload("emu:e1000", "tcp"), Offload::kTso);
  EXPECT_EQ(offload("emu:ixgbe", "tcp"), Offload::kTso);
  EXPECT_EQ(offload("emu:ixgbe", "udp"), Offload::kNone);
  EXPECT_EQ(offload("emu:null", "tcp"), Offload::kNone);
  EXPECT_EQ(offload("emu:ipoib-qdr", "tcp"), Offload::kNone);
  EXPECT_EQ(offload("ethdev:net_null0", "tcp"), Offload::kNone);
}

// The five policies, one cell each, on `driver` with one size and one producer: the cells
// BuildRunPlan makes of `a` (none, and a failure, where it refuses them).
std::vector<CellConfig> EachPolicysCell(RunArgs a, const char* driver, const char* size) {
  a.policy = "count:32,linux-2014,linux-2025,bql,blist-2007";
  a.drivers = {driver};
  a.size = size;
  a.procs = "1";
  auto plan = BuildRunPlan(a);
  EXPECT_TRUE(plan.ok()) << plan.error().message;
  return plan.ok() ? plan->cells : std::vector<CellConfig>{};
}

// Issue 45, item 3: TCP Small Queues' cap is tcp_limit_output_bytes as each policy's kernel set
// it — 131072 in linux-2014's 3.18, 4 MiB in linux-2025's (6.16 on), 1 MiB (5.0-6.15) for bql,
// count:N and blist-2007 — where the old code gave every cell 1 MiB. A --tsq typed is every
// cell's, 0 included.
TEST(RunPlan, EachPolicyGetsItsKernelsTsqCapUnlessTold) {
  const auto caps = [](const RunArgs& a) {
    std::vector<uint64_t> out;
    for (const CellConfig& c : EachPolicysCell(a, "emu:e1000", "65536")) out.push_back(c.tsq);
    return out;
  };
  RunArgs a;
  EXPECT_EQ(caps(a), (std::vector<uint64_t>{1 << 20, 131072, 4 << 20, 1 << 20, 1 << 20}));
  a.tsq = 200000;
  a.tsq_given = true;
  EXPECT_EQ(caps(a), std::vector<uint64_t>(5, 200000));
  a.tsq = 0;
  EXPECT_EQ(caps(a), std::vector<uint64_t>(5, 0));
}

// Without --sync each policy runs on the qdisc its kernel had: linux-2025 (6.x) and bql on the
// lock-free pfifo_fast of 4.16 on, linux-2014 (3.18), blist-2007 and the DPDK-style count:N on
// the root-locked one; tc's pfifo is root-locked in every kernel. An explicit --sync runs as
// asked, and a kernel policy given another era's qdisc carries the sentence that says so.
TEST(RunPlan, EachKernelPolicyRunsOnItsKernelsQdiscUnlessTold) {
  const auto syncs = [](const RunArgs& a) {
    std::vector<std::pair<bool, bool>> out;  // nolock, an era mix noted
    for (const CellConfig& c : EachPolicysCell(a, "emu:ixgbe", "64"))
      out.push_back({c.shape.nolock, !EraMix(c).empty()});
    return out;
  };
  using V = std::vector<std::pair<bool, bool>>;
  RunArgs a;
  EXPECT_EQ(syncs(a),
            (V{{false, false}, {false, false}, {true, false}, {true, false}, {false, false}}));
  a.qdisc = "pfifo";
  EXPECT_EQ(syncs(a), (V(5, {false, false})));
  a.qdisc = "pfifo_fast";
  a.sync = "rootlock";
  EXPECT_EQ(syncs(a),
            (V{{false, false}, {false, false}, {false, true}, {false, false}, {false, false}}));
  a.sync = "nolock";
  EXPECT_EQ(syncs(a), (V{{true, false}, {true, true}, {true, false}, {true, false}, {true, true}}));
  a.sync = "rootlock";
  a.policy = "linux-2025";
  auto plan = BuildRunPlan(a);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(EraMix(plan->cells.front()),
            "linux-2025 names a 6.x kernel, whose pfifo_fast is lock-free (4.16 on); --sync "
            "rootlock runs it on the root-locked pfifo_fast of before 4.16");
}

struct BadCase {
  const char* what;
  void (*set)(RunArgs&);  // the options that differ from RunArgs' defaults
  const char* must_say;
};

// The TX lock inherits priority only where a holder can be preempted by a sibling thread on its
// CPU while the txirq waits: with a dedicated runner, and inline where producers outnumber the
// CPUs; never with --qdisc none. The queue takes it from QueueConfigFor (2 inline producers on
// 2 CPUs: a priority-inheriting TX lock cost 2.6x the frames, doc/perf.md).
TEST(RunPlan, TheTxLockInheritsPriorityOnlyWhereAHolderCanBePreempted) {
  CellConfig c;
  c.procs = 2;
  EXPECT_FALSE(TxLockInherits(c, 2));
  EXPECT_FALSE(QueueConfigFor(c, 1e9, {0, 1}).tx_lock_inherits);
  EXPECT_FALSE(TxLockInherits(c, 4));
  EXPECT_TRUE(TxLockInherits(c, 1));
  EXPECT_TRUE(QueueConfigFor(c, 1e9, {0}).tx_lock_inherits);
  EXPECT_TRUE(TxLockInherits(c, 0));  // CPUs not known
  c.shape.dedicated = true;
  EXPECT_TRUE(TxLockInherits(c, 2));
  c.shape.dedicated = false;
  c.shape.noqueue = true;
  EXPECT_FALSE(TxLockInherits(c, 1));
}

TEST(RunPlan, RejectsBadInputWithTheValidChoices) {
  // Each case: the options that differ from RunArgs' defaults.
  const BadCase cases[] = {
      {"batch and policy", [](RunArgs& a) { a.batch = "1", a.policy = "count:1"; }, "give one"},
      {"batch 0", [](RunArgs& a) { a.batch = "0"; }, "1..4096"},
      {"batch list junk", [](RunArgs& a) { a.batch = "1,,32"; }, "1..4096"},
      {"policy", [](RunArgs& a) { a.policy = "bql:4"; }, "valid: count:N"},
      {"offload", [](RunArgs& a) { a.offload = "lro"; }, "valid: auto, none, gso, tso"},
      {"offload on udp", [](RunArgs& a) { a.proto = "udp", a.offload = "gso"; },
       "--offload none with --proto udp"},
      {"tso on a NIC without it", [](RunArgs& a) { a.drivers = {"emu:null"}, a.offload = "tso"; },
       "has no TSO here"},
      {"tso on a DPDK port",
       [](RunArgs& a) { a.drivers = {"ethdev:net_null0"}, a.offload = "tso"; },
       "valid: --offload tso with emu:e1000 or emu:ixgbe"},
      {"gso batches beyond one cut batch",
       [](RunArgs& a) { a.batch = "92", a.offload = "gso", a.qdisc = "none"; }, "a batch of 1..91"},
      {"a runner waiting for more than TSQ lets through",
       [](RunArgs& a) { a.policy = "buffer:64", a.procs = "1", a.runner = "dedicated"; },
       "it would never send; valid: buffer:N:T, N <= 17, or --tsq 0"},
      {"kernel policy without a qdisc",
       [](RunArgs& a) { a.policy = "linux-2014", a.qdisc = "none"; }, "--qdisc none has none"},
      {"bql on a DPDK port", [](RunArgs& a) { a.drivers = {"ethdev:net_null0"}, a.policy = "bql"; },
       "valid: bql with emu:MODEL"},
      {"pfifo is not lockless", [](RunArgs& a) { a.sync = "nolock", a.qdisc = "pfifo"; },
       "--qdisc pfifo with --sync rootlock"},
      {"fq_codel is not lockless", [](RunArgs& a) { a.sync = "nolock", a.qdisc = "fq_codel"; },
       "--qdisc fq_codel with --sync rootlock or auto"},
      {"fq_codel target 0", [](RunArgs& a) { a.qdisc = "fq_codel target 0"; },
       "fq_codel's target must be a time from 2us"},
      {"fq_codel unknown key", [](RunArgs& a) { a.qdisc = "pfifo_fast,fq_codel bands 3"; },
       "fq_codel has no parameter 'bands'"},
      {"parameters to pfifo", [](RunArgs& a) { a.qdisc = "pfifo limit 10"; },
       "pfifo takes no parameters"},
      {"bql bounds", [](RunArgs& a) { a.bql_limit_min = 5000, a.bql_limit_max = 4000; },
       "0 <= min <= max"},
      {"bql hold time", [](RunArgs& a) { a.bql_hold_ms = -1; }, "0..60000 ms"},
      {"buffer needs no qdisc", [](RunArgs& a) { a.policy = "buffer:32"; },
       "needs --qdisc none or --runner dedicated"},
      {"dedicated without a qdisc", [](RunArgs& a) { a.runner = "dedicated", a.qdisc = "none"; },
       "--qdisc none has none"},
      {"size small", [](RunArgs& a) { a.size = "17"; }, "18..1048576"},
      {"procs", [](RunArgs& a) { a.procs = "0"; }, "1..64"},
      {"proto", [](RunArgs& a) { a.proto = "sctp"; }, "valid: tcp, udp"},
      {"mtu", [](RunArgs& a) { a.mtu = 67; }, "68..9000"},
      {"mtu too small for tcp header", [](RunArgs& a) { a.mtu = 69; }, "txbatch header"},
      {"duration", [](RunArgs& a) { a.duration_s = 0; }, "0.01..3600"},
      {"warmup", [](RunArgs& a) { a.warmup_s = -1; }, "0..60"},
      {"rate", [](RunArgs& a) { a.rate = "fast"; }, "pps, kpps, mpps"},
      {"rate unit", [](RunArgs& a) { a.rate = "10furlongs"; }, "500mbit"},
      {"producer", [](RunArgs& a) { a.producer = "burst"; }, "stream, datagram"},
      {"runner", [](RunArgs& a) { a.runner = "softirq"; }, "valid: inline, dedicated"},
      {"sync", [](RunArgs& a) { a.sync = "seqlock"; }, "valid: auto, rootlock, nolock"},
      {"buffer deeper than the band, no timer",
       [](RunArgs& a) { a.policy = "buffer:64", a.txqueuelen = 32, a.runner = "dedicated"; },
       "would never send"},
      {"sync without a qdisc", [](RunArgs& a) { a.sync = "nolock", a.qdisc = "none"; },
       "--qdisc none has none"},
      {"qdisc", [](RunArgs& a) { a.qdisc = "fq"; }, "valid: pfifo_fast, pfifo, fq_codel"},
      {"txqueuelen", [](RunArgs& a) { a.txqueuelen = 0; }, "1..100000"},
      {"driver", [](RunArgs& a) { a.drivers = {"nic:eth0"}; }, "emu:MODEL"},
      {"emu key", [](RunArgs& a) { a.drivers = {"emu:e1000,speed=1"}; }, "valid keys"},
      {"eal memory", [](RunArgs& a) { a.eal_memory = "lots"; }, "auto, no-huge, in-memory"},
      // Issue 16, item 11: accepted silently before.
      {"rate too small to pace", [](RunArgs& a) { a.rate = "1e-300pps"; }, "1pps..1000mpps"},
      {"rate too small in bits", [](RunArgs& a) { a.rate = "1e-300mbit"; }, "1kbit..10000gbit"},
      {"link delay that rounds to zero", [](RunArgs& a) { a.link = "delay 1e-400ms"; },
       "delay needs a time"},
      {"link of blanks", [](RunArgs& a) { a.link = "   "; }, "no words were given"},
      {"repeated emu key", [](RunArgs& a) { a.drivers = {"emu:e1000,ring=64,ring=4096"}; },
       "key 'ring' in driver 'emu:e1000,ring=64,ring=4096' is given twice"},
      {"repeated ethdev key", [](RunArgs& a) { a.drivers = {"ethdev:net_null0,size=64,size=128"}; },
       "key 'size' in driver 'ethdev:net_null0,size=64,size=128' is given twice"},
      {"repeated verbs key",
       [](RunArgs& a) { a.drivers = {"verbs:mlx5_0:1,qpn=0x48,qkey=0x11,lid=3,lid=4"}; },
       "key 'lid' in driver"},
      {"batch repeated", [](RunArgs& a) { a.batch = "32,32,32"; }, "--batch gives '32' twice"},
      {"policy repeated", [](RunArgs& a) { a.policy = "bql,count:8,bql"; },
       "--policy gives 'bql' twice"},
      {"size repeated", [](RunArgs& a) { a.size = "64,1000,64"; }, "--size gives '64' twice"},
      {"procs repeated", [](RunArgs& a) { a.procs = "1,1"; }, "--procs gives '1' twice"},
      {"queues repeated", [](RunArgs& a) { a.queues = "2,2"; }, "--queues gives '2' twice"},
      {"sync repeated", [](RunArgs& a) { a.sync = "rootlock,rootlock"; },
       "--sync gives 'rootlock' twice"},
      {"runner repeated", [](RunArgs& a) { a.runner = "inline,inline"; },
       "--runner gives 'inline' twice"},
      {"qdisc repeated", [](RunArgs& a) { a.qdisc = "pfifo,pfifo"; },
       "--qdisc gives 'pfifo' twice"},
      {"engine repeated", [](RunArgs& a) { a.engine = "sim,sim"; }, "--engine gives 'sim' twice"},
      {"driver repeated",
       [](RunArgs& a) {
         a.drivers = {"emu:null", "emu:null"};
       },
       "--driver gives 'emu:null' twice"},
      {"driver repeated in other words",
       [](RunArgs& a) {
         a.drivers = {"emu:e1000", "emu:e1000,ring=256"};
       },
       "are the same driver"},
  };
  for (const BadCase& c : cases) {
    RunArgs a;
    c.set(a);
    auto plan = BuildRunPlan(a);
    ASSERT_FALSE(plan.ok()) << c.what;
    const std::string& msg = plan.error().message;
    EXPECT_NE(msg.find(c.must_say), std::string::npos) << c.what << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << c.what << ": one sentence, one line";
  }
}

TEST(Rate, ParsesUnits) {
  auto r = ParseRate("40kpps");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->unit, RateSpec::Unit::kPps);
  EXPECT_EQ(r->value, 40000);
  auto b = ParseRate("500mbit");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->unit, RateSpec::Unit::kBits);
  EXPECT_EQ(b->value, 5e8);
  EXPECT_EQ(ParseRate("max")->unit, RateSpec::Unit::kMax);
  EXPECT_FALSE(ParseRate("-5pps").ok());
  EXPECT_FALSE(ParseRate("0pps").ok());
  EXPECT_FALSE(ParseRate("1e-300pps").ok());  // no frame in any window; the pacing overflowed
  EXPECT_FALSE(ParseRate("2000mpps").ok());
  EXPECT_TRUE(ParseRate("1pps").ok());
  EXPECT_TRUE(ParseRate("100gbit").ok());
}

using Outcome = test::TxbatchRun;
using test::RunTxbatchAsGiven;

// A result document whose schema_version is the string "1"; the path it was written to.
std::string StringVersionDoc() {
  const std::string path = ::testing::TempDir() + "/schema_version_string.json";
  if (FILE* f = std::fopen(path.c_str(), "w")) {
    std::fputs(R"({"schema_version": "1", "records": [{}]})", f);
    std::fclose(f);
  }
  return path;
}

TEST(Cli, BadInputExitsTwoWithOneSentenceAndNoFile) {
  const std::string json = ::testing::TempDir() + "/must_not_exist.json";
  std::filesystem::remove(json);
  const std::string string_version = StringVersionDoc();
  std::vector<std::string> bad = {
      "run --batch 0",
      "run --batch 1 --policy count:1",
      "run --size 10",
      "run --proto sctp",
      "run --offload tso --driver emu:null",
      "run --offload gso --proto udp",
      "run --driver emu:e1000,ring=3",
      "run --driver nic:eth0",
      "run --mtu 10000",
      "run --rate 3parsecs",
      "run --duration abc",
      "run --no-such-option",
      "run --policy linux-2014 --qdisc none",
      "run --policy bql --driver ethdev:net_null0",
      "run --qdisc pfifo --sync nolock",
      "run --qdisc 'fq_codel target 0'",
      "run --qdisc 'fq_codel interval -1ms'",
      "run --qdisc fq_codel --sync nolock",
      "run --probe max",
      "run --probe 3parsecs",
      "run --bql-limit-min 10 --bql-limit-max 5",
      "run --driver verbs:txbatch_no_such_hca:1,qpn=0x48,qkey=0x11,lid=3",
      "run --driver verbs:mlx5_0",
      "run --driver verbs:mlx5_0:1,qpn=0x48,qkey=0x11",
      "run --driver verbs:rxe0:1,qpn=0x48,qkey=0x11,gid=::ffff:10.0.0.2,sgid_index=256",
      "run --driver verbs:rxe0:1,qpn=0x48,qkey=0x11,sgid_index=3",
      "run --driver verbs:rxe0:1,qpn=0x48,qkey=0x11,gid=10.0.0.2",
      "run --driver verbs:mlx5_0:1,qpn=0x48,qkey=0x11,lid=3,sq_depth=64,signal_every=65",
      "sweep --policy blist-2007",
      "bridge --port-a net_null0",
      "bridge --port-a net_ring0 --port-b net_null0",
      "bridge --port-a net_null0 --port-b net_null1 --link 'slot 1ms'",
      "bridge --port-a net_null0 --port-b net_null1 --link 'delay 1ms' --link-ab 'loss 1%'",
      "bridge --port-a net_null0 --port-b net_null1 --batch 1,32",
      "lab up --prefix WayTooLongPrefix",
      "respond --port net_null0",
      "sink --port net_null0 --flows 0",
      "sink --port verbs:mlx5_0:1",
      "sink --port verbs:txbatch_no_such_hca:1,qkey=0x11",
      "sink --port verbs:rxe0:1,qkey=0x11,gid=::ffff:10.0.0.2,sgid_index=256",
      "sink --port net_null0 --link 'loss 200%'",
      "sink",
      "respond --port net_null0 --ip 10.0.0.256",
      "respond --port net_null0 --ip 10.0.0.2 --udp-echo 70000",
      "respond --port ethdev-pair: --ip 10.0.0.2",
      "lab up --no-such-bridge-option",
      "lab up --mtu 20",
      "lab down --prefix nolab7",
      "report /nonexistent/records.json",
      "sweep --out /proc/no/such/dir",
      "bridge --port-a net_null0 --port-b net_null1 --stats -1",
      // Issue 16 item 7: once accepted, and the command stopped at once ("stopped after 0.0 s").
      "bridge --port-a net_null0 --port-b net_null1 --duration inf",
      "bridge --port-a net_null0 --port-b net_null1 --duration 1e400",
      "bridge --port-a net_null0 --port-b net_null1 --duration 1e10",
      "bridge --port-a net_null0 --port-b net_null1 --duration nan",
      "respond --port net_null0 --ip 10.0.0.2 --duration 9e9",
      "respond --port net_null0 --ip 10.0.0.2 --stats inf",
      "sink --port net_null0 --duration inf",
      "sink --port net_null0 --duration 1000001",
      "sink --port net_null0 --stats 1e10",
      "run --link 'delay 1ms' --driver ethdev:net_null0",
      "sink --port verbs:mlx5_0:1,qkey=0x11 --mtu 10",
      "lab",
      "run --engine warp",
      "run --engine sim --driver ethdev:net_null0",
      "run --engine sim --cost-model /nonexistent/cost.json",
      "run --engine sim --cost-model /proc/self/status",
      "run --queues 0",
      "run --pool-size 10",
      "run --driver emu:e1000,down_ms=-1",
      "run --queues 2,x",
      "run --queues 2 --driver verbs:mlx5_0:1,qpn=0x48,qkey=0x11,lid=3",
      "run --queues 32 --driver ethdev:net_ring0",
      "run --queues 2 --link 'delay 1ms'",
      "calibrate --batch 8",
      "calibrate --engine warp",
      "calibrate --rounds 0",
      "calibrate --out /proc/no/such/dir/cost.json",
      "calibrate --cost-model /nonexistent/cost.json",
      "frobnicate",
      "",
      // Issue 16, item 9: internal errors (exit 1) before.
      "run --engine sim --cost-model /",
      "report " + string_version,
      // Item 10: read without bound.
      "report /dev/zero",
      "calibrate --engine sim --cost-model /dev/zero",
      // Item 11: accepted silently, or an empty value read as 0 or as not given.
      "run --seed -1",
      "run --seed 18446744073709551616",
      "run --seed ''",
      "run --pool-size ''",
      "run --bql-limit-max ''",
      "run --bql-hold-time ''",
      "run --txqueuelen ''",
      "run --mtu ''",
      "run --duration ''",
      "run --rounds ''",
      "run --json ''",
      "run --link ''",
      "run --batch ''",
      "run --policy ''",
      "run --cost-model '' --engine sim",
      "run --rate 1e-300pps",
      "run --link 'delay 1e-400ms'",
      "run --driver emu:e1000,ring=64,ring=4096",
      "run --batch 32,32,32",
      "compare --batch 32,32",
      "calibrate --out ''",
      "calibrate --json ''",
      // Issue 22: the simulated machine's CPUs.
      "run --engine sim --cpus -1",
      "run --engine sim --cpus 1025",
      "run --engine sim --cpus 2.5",
      "run --cpus 2",
      "calibrate --check --out cost.json",
      "calibrate --check --engine sim",
      "calibrate --min-r2 1.5",
      "calibrate --min-r2 -0.1",
      "calibrate --check --min-r2 0.5",
      "calibrate --strict",
      "sink --port net_null0 --json ''",
      "bridge --port-a net_null0 --port-b net_null1 --link ''",
      "respond --port net_null0 --ip 10.0.0.2 --link ''",
      // Item 12: misleading messages (the content is checked in Cli.MessagesNameTheCause).
      "report /",
      "bridge --port-a net_null0 --port-b net_null0",
      "run --driver 'ethdev:net_null0,size=\"64\"'",
      // Review of the fixes: octal as net_null reads it (size=08 is no octal number), the
      // forwarding commands' numbers, a link that would hold its frames for hours at a stop.
      "run --driver ethdev:net_null0,size=08",
      "sink --port net_null0 --mtu ''",
      "sink --port net_null0 --flows 0x10",
      "respond --port net_null0 --ip 10.0.0.2 --udp-echo ''",
      "bridge --port-a net_null0 --port-b net_null1 --duration ''",
      "bridge --port-a net_null0 --port-b net_null1 --link 'rate 1bit'",
      "sink --port net_null0 --link 'delay 1h 1h distribution normal'",
      "tune --target ''",
  };
  for (const std::string& a : bad) {
    const char* args = a.c_str();
    // bridge and lab write no JSON: --json would be an unknown option and hide the case; a
    // case about --json itself gives its own.
    const bool writes_json = !a.starts_with("bridge") && !a.starts_with("lab") &&
                             !a.starts_with("respond") && !a.starts_with("sink") &&
                             !a.starts_with("report") && a.find("--json") == std::string::npos;
    const Outcome o = RunTxbatchAsGiven(a + (writes_json ? " --json " + json : ""));
    EXPECT_EQ(o.status, 2) << args << ": " << o.err;
    EXPECT_FALSE(o.err.empty()) << args;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << args << ": " << o.err;
    EXPECT_TRUE(o.out.empty()) << args << ": " << o.out;
    EXPECT_FALSE(std::filesystem::exists(json)) << args;
  }
}

// Issue 44 item 16: EAL's help option given to txbatch's EAL (--eal-extra, or after --) exited 0
// having done nothing — EAL printed its usage into the /dev/null txbatch points its start-up at
// and ended the process. It is bad input: exit 2, one sentence naming it, nothing written.
TEST(Cli, EalsOwnHelpOptionInTxbatchsEalArgumentsIsBadInput) {
  const std::string json = ::testing::TempDir() + "/eal_help.json";
  std::filesystem::remove(json);
  for (const std::string& args : std::vector<std::string>{
           "run --eal-extra --help", "run --eal-extra=-h", "run --eal-extra '-v -h'",
           "run --eal-extra --hel", "sink --port net_null0 --duration 0.1 --eal-extra --help",
           "run --json " + json + " -- --no-huge --no-shconf -h",
           "bridge --port-a net_null0 --port-b net_null1 --duration 0.1 -- --help"}) {
    const Outcome o = RunTxbatchAsGiven(args);
    EXPECT_EQ(o.status, 2) << args << ": " << o.err;
    EXPECT_NE(o.err.find("EAL's own help option"), std::string::npos) << args << ": " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << args << ": " << o.err;
    EXPECT_TRUE(o.out.empty()) << args << ": " << o.out;
  }
  EXPECT_FALSE(std::filesystem::exists(json));
}

// Issue 16, items 9, 10 and 12: each sentence names the real cause.
TEST(Cli, MessagesNameTheCause) {
  const std::string big = ::testing::TempDir() + "/too_big.json";
  std::filesystem::remove(big);
  if (FILE* f = std::fopen(big.c_str(), "w")) std::fclose(f);
  std::filesystem::resize_file(big, (256ull << 20) + 1);  // sparse: nothing is written
  const std::string fifo = ::testing::TempDir() + "/results.fifo";
  std::filesystem::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  struct Case {
    std::string args;
    const char* must_say;
  };
  for (const Case& c : {
           Case{"report /", "result file '/' is a directory"},
           Case{"report /dev/zero", "result file '/dev/zero' is a character device"},
           Case{"report " + fifo, "is a FIFO"},
           Case{"report " + big, "is larger than the 256 MiB txbatch reads"},
           Case{"report " + StringVersionDoc(), "has schema_version \"1\""},
           Case{"run --engine sim --cost-model /", "--cost-model '/' is a directory"},
           Case{"run --seed -1", "--seed '-1' is not a whole number"},
           Case{"run --seed 18446744073709551616", "at most 18446744073709551615"},
           Case{"run --pool-size ''", "--pool-size '' is not a whole number"},
           Case{"run --json ''", "--json needs a file name (or - for standard output)"},
           Case{"run --link ''", "--link needs netem words"},
           Case{"run --cpus 2", "no cell runs on --engine sim"},
           Case{"run --latency-sample 0", "--latency-sample 0 is out of range; valid: 1"},
           Case{"run --latency-sample 65537", "valid: 1 (every frame)..65536"},
           Case{"run --latency-sample 64 --no-timing",
                "--latency-sample 64 with --no-timing: --no-timing stamps no frame to sample"},
           Case{"run --engine sim --cpus 1025", "--cpus 1025 is out of range; valid: 0..1024"},
           Case{"bridge --port-a net_null0 --port-b net_null0,size=64", "are the same port"},
           Case{"run --driver 'ethdev:net_null0,size=\"64\"'", "(no quotes)"},
           // The driver table names a driver without the half a port command needs (before, its
           // spec was read as devargs: "'ethdev:emu:e1000' is not a vdev spec").
           Case{"sink --port emu:e1000", "emu has no receive half to count from; valid: ethdev:"},
           // Built without libibverbs, the port is refused first, as before the table.
           Case{"sink --port verbs:mlx5_0:1,qkey=0x11 --capture x.pcapng",
                verbs::Available() ? "a verbs port is none" : "built without libibverbs"},
           Case{"bridge --port-a verbs:mlx5_0:1,qkey=0x11 --port-b net_null0",
                "verbs carries IP datagrams to a queue pair (IPoIB, RoCE UD), not the "
                "Ethernet frames a bridge forwards"},
           Case{"respond --port emu:null --ip 10.0.0.2",
                "emu is a NIC model with no port to receive on"},
           Case{"sink --port ''", "--port is required; valid: ethdev:DEVARGS"},
       }) {
    const Outcome o = RunTxbatchAsGiven(c.args);
    EXPECT_EQ(o.status, 2) << c.args << ": " << o.err;
    EXPECT_NE(o.err.find(c.must_say), std::string::npos) << c.args << ": " << o.err;
    EXPECT_TRUE(o.out.empty()) << c.args << ": " << o.out;
  }
  std::filesystem::remove(big);
  std::filesystem::remove(fifo);
}

// CLI11 converts with base 0 (--mtu 01500 was octal 832) and took --seed beyond 2^64-1 as
// 2^64-1: numbers are decimal, and the whole uint64 range is a seed.
TEST(Cli, NumbersAreReadAsDecimal) {
  const std::string json = ::testing::TempDir() + "/decimal.json";
  std::filesystem::remove(json);
  const Outcome o = RunTxbatchAsGiven(
      "run --engine sim --driver emu:null --procs 1 --size 64 --batch 8 --duration 0.02 "
      "--warmup 0.01 --rounds 1 --mtu 01500 --txqueuelen 0100 --seed 18446744073709551615 "
      "--json " +
      json);
  ASSERT_EQ(o.status, 0) << o.err;
  std::ifstream in(json);
  const nlohmann::json doc = nlohmann::json::parse(in);
  const nlohmann::json& c = doc["records"][0]["config"];
  EXPECT_EQ(c["mtu"], 1500);
  EXPECT_EQ(c["txqueuelen"], 100);
  EXPECT_EQ(c["seed"], 18446744073709551615ull);
  std::filesystem::remove(json);
}

TEST(Cli, UnwritableJsonPathIsBadInputBeforeAnythingRuns) {
  const Outcome o = RunTxbatchAsGiven("run --duration 0.01 --json /nonexistent-dir/x.json");
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("cannot write --json file"), std::string::npos) << o.err;
  EXPECT_TRUE(o.out.empty()) << o.out;  // nothing ran
}

TEST(Cli, HelpExplainsEveryOptionWithItsDefault) {
  const Outcome o = RunTxbatchAsGiven("run --help");
  EXPECT_EQ(o.status, 0);
  for (const char* opt : {"--driver",        "--batch",
                          "--policy",        "--size",
                          "--procs",         "--duration",
                          "--warmup",        "--proto",
                          "--mtu",           "--rate",
                          "--producer",      "--txqueuelen",
                          "--runner",        "--sync",
                          "--qdisc",         "--json",
                          "--eal-memory",    "--rounds",
                          "--link",          "or auto (as",
                          "grid axis",       "distribution uniform|normal",
                          "linux-2014",      "linux-2025",
                          "blist-2007",      "bql",
                          "xmit_more",       "--bql-limit-min",
                          "--bql-limit-max", "--bql-hold-time",
                          "pfifo (one",      "--offload"})
    EXPECT_NE(o.out.find(opt), std::string::npos) << opt;
  // Every command documents itself.
  for (const char* cmd :
       {"compare --help", "sweep --help", "tune --help", "report --help", "bridge --help",
        "respond --help", "sink --help", "lab up --help", "lab down --help"}) {
    const Outcome h = RunTxbatchAsGiven(cmd);
    EXPECT_EQ(h.status, 0) << cmd;
    EXPECT_NE(h.out.find("--"), std::string::npos) << cmd;
  }
  EXPECT_NE(o.out.find("4096,16384,65536,131072,262144"), std::string::npos);
  EXPECT_NE(o.out.find("default: emu:e1000"), std::string::npos);
}

TEST(DriverSpec, ParsesEmuAndEthdevForms) {
  auto e = ParseDriverSpec("emu:ixgbe,ring=1024");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_TRUE(e->emulated());
  EXPECT_EQ(e->ring(), 1024u);
  auto null_port = ParseDriverSpec("ethdev:net_null0");
  ASSERT_TRUE(null_port.ok()) << null_port.error().message;
  EXPECT_FALSE(null_port->emulated());
  EXPECT_EQ(null_port->ToString(), "ethdev:net_null0,no-rx=1");  // no zero-filled RX frames
  auto rx_null = ParseDriverSpec("ethdev:net_null0,no-rx=0");
  ASSERT_TRUE(rx_null.ok());
  EXPECT_EQ(rx_null->ToString(), "ethdev:net_null0,no-rx=0");  // the user's word stands
  auto pcap = ParseDriverSpec("ethdev:net_pcap0,tx_pcap=/tmp/x.pcap");
  ASSERT_TRUE(pcap.ok());
  EXPECT_EQ(pcap->ToString(), "ethdev:net_pcap0,tx_pcap=/tmp/x.pcap");
  auto pair = ParseDriverSpec("ethdev-pair:");
  ASSERT_TRUE(pair.ok());
  EXPECT_EQ(pair->ToString(), "ethdev-pair:");
  auto memif = ParseDriverSpec("ethdev-pair:memif");
  ASSERT_TRUE(memif.ok());
  EXPECT_EQ(memif->ToString(), "ethdev-pair:memif");
  // Keys a PMD takes once per queue or member may repeat (net_pcap: a queue per file); commas
  // inside a [list] are not separators.
  EXPECT_TRUE(ParseDriverSpec("ethdev:net_pcap0,tx_pcap=/tmp/a.pcap,tx_pcap=/tmp/b.pcap").ok());
  EXPECT_TRUE(ParseDriverSpec("ethdev:net_tap0,iface=[a,iface=b]").ok());
  auto port = ParseDriverSpec("ethdev:port=3");
  ASSERT_TRUE(port.ok());
  EXPECT_EQ(port->ToString(), "ethdev:port=3");
}

TEST(DriverSpec, RejectsWithTheValidForms) {
  for (const char* bad : {"nic:eth0", "ethdev:", "ethdev:eth0", "ethdev:port=", "ethdev:port=-1",
                          "ethdev:port=99999", "ethdev:net_", "emu:", "ethdev-pair:x"}) {
    auto s = ParseDriverSpec(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.error().message.find("valid"), std::string::npos) << s.error().message;
  }
}

// One table of driver forms (drivers/factory.cc) for the refusal, --driver's help and the
// help's Drivers block: --driver's help omitted the IPoIB models, ethdev-pair and verbs, and the
// refusal the IPoIB models and RoCE's gid=.
TEST(DriverSpec, TheRefusalTheOptionsHelpAndTheDriversBlockNameEveryForm) {
  const auto unknown = ParseDriverSpec("nic:eth0");
  ASSERT_FALSE(unknown.ok());
  const Outcome help = RunTxbatchAsGiven("run --help");
  ASSERT_EQ(help.status, 0);
  const size_t option = help.out.find("--driver TEXT");
  const size_t block = help.out.find("Drivers:");
  ASSERT_NE(option, std::string::npos);
  ASSERT_NE(block, std::string::npos);
  const std::string option_help = help.out.substr(option, help.out.find('\n', option) - option);
  const std::string drivers = help.out.substr(block);
  for (const char* form :
       {"e1000", "ixgbe", "null", "ipoib-sdr", "ipoib-ddr", "ipoib-qdr", "ipoib-fdr",
        "ethdev:DEVARGS", "ethdev:port=N", "ethdev-pair:", "ethdev-pair:memif",
        "verbs:DEVICE:PORT,qpn=N,qkey=N,lid=N", "verbs:DEVICE:PORT,qpn=N,qkey=N,gid=GID"}) {
    EXPECT_NE(unknown.error().message.find(form), std::string::npos) << form;
    EXPECT_NE(option_help.find(form), std::string::npos) << form;
    EXPECT_NE(drivers.find(form), std::string::npos) << form;
  }
}

}  // namespace
}  // namespace txbatch
