// The txbatch command line: each command's options, checked and handed to the command's own
// file (run_cmd, compare_cmd, tune_cmd, report_cmd, calibrate, bridge_cmd, sink_cmd, lab).
//
// Exit status (DESIGN.md Terms): 0 ok; 2 bad input or missing device; 3 books do not balance;
// 4 interrupted; 5 the cost model not to be trusted (calibrate's fit below --min-r2, or
// calibrate --check --strict disagreeing); 1 internal error. SIGINT/SIGTERM/SIGHUP
// stop the run, print and write what was measured, clean up and exit 4. A standard output whose
// reader went away (| head) loses the rest of the table, nothing else: the status is the run's.

#include <fmt/format.h>
#include <rte_version.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/units.h"
#include "tools/bridge_cmd.h"
#include "tools/calibrate.h"
#include "tools/capture_cmd.h"
#include "tools/compare_cmd.h"
#include "tools/lab.h"
#include "tools/run_options.h"
#include "tools/report_cmd.h"
#include "tools/run_cmd.h"
#include "tools/session.h"
#include "tools/sink_cmd.h"
#include "tools/tune.h"
#include "tools/tune_cmd.h"
#include "tools/usage_errors.h"
#include "txbatch_config.h"

namespace txbatch {
namespace {

// calibrate --duration (seconds) and --min-r2 (tune --target's is tune_cmd.h's).
constexpr ValueRange kCalibrateDurationS{0.01, 60};
constexpr ValueRange kMinR2{0, 1};

// What the command line fills in: each command's options, and the commands themselves (to tell
// which one was given). CLI11 keeps pointers into it: made once, in Main, and never moved.
struct Commands {
  CLI::App* run = nullptr;
  CLI::App* compare = nullptr;
  CLI::App* report = nullptr;
  CLI::App* bridge = nullptr;
  CLI::App* respond = nullptr;
  CLI::App* sink = nullptr;
  CLI::App* lab = nullptr;
  CLI::App* lab_up = nullptr;
  CLI::App* lab_down = nullptr;
  CLI::App* sweep = nullptr;
  CLI::App* tune = nullptr;
  CLI::App* calibrate = nullptr;
  RunArgs run_args;
  std::string run_capture;
  RunArgs compare_args;
  std::string report_path;
  std::string report_out;
  BridgeArgs bridge_args;
  RespondArgs respond_args;
  SinkArgs sink_args;
  LabArgs lab_args;
  std::string lab_down_prefix = "txb";
  RunArgs sweep_args;  // --batch 1,2,4,8,16,32,64 unless --batch or --policy is given
  std::string sweep_out;
  RunArgs tune_args;
  double tune_target = kDefaultTuneTarget * 100;
  std::string tune_p99;
  CalibrateArgs cal_args;
  std::string eal_extra;  // --eal-extra, on every command that starts EAL
  bool no_telemetry = false;  // --no-telemetry, on those that keep it (all but calibrate)
};

// --eal-extra: EAL arguments appended to txbatch's own choice (PlanEal), split at blanks.
void AddEalExtraOption(CLI::App& cmd, std::string& eal_extra) {
  cmd.add_option("--eal-extra", eal_extra,
                 "EAL arguments added after txbatch's own (e.g. \"--log-level=pmd.net.*:debug\"), "
                 "split at blanks; arguments after -- replace them all instead")
      ->check(NonEmpty("--eal-extra needs EAL arguments (e.g. --eal-extra "
                       "\"--log-level=lib.eal:debug\"); valid: leave it out for none"));
}

// Everything after the first "--" goes to EAL untouched and replaces txbatch's defaults: returns
// it, and sets `own_argc` to the count of txbatch's own arguments (those before it).
std::vector<std::string> SplitEalArgs(int argc, char** argv, int& own_argc) {
  std::vector<std::string> eal_args;
  own_argc = argc;
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--") {
      own_argc = i;
      eal_args.assign(argv + i + 1, argv + argc);
      break;
    }
  return eal_args;
}

// --version, one command required, and the footer of --help (exit statuses, drivers).
void AddTopLevel(CLI::App& app) {
  // rte_version() is a constant string: no EAL needed.
  app.set_version_flag("--version",
                       std::string("txbatch ") + TXBATCH_VERSION + " (" + rte_version() + ")");
  app.require_subcommand(1);
  app.footer(
      "Exit status: 0 ok, 2 bad input or missing device, 3 books do not balance, 4 "
      "interrupted by SIGINT/SIGTERM/SIGHUP (what was measured is printed and written), 5 "
      "calibrate's none, net_null or receiver fit below --min-r2 or its machine changed (no "
      "model written) or --check --strict disagreeing, 1 "
      "internal error.\nDrivers:\n" +
      DescribeDrivers());
}

void AddRunCommand(CLI::App& app, Commands& c) {
  c.run = app.add_subcommand(
      "run",
      "Run a grid of cells (drivers x policies x sizes x procs). With no options: the "
      "lmbench bw_tcp table of the 2007 batching thread on emu:e1000 (tcp, sizes 4096.."
      "262144, procs 1 and 8, batch 1 then 32).");
  AddRunOptions(*c.run, c.run_args);
  AddCaptureOption(*c.run, c.run_capture);
}

void AddCompareCommand(CLI::App& app, Commands& c) {
  // compare's own defaults: one value everywhere but the batch limit.
  c.compare_args.size = "65536";
  c.compare_args.procs = "1";
  c.compare_args.rounds = 10;
  c.compare = app.add_subcommand(
      "compare",
      "Compare two configurations: the options of run, with exactly one axis given two values "
      "(--batch 1,32, --policy count:1,buffer:32, two --driver, --procs 1,8, --sync "
      "rootlock,nolock, ...). They run interleaved, A then B in each round, and each metric gets "
      "medians, the ratio B/A with a 95% confidence interval and a verdict: better, worse, "
      "equivalent (within +-2%) or inconclusive. Defaults: emu:e1000, tcp, size 65536, procs 1, "
      "--batch 1,32.");
  AddRunOptions(*c.compare, c.compare_args);
}

void AddReportCommand(CLI::App& app, Commands& c) {
  c.report = app.add_subcommand(
      "report",
      "Re-render the tables (or a comparison) of a result file written with --json, without "
      "running anything.");
  c.report->add_option("file", c.report_path, "A result file txbatch wrote with --json")
      ->required();
  c.report->add_option("--out", c.report_out,
                       "Also write the sweep files here and draw their figures (doc/output.md)");
}

// bridge, respond and sink: the commands on DPDK ports.
void AddPortCommands(CLI::App& app, Commands& c) {
  c.bridge = app.add_subcommand(
      "bridge",
      "Forward between two DPDK ports, both ways: RX burst, the link model (--link), a qdisc and "
      "the batched TX path with any policy. L2-transparent (every EtherType passes, ports "
      "promiscuous). Prints per-direction statistics every --stats seconds and, at SIGINT, "
      "SIGTERM or --duration, each direction's books.");
  AddBridgeOptions(*c.bridge, c.bridge_args);
  c.respond = app.add_subcommand(
      "respond",
      "Answer ARP and ICMP echo for --ip (and UDP echo on --udp-echo) on one DPDK port, the "
      "replies going through the link model (--link), a qdisc and the batched TX path, so ping "
      "-f measures a DPDK endpoint directly. Prints statistics every --stats seconds and its "
      "books at SIGINT, SIGTERM or --duration.");
  AddRespondOptions(*c.respond, c.respond_args);
  c.sink = app.add_subcommand(
      "sink",
      "The receive end of a two-host run: counts txbatch frames on one DPDK port per flow, "
      "with sequence gaps (loss), duplicates and reordering, optionally behind a link model; "
      "txbatch run on the other host sends them.");
  AddSinkOptions(*c.sink, c.sink_args);
}

void AddLabCommand(CLI::App& app, Commands& c) {
  c.lab = app.add_subcommand(
      "lab", "Two network namespaces joined through the bridge (root): lab up, lab down");
  c.lab->require_subcommand(1);
  c.lab_up = c.lab->add_subcommand(
      "up",
      "Creates namespaces PREFIX-a (10.77.0.1) and PREFIX-b (10.77.0.2), a veth pair into each "
      "(TX checksum offload off inside), and starts `txbatch bridge` between the host ends in "
      "the background (pid file and log under /run/txbatch-lab/PREFIX). Every other option "
      "(--link, --link-ab, --link-ba, --batch, --policy, --qdisc, …) goes to the bridge.");
  AddOptionWithDefault(*c.lab_up, "--prefix", c.lab_args.prefix,
                       "Names: PREFIX-a, PREFIX-a0, … (1-8 of a-z0-9)");
  c.lab_up->allow_extras();
  c.lab_down = c.lab->add_subcommand(
      "down",
      "Stops the lab's bridge (printing its books) and removes its namespaces, links and "
      "files; also after a crash");
  AddOptionWithDefault(*c.lab_down, "--prefix", c.lab_down_prefix, "The lab's prefix");
}

void AddSweepCommand(CLI::App& app, Commands& c) {
  c.sweep_args.size = "65536";
  c.sweep_args.batching_off_first = true;
  c.sweep = app.add_subcommand(
      "sweep",
      "A grid (batch sizes x sizes x procs x drivers x qdisc shapes) run in interleaved rounds, "
      "every cell judged against the same cell with batching off (count:1, added first if "
      "missing). Writes to --out DIR: tables.txt, results.csv, results.json, latency_hist.csv, "
      "and txbatch-plot's figures (doc/output.md). Defaults: emu:e1000, tcp, size 65536, procs 1 "
      "and 8, "
      "--batch 1,2,4,8,16,32,64, 3 rounds.");
  AddRunOptions(*c.sweep, c.sweep_args);
  c.sweep->add_option("--out", c.sweep_out, "Directory for the outputs (created if missing)")
      ->required();
}

void AddTuneCommand(CLI::App& app, Commands& c) {
  c.tune_args.batch = "1,2,4,8,16,32,64,128,256";
  c.tune_args.size = "65536";
  c.tune_args.procs = "1";
  c.tune_args.batching_off_first = true;
  c.tune = app.add_subcommand(
      "tune",
      "Recommend a batch size: the smallest limit reaching --target percent of the best "
      "throughput measured, with p99 latency within --p99-max if given. A coarse sweep of "
      "--batch (default powers of two to 256), then the limits between the knee and the coarse "
      "one below it. One configuration: every other option takes one value.");
  AddRunOptions(*c.tune, c.tune_args);
  AddDecimalOption(*c.tune, "--target", c.tune_target, "Percent of the best throughput (50..100)",
                   kTuneTargetPct, "(percent of the best throughput)");
  c.tune->add_option("--p99-max", c.tune_p99, "Latency budget for p99, e.g. 50us or 2ms");
}

void AddCalibrateCommand(CLI::App& app, Commands& c) {
  CalibrateArgs& a = c.cal_args;
  c.calibrate = app.add_subcommand(
      "calibrate",
      "Measure this machine's TX path (one producer of 60-byte frames on emu:null: --qdisc none "
      "and a dedicated runner at each --batch limit, an inline check, net_null for comparison, "
      "and the txirq's reclaims on emu:ixgbe), fit cycles per driver call (and per reclaim) = "
      "fixed + per-frame x n with R² and residuals, and write the simulation engine's cost "
      "model (--engine sim --cost-model FILE).");
  CLI::App& cal = *c.calibrate;
  AddOptionWithDefault(cal, "--out", a.out, "The cost-model file to write")
      ->check(NonEmpty("--out needs a file name (or - for standard output)"));
  AddOptionWithDefault(cal, "--batch", a.batch, "Batch limits, comma-separated (two or more)");
  AddTimeOption(cal, "--duration", a.duration_s,
                "Measured window per cell: a time (200ms) or a bare number of seconds", kSecondNs,
                kCalibrateDurationS);
  AddWholeNumberOption(cal, "--rounds", a.rounds,
                       fmt::format("Interleaved rounds (medians are fitted; with --check {} "
                                   "unless given)",
                                   kCheckRounds));
  AddOptionWithDefault(cal, "--engine", a.engine,
                       "real, or sim: calibrate the simulation of --cost-model (a check that "
                       "the fit recovers the model's costs)");
  cal.add_option("--cost-model", a.cost_model,
                 "The base model: costs calibrate cannot separate are kept from it")
      ->check(NonEmpty("--cost-model needs a file name; valid: a JSON file as txbatch calibrate "
                       "writes (without --cost-model: the built-in costs)"));
  cal.add_option("--json", a.json, "Also write the measured records here")
      ->check(NonEmpty(kJsonNeedsName));
  AddOptionWithDefault(cal, "--eal-memory", a.eal_memory, "auto, no-huge or in-memory");
  AddDecimalOption(cal, "--min-r2", a.min_r2,
                   "Least share of its points a fit must explain (R², 0..1; 0 accepts any fit): "
                   "below it the dedicated runner's or the reclaims' series keeps the base "
                   "model's costs (said); the none, net_null or receiver series writes no "
                   "model, exit 5",
                   kMinR2);
  cal.add_flag("--check", a.check,
               "Write no model: run a reference grid (emu:ixgbe udp 64 B and emu:e1000 tcp 64 "
               "KiB; procs 1 up to 4x the CPUs; batch 1 and 32; rootlock and nolock; inline and "
               "dedicated) on both engines in interleaved rounds, the simulation on --cost-model, "
               "and print sim/real per cell beside the real rounds' spread, a verdict per cell "
               "and batching's verdict on each engine")
      ->excludes(cal.get_option("--out"))
      ->excludes(cal.get_option("--min-r2"));
  cal.add_flag("--strict", a.strict,
               "With --check: exit 5 unless every cell agrees and batching's verdict is the same "
               "on both engines in every batched row (for scripts and CI)");
}

// Every command, in the order --help lists them.
void AddCommands(CLI::App& app, Commands& c) {
  AddRunCommand(app, c);
  AddCompareCommand(app, c);
  AddReportCommand(app, c);
  AddPortCommands(app, c);
  AddLabCommand(app, c);
  AddSweepCommand(app, c);
  AddTuneCommand(app, c);
  AddCalibrateCommand(app, c);
  for (CLI::App* cmd :
       {c.run, c.compare, c.bridge, c.respond, c.sink, c.sweep, c.tune, c.calibrate})
    AddEalExtraOption(*cmd, c.eal_extra);
  for (CLI::App* cmd : {c.run, c.compare, c.bridge, c.respond, c.sink, c.sweep, c.tune})
    cmd->add_flag("--no-telemetry", c.no_telemetry,
                  "No DPDK telemetry socket (by default dpdk-telemetry.py -f <the prefix the "
                  "header names> reads /ethdev/*, /eal/* and txbatch's own /txbatch/info and "
                  "/txbatch/stats while it runs)");
}

// `lab up`: the bridge's options (what `lab_up` left over) are checked here, before anything is
// created.
int LabUpCommand(LabArgs& lab_args, const CLI::App& lab_up, const EalUserArgs& eal_args) {
  lab_args.bridge_args = lab_up.remaining();
  CLI::App check;
  BridgeArgs unused;
  AddBridgeOptions(check, unused);
  std::string eal_extra;  // the bridge's own, passed on with its other options
  AddEalExtraOption(check, eal_extra);
  bool no_telemetry = false;
  check.add_flag("--no-telemetry", no_telemetry);
  const auto refuse = [](const std::string& sentence) {
    return Fail(kExitBadInput, Error{EINVAL, fmt::format("{}; valid: the options of txbatch "
                                                         "bridge --help (but --port-a/-b)",
                                                         sentence)});
  };
  if (auto misplaced = OptionInPlaceOfValue(check, lab_args.bridge_args))
    return refuse(misplaced->sentence);
  std::vector<std::string> args = {"--port-a", "x", "--port-b", "y"};
  args.insert(args.end(), lab_args.bridge_args.begin(), lab_args.bridge_args.end());
  std::reverse(args.begin(), args.end());
  try {
    check.parse(args);
  } catch (const CLI::ParseError& e) {
    return refuse(UsageSentence(e, check, lab_args.bridge_args, "txbatch lab up"));
  }
  return LabUp(lab_args, eal_args.replace);
}

// Runs the command that was given.
int Dispatch(Commands& c, const EalUserArgs& eal_args, const RunEnv& env) {
  if (c.run->parsed()) {
    auto plan = BuildRunPlan(c.run_args);
    if (!plan) return Fail(kExitBadInput, plan.error());
    return RunCommand(*plan, eal_args, env, "", c.run_capture);
  }
  if (c.report->parsed()) return ReportCommand(c.report_path, c.report_out);
  if (c.bridge->parsed()) return BridgeCommand(c.bridge_args, eal_args);
  if (c.respond->parsed()) return RespondCommand(c.respond_args, eal_args);
  if (c.sink->parsed()) return SinkCommand(c.sink_args, eal_args);
  if (c.lab_up->parsed()) return LabUpCommand(c.lab_args, *c.lab_up, eal_args);
  if (c.lab_down->parsed()) return LabDown(c.lab_down_prefix);
  if (c.tune->parsed()) return TuneCommand(c.tune_args, c.tune_target, c.tune_p99, eal_args, env);
  if (c.calibrate->parsed()) {
    // --check judges the simulation against the real median's 95 % interval, which the rounds'
    // order statistics give from 6 rounds on (5: 93.75 %); the fit's medians need fewer.
    if (c.cal_args.check && c.calibrate->count("--rounds") == 0) c.cal_args.rounds = kCheckRounds;
    return CalibrateCommand(c.cal_args, eal_args, env);
  }
  if (c.sweep->parsed()) return SweepCommand(c.sweep_args, c.sweep_out, eal_args, env);
  if (c.compare->parsed()) {
    auto plan = BuildRunPlan(c.compare_args);
    if (!plan) return Fail(kExitBadInput, plan.error());
    return CompareCommand(*plan, eal_args, env);
  }
  return kExitBadInput;
}

int Main(int argc, char** argv) {
  int own_argc = argc;
  EalUserArgs eal_args;
  eal_args.replace = SplitEalArgs(argc, argv, own_argc);
  CLI::App app{
      "txbatch — a batched-transmit network emulator: Linux qdisc-to-driver batching in "
      "userspace, measured with batching off (batch 1) and on.\n"
      "EAL arguments after -- replace txbatch's defaults entirely; --eal-extra adds to them.",
      "txbatch"};
  AddTopLevel(app);
  Commands c;
  AddCommands(app, c);
  if (const std::optional<int> status = ParseCommandLine(app, own_argc, argv)) return *status;
  std::istringstream words(c.eal_extra);
  for (std::string w; words >> w;) eal_args.extra.push_back(w);
  if (!eal_args.extra.empty() && !eal_args.replace.empty())
    return Fail(kExitBadInput,
                Error{EINVAL,
                      "--eal-extra adds to txbatch's EAL arguments and those after -- "
                      "replace them; valid: one of the two (put the extra ones after "
                      "-- too)"});
  if (c.eal_extra.find_first_not_of(" \t\n") == std::string::npos && !c.eal_extra.empty())
    return Fail(kExitBadInput, Error{EINVAL,
                                     "--eal-extra needs EAL arguments (e.g. --eal-extra "
                                     "\"--log-level=lib.eal:debug\"); valid: leave it "
                                     "out for none"});
  if (Status st = CheckEalUserArgs(eal_args); !st) return Fail(kExitBadInput, st.error());
  // Calibrate measures the machine: no telemetry thread beside it.
  eal_args.telemetry = !c.no_telemetry && !c.calibrate->parsed();
  const RunEnv env = CollectEnv(argc, argv);
  return Dispatch(c, eal_args, env);
}

// The commands a signal stops cleanly (they watch StopRequested and clean up EAL). They take
// the stop signals over at their first instruction: one that came while the options were read
// or EAL was starting (~0.15 s) would otherwise kill the process by the signal and leave EAL's
// runtime folder behind. `report` and `lab` keep the default: a signal ends them at once.
bool StopsCleanlyAtSignals(std::string_view command) {
  for (std::string_view c :
       {"bridge", "respond", "sink", "run", "compare", "sweep", "tune", "calibrate"})
    if (command == c) return true;
  return false;
}

}  // namespace
}  // namespace txbatch

int main(int argc, char** argv) {
  txbatch::IgnoreBrokenPipes();
  if (argc > 1 && txbatch::StopsCleanlyAtSignals(argv[1])) txbatch::CatchStopSignals();
  try {
    return txbatch::SayIfStdoutCutShort(txbatch::Main(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "txbatch: internal error: %s\n", e.what());
    return 1;
  }
}
