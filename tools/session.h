#pragma once
// What every txbatch command that measures shares: exit statuses, EAL and the pool (a Session),
// running one cell or a whole grid in interleaved rounds, and writing the outcome. Control plane.

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/output_file.h"
#include "dataplane/capture.h"
#include "dataplane/eal.h"
#include "dataplane/mempool.h"
#include "engine/cell.h"
#include "engine/record.h"

namespace txbatch {

// Exit status (DESIGN.md Terms).
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitUnbalanced = 3;
// A stop signal (SIGINT, SIGTERM or SIGHUP: base/stop_signals.h) stopped a measuring command:
// what was measured is printed and written, records marked `interrupted` (scripts tell a
// cut-short run from a complete one by this).
inline constexpr int kExitInterrupted = 4;
// A measurement too noisy to trust: calibrate's fit is poor (--min-r2). What was measured is
// written (--json); what it would have fitted is not.
inline constexpr int kExitPoorFit = 5;

// Prints "txbatch: <sentence>" on stderr and returns `code`.
int Fail(int code, const Error& e);

// Whether a stop signal (SIGINT, SIGTERM, SIGHUP) arrived since they were taken over (they stop
// the run cleanly).
bool StopRequested();
// Takes over the stop signals (StopRequested): the first asks for a clean stop, a second ends the
// process by it at once. StartSession does it for the measuring commands.
void CatchStopSignals();
// Process-wide, first thing in main for every command: a write to a pipe or socket whose reader
// went away (`txbatch run ... | head -1`, a telemetry client that left) fails with EPIPE instead
// of SIGPIPE ending the process with its measurement unwritten and EAL's folder left behind.
// What goes to standard output is then lost; everything else carries on. A write past the file
// size limit (`ulimit -f`) fails with EFBIG the same way, instead of SIGXFSZ ending it.
void IgnoreBrokenPipes();
// At exit: where standard output could not be written to the end (its reader went away), says so
// in one sentence on stderr. Returns `status` unchanged: the measurement and its files are whole,
// and only the reader's copy of the table is short (doc/usage.md, Exit status).
int SayIfStdoutCutShort(int status);

// EAL, one pool sized for the largest cell, and every device created once (a missing one is bad
// input before anything is measured).
struct Session {
  std::unique_ptr<Eal> eal;
  PoolPtr pool;  // freed before EAL is torn down (declared after it)
  RunEnv env;
  // Each flow's next sequence number: a cell's flows go on where the previous cell's left off,
  // so a receiver in another process (`txbatch sink`) sees one sequence per flow, not a restart
  // (read as duplicates) at every cell and round.
  std::vector<uint64_t> flow_seq;
  // The longest link drain said on stderr so far (each longer one is said once).
  double drain_said_s = 0;
  // Called with each cell run's record as it is appended (MeasureGrid; compare's rounds):
  // --stats-json's "cell" events.
  std::function<void(const CellRecord&)> on_record;
  // run --capture: what the cells' ethdev ports sent and received (dataplane/capture.h), from
  // the device check to the end; stopped before EAL (declared after it). Null without one.
  std::unique_ptr<Capture> capture;
};

// Starts a session for `cells` and takes over the stop signals; on failure sets `*exit_code`.
// With a `capture_fd` (run --capture: an open pcapng file, every cell on one ethdev driver, as
// the caller checked) the capture's pool goes into EAL's estimate and the capture starts at the
// device check, while that driver's ports exist: rte_pcapng names the ports there are when it
// opens, and every cell makes the same ports again, with the same ids. The descriptor is the
// capture's once it started (*capture_fd is then -1); until then the caller's. `capture_name`
// (the path as given, or "-") names it in a sentence where it cannot start.
Result<Session> StartSession(const std::vector<CellConfig>& cells, EalMemory memory,
                             const EalUserArgs& eal_user_args, RunEnv env, int* exit_code,
                             int* capture_fd = nullptr, const std::string& capture_name = "");

// How to watch the run with dpdk-telemetry.py, where telemetry is on (printed after the header).
void PrintTelemetryLine(const RunEnv& env);

// Runs one cell; on failure prints the sentence and sets `*status` (a device that vanished
// mid-run is a missing device (2), a drain that did not finish a bug (1)).
std::optional<CellResult> MeasureCell(const CellConfig& cell, Session& s, int* status);

// Between progress lines on a standard error that is no terminal (CI, tee): a line a cell would
// flood a log, none would leave a long sweep silent until it ends.
inline constexpr double kProgressLineS = 5;

// Runs every cell once per round (interleaved), appending to `records` (cells numbered from
// `first_cell`). Stops at a signal or a failed cell (status set). A progress line with an ETA
// goes to stderr: rewritten in place on a terminal, else a whole line at most every
// kProgressLineS. `around_cell` (if any) runs before and after each cell run, given the cell's
// index in `cells` and whether the run is behind it (then its record is the last of `records`;
// not called after a run that failed).
void MeasureGrid(const std::vector<CellConfig>& cells, int rounds, Session& session, int first_cell,
                 std::vector<CellRecord>& records, int* status, bool* balanced,
                 const std::function<void(size_t, bool)>& around_cell = {});

// Checks an output file named on the command line before anything runs (an empty `path`: none
// asked for). One that is standard output ("-", /dev/stdout) claims it: from here on everything
// else this process prints on stdout goes to stderr, and the document alone to stdout.
Result<std::optional<OutputFile>> PrepareOutput(const std::string& path,
                                                const std::string& what = "--json file");

// Writes the JSON document (if one was asked for) and turns the outcome into the exit status:
// a failure's, else 3 for unbalanced books, else 4 if a signal stopped the run, else 0.
int Finish(const std::optional<OutputFile>& json, const nlohmann::json& doc, int status,
           bool balanced);

}  // namespace txbatch
