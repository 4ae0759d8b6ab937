// The txbatch command. Control plane only: options, EAL, pools, the grid of cells, output.
//
// Exit status (DESIGN.md Terms): 0 ok; 2 bad input or missing device; 3 books do not balance;
// 1 internal error. SIGINT/SIGTERM stop the run, print and write what was measured, clean up.

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "dataplane/eal.h"
#include "dataplane/experiment.h"
#include "dataplane/mempool.h"
#include "drivers/emu/emu.h"
#include "drivers/factory.h"
#include "tools/compare.h"
#include "tools/record_reader.h"
#include "tools/report.h"
#include "tools/run_options.h"
#include "tools/summary.h"
#include "tools/sweep.h"
#include "txbatch_config.h"

namespace txbatch {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitUnbalanced = 3;

std::atomic<bool> g_stop{false};

extern "C" void OnSignal(int) { g_stop.store(true); }

int Fail(int code, const Error& e) {
  std::fprintf(stderr, "txbatch: %s\n", e.message.c_str());
  return code;
}

// What every command that measures needs: EAL, one pool sized for the largest cell, and every
// device created once (a missing one is bad input before anything is measured).
struct Session {
  std::unique_ptr<Eal> eal;
  PoolPtr pool;  // freed before EAL is torn down (declared after it)
  RunEnv env;
};

// Starts a session for `cells`; on failure returns the exit status, the sentence printed.
Result<Session> StartSession(const std::vector<CellConfig>& cells, EalMemory memory,
                             const std::vector<std::string>& eal_user_args, RunEnv env,
                             int* exit_code) {
  const auto fail = [&](int code, const Error& e) {
    *exit_code = code;
    return e;
  };
  // Size one pool for the largest cell; the EAL memory estimate follows from it.
  const unsigned lcores = static_cast<unsigned>(AllowedCpus().size());
  unsigned pool_size = 0;
  for (const auto& c : cells) pool_size = std::max(pool_size, PoolSizeFor(c, lcores));
  const unsigned mtu = cells.front().mtu;
  auto eal_plan = PlanEal(PoolBytes(pool_size, mtu), eal_user_args, memory);
  if (!eal_plan) return fail(kExitBadInput, eal_plan.error());
  env.eal_args.assign(eal_plan->args.begin() + 1, eal_plan->args.end());
  env.eal_mode = eal_plan->mode;
  env.eal_why = eal_plan->why;

  auto eal = Eal::Start(*eal_plan);
  if (!eal) return fail(kExitBadInput, eal.error());
  // Signals are ours from here on: EAL is up and must be torn down cleanly.
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  env.tsc_hz = (*eal)->tsc_hz();
  env.cpus = (*eal)->cpus();
  unsigned max_procs = 0;
  for (const auto& c : cells) max_procs = std::max(max_procs, c.procs);
  env.pinning = DescribePinning(max_procs, env.cpus);

  auto pool = CreatePacketPool("txbatch_pool", pool_size, mtu);
  if (!pool) return fail(kExitInternal, pool.error());
  // Fault every page in now (pool, EAL heap) rather than on a frame's first use mid-window.
  // Not MCL_FUTURE: it would pin every thread's 8 MiB stack as well. Best effort (RLIMIT).
  (void)mlockall(MCL_CURRENT);

  // Every device must exist and start before anything is measured: a missing one is bad input
  // (exit 2), with nothing printed or written but the sentence.
  std::set<std::string> checked;
  RunWindow window;
  RxSink sink(window, env.tsc_hz, 1);
  for (const CellConfig& cell : cells) {
    if (!checked.insert(cell.driver_spec.ToString()).second) continue;
    auto d = CreateDriver(cell.driver_spec, pool->get(), cell.mtu, sink, window, env.tsc_hz);
    if (!d) return fail(kExitBadInput, d.error());
  }
  return Session{std::move(*eal), std::move(*pool), std::move(env)};
}

// Runs one cell; on failure prints the sentence and sets the exit status (a device that vanished
// mid-run is a missing device (2), a drain that did not finish a bug (1)).
std::optional<CellResult> MeasureCell(const CellConfig& cell, Session& s, int* status) {
  auto r = RunCell(cell, s.pool.get(), s.env.tsc_hz, s.env.cpus, g_stop);
  if (!r) {
    std::fprintf(stderr, "txbatch: %s\n", r.error().message.c_str());
    *status = r.error().err == EIO ? kExitInternal : kExitBadInput;
    return std::nullopt;
  }
  if (!r->books.balanced)
    std::fprintf(stderr, "txbatch: the books do NOT balance for %s %s size %u procs %u\n",
                 cell.driver.c_str(), cell.policy.ToString().c_str(), cell.size, cell.procs);
  return *r;
}

// Writes the JSON document (if asked) and turns the outcome into the exit status.
int Finish(const std::string& json_path, const nlohmann::json& doc, int status, bool balanced) {
  if (!json_path.empty()) {
    if (Status s = WriteJsonFile(json_path, doc); !s) return Fail(kExitBadInput, s.error());
  }
  if (status != kExitOk) return status;
  if (!balanced) {
    std::fprintf(stderr, "txbatch: the books do not balance (see above): exit 3\n");
    return kExitUnbalanced;
  }
  return kExitOk;
}

// Prints the tables and returns them as text too (for --out).
std::string PrintAndKeepTables(const std::vector<CellRecord>& records,
                               const std::vector<PolicySpec>& policies) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* mem = open_memstream(&buf, &len);
  if (mem == nullptr) {
    PrintTables(stdout, records, policies);
    return {};
  }
  PrintTables(mem, records, policies);
  std::fclose(mem);
  std::string text(buf, len);
  std::free(buf);
  std::fputs(text.c_str(), stdout);
  return text;
}

// An --out directory that cannot be created or written is bad input, found before anything runs.
Status CheckOutDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return MakeError(ec.value(),
                     fmt::format("cannot create --out directory '{}': {}", dir, ec.message()));
  return CheckWritable((std::filesystem::path(dir) / "results.json").string());
}

int RunCommand(const RunPlan& plan, const std::vector<std::string>& eal_user_args, RunEnv env,
               const std::string& out_dir = "") {
  // A --json file (or --out directory) that cannot be written is bad input: say so before
  // running anything.
  if (!plan.json_path.empty()) {
    if (Status s = CheckWritable(plan.json_path); !s) return Fail(kExitBadInput, s.error());
  }
  if (!out_dir.empty()) {
    if (Status s = CheckOutDir(out_dir); !s) return Fail(kExitBadInput, s.error());
  }
  int status = kExitOk;
  auto session = StartSession(plan.cells, plan.eal_memory, eal_user_args, std::move(env), &status);
  if (!session) return Fail(status, session.error());
  PrintHeader(stdout, plan.cells, session->env);
  std::fflush(stdout);
  std::vector<CellRecord> records;
  bool balanced = true;
  const size_t total = plan.cells.size() * static_cast<size_t>(plan.rounds);
  for (int round = 1; round <= plan.rounds && status == kExitOk; ++round)
    for (size_t i = 0; i < plan.cells.size() && !g_stop.load(); ++i) {
      auto r = MeasureCell(plan.cells[i], *session, &status);
      if (!r) break;
      balanced &= r->books.balanced;
      records.push_back({plan.cells[i], *r, plan.rounds > 1 ? round : 0, "", static_cast<int>(i)});
      if (isatty(fileno(stderr)))
        std::fprintf(stderr, "\rcell %zu/%zu (round %d/%d)", records.size(), total, round,
                     plan.rounds);
    }
  if (isatty(fileno(stderr))) std::fprintf(stderr, "\r%40s\r", "");
  if (g_stop.load())
    std::printf("\ninterrupted by a signal: %zu of %zu cell runs measured\n", records.size(),
                total);
  const std::string tables = PrintAndKeepTables(records, plan.policies);
  std::fflush(stdout);
  const nlohmann::json doc = ToJson(records, session->env);
  if (!out_dir.empty() && !records.empty()) {
    if (Status s =
            WriteSweepOutputs(out_dir, tables, doc, Summarise(records, plan.policies.front()));
        !s)
      return Fail(kExitBadInput, s.error());
    std::printf(
        "wrote %s/{tables.txt,results.csv,results.json,throughput.svg,latency.svg,"
        "cost.svg,calls.svg,onoff.svg}\n",
        out_dir.c_str());
  }
  session->pool.reset();
  return Finish(plan.json_path, doc, status, balanced);
}

int CompareCommand(const RunPlan& plan, const std::vector<std::string>& eal_user_args, RunEnv env) {
  auto axis = CompareAxis(plan);
  if (!axis) return Fail(kExitBadInput, axis.error());
  const int rounds = plan.rounds;
  if (rounds < 2)
    return Fail(kExitBadInput,
                Error{ERANGE, fmt::format("compare --rounds {} gives no confidence interval; "
                                          "valid: 2..1000",
                                          rounds)});
  if (!plan.json_path.empty()) {
    if (Status s = CheckWritable(plan.json_path); !s) return Fail(kExitBadInput, s.error());
  }
  int status = kExitOk;
  auto session = StartSession(plan.cells, plan.eal_memory, eal_user_args, std::move(env), &status);
  if (!session) return Fail(status, session.error());
  const CellConfig& a = plan.cells[0];
  const CellConfig& b = plan.cells[1];
  PrintHeader(stdout, plan.cells, session->env);
  std::fflush(stdout);
  std::vector<CellRecord> records;
  std::vector<CellResult> ra, rb;
  bool balanced = true;
  for (int round = 1; round <= rounds && status == kExitOk && !g_stop.load(); ++round) {
    for (const auto& [cell, side, results] : {std::tuple{&a, "A", &ra}, std::tuple{&b, "B", &rb}}) {
      if (g_stop.load()) break;
      auto r = MeasureCell(*cell, *session, &status);
      if (!r) break;
      balanced &= r->books.balanced;
      results->push_back(*r);
      records.push_back({*cell, *r, round, side});
    }
    if (isatty(fileno(stderr))) std::fprintf(stderr, "\rround %d/%d", round, rounds);
  }
  if (isatty(fileno(stderr))) std::fprintf(stderr, "\r%20s\r", "");
  if (g_stop.load())
    std::printf("\ninterrupted by a signal: %zu of %d rounds measured\n",
                std::min(ra.size(), rb.size()), rounds);
  const auto metrics = CompareMetrics(ra, rb);
  PrintComparison(stdout, *axis, a, b, ra, rb, metrics);
  std::vector<std::string> checks;
  for (const auto& [cell, side, results] : {std::tuple{&a, "A", &ra}, std::tuple{&b, "B", &rb}})
    if (std::string c = BatchCheck(side, *cell, *results); !c.empty()) {
      std::printf("note: %s\n", c.c_str());
      checks.push_back(c);
    }
  std::fflush(stdout);
  nlohmann::json doc = ToJson(records, session->env);
  doc["comparison"] = ComparisonJson(*axis, a, b, static_cast<int>(std::min(ra.size(), rb.size())),
                                     metrics, checks);
  session->pool.reset();
  return Finish(plan.json_path, doc, status, balanced);
}

// Re-renders what a --json file holds, as the command that wrote it printed it.
int ReportCommand(const std::string& path, const std::string& out_dir) {
  auto back = ReadResults(path);
  if (!back) return Fail(kExitBadInput, back.error());
  if (!out_dir.empty()) {
    if (Status s = CheckOutDir(out_dir); !s) return Fail(kExitBadInput, s.error());
  }
  PrintHeader(stdout, back->cells, back->env);
  bool balanced = true;
  for (const auto& rec : back->records) balanced &= rec.result.books.balanced;
  if (!back->comparison.is_null() && back->cells.size() == 2) {
    std::vector<CellResult> ra, rb;
    for (const auto& rec : back->records) (rec.side == "B" ? rb : ra).push_back(rec.result);
    const std::string axis = back->comparison.value("axis", std::string("--batch/--policy"));
    PrintComparison(stdout, axis, back->cells[0], back->cells[1], ra, rb, CompareMetrics(ra, rb));
    for (const auto& [cell, side, results] :
         {std::tuple{&back->cells[0], "A", &ra}, std::tuple{&back->cells[1], "B", &rb}})
      if (std::string c = BatchCheck(side, *cell, *results); !c.empty())
        std::printf("note: %s\n", c.c_str());
  } else {
    const std::string tables = PrintAndKeepTables(back->records, back->policies);
    if (!out_dir.empty()) {
      std::ifstream in(path);
      nlohmann::json doc = nlohmann::json::parse(in);
      if (Status s = WriteSweepOutputs(out_dir, tables, std::move(doc),
                                       Summarise(back->records, back->policies.front()));
          !s)
        return Fail(kExitBadInput, s.error());
    }
  }
  return balanced ? kExitOk : kExitUnbalanced;
}

int Main(int argc, char** argv) {
  // Everything after the first "--" goes to EAL untouched and replaces txbatch's defaults.
  std::vector<std::string> eal_args;
  int own_argc = argc;
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--") {
      own_argc = i;
      eal_args.assign(argv + i + 1, argv + argc);
      break;
    }

  CLI::App app{
      "txbatch — a batched-transmit network emulator: Linux qdisc-to-driver batching in "
      "userspace, measured with batching off (batch 1) and on.\n"
      "EAL arguments after -- replace txbatch's defaults entirely.",
      "txbatch"};
  app.set_version_flag("--version", TXBATCH_VERSION);
  app.require_subcommand(1);
  app.footer(
      "Exit status: 0 ok, 2 bad input or missing device, 3 books do not balance, 1 "
      "internal error.\nDrivers:\n" +
      emu::DescribeModels() +
      "  ethdev:DEVARGS a DPDK vdev txbatch creates (net_null0, net_ring0 as a loopback, "
      "net_pcap0,tx_pcap=FILE, net_tap0,iface=NAME, net_af_packet0,iface=NAME, …)\n"
      "  ethdev:port=N  a port EAL probed (a NIC given after --, e.g. -a 0000:01:00.0)\n"
      "  ethdev-pair:   two ports on crossed rings, a cable: send on one, receive on the other\n");
  RunArgs run_args;
  CLI::App* run = app.add_subcommand(
      "run",
      "Run a grid of cells (drivers x policies x sizes x procs). With no options: the "
      "lmbench bw_tcp table of the 2007 batching thread on emu:e1000 (tcp, sizes 4096.."
      "262144, procs 1 and 8, batch 1 then 32).");
  AddRunOptions(*run, run_args);
  RunArgs compare_args;
  // compare's own defaults: one value everywhere but the batch limit.
  compare_args.size = "65536";
  compare_args.procs = "1";
  compare_args.rounds = 10;
  CLI::App* compare = app.add_subcommand(
      "compare",
      "Compare two configurations: the options of run, with exactly one axis given two values "
      "(--batch 1,32, --policy count:1,buffer:32, two --driver, --procs 1,8, --sync "
      "rootlock,nolock, ...). They run interleaved, A then B in each round, and each metric gets "
      "medians, the ratio B/A with a 95% confidence interval and a verdict: better, worse, "
      "equivalent (within +-2%) or inconclusive. Defaults: emu:e1000, tcp, size 65536, procs 1, "
      "--batch 1,32.");
  AddRunOptions(*compare, compare_args);
  std::string report_path;
  CLI::App* report = app.add_subcommand(
      "report",
      "Re-render the tables (or a comparison) of a result file written with --json, without "
      "running anything.");
  report->add_option("file", report_path, "A result file txbatch wrote with --json")->required();
  std::string report_out;
  report->add_option("--out", report_out,
                     "Also write tables.txt, results.csv, results.json and the SVG plots here");
  RunArgs sweep_args;
  sweep_args.batch = "1,2,4,8,16,32,64";
  sweep_args.size = "65536";
  sweep_args.batching_off_first = true;
  std::string sweep_out;
  CLI::App* sweep = app.add_subcommand(
      "sweep",
      "A grid (batch sizes x sizes x procs x drivers x qdisc shapes) run in interleaved rounds, "
      "every cell judged against the same cell with batching off (count:1, added first if "
      "missing). Writes to --out DIR: tables.txt, results.csv, results.json and SVG plots "
      "against batch size (doc/output.md). Defaults: emu:e1000, tcp, size 65536, procs 1 and 8, "
      "--batch 1,2,4,8,16,32,64, 3 rounds.");
  AddRunOptions(*sweep, sweep_args);
  sweep->add_option("--out", sweep_out, "Directory for the outputs (created if missing)")
      ->required();
  try {
    app.parse(own_argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "txbatch: %s; run 'txbatch %s--help' for the valid options.\n", e.what(),
                 run->parsed()       ? "run "
                 : compare->parsed() ? "compare "
                 : report->parsed()  ? "report "
                 : sweep->parsed()   ? "sweep "
                                     : "");
    return kExitBadInput;
  }
  RunEnv env = CollectEnv(argc, argv);
  if (run->parsed()) {
    auto plan = BuildRunPlan(run_args);
    if (!plan) return Fail(kExitBadInput, plan.error());
    return RunCommand(*plan, eal_args, env);
  }
  if (report->parsed()) return ReportCommand(report_path, report_out);
  if (sweep->parsed()) {
    auto plan = BuildRunPlan(sweep_args);
    if (!plan) return Fail(kExitBadInput, plan.error());
    return RunCommand(*plan, eal_args, env, sweep_out);
  }
  if (compare->parsed()) {
    auto plan = BuildRunPlan(compare_args);
    if (!plan) return Fail(kExitBadInput, plan.error());
    return CompareCommand(*plan, eal_args, env);
  }
  return kExitBadInput;
}

}  // namespace
}  // namespace txbatch

int main(int argc, char** argv) {
  try {
    return txbatch::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "txbatch: internal error: %s\n", e.what());
    return 1;
  }
}
