// `txbatch run` and `txbatch sweep` (run_cmd.h).
#include "tools/run_cmd.h"

#include <fmt/format.h>

#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "results/records.h"
#include "results/summary.h"
#include "results/sweep.h"
#include "results/tables.h"
#include "tools/capture_cmd.h"
#include "tools/command_outputs.h"
#include "tools/figures.h"
#include "tools/session.h"
#include "tools/stats_stream.h"

namespace txbatch {

int RunCommand(const RunPlan& plan, const EalUserArgs& eal_user_args, RunEnv env,
               const std::string& out_dir, const std::string& capture) {
  // A --json file (or --out directory) that cannot be written is bad input: say so before
  // running anything.
  std::optional<OutputDir> out;
  if (!out_dir.empty()) {
    auto d = OutputDir::Check(out_dir);
    if (!d) return Fail(kExitBadInput, d.error());
    out = *d;
  }
  if (Status st = capture.empty() ? Status{} : CheckRunCapture(plan.cells); !st)
    return Fail(kExitBadInput, st.error());
  OutputNames names{plan.json_path, plan.stats_json_path, capture, plan.cells.front().mtu,
                    /*open_capture_now=*/true, {}};
  if (out)
    for (const char* file : {"results.json", "results.csv", "tables.txt"})
      names.more.emplace_back(fmt::format("--out's {}", file), out_dir + "/" + file);
  auto outputs = OpenOutputs(names);
  if (!outputs) return Fail(kExitBadInput, outputs.error());
  const std::optional<OutputFile>& json = outputs->json;
  StatsStream& stream = outputs->stream;
  CaptureFile& capture_file = outputs->capture;
  CaptureReserve& capture_reserve = *outputs->capture_opened;
  int status = kExitOk;
  auto session = StartSession(plan.cells, plan.eal_memory, eal_user_args, std::move(env), &status,
                              &capture_reserve.fd, capture);
  if (!session) return Fail(status, session.error());
  if (session->capture) capture_reserve.remove.clear();
  PrintHeader(stdout, plan.cells, session->env);
  PrintTelemetryLine(session->env);
  std::fflush(stdout);
  StartCellStream(stream, *session, out_dir.empty() ? "run" : "sweep",
                  plan.cells.size() * plan.rounds, plan.rounds);
  std::vector<CellRecord> records;
  bool balanced = true;
  MeasureGrid(plan.cells, plan.rounds, *session, 0, records, &status, &balanced);
  if (!FinishCapture(session->capture, capture_file) && status == kExitOk) status = kExitBadInput;
  const std::string tables = PrintAndKeepTables(records, plan.policies);
  std::fflush(stdout);
  const nlohmann::json doc = ToJson(records, session->env);
  if (out && records.empty()) {
    std::fprintf(stderr, "txbatch: nothing written to --out folder '%s': no cell was measured\n",
                 out_dir.c_str());
  } else if (out) {
    if (Status s = WriteSweepOutputs(*out, tables, doc, Summarise(records, plan.policies.front()));
        !s)
      return Fail(kExitBadInput, s.error());
  }
  session->pool.reset();
  const int code = Finish(json, doc, status, balanced);
  // The figures once every result is written: however long they take, or if they fail.
  if (out && !records.empty()) SayWrittenAndDraw(out_dir);
  EndCellStream(stream, records, status, balanced, code);
  return stream.Finish(code);
}

int SweepCommand(RunArgs& sweep_args, const std::string& sweep_out, const EalUserArgs& eal_args,
                 const RunEnv& env) {
  if (sweep_args.batch.empty() && sweep_args.policy.empty()) sweep_args.batch = "1,2,4,8,16,32,64";
  auto plan = BuildRunPlan(sweep_args);
  if (!plan) return Fail(kExitBadInput, plan.error());
  for (const PolicySpec& p : plan->policies)
    if (p.needs_qdisc())
      return Fail(kExitBadInput,
                  Error{EINVAL, fmt::format("sweep plots against a batch limit N, and {} has "
                                            "none; valid: count:N or buffer:N[:T] here, and "
                                            "txbatch run or compare for the kernel policies",
                                            p.ToString())});
  return RunCommand(*plan, eal_args, env, sweep_out);
}

}  // namespace txbatch
