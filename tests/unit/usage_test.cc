// Bad input on the command line as a user meets it (issue 44, item 21): one sentence of
// txbatch's on stderr that names what was typed, exit 2, nothing on stdout, no output file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/record.h"
#include "results/tables.h"
#include "tests/txbatch_run.h"
#include "tools/run_options.h"

namespace txbatch {
namespace {

using Outcome = test::TxbatchRun;
using test::RunTxbatchAsGiven;

struct Case {
  std::string args;
  std::string must_say;  // in the one line on stderr
};

// Each case refused: exit 2, `must_say` in its one line on stderr, nothing on stdout.
void ExpectRefused(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    const Outcome o = RunTxbatchAsGiven(c.args);
    EXPECT_EQ(o.status, 2) << c.args << ": " << o.err;
    EXPECT_NE(o.err.find(c.must_say), std::string::npos) << c.args << ": " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << c.args << ": " << o.err;
    EXPECT_TRUE(o.out.empty()) << c.args << ": " << o.out;
  }
}

// CLI11's own words reached the user as they were: extras listed backwards ("The following
// arguments were not expected: 0.01 --warmup"), "1 required FLOAT missing", "At Most 1 required
// but received 2", "--out excludes --check", "Could not convert". Each now reads as one
// sentence of txbatch's, the options in the order typed.
TEST(Cli, ParseMistakesNameTheOptionsInTheOrderTyped) {
  const std::string ports = "bridge --port-a net_null0 --port-b net_null1 --duration 1";
  const std::vector<Case> cases = {
      {ports + " --warmup 0.01", "txbatch bridge has no option --warmup (given: --warmup 0.01)"},
      {"run --no-such --also-no", "txbatch run has no options --no-such and --also-no"},
      {"run --Duration 1", "txbatch run has no option --Duration (given: --Duration 1)"},
      {"run --duration --warmup 0.01",
       "--duration needs a value, and the next argument is the option --warmup"},
      {"run --json --duration 1",
       "--json needs a value, and the next argument is the option --duration"},
      {"run --duration 0.5 0.02 0.03",
       "'0.02' and '0.03' follow no option that takes them: txbatch run takes no other "
       "arguments"},
      {"run --batch", "--batch needs a value; run 'txbatch run --help'"},
      {"lab down --prefix", "--prefix needs a value; run 'txbatch lab down --help'"},
      {"report a b", "'b' is an argument more than txbatch report takes (its file)"},
      {"report", "txbatch report needs its file argument: a result file"},
      {"bridge --port-b net_null1", "txbatch bridge needs --port-a"},
      {"run --procs 1 --procs 8", "--procs was given 2 times; valid: once"},
      {"bridge --port-a net_null0 --port-b net_null1 --port-a net_null2",
       "--port-a was given 2 times; valid: once;"},
      {"calibrate --check --out x.json", "--check and --out cannot be given together"},
      {"calibrate --out x.json --check", "--out and --check cannot be given together"},
      {"run --no-bypass=maybe", "--no-bypass=maybe is not valid: --no-bypass is a flag"},
      {"lab frob", "'frob' is not a command of txbatch lab; valid: up, down"},
      {"lab", "txbatch lab needs a command; valid: up, down"},
      {"frobnicate", "'frobnicate' is not a command of txbatch; valid: run, compare,"},
      {"lab up --warmup 1",
       "txbatch lab up has no option --warmup (given: --warmup 1); valid: "
       "the options of txbatch bridge --help"},
      {"lab up --duration --stats 1",
       "--duration needs a value, and the next argument is the option --stats"},
  };
  ExpectRefused(cases);
  for (const Case& c : cases) {
    const std::string err = RunTxbatchAsGiven(c.args).err;
    for (const char* clis : {"The following", "not expected", "required", "missing", "At Most",
                             " excludes ", "Could not convert", "FLOAT", "TEXT"})
      EXPECT_EQ(err.find(clis), std::string::npos) << c.args << ": " << err;
  }
}

// `bridge --duration 1000001` said "1e+06 is out of range", and a time given in another unit
// came back converted (--bql-hold-time 61s: "61000 is out of range; valid: 0..60000 ms"). The
// value is named as typed, the range in the unit it was typed in.
TEST(Cli, OutOfRangeNamesTheValueAsTyped) {
  ExpectRefused({
      {"bridge --port-a net_null0 --port-b net_null1 --duration 1000001",
       "--duration 1000001 is out of range; valid: 0 (until SIGINT or SIGTERM) or up to 1000000 "
       "seconds"},
      {"respond --port net_null0 --ip 10.0.0.2 --stats 2e6",
       "--stats 2e6 is out of range; valid: 0 (only the final summary) or up to 1000000 seconds"},
      {"sink --port net_null0 --duration 1000001s",
       "--duration 1000001s is out of range; valid: 0 (until SIGINT or SIGTERM) or up to 1000000 "
       "s"},
      {"lab up --duration 2000000000ms",
       "--duration 2000000000ms is out of range; valid: 0 (until SIGINT or SIGTERM) or up to "
       "1000000000 ms"},
      {"run --duration 1e-9", "--duration 1e-9 is out of range; valid: 0.01..3600 seconds"},
      {"run --duration 5ms", "--duration 5ms is out of range; valid: 10..3600000 ms"},
      {"run --warmup 61000msec", "--warmup 61000msec is out of range; valid: 0..60000 msec"},
      {"run --bql-hold-time 61s", "--bql-hold-time 61s is out of range; valid: 0..60 s"},
      {"run --bql-hold-time 60001", "--bql-hold-time 60001 is out of range; valid: 0..60000 ms"},
      {"calibrate --duration 90s", "--duration 90s is out of range; valid: 0.01..60 s"},
      {"tune --target 1e3",
       "--target 1e3 is out of range; valid: 50..100 (percent of the best throughput)"},
      {"calibrate --min-r2 1.50", "--min-r2 1.50 is out of range; valid: 0..1"},
  });
}

// --tsq runs only where completions release the bytes of a TCP stream (TsqActive). Given above 0
// where no cell can run it, it was taken and ignored (rc 0, config.tsq null): it is refused,
// saying why, before anything runs.
TEST(Cli, TsqWhereNoCellCanRunItIsRefused) {
  const std::string json = ::testing::TempDir() + "/tsq_refused.json";
  std::filesystem::remove(json);
  // Short grids, so that a txbatch that takes them runs for a second, not minutes.
  const std::string run =
      "run --procs 1 --size 4096 --batch 1 --duration 0.01 --warmup 0 "
      "--rounds 1 --json " +
      json;
  ExpectRefused({
      {run + " --proto udp --tsq 131072",
       "--tsq 131072 bounds the TCP payload a stream keeps below its socket, and --proto udp "
       "sends datagrams"},
      {run + " --producer datagram --tsq 131072",
       "--tsq 131072 makes a stream producer wait for completions, and --producer datagram never "
       "waits"},
      {run + " --driver ethdev:net_null0 --tsq 131072",
       "--tsq 131072 waits for the NIC's completions to release a stream's bytes, and txbatch "
       "sees completions on emu:MODEL drivers only (ethdev:net_null0 is not one)"},
      {run + " --driver ethdev:net_null0 --driver ethdev:net_ring0 --tsq 1048576",
       "drivers only (none of ethdev:net_null0, ethdev:net_ring0 is)"},
      {"sweep --out " + ::testing::TempDir() +
           "/tsq_sweep --procs 1 --batch 1 --duration 0.01 --warmup 0 --rounds 1 --proto udp "
           "--tsq 65536",
       "--proto udp sends datagrams"},
  });
  EXPECT_FALSE(std::filesystem::exists(json));
  EXPECT_FALSE(std::filesystem::exists(::testing::TempDir() + "/tsq_sweep"));
}

// Where it can run, --tsq runs; --tsq 0 (nothing to turn off) and the default are taken
// anywhere; with emu and other drivers together the header names the drivers whose cells ran
// without TCP Small Queues.
TEST(RunPlan, TsqRunsWhereItCanAndTheHeaderSaysWhereNot) {
  RunArgs udp;
  udp.proto = "udp";
  EXPECT_TRUE(BuildRunPlan(udp).ok());  // the default, not given
  udp.tsq_given = true;
  udp.tsq = 0;
  EXPECT_TRUE(BuildRunPlan(udp).ok());
  udp.tsq = 131072;
  EXPECT_FALSE(BuildRunPlan(udp).ok());

  RunArgs mixed;
  mixed.drivers = {"emu:e1000", "ethdev:net_null0"};
  mixed.tsq = 131072;
  mixed.tsq_given = true;
  mixed.procs = "1";
  mixed.size = "4096";
  auto plan = BuildRunPlan(mixed);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  for (const CellConfig& c : plan->cells)
    EXPECT_EQ(TsqActive(c), c.driver_spec.emulated()) << c.driver;
  const auto header = [](const std::vector<CellConfig>& cells) {
    char* text = nullptr;
    size_t size = 0;
    std::FILE* out = open_memstream(&text, &size);
    PrintHeader(out, cells, RunEnv{});
    std::fclose(out);
    std::string s(text, size);
    std::free(text);
    return s;
  };
  EXPECT_NE(header(plan->cells)
                .find("note: TCP Small Queues (131072 bytes below a socket) run on emu "
                      "drivers only, whose completions release the bytes: the cells of "
                      "ethdev:net_null0,no-rx=1 ran without them (config.tsq null)\n"),
            std::string::npos)
      << header(plan->cells);
  mixed.drivers = {"emu:e1000"};
  plan = BuildRunPlan(mixed);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(header(plan->cells).find("note: TCP Small Queues"), std::string::npos);

  // Without --tsq each policy has its kernel's cap (EraTsqBytes), and the header names each
  // where they differ; it said the first cell's 1048576 for all of them.
  RunArgs eras;
  eras.drivers = {"emu:e1000"};
  eras.policy = "count:32,linux-2014,linux-2025";
  eras.procs = "1";
  eras.size = "4096";
  plan = BuildRunPlan(eras);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_NE(header(plan->cells)
                .find("and beyond 1048576 (count:32), 131072 (linux-2014), 4194304 "
                      "(linux-2025) bytes below the socket: TCP Small Queues, on emu drivers)"),
            std::string::npos)
      << header(plan->cells);
}

}  // namespace
}  // namespace txbatch
