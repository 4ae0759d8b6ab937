// Quantities in tc's words through the binary (issue 20, item 4): a run given its window, warm-up
// and rate with units runs them and records them; a word in no unit is one sentence, exit 2,
// nothing written; the forwarding commands' --duration and --stats take the same words. And
// --eal-extra.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "tests/e2e/run_helper.h"

namespace txbatch::test {
namespace {

TEST(Units, ARunTakesItsTimesAndRateInTcsWords) {
  const auto run = RunTxbatch(
      "run --driver emu:e1000 --proto udp --size 64 --procs 1 --batch 1 --duration 50ms "
      "--warmup 20MS --rate 100Mbit");
  ASSERT_TRUE(WroteCells(run, 1));
  const auto& c = run.doc["records"][0]["config"];
  EXPECT_DOUBLE_EQ(c["duration_s"].get<double>(), 0.05);
  EXPECT_DOUBLE_EQ(c["warmup_s"].get<double>(), 0.02);
  EXPECT_EQ(c["rate"], "100000000bit");
  // Paced at 100 Mbit/s of wire (64 B datagrams: 84 wire bytes each, preamble and gap too): 1e8 /
  // (84 x 8) = 0.149 Mpps. The bound is twice that and a fifth of the 1 Gbit/s wire's 1.49 Mpps:
  // a rate read as 100 Mbyte/s or Gbit/s (8x, 10x) crosses it, pacing's own jitter does not.
  EXPECT_LT(Results(run, 0)["mpps"].get<double>(), 0.3);
}

TEST(Units, AWordInNoUnitIsOneSentence) {
  const std::pair<const char*, const char*> cases[] = {
      {"run --duration 5x", "--duration '5x' is not a time; valid: a number with a unit s, ms"},
      {"run --warmup 1min", "--warmup '1min' is not a time"},
      {"run --rate 1000", "rate '1000' is not valid; valid: max, or frames/s"},
      {"run --bql-hold-time 1h", "--bql-hold-time '1h' is not a time"},
      {"sink --port net_null0 --stats 1x", "--stats '1x' is not a time"},
      {"run --link 'rate 1gigabit'", "rate needs a rate from 1bit to 10tbit"},
  };
  for (const auto& [args, sentence] : cases) {
    const auto run = RunTxbatch(args);
    EXPECT_EQ(run.status, 2) << args << ": " << run.err;
    EXPECT_NE(run.err.find(sentence), std::string::npos) << args << ": " << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << args << ": " << run.err;
    EXPECT_TRUE(run.doc.is_null()) << args;
  }
}

// --eal-extra (issue 20, item 5): added after txbatch's own EAL arguments, as the record says;
// with arguments after -- (which replace them) it is one sentence.
TEST(EalExtra, AddsToTxbatchsOwnArgumentsAndNotToThoseAfterDashDash) {
  const auto run = RunTxbatch(
      "run --driver emu:null --proto udp --size 64 --procs 1 --batch 1 --duration 20ms "
      "--warmup 0 --eal-extra '--log-level=lib.eal:notice  --vdev=net_null9'");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto eal = run.doc["records"][0]["config"]["eal"].get<std::vector<std::string>>();
  ASSERT_GE(eal.size(), 3u);
  EXPECT_EQ(eal[eal.size() - 2], "--log-level=lib.eal:notice");
  EXPECT_EQ(eal.back(), "--vdev=net_null9");
  EXPECT_NE(std::find(eal.begin(), eal.end(), "--no-pci"), eal.end());  // txbatch's own kept
  EXPECT_NE(run.out.find("--eal-extra added --log-level=lib.eal:notice --vdev=net_null9"),
            std::string::npos)
      << run.out;
  // A log level among them shows DPDK's log, as one after -- does.
  const auto logged = RunTxbatch(
      "run --driver emu:null --proto udp --size 64 --procs 1 --batch 1 --duration 20ms "
      "--warmup 0 --eal-extra --log-level=lib.eal:debug");
  ASSERT_EQ(logged.status, 0) << logged.err;
  EXPECT_NE((logged.err + logged.out).find("EAL: "), std::string::npos) << logged.err;
  for (const char* args : {"run --eal-extra --no-pci -- --no-huge", "run --eal-extra ' '"}) {
    const auto bad = RunTxbatch(args);
    EXPECT_EQ(bad.status, 2) << args << ": " << bad.err;
    EXPECT_NE(bad.err.find("--eal-extra"), std::string::npos) << args << ": " << bad.err;
    EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << args << ": " << bad.err;
  }
}

// Under CI or tee (stderr no terminal) a grid that runs longer than kProgressLineS says where it
// is in whole lines (issue 20, item 3); a terminal gets the line rewritten in place instead.
TEST(Progress, AGridSaysWhereItIsOnAStderrThatIsNoTerminal) {
  const auto run = RunTxbatch(
      "run --driver emu:null --proto udp --size 64 --procs 1 --batch 1 --rounds 7 --duration 0.8 "
      "--warmup 0");
  ASSERT_EQ(run.status, 0) << run.err;
  const std::regex line(R"(txbatch: cell [1-7]/7 \(round [1-7]/7\), \d+ s so far, ETA \d+ s\n)");
  EXPECT_TRUE(std::regex_search(run.err, line)) << run.err;
  EXPECT_EQ(run.err.find('\r'), std::string::npos) << run.err;
}

}  // namespace
}  // namespace txbatch::test
