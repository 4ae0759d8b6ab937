#include "tests/e2e/run_helper.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dataplane/eal.h"
#include "tests/test_files.h"

namespace txbatch::test {
TxbatchRun RunTxbatch(const std::string& args) {
  const char* bin = std::getenv("TXBATCH_BIN");
  const std::string dir = ::testing::TempDir();
  const std::string tag = std::to_string(getpid());
  const std::string json = dir + "/run_" + tag + ".json";
  const std::string out = dir + "/run_" + tag + ".out", err = dir + "/run_" + tag + ".err";
  std::filesystem::remove(json);
  // EAL arguments after "--" must stay last.
  std::string own = args, eal;
  if (const size_t dd = args.find(" -- "); dd != std::string::npos) {
    own = args.substr(0, dd);
    eal = args.substr(dd);
  }
  // A run measures one round unless the test asks for more: tests read one record per cell.
  if (own.starts_with("run") && own.find("--rounds") == std::string::npos) own += " --rounds 1";
  // report reads a result file and writes none.
  const std::string json_arg = own.starts_with("report") ? "" : " --json " + json;
  const std::string cmd =
      std::string(bin ? bin : "txbatch") + " " + own + json_arg + eal + " >" + out + " 2>" + err;
  const int rc = std::system(cmd.c_str());
  TxbatchRun r;
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = Slurp(out);
  r.err = Slurp(err);
  if (std::filesystem::exists(json)) r.doc = nlohmann::json::parse(Slurp(json));
  std::filesystem::remove(json);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
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

}  // namespace txbatch::test
