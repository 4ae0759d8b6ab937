#include "dataplane/eal.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pthread.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/stop_signals.h"
#include "dataplane/telemetry.h"

namespace txbatch {
namespace {

// EAL itself (tailqs, memzones, the ethdev and log tables) needs this much besides our pools.
inline constexpr uint64_t kEalBaseBytes = 96ull << 20;
// EAL lcores taken from the affinity mask. Producers and the txirq are registered non-EAL
// threads that need lcore ids of their own (RTE_MAX_LCORE is 128), and txbatch runs nothing on
// EAL's worker lcores, so a big machine's mask is cut here.
inline constexpr size_t kMaxEalLcores = 16;

// DPDK's log stream (DpdkLogMark): error lines are kept, every byte passes on to `forward`.
class LogTap {
 public:
  static LogTap& Get() {
    static LogTap tap;
    return tap;
  }

  // The stream to give rte_openlog_stream; `forward` (may be null) gets everything.
  std::FILE* Open(std::FILE* forward) {
    std::lock_guard lock(mu_);
    forward_ = forward;
    if (stream_ == nullptr) {
      cookie_io_functions_t io{};
      io.write = [](void* self, const char* buf, size_t size) -> ssize_t {
        static_cast<LogTap*>(self)->Write(buf, size);
        return static_cast<ssize_t>(size);
      };
      stream_ = fopencookie(this, "w", io);
      // One write per line, while rte_log's current message level still describes it.
      if (stream_ != nullptr) setvbuf(stream_, nullptr, _IOLBF, 0);
    }
    return stream_;
  }

  uint64_t Mark() {
    std::lock_guard lock(mu_);
    return lines_;
  }

  std::string Since(uint64_t mark) {
    std::lock_guard lock(mu_);
    const Kept* pmd = nullptr;
    const Kept* eal = nullptr;
    for (const Kept& k : kept_) {
      if (k.seq <= mark) continue;
      if (!k.eal) pmd = &k;
      if (k.eal && eal == nullptr) eal = &k;
    }
    return pmd ? pmd->text : eal ? eal->text : std::string();
  }

 private:
  struct Kept {
    uint64_t seq;  // which line of the log
    bool eal;      // logged by EAL itself (often only "Driver cannot attach the device")
    std::string text;
  };
  // The latest error lines; a failed step logs a few, so older ones are of no use.
  static constexpr size_t kKeep = 32;

  void Write(const char* buf, size_t size) {
    const int level = rte_log_cur_msg_loglevel();
    const bool eal = rte_log_cur_msg_logtype() == RTE_LOGTYPE_EAL;
    std::lock_guard lock(mu_);
    if (forward_ != nullptr) {
      std::fwrite(buf, 1, size, forward_);
      std::fflush(forward_);
    }
    std::string_view text(buf, size);
    while (!text.empty()) {
      const size_t nl = text.find('\n');
      std::string_view line = text.substr(0, nl);
      text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
      ++lines_;
      if (level > static_cast<int>(RTE_LOG_ERR)) continue;
      // Trailing blanks and a full stop: the line goes inside txbatch's sentence.
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '.'))
        line.remove_suffix(1);
      // PMDs prefix the function's name ("rte_pmd_init_internals(): "), EAL its own.
      if (const size_t p = line.find("(): ");
          p != std::string_view::npos && line.substr(0, p).find(' ') == std::string_view::npos)
        line.remove_prefix(p + 4);
      if (line.starts_with("EAL: ")) line.remove_prefix(5);
      if (line.empty()) continue;
      if (kept_.size() == kKeep) kept_.erase(kept_.begin());
      kept_.push_back({lines_, eal, std::string(line)});
    }
  }

  std::mutex mu_;
  std::FILE* stream_ = nullptr;
  std::FILE* forward_ = nullptr;
  uint64_t lines_ = 0;
  std::vector<Kept> kept_;
};

uint64_t ReadNumber(const std::string& path) {
  std::ifstream in(path);
  uint64_t v = 0;
  in >> v;
  return in ? v : 0;
}

std::string CpuList(const std::vector<int>& cpus) {
  std::string s;
  for (int c : cpus) {
    if (!s.empty()) s += ',';
    s += std::to_string(c);
  }
  return s;
}

// The path of the unix socket this process bound whose name starts with `prefix`, read from its
// own descriptors (getsockname), or empty. DPDK keeps no public record of where its telemetry
// listens: "dpdk_telemetry.v2", or "dpdk_telemetry.v2:N" where another process of the same
// --file-prefix holds that name already.
std::string OwnUnixSocket(const std::string& prefix) {
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return "";
  std::string found;
  while (const dirent* e = readdir(fds)) {
    int fd = -1;
    const std::string_view name(e->d_name);
    if (std::from_chars(name.data(), name.data() + name.size(), fd).ptr !=
            name.data() + name.size() ||
        fd == dirfd(fds))
      continue;
    sockaddr_un addr{};
    socklen_t len = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        addr.sun_family != AF_UNIX || len <= offsetof(sockaddr_un, sun_path) ||
        addr.sun_path[0] == '\0')  // unnamed or abstract: no file
      continue;
    const std::string path(addr.sun_path, strnlen(addr.sun_path, sizeof addr.sun_path));
    if (path.starts_with(prefix)) {
      found = path;
      break;
    }
  }
  closedir(fds);
  return found;
}

}  // namespace

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {0};
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::vector<int> TxbatchProcessesOnCpu(int cpu, const std::string& proc) {
  std::vector<int> out;
  DIR* d = opendir(proc.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = readdir(d)) {
    int pid = 0;
    const std::string_view name(e->d_name);
    if (std::from_chars(name.data(), name.data() + name.size(), pid).ptr !=
            name.data() + name.size() ||
        pid <= 0 || pid == getpid())
      continue;
    // The affinity first (no file opened), then the name; a zombie (state Z) runs nowhere.
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(pid, sizeof set, &set) != 0 || CPU_COUNT(&set) != 1 ||
        !CPU_ISSET(cpu, &set))
      continue;
    const std::string dir = proc + "/" + std::string(name);
    std::ifstream comm(dir + "/comm");
    std::string command, stat;
    if (!std::getline(comm, command) || command != "txbatch") continue;
    std::ifstream status(dir + "/stat");
    std::getline(status, stat);
    // "pid (comm) S ...": the state follows the last ')'.
    if (const size_t paren = stat.rfind(')');
        paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z')
      continue;
    out.push_back(pid);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

void EnterOutputThread() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  unsigned lcore;
  RTE_LCORE_FOREACH(lcore) {
    rte_cpuset_t s = rte_lcore_cpuset(lcore);
    CPU_OR(&cpus, &cpus, &s);
  }
  rte_cpuset_t main = rte_lcore_cpuset(rte_get_main_lcore());
  cpu_set_t others;
  CPU_XOR(&others, &cpus, &main);
  CPU_AND(&others, &others, &cpus);
  if (CPU_COUNT(&others) > 0) cpus = others;
  if (CPU_COUNT(&cpus) > 0) (void)pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus);
  sigset_t held;
  sigemptyset(&held);
  sigaddset(&held, SIGPIPE);
  for (int sig : kStopSignals) sigaddset(&held, sig);
  pthread_sigmask(SIG_BLOCK, &held, nullptr);
}

unsigned RemoveStaleRuntimeDirs(const std::string& root) {
  DIR* dir = opendir(root.c_str());
  if (dir == nullptr) return 0;
  constexpr std::string_view kPrefix = "txbatch-";
  unsigned removed = 0;
  while (dirent* e = readdir(dir)) {
    const std::string_view name = e->d_name;
    if (!name.starts_with(kPrefix)) continue;
    const std::string_view digits = name.substr(kPrefix.size());
    pid_t pid = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
    if (ec != std::errc() || end != digits.data() + digits.size() || pid <= 0 || pid == getpid())
      continue;  // not txbatch-<pid> exactly ("txbatch-12x", "txbatch-+3"), or our own
    // Gone only when the kernel says no such process (EPERM: it exists, someone else's).
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;
    // Its telemetry socket, which only its exit would have unlinked, is the one thing of its
    // own it may hold: a socket, not a file anyone could have written.
    const std::string folder = root + "/" + std::string(name);
    const std::string socket = folder + "/dpdk_telemetry.v2";
    struct stat st {};
    if (lstat(socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) unlink(socket.c_str());
    if (rmdir(folder.c_str()) == 0) ++removed;
  }
  closedir(dir);
  return removed;
}

namespace {
// The hugepages sysfs lists, over every page size: the free bytes, and the largest page size of
// which some are free (0 where none are).
struct HugepageScan {
  uint64_t free_bytes = 0;
  uint64_t largest_free_page = 0;
};
HugepageScan ScanHugepages() {
  HugepageScan scan;
  DIR* dir = opendir("/sys/kernel/mm/hugepages");
  if (dir == nullptr) return scan;
  while (dirent* e = readdir(dir)) {
    std::string_view name = e->d_name;  // "hugepages-2048kB"
    if (!name.starts_with("hugepages-")) continue;
    const uint64_t page = std::strtoull(name.data() + 10, nullptr, 10) * 1024;
    const uint64_t free_pages =
        ReadNumber(fmt::format("/sys/kernel/mm/hugepages/{}/free_hugepages", name));
    scan.free_bytes += free_pages * page;
    if (free_pages > 0) scan.largest_free_page = std::max(scan.largest_free_page, page);
  }
  closedir(dir);
  return scan;
}
}  // namespace

uint64_t FreeHugepageBytes() { return ScanHugepages().free_bytes; }

EalHost EalHost::Here() {
  const HugepageScan scan = ScanHugepages();
  EalHost host{.free_huge_bytes = scan.free_bytes};
  // The largest page with free pages: the largest file EAL's --in-memory may make.
  if (scan.largest_free_page > 0) host.huge_page_bytes = scan.largest_free_page;
  rlimit fsize{};
  if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY)
    host.file_size_limit = fsize.rlim_cur;
  return host;
}

std::string EalHelpOption(const std::vector<std::string>& args) {
  // DPDK 22.11's short options (eal_common_options.c, eal_short_options): h and v stand alone,
  // these take a value — the rest of their cluster, or the next argument.
  constexpr std::string_view kWithValue = "abcdlmnrsSw";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "--") break;  // getopt stops: what follows is the application's
    if (a.starts_with("--")) {
      // A unique prefix names a long option; "--h" is ambiguous (--huge-dir, --huge-unlink,
      // --huge-worker-stack) and EAL refuses it, and --help takes no value ("--help=x" refused).
      const std::string_view name = a.substr(2);
      if (name.size() >= 2 && std::string_view("help").starts_with(name)) return args[i];
      continue;
    }
    if (a.size() < 2 || a[0] != '-') continue;  // not an option (getopt permutes past it)
    for (size_t j = 1; j < a.size(); ++j) {
      if (a[j] == 'h') return args[i];
      if (kWithValue.find(a[j]) != std::string_view::npos) {
        if (j + 1 == a.size()) ++i;  // its value is the next argument
        break;
      }
    }
  }
  return "";
}

Status CheckEalUserArgs(const EalUserArgs& user) {
  for (const auto& [args, where] : {std::pair{&user.extra, "--eal-extra"},
                                    std::pair{&user.replace, "the EAL arguments after --"}})
    if (const std::string help = EalHelpOption(*args); !help.empty())
      return MakeError(EINVAL,
                       fmt::format("{} holds '{}', EAL's own help option, with which EAL prints "
                                   "its usage and ends txbatch before it does anything; valid: "
                                   "EAL arguments without it (EAL's options: doc.dpdk.org, "
                                   "\"EAL parameters\"; txbatch's: txbatch --help)",
                                   where, help));
  return {};
}

Result<EalPlan> PlanEal(uint64_t need_bytes, const EalUserArgs& user, EalMemory memory,
                        const EalHost& host) {
  if (Status st = CheckEalUserArgs(user); !st) return st.error();
  EalPlan plan;
  plan.args.push_back("txbatch");
  if (!user.replace.empty()) {
    plan.args.insert(plan.args.end(), user.replace.begin(), user.replace.end());
    plan.mode = "user";
    plan.why = "EAL arguments given after --, used as they are";
    return plan;
  }
  const uint64_t need = need_bytes + kEalBaseBytes;
  const uint64_t need_mb = (need + (1 << 20) - 1) >> 20;
  const uint64_t free_huge = host.free_huge_bytes;
  // --in-memory sizes a hugepage file a page (a whole segment list with --single-file-segments);
  // a file-size limit below that leaves EAL without memory (EalHost).
  const bool single_file = std::find(user.extra.begin(), user.extra.end(),
                                     "--single-file-segments") != user.extra.end();
  const uint64_t file_bytes = single_file ? need : host.huge_page_bytes;
  const bool files_fit = host.file_size_limit >= file_bytes;
  const std::string files_limit = fmt::format(
      "the file-size limit (ulimit -f) of {} KB is below {}, and --in-memory's hugepages are "
      "files",
      host.file_size_limit >> 10,
      single_file ? fmt::format("the {} MB estimate (--single-file-segments)", need_mb)
                  : fmt::format("a {} KB hugepage", host.huge_page_bytes >> 10));
  plan.args.push_back(fmt::format("--file-prefix=txbatch-{}", getpid()));
  // A core list in --eal-extra replaces txbatch's: EAL 22.11 refuses a second -l, -c or --lcores
  // ("Option -l is ignored, because (-l) is set!") where it takes the last of other options.
  const bool own_cores = std::none_of(user.extra.begin(), user.extra.end(), [](const auto& a) {
    return a.starts_with("-l") || a.starts_with("-c") || a.starts_with("--lcores");
  });
  if (own_cores) {
    plan.args.push_back("-l");
    std::vector<int> cpus = AllowedCpus();
    if (cpus.size() > kMaxEalLcores) cpus.resize(kMaxEalLcores);
    plan.args.push_back(CpuList(cpus));
  }
  plan.args.push_back("--no-pci");
  if (!user.telemetry) plan.args.push_back("--no-telemetry");
  bool use_huge = false;
  switch (memory) {
    case EalMemory::kInMemory:
      if (free_huge < need)
        return MakeError(ENOMEM, fmt::format("--eal-memory in-memory needs {} MB of free "
                                             "hugepages but {} MB are free; reserve more in "
                                             "/proc/sys/vm/nr_hugepages or use no-huge or auto.",
                                             need_mb, free_huge >> 20));
      if (!files_fit)
        return MakeError(EFBIG, fmt::format("--eal-memory in-memory cannot start: {}; valid: a "
                                            "limit of at least {} KB (ulimit -f), or "
                                            "--eal-memory no-huge or auto.",
                                            files_limit, file_bytes >> 10));
      use_huge = true;
      plan.why = fmt::format("forced by --eal-memory; {} MB of {} MB free hugepages", need_mb,
                             free_huge >> 20);
      break;
    case EalMemory::kNoHuge:
      plan.why = "forced by --eal-memory";
      break;
    case EalMemory::kAuto:
      use_huge = free_huge >= need && files_fit;
      plan.why = use_huge ? fmt::format("{} MB of free hugepages cover the {} MB estimate",
                                        free_huge >> 20, need_mb)
                 : free_huge < need ? fmt::format("{} MB of free hugepages do not cover the {} "
                                                  "MB estimate",
                                                  free_huge >> 20, need_mb)
                                    : files_limit;
      break;
  }
  if (use_huge) {
    plan.mode = "in-memory";
    plan.args.push_back("--in-memory");
  } else {
    // --no-huge cannot be combined with --in-memory in 22.11; --no-shconf keeps processes apart.
    plan.mode = "no-huge";
    plan.args.push_back("--no-huge");
    plan.args.push_back("--no-shconf");
    plan.args.push_back("-m");
    plan.args.push_back(std::to_string(need_mb));
  }
  if (!user.extra.empty()) {
    plan.args.insert(plan.args.end(), user.extra.begin(), user.extra.end());
    plan.why += fmt::format("; --eal-extra added {}", fmt::join(user.extra, " "));
  }
  return plan;
}

Result<std::unique_ptr<Eal>> Eal::Start(const EalPlan& plan) {
  std::vector<char*> argv;
  std::vector<std::string> copy = plan.args;  // rte_eal_init may permute argv
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Keep DPDK's log out of the report unless the user asked for a log level (after --, or with
  // --eal-extra: txbatch's own arguments never name one).
  bool user_log = false;
  for (const auto& a : plan.args) user_log |= a.starts_with("--log-level");
  if (!user_log) rte_log_set_global_level(RTE_LOG_WARNING);
  // Before rte_eal_init, which pins this thread to the main lcore.
  std::vector<int> cpus = AllowedCpus();
  // DPDK's own log (PMD probe errors, ring warnings) would add lines to txbatch's one-sentence
  // errors and tables; it goes nowhere unless the user asked for a log level (then to stderr:
  // EAL's own stream is stderr before rte_eal_init and stdout + syslog after, and stdout may be
  // the JSON document). Either way its error lines are kept for those sentences
  // (DpdkErrorSince), from before rte_eal_init: why EAL refused to start is one of them.
  std::FILE* tap = LogTap::Get().Open(user_log ? stderr : nullptr);
  if (tap != nullptr) rte_openlog_stream(tap);
  const uint64_t mark = DpdkLogMark();
  // EAL prints its usage and errors on stdout and stderr; a user gets txbatch's one sentence,
  // unless they asked for EAL's log.
  std::fflush(stdout);
  std::fflush(stderr);
  const int saved_out = dup(STDOUT_FILENO), saved_err = dup(STDERR_FILENO);
  const int devnull = user_log ? -1 : open("/dev/null", O_WRONLY);
  if (devnull >= 0) {
    dup2(devnull, STDOUT_FILENO);
    dup2(devnull, STDERR_FILENO);
  }
  const int rc = rte_eal_init(static_cast<int>(argv.size() - 1), argv.data());
  const int err = rte_errno;
  std::fflush(stdout);
  std::fflush(stderr);
  if (saved_out >= 0) dup2(saved_out, STDOUT_FILENO);
  if (saved_err >= 0) dup2(saved_err, STDERR_FILENO);
  for (int fd : {saved_out, saved_err, devnull})
    if (fd >= 0) close(fd);
  if (rc < 0) {
    std::string why = DpdkErrorSince(mark);
    while (!why.empty() && (why.back() == '.' || why.back() == ' ')) why.pop_back();
    return MakeError(err, fmt::format("DPDK EAL failed to start ({}{}) with arguments '{}'; "
                                      "check the EAL arguments after -- or drop them to use the "
                                      "defaults.",
                                      rte_strerror(err), why.empty() ? "" : ": " + why,
                                      fmt::join(plan.args, " ")));
  }
  auto eal = std::unique_ptr<Eal>(new Eal());
  eal->runtime_dir_ = rte_eal_get_runtime_dir();
  // The telemetry socket this process bound, by its file's identity: at exit only that one is
  // unlinked. Another txbatch given the same --file-prefix holds dpdk_telemetry.v2 (this one's
  // is then dpdk_telemetry.v2:1); unlinking the name cut that process off from its clients.
  if (!eal->runtime_dir_.empty() && !TelemetryPrefix(plan.args).empty()) {
    const std::string socket = OwnUnixSocket(eal->runtime_dir_ + "/dpdk_telemetry.");
    struct stat st {};
    if (!socket.empty() && lstat(socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode))
      eal->telemetry_socket_ = {socket, st.st_dev, st.st_ino};
  }
  // A txbatch that was SIGKILLed never ran its destructor: its empty runtime folder is still
  // there, next to ours (ENV-NOTES). They would pile up run after run.
  if (const size_t slash = eal->runtime_dir_.rfind('/'); slash != std::string::npos && slash > 0)
    (void)RemoveStaleRuntimeDirs(eal->runtime_dir_.substr(0, slash));
  eal->cpus_ = std::move(cpus);
  eal->tsc_hz_ = static_cast<double>(rte_get_tsc_hz());
  // Another txbatch polling on this one's CPU takes turns with it: said, as it slows both.
  const rte_cpuset_t main = rte_lcore_cpuset(rte_get_main_lcore());
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &main)) continue;
    if (const std::vector<int> others = TxbatchProcessesOnCpu(cpu); !others.empty())
      std::fprintf(stderr,
                   "txbatch: note: CPU %d, this process's main lcore, is also the main lcore of "
                   "txbatch pid %s: processes polling one CPU take turns on it; give each CPUs "
                   "of its own (taskset -c N txbatch ..., or --eal-extra \"-l N\"; "
                   "doc/bridge.md)\n",
                   cpu, fmt::format("{}", fmt::join(others, ", ")).c_str());
    break;
  }
  if (Status st = RegisterTelemetry(); !st) return st.error();
  return eal;
}

uint64_t DpdkLogMark() { return LogTap::Get().Mark(); }

std::string DpdkErrorSince(uint64_t mark) { return LogTap::Get().Since(mark); }

std::string TelemetryPrefix(const std::vector<std::string>& args) {
  std::string prefix = "rte";  // EAL's default
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--no-telemetry") return "";
    if (args[i].starts_with("--file-prefix=")) prefix = args[i].substr(14);
    if (args[i] == "--file-prefix" && i + 1 < args.size()) prefix = args[i + 1];
  }
  return prefix;
}

std::string TelemetryLine(const std::vector<std::string>& args) {
  const std::string prefix = TelemetryPrefix(args);
  if (prefix.empty()) return "";
  return fmt::format(
      "telemetry: dpdk-telemetry.py -f {} (txbatch's own: /txbatch/info, "
      "/txbatch/stats; --no-telemetry turns it off)",
      prefix);
}

Eal::~Eal() {
  rte_eal_cleanup();
  // DPDK unlinks its telemetry socket in an atexit handler, after this: the folder would stay.
  // Only the socket this process bound, and only while the name is still that file.
  if (const TelemetrySocket& t = telemetry_socket_; !t.path.empty()) {
    struct stat st {};
    if (lstat(t.path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == t.dev &&
        st.st_ino == t.ino)
      unlink(t.path.c_str());
  }
  // EAL leaves an empty /var/run/dpdk/<prefix> (ENV-NOTES); a non-empty one is not ours to clear.
  if (!runtime_dir_.empty()) rmdir(runtime_dir_.c_str());
}

}  // namespace txbatch
