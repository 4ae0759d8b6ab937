// Bad input on the command line as a user meets it (issue 44, item 21): one sentence of
// txbatch's on stderr that names what was typed, exit 2, nothing on stdout, no output file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/unit/run_txbatch.h"
#include "tools/run_options.h"

namespace txbatch {
namespace {

using test::Outcome;
using test::RunTxbatch;

struct Case {
  std::string args;
  std::string must_say;  // in the one line on stderr
};

// Each case refused: exit 2, `must_say` in its one line on stderr, nothing on stdout.
void ExpectRefused(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    const Outcome o = RunTxbatch(c.args);
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
    const std::string err = RunTxbatch(c.args).err;
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

}  // namespace
}  // namespace txbatch
