// Quantities in tc(8)'s words (base/units.h): every unit each parser takes, in any case, the
// bare number's meaning per caller, and one sentence for what is refused; the options and the
// link spec that use them.
#include "base/units.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>

#include "dataplane/link_spec.h"
#include "dataplane/producer.h"
#include "drivers/factory.h"
#include "results/latency_text.h"
#include "results/record_reader.h"
#include "results/records.h"
#include "results/tables.h"
#include "tools/run_options.h"

namespace txbatch {
namespace {

TEST(Units, EveryTimeUnitInAnyCase) {
  const std::pair<const char*, double> forms[] = {
      {"2s", 2e9},        {"2sec", 2e9},         {"2secs", 2e9}, {"1.5ms", 1.5e6},
      {"1.5msec", 1.5e6}, {"1.5msecs", 1.5e6},   {"50us", 50e3}, {"50usec", 50e3},
      {"50usecs", 50e3},  {"50\xc2\xb5s", 50e3}, {"800ns", 800}, {"800nsec", 800},
      {"800nsecs", 800},  {"500MS", 500e6},      {"3Sec", 3e9},  {"0ms", 0},
      {"1e-3s", 1e6},
  };
  for (const auto& [text, ns] : forms) {
    auto r = ParseTimeNs("--x", text, 0);
    ASSERT_TRUE(r.ok()) << text << ": " << r.error().message;
    EXPECT_DOUBLE_EQ(*r, ns) << text;
  }
}

TEST(Units, ABareTimeIsTheCallersUnitOrRefused) {
  EXPECT_DOUBLE_EQ(*ParseTimeNs("--link", "3", kUsNs), 3e3);  // tc's and netem's rule
  EXPECT_DOUBLE_EQ(*ParseTimeNs("--duration", "0.5", kSecondNs), 0.5e9);
  EXPECT_DOUBLE_EQ(*ParseTimeNs("--bql-hold-time", "1000", kMsNs), 1e9);
  auto r = ParseTimeNs("--p99-max", "50", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            std::string("--p99-max '50' is not a time; valid: ") + kTimeUnitsSentence);
  auto s = ParseTimeNs("--duration", "5x", kSecondNs);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, std::string("--duration '5x' is not a time; valid: ") +
                                   kTimeUnitsSentence + "; a bare number is seconds");
}

TEST(Units, TimesRefused) {
  for (const char* bad : {"", "us", "-5us", "5 us", " 5us", "5parsecs", "1e400s", "1e300s",
                          "1e-400ms", "nanms", "infs", "0x10ms", "+5ms", "5m", "5min"}) {
    auto r = ParseTimeNs("--x", bad, kUsNs);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().message.rfind(std::string("--x '") + bad + "' is not a time; valid: ", 0),
              0u)
        << r.error().message;
  }
}

TEST(Units, EveryRateUnitInAnyCase) {
  const double ki = 1024, mi = ki * ki, gi = mi * ki, ti = gi * ki;
  const std::pair<const char*, double> forms[] = {
      {"1000bit", 1e3},   {"1kbit", 1e3},     {"100mbit", 1e8},   {"1gbit", 1e9},
      {"2tbit", 2e12},    {"1kibit", ki},     {"1mibit", mi},     {"1gibit", gi},
      {"1tibit", ti},     {"1000bps", 8e3},   {"1kbps", 8e3},     {"10mbps", 8e7},
      {"1gbps", 8e9},     {"1tbps", 8e12},    {"1kibps", 8 * ki}, {"1mibps", 8 * mi},
      {"1gibps", 8 * gi}, {"1tibps", 8 * ti}, {"1Gbit", 1e9},     {"10MBPS", 8e7},
      {"2.5GBit", 2.5e9},
  };
  for (const auto& [text, bps] : forms) {
    auto r = ParseBitRate("--x", text, false);
    ASSERT_TRUE(r.ok()) << text << ": " << r.error().message;
    EXPECT_DOUBLE_EQ(*r, bps) << text;
  }
  EXPECT_DOUBLE_EQ(*ParseBitRate("--link", "1000", true), 1000);  // tc: a bare number is bits
  EXPECT_FALSE(ParseBitRate("--rate", "1000", false).ok());
  for (const char* bad : {"0mbit", "-1mbit", "1e400bit", "mbit", "1mbits", "1mb", "1 mbit"}) {
    auto r = ParseBitRate("--x", bad, true);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().message, std::string("--x '") + bad + "' is not a rate; valid: " +
                                     kBitRateUnitsSentence + "; a bare number is bits/s");
  }
}

TEST(Units, EveryPacketRateUnit) {
  const std::pair<const char*, double> forms[] = {
      {"40000pps", 4e4}, {"40kpps", 4e4}, {"1.5mpps", 1.5e6}, {"1gpps", 1e9}, {"2MPPS", 2e6}};
  for (const auto& [text, pps] : forms) {
    auto r = ParsePacketRate("--x", text);
    ASSERT_TRUE(r.ok()) << text << ": " << r.error().message;
    EXPECT_DOUBLE_EQ(*r, pps) << text;
  }
  for (const char* bad : {"40000", "0pps", "pps", "1e400pps", "1ppss"})
    EXPECT_FALSE(ParsePacketRate("--x", bad).ok()) << bad;
}

// --rate: max, frames/s or wire bits/s in tc's words; its bps is bytes (it was bits until
// 2026-12-05), and a record says the rate in bits.
TEST(Units, TheOfferedRateTakesTcsWords) {
  auto gbit = ParseRate("1Gbit");
  ASSERT_TRUE(gbit.ok()) << gbit.error().message;
  EXPECT_EQ(gbit->unit, RateSpec::Unit::kBits);
  EXPECT_DOUBLE_EQ(gbit->value, 1e9);
  EXPECT_EQ(gbit->ToString(), "1000000000bit");
  auto bytes = ParseRate("100mbps");
  ASSERT_TRUE(bytes.ok());
  EXPECT_DOUBLE_EQ(bytes->value, 8e8);
  auto pps = ParseRate("1.5Mpps");
  ASSERT_TRUE(pps.ok());
  EXPECT_EQ(pps->unit, RateSpec::Unit::kPps);
  EXPECT_EQ(pps->ToString(), "1500000pps");
  for (const std::string& s : {gbit->ToString(), pps->ToString()}) {
    auto back = ParseRate(s);
    ASSERT_TRUE(back.ok()) << s;
    EXPECT_EQ(back->ToString(), s);
  }
  for (const char* bad : {"1000", "fast", "0.5pps", "100bit", "2e13bit"}) {
    auto r = ParseRate(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("valid: max, or frames/s"), std::string::npos);
  }
}

// A record says its rate in bits ("Nbit"); one written before 2026-12-05 said "Nbps" and meant
// bits too, and is read so (not as tc's bytes).
TEST(Units, ARecordsRateReadsBackInBitsOldOrNew) {
  CellRecord r;
  auto emu = ParseDriverSpec("emu:e1000");
  ASSERT_TRUE(emu);
  r.config.driver_spec = *emu;
  r.config.driver = emu->ToString();
  r.config.rate = *ParseRate("500mbit");
  nlohmann::json doc = ToJson({r}, RunEnv{});
  EXPECT_EQ(doc["records"][0]["config"]["rate"], "500000000bit");
  const auto rate_read_back = [&] {
    auto back = ParseResults(doc.dump(), "test.json");
    EXPECT_TRUE(back) << back.error().message;
    return back ? back->records.at(0).config.rate : RateSpec{};
  };
  EXPECT_EQ(rate_read_back().value, 5e8);
  doc["records"][0]["config"]["rate"] = "5e+08bps";  // RateSpec::ToString until 2026-12-05
  EXPECT_EQ(rate_read_back().unit, RateSpec::Unit::kBits);
  EXPECT_EQ(rate_read_back().value, 5e8);
  doc["records"][0]["config"]["rate"] = "40000pps";
  EXPECT_EQ(rate_read_back().value, 4e4);
}

// The link spec reads the same words (tc-netem(8)): 1Gbit, bytes, a bare microsecond delay.
TEST(Units, TheLinkSpecReadsTheSameWords) {
  auto l = ParseLinkSpec("delay 2 rate 1Gbit", "");
  ASSERT_TRUE(l.ok()) << l.error().message;
  EXPECT_DOUBLE_EQ(l->delay_ns, 2e3);
  EXPECT_DOUBLE_EQ(l->rate_bps, 1e9);
  auto m = ParseLinkSpec("delay 1.5MSEC rate 10mbps", "");
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_DOUBLE_EQ(m->delay_ns, 1.5e6);
  EXPECT_DOUBLE_EQ(m->rate_bps, 8e7);
  auto bad = ParseLinkSpec("rate fast", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find(kBitRateUnitsSentence), std::string::npos);
}

// A latency reads in tc's words, in its own unit alone, and in a table one unit for a column.
TEST(Units, LatencyTextIsOneUnitAColumn) {
  EXPECT_EQ(LatencyText(282.5e3), "282.5us");
  EXPECT_EQ(LatencyText(1.25e6), "1250.0us");  // as a column of it alone
  EXPECT_EQ(LatencyText(12.5e6), "12.500ms");
  EXPECT_EQ(LatencyText(std::nullopt, LatencyUnit::kUs), "-");
  EXPECT_EQ(ColumnUnit({900e3, std::nullopt, 12e6}), LatencyUnit::kMs);
  EXPECT_EQ(ColumnUnit({900e3, 9.9e6}), LatencyUnit::kUs);
  EXPECT_DOUBLE_EQ(*ParseTimeNs("p99", LatencyText(282.5e3), 0), 282.5e3);  // it reads back

  // Two cells of one table, p99 900 us and 12 ms: both in ms (until 2026-12-05 "900.0us" sat
  // above "12.00ms"), the small one with its microseconds.
  auto emu = ParseDriverSpec("emu:e1000");
  ASSERT_TRUE(emu);
  std::vector<CellRecord> records;
  for (const double p99 : {900e3, 12e6}) {
    CellRecord r;
    r.config.driver_spec = *emu;
    r.config.driver = emu->ToString();
    r.config.procs = records.empty() ? 1 : 8;
    r.cell = static_cast<int>(records.size());
    r.result.packets = 1000;
    r.result.mpps = 1;
    r.result.latency = LatencySummary{.avg = p99 / 2, .p50 = p99 / 2, .p99 = p99, .count = 1000};
    records.push_back(r);
  }
  char* text = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&text, &size);
  ASSERT_NE(out, nullptr);
  PrintTables(out, records, {records.front().config.policy});
  std::fclose(out);
  const std::string tables(text, size);
  std::free(text);
  EXPECT_NE(tables.find("0.900ms"), std::string::npos) << tables;
  EXPECT_NE(tables.find("12.000ms"), std::string::npos) << tables;
  EXPECT_EQ(tables.find("900.0us"), std::string::npos) << tables;
  EXPECT_NE(tables.find("6000.0us"), std::string::npos) << tables;  // avg: under 10 ms, us
}

// A time option takes tc's words and a bare number of its own unit; CLI11 is handed the number.
TEST(Units, TimeOptionsTakeUnitsAndBareNumbers) {
  const auto parse = [](const char* flag, const char* value, double unit_ns) {
    CLI::App app;
    double v = -1;
    AddTimeOption(app, flag, v, "", unit_ns, ValueRange{0, 1e6});
    std::vector<std::string> args = {value, flag};  // CLI11 reads them from the back
    app.parse(args);
    return v;
  };
  EXPECT_DOUBLE_EQ(parse("--duration", "500ms", kSecondNs), 0.5);
  EXPECT_DOUBLE_EQ(parse("--duration", "2", kSecondNs), 2);
  EXPECT_DOUBLE_EQ(parse("--duration", "1e-1", kSecondNs), 0.1);
  EXPECT_DOUBLE_EQ(parse("--bql-hold-time", "1s", kMsNs), 1000);
  EXPECT_DOUBLE_EQ(parse("--bql-hold-time", "250", kMsNs), 250);
  try {
    parse("--duration", "5parsecs", kSecondNs);
    ADD_FAILURE() << "5parsecs was taken";
  } catch (const CLI::ParseError& e) {
    EXPECT_EQ(std::string(e.what()), std::string("--duration '5parsecs' is not a time; valid: ") +
                                         kTimeUnitsSentence + "; a bare number is seconds");
  }
}

}  // namespace
}  // namespace txbatch
