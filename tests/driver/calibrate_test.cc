// txbatch calibrate end to end on the real engine: a short run writes a cost model with every
// series' fit, the costs it claims to have fitted, and a file the simulation loads.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/driver/run_helper.h"

namespace txbatch::test {
namespace {

using nlohmann::json;

TEST(CalibrateRun, WritesAFittedCostModelTheSimulationLoads) {
  const std::string out =
      ::testing::TempDir() + "/calibrated_" + std::to_string(getpid()) + ".json";
  std::filesystem::remove(out);
  const auto run = RunTxbatch("calibrate --batch 1,8,64 --rounds 1 --duration 0.1 --out " + out);
  ASSERT_EQ(run.status, 0) << run.err << run.out;
  ASSERT_TRUE(std::filesystem::exists(out));
  std::ifstream in(out);
  const json model = json::parse(in);
  const json& fit = model["fit"];
  // Every series measured and fitted; a reclaim and a driver call cost more with more frames.
  for (const char* series : {"none", "dedicated", "net_null", "completion"}) {
    ASSERT_TRUE(fit[series].is_object()) << series << fit.dump();
    EXPECT_EQ(fit[series]["residuals"].size(), 3u) << series;
    EXPECT_GT(fit[series]["per_frame_cycles"].get<double>(), 0) << series;
  }
  // A reclaim's fixed cost: fitted, or held at 0 where noise would put it below (a sanitizer
  // build); the model carries what the fit says.
  EXPECT_GE(fit["completion"]["fixed_cycles"].get<double>(), 0) << fit["completion"].dump();
  EXPECT_NEAR(model["cycles"]["completion"].get<double>(),
              fit["completion"]["fixed_cycles"].get<double>(), 1e-6);
  EXPECT_NE(model["source"].get<std::string>().find("completion, completion_frame; kept"),
            std::string::npos)
      << model["source"];
  EXPECT_NE(run.out.find("cycles per txirq reclaim"), std::string::npos) << run.out;
  // The records: the completion cells report their reclaims.
  size_t reclaiming = 0;
  for (const json& rec : run.doc["records"]) {
    EXPECT_TRUE(rec["results"]["accounting"]["balanced"].get<bool>());
    reclaiming += rec["results"]["completions"].is_object();
  }
  EXPECT_GE(reclaiming, 3u);
  // The simulation runs on it and says so.
  const auto sim = RunTxbatch(
      "run --driver emu:ixgbe --engine sim --proto udp --size 18 --procs 1 "
      "--duration 0.02 --warmup 0.01 --cost-model " +
      out);
  ASSERT_EQ(sim.status, 0) << sim.err;
  EXPECT_EQ(sim.doc["records"][0]["config"]["cost_model"]["source"], model["source"])
      << sim.doc["records"][0]["config"].dump();
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace txbatch::test
