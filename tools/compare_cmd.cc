// `txbatch compare` (compare_cmd.h).
#include "tools/compare_cmd.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dataplane/telemetry.h"
#include "results/records.h"
#include "results/tables.h"
#include "tools/command_outputs.h"
#include "tools/compare.h"
#include "tools/session.h"
#include "tools/stats_stream.h"

namespace txbatch {

int CompareCommand(const RunPlan& plan, const EalUserArgs& eal_user_args, RunEnv env) {
  auto axis = CompareAxis(plan);
  if (!axis) return Fail(kExitBadInput, axis.error());
  const int rounds = plan.rounds;
  if (rounds < 2)
    return Fail(kExitBadInput,
                Error{ERANGE, fmt::format("compare --rounds {} gives no confidence interval; "
                                          "valid: 2..1000",
                                          rounds)});
  auto outputs = OpenOutputs({.json = plan.json_path, .stats_json = plan.stats_json_path});
  if (!outputs) return Fail(kExitBadInput, outputs.error());
  StatsStream& stream = outputs->stream;
  int status = kExitOk;
  auto session = StartSession(plan.cells, plan.eal_memory, eal_user_args, std::move(env), &status);
  if (!session) return Fail(status, session.error());
  const CellConfig& a = plan.cells[0];
  const CellConfig& b = plan.cells[1];
  PrintHeader(stdout, plan.cells, session->env);
  PrintTelemetryLine(session->env);
  std::fflush(stdout);
  StartCellStream(stream, *session, "compare", 2 * static_cast<size_t>(rounds), rounds);
  std::vector<CellRecord> records;
  std::vector<CellResult> ra, rb;
  bool balanced = true;
  const auto started = std::chrono::steady_clock::now();
  double last_line_s = 0;  // progress lines on a stderr that is no terminal (MeasureGrid's rule)
  // /txbatch/stats: the round, and the last side measured.
  const auto publish = [&](const char* state, int round, const char* side, const CellResult* r) {
    TelemetryDict d{
        {"state", std::string(state)},
        {"at_s",
         fmt::format(
             "{:.3f}",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count())},
        {"round", static_cast<uint64_t>(round)},
        {"rounds", static_cast<uint64_t>(rounds)},
        {"a_runs", uint64_t{ra.size()}},
        {"b_runs", uint64_t{rb.size()}}};
    if (r != nullptr) {
      d.emplace_back("last_side", std::string(side));
      d.emplace_back("last_packets", r->packets);
      d.emplace_back("last_mpps", fmt::format("{:.4f}", r->mpps));
      d.emplace_back("last_balanced", std::string(r->books.balanced ? "true" : "false"));
    }
    PublishTelemetryStats(std::move(d));
  };
  publish("running", 1, "", nullptr);
  for (int round = 1; round <= rounds && status == kExitOk && !StopRequested(); ++round) {
    for (const auto& [cell, side, results] : {std::tuple{&a, "A", &ra}, std::tuple{&b, "B", &rb}}) {
      if (StopRequested()) break;
      auto r = MeasureCell(*cell, *session, &status);
      if (!r) break;
      balanced &= r->books.balanced;
      results->push_back(*r);
      records.push_back({*cell, *r, round, side});
      if (session->on_record) session->on_record(records.back());
      publish("running", round, side, &*r);
    }
    if (isatty(fileno(stderr))) {
      std::fprintf(stderr, "\rround %d/%d", round, rounds);
    } else if (const double spent =
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
                       .count();
               spent >= last_line_s + kProgressLineS) {
      std::fprintf(stderr, "txbatch: round %d/%d, %.0f s so far\n", round, rounds, spent);
      last_line_s = spent;
    }
  }
  publish(StopRequested()     ? "interrupted"
          : status == kExitOk ? "done"
                              : "failed",
          rounds, "", nullptr);
  if (isatty(fileno(stderr))) std::fprintf(stderr, "\r%20s\r", "");
  if (StopRequested())
    std::printf("\ninterrupted by a signal: %zu of %d rounds measured\n",
                std::min(ra.size(), rb.size()), rounds);
  const auto metrics = CompareMetrics(ra, rb);
  PrintComparison(stdout, *axis, a, b, ra, rb, metrics);
  const std::vector<std::string> checks = ComparisonChecks(a, b, ra, rb);
  for (const std::string& c : checks) std::printf("note: %s\n", c.c_str());
  std::fflush(stdout);
  nlohmann::json doc = ToJson(records, session->env);
  doc["comparison"] = ComparisonJson(*axis, a, b, static_cast<int>(std::min(ra.size(), rb.size())),
                                     metrics, checks);
  session->pool.reset();
  const int code = Finish(outputs->json, doc, status, balanced);
  EndCellStream(stream, records, status, balanced, code, {{"comparison", doc["comparison"]}});
  return stream.Finish(code);
}

}  // namespace txbatch
