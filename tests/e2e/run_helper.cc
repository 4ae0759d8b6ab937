#include "tests/e2e/run_helper.h"

#include <chrono>

#include "dataplane/eal.h"

namespace txbatch::test {
::testing::AssertionResult WroteCells(const TxbatchRun& run, size_t cells) {
  const size_t records = run.doc.contains("records") ? run.doc["records"].size() : 0;
  if (run.status == 0 && records == cells) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "exit status " << run.status << ", " << records << " records of " << cells << " cells\n"
         << run.err << run.out;
}

const nlohmann::json& Results(const TxbatchRun& run, size_t i) {
  return run.doc["records"][i]["results"];
}

std::vector<Cell> Cells(const TxbatchRun& run) {
  std::vector<Cell> cells;
  for (const nlohmann::json& rec : run.doc["records"]) {
    const nlohmann::json& r = rec["results"];
    cells.push_back(Cell{rec, r, r["accounting"], rec["config"].dump()});
  }
  return cells;
}

TxbatchRun RunTxbatchTimed(const std::string& args, double* wall_s) {
  const auto t0 = std::chrono::steady_clock::now();
  TxbatchRun run = RunTxbatch(args);
  *wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

std::string UserEalArgs(const std::string& file_prefix) {
  return " -- --no-huge -m 256 --no-shconf --no-pci --no-telemetry --file-prefix=" + file_prefix;
}

std::vector<uint64_t> SentByDriverCountedRecords(const nlohmann::json& doc) {
  std::vector<uint64_t> sent;
  for (const auto& rec : doc["records"]) {
    EXPECT_TRUE(rec["results"]["accounting"]["balanced"].get<bool>()) << rec["config"].dump();
    EXPECT_EQ(rec["results"]["counted_at"], "driver") << rec["config"].dump();
    sent.push_back(rec["results"]["accounting"]["sent"].get<uint64_t>());
  }
  return sent;
}

bool HugepagesAvailable() {
  // --in-memory also needs the file-size limit to hold a hugepage file (EalHost).
  const EalHost host = EalHost::Here();
  return host.free_huge_bytes >= (256ull << 20) && host.file_size_limit >= host.huge_page_bytes;
}

void ExpectBooksClosed(const nlohmann::json& rec) {
  const nlohmann::json& r = rec["results"];
  const nlohmann::json& a = r["accounting"];
  const std::string cell = rec["config"].dump();
  EXPECT_TRUE(a["balanced"].get<bool>()) << cell << a.dump();
  EXPECT_EQ(r["mbufs_in_use_at_exit"], 0) << cell;
  EXPECT_EQ(a["queued"], 0) << cell;  // the drain completed
}

void ExpectDeliveredOnce(const nlohmann::json& rec) {
  ExpectBooksClosed(rec);
  const nlohmann::json& a = rec["results"]["accounting"];
  const std::string cell = rec["config"].dump();
  EXPECT_EQ(a["received"], a["sent"]) << cell;
  EXPECT_EQ(a["lost"], 0) << cell;
  EXPECT_EQ(a["duplicated"], 0) << cell;
}

void ExpectDropsHaveReasons(const nlohmann::json& rec) {
  const nlohmann::json& r = rec["results"];
  const std::string cell = rec["config"].dump();
  EXPECT_EQ(r["alloc_failures"], 0) << cell << ": the pool ran dry";
  uint64_t by_reason = 0;
  for (const auto& [reason, n] : r["drops"].items()) by_reason += n.get<uint64_t>();
  EXPECT_EQ(by_reason, r["drops_total"].get<uint64_t>()) << cell << r["drops"].dump();
}

}  // namespace txbatch::test
