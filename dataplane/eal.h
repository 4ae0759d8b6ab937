#pragma once
// EAL start-up with embedded defaults. rte_eal_init cannot be retried in one process, so the
// memory mode is chosen *before* calling it, from the pool estimate and the free hugepages.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"

namespace txbatch {

// What the EAL will be started with, and why (printed in the run header).
struct EalPlan {
  std::vector<std::string> args;  // argv for rte_eal_init, argv[0] included
  std::string mode;               // "in-memory", "no-huge" or "user"
  std::string why;                // one line: the reason for `mode`
};

// How the caller wants memory; kAuto picks hugepages only when enough free ones are reserved.
enum class EalMemory { kAuto, kNoHuge, kInMemory };

// Free hugepage bytes over all page sizes (/sys/kernel/mm/hugepages), 0 when none are reserved.
uint64_t FreeHugepageBytes();

// What this process can lend EAL's memory: the free hugepages, the largest page size among them,
// and the file-size limit (ulimit -f, RLIMIT_FSIZE's soft limit; UINT64_MAX for none) that
// --in-memory's hugepage files are sized under: DPDK 22.11 makes one memfd a page
// (eal_memalloc.c alloc_seg, without --single-file-segments) and ftruncates it to the page's
// size; past the limit that fails with EFBIG, and EAL then starts without memory ("error
// allocating rte services array"). The no-huge mode's memfd falls back to an anonymous map and
// needs no file.
struct EalHost {
  uint64_t free_huge_bytes = 0;
  uint64_t huge_page_bytes = 2 << 20;
  uint64_t file_size_limit = UINT64_MAX;
  static EalHost Here();
};

// The EAL arguments a user gave: `replace` (everything after `--` on the command line) replaces
// txbatch's own entirely; `extra` (--eal-extra) is appended to them. Not both (the command line
// refuses that).
struct EalUserArgs {
  std::vector<std::string> replace, extra;
  // Keep EAL's telemetry socket (txbatch's own choice only: the long-running commands do, unless
  // told --no-telemetry), so dpdk-telemetry.py can read /ethdev/*, /eal/* and /txbatch/*.
  bool telemetry = false;
};

// EAL's own help option among `args` (EAL arguments, argv[0] not among them) as EAL's getopt
// reads them: -h, --help or a prefix of it that names it alone (--he, --hel), or h in a cluster
// of short options (-vh; not where it is the value of one: -lh, or -l -h). rte_eal_init prints
// EAL's usage for it and exits the process, 0, from inside — txbatch having done nothing.
// Arguments after a "--" are not EAL's. Empty where there is none.
std::string EalHelpOption(const std::vector<std::string>& args);

// Refuses the user's EAL arguments that would end txbatch from inside rte_eal_init (EAL's help
// option: EalHelpOption), with one sentence naming the option and where it was given. PlanEal
// calls it; main does too, before any command runs.
Status CheckEalUserArgs(const EalUserArgs& user);

// Builds the EAL arguments. `need_bytes` is the estimated pool + ring memory. `user.replace`, when
// non-empty, is used as it is; else txbatch's own, then `user.extra` after them (EAL takes the
// last of an option given twice: a --file-prefix of the user's own; a core list in `user.extra`,
// -l, -c or --lcores, replaces txbatch's -l, as EAL refuses two).
// Fails when the user's arguments hold EAL's help option (CheckEalUserArgs), or when kInMemory
// is forced and the free hugepages cannot hold `need_bytes` or the file-size limit is below a
// hugepage (the whole estimate with --single-file-segments among `user.extra`); kAuto then
// picks no-huge.
// `--no-telemetry` is among txbatch's own unless `user.telemetry`.
Result<EalPlan> PlanEal(uint64_t need_bytes, const EalUserArgs& user, EalMemory memory,
                        const EalHost& host);
inline Result<EalPlan> PlanEal(uint64_t need_bytes, const EalUserArgs& user, EalMemory memory) {
  return PlanEal(need_bytes, user, memory, EalHost::Here());
}

// The file prefix `dpdk-telemetry.py -f` needs to reach a process started with these EAL
// arguments (argv[0] included or not); empty where they turn telemetry off (--no-telemetry).
std::string TelemetryPrefix(const std::vector<std::string>& args);
// The header line that says how to watch it: "telemetry: dpdk-telemetry.py -f PREFIX ...", or
// empty where telemetry is off.
std::string TelemetryLine(const std::vector<std::string>& args);

// The running EAL. One per process; destruction calls rte_eal_cleanup and removes the runtime
// directory /var/run/dpdk/<prefix> it leaves behind (with the telemetry socket this process
// bound, which DPDK unlinks only at exit, after it — never another process's of the same
// --file-prefix: the folder then stays, theirs). Start registers txbatch's telemetry commands
// (telemetry.h).
class Eal {
 public:
  static Result<std::unique_ptr<Eal>> Start(const EalPlan& plan);
  ~Eal();
  Eal(const Eal&) = delete;
  Eal& operator=(const Eal&) = delete;

  // CPUs the process may run on (its affinity mask at start-up), in ascending order.
  const std::vector<int>& cpus() const { return cpus_; }
  double tsc_hz() const { return tsc_hz_; }

 private:
  Eal() = default;
  // The telemetry socket this process bound, as its file was then (empty path: none).
  struct TelemetrySocket {
    std::string path;
    dev_t dev = 0;
    ino_t ino = 0;
  };
  std::string runtime_dir_;
  TelemetrySocket telemetry_socket_;
  std::vector<int> cpus_;
  double tsc_hz_ = 0;
};

// Removes what SIGKILLed txbatch processes left in EAL's runtime root (`root`, e.g.
// /var/run/dpdk): the folders named exactly txbatch-<pid> (txbatch's --file-prefix) whose pid no
// longer exists, and only empty ones (rmdir; a folder with anything in it is not ours to judge),
// but for the telemetry socket the dead process's exit would have unlinked.
// Every other name, a live pid's folder and this process's own are left alone. Returns how many
// it removed. Control plane; Eal::Start calls it once EAL is up.
unsigned RemoveStaleRuntimeDirs(const std::string& root);

// The CPUs in this thread's affinity mask, ascending.
std::vector<int> AllowedCpus();

// Other txbatch processes (by pid) whose main thread is pinned to `cpu` alone — their main lcore,
// where a bridge or sink polls — read from `proc` (/proc). Pollers that share a CPU take turns on
// it: a bridge beside a sink on one CPU here forwarded ~3 kpps of 100 offered (doc/bridge.md).
std::vector<int> TxbatchProcessesOnCpu(int cpu, const std::string& proc = "/proc");

// For a thread that writes what the data path produced (a capture file, statistics lines), called
// first thing in it: moves it to EAL's CPUs but the main lcore's, where one is left (it inherited
// that one from the thread that made it; there a bridge or sink busy-polls its ports), and holds
// back SIGPIPE (a reader that went away is EPIPE, said at the end, not a death that leaves EAL's
// files behind) and the stop signals (base/stop_signals.h: they go to a thread that acts on them
// and never interrupt a write half-way). Control plane; needs EAL started.
void EnterOutputThread();

// DPDK's own reasons. A failed control-plane call often returns only an errno
// (rte_dev_probe: -EPERM for an af_packet interface that does not exist) while the PMD logged
// why ("ioctl failed (SIOCGIFINDEX):No such device"). Once Eal::Start has run, DPDK's log goes
// through a tap that keeps its error lines (RTE_LOG_ERR and worse) and passes everything on
// where it went before (nowhere, unless the user asked for --log-level after --).
// Thread-safe; not for the data path (nothing there logs).
//
// A point in DPDK's log: the errors logged after it are those of the steps that follow.
uint64_t DpdkLogMark();
// The reason DPDK logged after `mark` for a step that failed: the last error line of a PMD (or
// any component but EAL itself), else EAL's first, without the "func(): " or "EAL: " prefix;
// empty when none was logged (or Eal::Start has not run).
std::string DpdkErrorSince(uint64_t mark);

}  // namespace txbatch
