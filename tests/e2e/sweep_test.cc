// txbatch sweep --out DIR on emu and net_null: the CSV and JSON validate against their documented
// shape (doc/output.md), txbatch-plot draws its figures there (tests/e2e/plot_test.py checks
// them against the data), and report --out re-renders the same files from results.json alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>

#include "tests/e2e/run_helper.h"
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
  for (const char* f : {"tables.txt", "results.csv", "results.json", "latency_hist.csv"})
    ASSERT_TRUE(std::filesystem::exists(dir_ / f)) << f;
  EXPECT_NE(run.out.find("wrote " + dir_.string() +
                         "/{tables.txt,results.csv,results.json,"
                         "latency_hist.csv}\n"),
            std::string::npos)
      << run.out;

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

  // The figures: txbatch-plot beside the binary drew them, each series named by the cell apart
  // from its batch limit (and the facet's size and producers).
  ASSERT_NE(run.out.find("drew " + dir_.string() + "/{latency.svg,latency.png,"), std::string::npos)
      << run.out << run.err;
  for (const char* f : {"latency", "throughput", "cost", "batching"}) {
    EXPECT_EQ(std::system(("xmllint --noout " + (dir_ / f).string() + ".svg").c_str()), 0) << f;
    EXPECT_TRUE(std::filesystem::exists(dir_ / (std::string(f) + ".png"))) << f;
  }
  const auto figs = nlohmann::json::parse(Slurp(dir_ / "figures.json"))["figures"];
  ASSERT_EQ(figs.size(), 4u);
  const std::string series = driver + " rootlock inline";
  EXPECT_EQ(figs[1]["file"], "throughput");
  EXPECT_EQ(figs[1]["panels"][0]["series"][0]["label"], series);
  EXPECT_EQ(figs[1]["panels"][0]["series"][0]["x"], nlohmann::json::array({1, 8}));
  if (driver == "ethdev:net_null0") {  // nothing receives: the figure says so, draws no curve
    EXPECT_TRUE(figs[0]["panels"][0]["series"].empty());
    EXPECT_NE(Slurp(dir_ / "latency.svg").find("no latency: nothing receives"), std::string::npos);
  } else {
    EXPECT_EQ(figs[0]["panels"][0]["series"][0]["label"], "batch 1 " + series);
  }

  // report --out re-renders the same files from results.json alone.
  const std::filesystem::path again = dir_ / "again";
  const auto report =
      RunTxbatch("report " + (dir_ / "results.json").string() + " --out " + again.string());
  ASSERT_EQ(report.status, 0) << report.err;
  for (const char* f : {"tables.txt", "results.csv", "latency_hist.csv", "latency.svg",
                        "throughput.svg", "cost.svg", "batching.svg"})
    EXPECT_EQ(Slurp(again / f), Slurp(dir_ / f)) << f;
  // figures.json the same but for the files drawn as they lie (their inodes and times).
  auto drawn = nlohmann::json::parse(Slurp(dir_ / "figures.json"));
  auto redrawn = nlohmann::json::parse(Slurp(again / "figures.json"));
  ASSERT_EQ(drawn["files"].size(), 8u) << drawn["files"].dump();
  EXPECT_EQ(redrawn["files"].size(), 8u) << redrawn["files"].dump();
  drawn.erase("files");
  redrawn.erase("files");
  EXPECT_EQ(redrawn, drawn);
}

INSTANTIATE_TEST_SUITE_P(Drivers, SweepOut, ::testing::Values("emu:null", "ethdev:net_null0"),
                         [](const auto& info) {
                           return std::string(info.param == "emu:null" ? "emu_null" : "net_null");
                         });

// Figures are an extra: where txbatch-plot is not there or fails, the data files stand, stderr
// says why in one line, and the exit status is the measurement's. An earlier run's figures go:
// they were not drawn from this run's data. Only those: the files figures.json lists as drawn
// and that are still as drawn; a user's file that only has a figure's name stays, and so does a
// figure changed since it was drawn, each named on that line (issue 44, item 21: every
// figure-named file went).
TEST(Sweep, WithoutItsFiguresWritesTheDataAndSaysWhy) {
  const std::filesystem::path dir =
      ::testing::TempDir() + "/sweep_nofig_" + std::to_string(getpid());
  const std::string sweep =
      "sweep --driver emu:null --proto udp --size 64 --batch 1,8 --rounds 1 --duration 0.05 "
      "--warmup 0.02 --out " +
      dir.string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "onoff.svg") << "mine";    // the name of a figure txbatch once drew
  std::ofstream(dir / "compare.png") << "mine";  // one a sweep's drawing never draws
  // An earlier run, drawn by txbatch-plot beside the binary.
  const auto drawn = RunTxbatch(sweep);
  ASSERT_EQ(drawn.status, 0) << drawn.err;
  ASSERT_NE(drawn.out.find("drew " + dir.string() + "/{latency.svg,"), std::string::npos)
      << drawn.out << drawn.err;
  std::ofstream(dir / "cost.svg", std::ios::app) << "<!-- mine -->";  // changed since drawn
  bool first = true;
  for (const auto& [plot, says] :
       {std::pair{"", "TXBATCH_PLOT is set empty"}, std::pair{"/bin/false", "/bin/false exited 1"},
        std::pair{"/nonexistent/txbatch-plot", "is not there"}}) {
    setenv("TXBATCH_PLOT", plot, 1);
    const auto run = RunTxbatch(sweep);
    unsetenv("TXBATCH_PLOT");
    EXPECT_EQ(run.status, 0) << run.err;
    // One line says it (progress lines may come before it).
    const size_t at = run.err.find("txbatch: no figures in " + dir.string() + ": ");
    ASSERT_NE(at, std::string::npos) << run.err;
    const std::string line = run.err.substr(at, run.err.find('\n', at) - at);
    EXPECT_NE(line.find(says), std::string::npos) << line;
    EXPECT_NE(line.find(first ? "(left as they are, not drawn by txbatch or changed since: "
                                "cost.svg, compare.png, onoff.svg)"
                              : "(left as they are, not drawn by txbatch or changed since: "
                                "latency.svg, cost.svg, compare.png, figures.json, onoff.svg)"),
              std::string::npos)
        << line;
    EXPECT_EQ(run.err.find("figures", at + line.size()), std::string::npos) << run.err;
    EXPECT_EQ(run.out.find("drew "), std::string::npos) << run.out;
    for (const char* f : {"tables.txt", "results.csv", "results.json", "latency_hist.csv"})
      EXPECT_TRUE(std::filesystem::exists(dir / f)) << f;
    for (const char* gone : {"latency.png", "throughput.svg", "throughput.png", "cost.png",
                             "batching.svg", "batching.png"})
      EXPECT_FALSE(std::filesystem::exists(dir / gone)) << gone;
    EXPECT_EQ(Slurp(dir / "onoff.svg"), "mine");
    EXPECT_EQ(Slurp(dir / "compare.png"), "mine");
    EXPECT_TRUE(Slurp(dir / "cost.svg").ends_with("<!-- mine -->"));
    if (first) {
      EXPECT_FALSE(std::filesystem::exists(dir / "latency.svg"));
      EXPECT_FALSE(std::filesystem::exists(dir / "figures.json"));
      // A user's files of those names, from here on: they stay too.
      std::ofstream(dir / "latency.svg") << "mine";
      std::ofstream(dir / "figures.json") << "mine";
    } else {
      EXPECT_EQ(Slurp(dir / "latency.svg"), "mine");
      EXPECT_EQ(Slurp(dir / "figures.json"), "mine");
    }
    first = false;
  }
  std::filesystem::remove_all(dir);
}

TEST(Sweep, NeedsAnOutDirectoryItCanWrite) {
  EXPECT_EQ(RunTxbatch("sweep --duration 0.1").status, 2);  // --out is required
  const auto r = RunTxbatch("sweep --duration 0.1 --out /proc/no/such/dir");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

}  // namespace
}  // namespace txbatch::test
