// txbatch report: a result file re-rendered without running anything gives the same tables (or
// comparison) the command printed; bad files get one sentence.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>

#include "tests/e2e/run_helper.h"

namespace txbatch::test {
namespace {

std::string SaveDoc(const nlohmann::json& doc, const char* name) {
  const std::string path =
      ::testing::TempDir() + "/" + name + "_" + std::to_string(getpid()) + ".json";
  std::ofstream(path) << doc.dump(2);
  return path;
}

// `report` on the file a command (`args`) wrote prints what the command printed: header, tables,
// verdicts or comparison, books, all from the file — but the telemetry line, which pointed at the
// process while it ran.
void ExpectReportReRenders(const std::string& args, const char* name) {
  const auto run = RunTxbatch(args);
  ASSERT_EQ(run.status, 0) << run.err;
  const std::string path = SaveDoc(run.doc, name);
  const auto report = RunTxbatch("report " + path);
  ASSERT_EQ(report.status, 0) << report.err;
  const std::regex telemetry("telemetry: dpdk-telemetry\\.py -f [^\\n]*\\n");
  ASSERT_TRUE(std::regex_search(run.out, telemetry)) << run.out;
  EXPECT_EQ(report.out, std::regex_replace(run.out, telemetry, ""));
  std::remove(path.c_str());
}

TEST(Report, ReRendersTheRunTablesIdentically) {
  ExpectReportReRenders(
      "run --driver emu:ixgbe --proto udp --size 64,1000 --procs 2 --batch 1,8 --rounds 2 "
      "--duration 0.1 --warmup 0.05 --per-flow",
      "report_run");
}

TEST(Report, ReRendersAComparisonIdentically) {
  ExpectReportReRenders(
      "compare --driver emu:null --proto udp --size 64 --procs 1 --batch 1,16 --rounds 3 "
      "--duration 0.1 --warmup 0.05",
      "report_compare");
}

TEST(Report, FilesThatAreNotResultsAreOneSentence) {
  const std::string not_json = SaveDoc(nlohmann::json::object(), "report_bad");
  std::ofstream(not_json) << "{ not json";
  const std::string foreign = SaveDoc(nlohmann::json{{"schema_version", 1}}, "report_foreign");
  for (const std::string& f : {std::string("/nonexistent/x.json"), not_json, foreign}) {
    const auto r = RunTxbatch("report " + f);
    EXPECT_EQ(r.status, 2) << f << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << f << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << f;
  }
  std::remove(not_json.c_str());
  std::remove(foreign.c_str());
}

// Found by report_fuzz: a float where an integer belongs (1.87905e+69 as a frame size) was
// converted to unsigned — undefined behaviour. Such values, negative counts and fractional counters
// are now refused with the document's one sentence.
TEST(Report, NumbersOutsideAnIntegerFieldsRangeAreOneSentence) {
  const auto run = RunTxbatch(
      "run --driver emu:null --engine sim --procs 1 --batch 8 --duration 0.02 --warmup 0.01");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto tamper = [&](const char* name, auto edit) {
    nlohmann::json doc = run.doc;
    edit(doc["records"][0]);
    const std::string path = SaveDoc(doc, name);
    const auto r = RunTxbatch("report " + path);
    EXPECT_EQ(r.status, 2) << name << ": " << r.err << r.out;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << name << ": " << r.err;
    EXPECT_NE(r.err.find(" was expected"), std::string::npos) << name << ": " << r.err;
    std::remove(path.c_str());
  };
  tamper("huge_size", [](nlohmann::json& rec) { rec["config"]["size"] = 1.87905e69; });
  tamper("negative_count", [](nlohmann::json& rec) { rec["results"]["packets"] = -3; });
  tamper("fractional_drop",
         [](nlohmann::json& rec) { rec["results"]["drops"]["qdisc_full"] = 2.5; });
  // And a batch_hist key that is not a batch size (it threw out of the reader: a crash).
  tamper("bad_hist_key", [](nlohmann::json& rec) { rec["results"]["batch_hist"]["x7"] = 1; });
  // Latency histogram bins that are not [lo, hi, count] going up.
  tamper("bins_object", [](nlohmann::json& rec) {
    rec["results"]["latency_hist_ns"]["bins"] = nlohmann::json::object({{"a", 1}});
  });
  tamper("bin_of_two", [](nlohmann::json& rec) {
    rec["results"]["latency_hist_ns"]["bins"][0] = nlohmann::json::array({1, 2});
  });
  tamper("bin_upside_down", [](nlohmann::json& rec) {
    rec["results"]["latency_hist_ns"]["bins"][0] = nlohmann::json::array({5, 2, 1});
  });
  tamper("bins_overlapping", [](nlohmann::json& rec) {
    auto& bins = rec["results"]["latency_hist_ns"]["bins"];
    bins.push_back(bins.back());
  });
  // The untouched document still reads.
  const std::string path = SaveDoc(run.doc, "untouched");
  EXPECT_EQ(RunTxbatch("report " + path).status, 0);
  std::remove(path.c_str());
}

// Issue 44, item 21: names and strings from a document are printed with their control
// characters escaped (an ESC in a driver name drove the terminal), and a sink's --json document
// is said to be one (it was told to use a file txbatch wrote with --json: it is one).
TEST(Report, ControlCharactersFromTheDocumentAreEscapedAndASinkRecordIsNamed) {
  const auto run = RunTxbatch(
      "run --driver emu:null --engine sim --procs 1 --batch 8 --duration 0.02 --warmup 0.01");
  ASSERT_EQ(run.status, 0) << run.err;
  nlohmann::json doc = run.doc;
  doc["records"][0]["config"]["driver_given"] = "emu:\x1b[31mnull\x07\xc2\x9b";
  doc["records"][0]["env"]["kernel"] = "k\x1b]0;title\x07";
  const std::string path = SaveDoc(doc, "report_ctl");
  const auto r = RunTxbatch("report " + path);
  EXPECT_EQ(r.status, 0) << r.err;
  for (const char c : r.out)
    EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 && c != '\n') << int(c) << r.out;
  EXPECT_EQ(r.out.find("\xc2\x9b"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("emu:\\x1b[31mnull\\x07\\u009b"), std::string::npos) << r.out;
  std::remove(path.c_str());

  const std::string sink = SaveDoc(
      {{"schema_version", 1}, {"kind", "sink"}, {"port", "net_null0"}, {"results", {}}}, "sink");
  const auto s = RunTxbatch("report " + sink);
  EXPECT_EQ(s.status, 2);
  EXPECT_EQ(std::count(s.err.begin(), s.err.end(), '\n'), 1) << s.err;
  EXPECT_NE(s.err.find("is a txbatch sink record; report reads "
                       "run/compare/sweep/tune/calibrate result documents"),
            std::string::npos)
      << s.err;
  std::remove(sink.c_str());
}

// Issue 44, item 19: nesting past kMaxResultDepth (64) is one sentence, as txbatch-plot refuses
// it (Python's json recurses a frame a level); 64 levels still read.
TEST(Report, NestingPastSixtyFourLevelsIsOneSentence) {
  const auto run = RunTxbatch(
      "run --driver emu:null --engine sim --procs 1 --batch 8 --duration 0.02 --warmup 0.01");
  ASSERT_EQ(run.status, 0) << run.err;
  for (const int depth : {64, 65}) {
    nlohmann::json doc = run.doc, deep = nlohmann::json::array();
    for (int i = 2; i < depth; ++i) deep = nlohmann::json::array({deep});
    doc["extra"] = deep;  // the document is level 1
    const std::string path = SaveDoc(doc, "report_deep");
    const auto r = RunTxbatch("report " + path);
    EXPECT_EQ(r.status, depth <= 64 ? 0 : 2) << depth << ": " << r.err;
    if (depth > 64) EXPECT_NE(r.err.find("deeper than the 64 levels"), std::string::npos) << r.err;
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace txbatch::test
