// txbatch sweep --out DIR on emu and net_null: the CSV and JSON validate against their documented
// shape (doc/output.md), the SVG plots parse as XML and carry the expected series, and report
// --out re-renders the same files from results.json alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "tests/driver/run_helper.h"
#include "tests/test_files.h"

namespace txbatch::test {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) out.push_back(line);
  return out;
}

size_t Fields(const std::string& csv_line) {  // no quoted commas in these rows
  return static_cast<size_t>(std::count(csv_line.begin(), csv_line.end(), ',')) + 1;
}

class SweepOut : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/sweep_" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_P(SweepOut, WritesTablesCsvJsonAndPlotsThatValidate) {
  const std::string driver = GetParam();
  const auto run = RunTxbatch("sweep --driver " + driver +
                              " --proto udp --size 64 --procs 2 --batch 8,1 --rounds 3 "
                              "--duration 0.1 --warmup 0.05 --out " +
                              dir_.string());
  ASSERT_EQ(run.status, 0) << run.err << run.out;
  for (const char* f : {"tables.txt", "results.csv", "results.json", "latency_hist.csv",
                        "throughput.svg", "latency.svg", "cost.svg", "calls.svg", "onoff.svg"})
    ASSERT_TRUE(std::filesystem::exists(dir_ / f)) << f;

  // CSV: the documented header, one row per cell (batch 1 first: the baseline), same width.
  const auto csv = Lines(Slurp(dir_ / "results.csv"));
  ASSERT_EQ(csv.size(), 3u);
  EXPECT_EQ(csv[0].rfind("driver,qdisc_shape,proto,size,procs,policy,batch,rounds,", 0), 0u);
  for (const auto& line : csv) EXPECT_EQ(Fields(line), Fields(csv[0])) << line;
  EXPECT_NE(csv[1].find(",count:1,1,3,"), std::string::npos) << csv[1];
  EXPECT_NE(csv[2].find(",count:8,8,3,"), std::string::npos) << csv[2];

  // JSON: the records of every round plus one summary row per cell.
  const auto doc = nlohmann::json::parse(Slurp(dir_ / "results.json"));
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["records"].size(), 6u);
  ASSERT_EQ(doc["summary"].size(), 2u);
  EXPECT_EQ(doc["summary"][0]["policy"], "count:1");
  EXPECT_TRUE(doc["summary"][0]["cycles_vs_off"].is_null());
  // The verdict is whatever the machine gave; its shape is fixed.
  const auto& vs = doc["summary"][1]["cycles_vs_off"];
  ASSERT_TRUE(vs.is_object()) << doc["summary"][1].dump();
  EXPECT_TRUE(vs["verdict"] == "better" || vs["verdict"] == "worse" ||
              vs["verdict"] == "equivalent" || vs["verdict"] == "inconclusive");
  EXPECT_LE(vs["ci95"][0].get<double>(), vs["ratio"].get<double>());
  EXPECT_GE(vs["ci95"][1].get<double>(), vs["ratio"].get<double>());

  // latency_hist.csv: each cell's bins, its rounds added up — as many frames as its records'
  // latency counts; none where nothing receives.
  const auto hist = Lines(Slurp(dir_ / "latency_hist.csv"));
  ASSERT_FALSE(hist.empty());
  EXPECT_EQ(hist[0],
            "driver,qdisc_shape,proto,size,procs,policy,batch,rounds,bin_lo_ns,"
            "bin_hi_ns,count");
  std::map<std::string, uint64_t> binned;  // by policy
  std::map<std::string, double> last_hi;
  for (size_t i = 1; i < hist.size(); ++i) {
    std::vector<std::string> f;
    std::stringstream ss(hist[i]);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    ASSERT_EQ(f.size(), 11u) << hist[i];
    const double lo = std::stod(f[8]), hi = std::stod(f[9]);
    EXPECT_LT(lo, hi) << hist[i];
    EXPECT_GE(lo, last_hi[f[5]]) << "bins in order, apart: " << hist[i];
    last_hi[f[5]] = hi;
    binned[f[5]] += std::stoull(f[10]);
  }
  std::map<std::string, uint64_t> counted;
  for (const auto& rec : doc["records"]) {
    const auto& h = rec["results"]["latency_hist_ns"];
    if (rec["results"]["latency_ns"].is_null()) {
      EXPECT_TRUE(h.is_null());
      continue;
    }
    counted[rec["config"]["policy"]] += rec["results"]["latency_ns"]["count"].get<uint64_t>();
    EXPECT_EQ(h["count"], rec["results"]["latency_ns"]["count"]);
    EXPECT_EQ(h["min"], rec["results"]["latency_ns"]["min"]);
    EXPECT_EQ(h["max"], rec["results"]["latency_ns"]["max"]);
  }
  EXPECT_EQ(binned, counted);
  if (driver == "ethdev:net_null0")
    EXPECT_EQ(hist.size(), 1u);  // the header alone
  else
    EXPECT_EQ(binned.size(), 2u);

  // SVG: well-formed XML with one series per cell apart from the batch limit.
  const std::string series = driver + " rootlock inline 64B x2";
  for (const char* f : {"throughput.svg", "latency.svg", "cost.svg", "calls.svg", "onoff.svg"}) {
    EXPECT_EQ(std::system(("xmllint --noout " + (dir_ / f).string()).c_str()), 0) << f;
    const bool no_latency = driver == "ethdev:net_null0" && std::string(f) == "latency.svg";
    if (no_latency)  // nothing receives: the plot says so instead of drawing nothing
      EXPECT_NE(Slurp(dir_ / f).find("no latency: nothing receives"), std::string::npos);
    else
      EXPECT_NE(Slurp(dir_ / f).find("data-series=\"" + series), std::string::npos) << f;
  }

  // report --out re-renders the same files from results.json alone.
  const std::filesystem::path again = dir_ / "again";
  const auto report =
      RunTxbatch("report " + (dir_ / "results.json").string() + " --out " + again.string());
  ASSERT_EQ(report.status, 0) << report.err;
  for (const char* f :
       {"tables.txt", "results.csv", "latency_hist.csv", "throughput.svg", "onoff.svg"})
    EXPECT_EQ(Slurp(again / f), Slurp(dir_ / f)) << f;
}

INSTANTIATE_TEST_SUITE_P(Drivers, SweepOut, ::testing::Values("emu:null", "ethdev:net_null0"),
                         [](const auto& info) {
                           return std::string(info.param == "emu:null" ? "emu_null" : "net_null");
                         });

TEST(Sweep, NeedsAnOutDirectoryItCanWrite) {
  EXPECT_EQ(RunTxbatch("sweep --duration 0.1").status, 2);  // --out is required
  const auto r = RunTxbatch("sweep --duration 0.1 --out /proc/no/such/dir");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

}  // namespace
}  // namespace txbatch::test
