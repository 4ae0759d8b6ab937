#include "tools/lab.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>
#include <variant>

#include "base/error.h"
#include "base/stop_signals.h"
#include "dataplane/frame.h"
#include "tools/bridge_cmd.h"
#include "tools/session.h"

namespace txbatch {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// How long `down` gives the bridge to stop beyond the drain it announces (EAL and the ports'
// teardown), and how long processes left in the namespaces get between SIGTERM and SIGKILL.
constexpr std::chrono::seconds kBridgeStopGrace{10};
constexpr std::chrono::seconds kProcessGrace{2};
// How long `down` waits for the bridge's watcher to write how the bridge ended, once it has: the
// watcher only reaps it and writes a line (a lab an older txbatch made has no watcher).
constexpr std::chrono::seconds kExitLineWait{2};

// The signal that interrupted `lab up` (0: none); checked between steps.
volatile sig_atomic_t g_signal = 0;
void OnSignal(int sig) { g_signal = sig; }

// Runs `argv` (no shell), its stdout and stderr captured; an error holds the command and what
// it said. The command ignores the stop signals (a Ctrl-C reaches the whole process group):
// each step finishes and is recorded, and `lab up` undoes it if it was interrupted.
Result<std::string> Exec(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe(fds) != 0) return MakeError(errno, "cannot create a pipe");
  const pid_t pid = fork();
  if (pid < 0) return MakeError(errno, "cannot fork");
  if (pid == 0) {
    for (const int sig : kStopSignals) std::signal(sig, SIG_IGN);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return MakeError(WIFEXITED(st) && WEXITSTATUS(st) == 127 ? ENOENT : EIO,
                     fmt::format("'{}' failed: {}", cmd,
                                 out.empty() ? "no output" : out.substr(0, out.find('\n'))));
  }
  return out;
}

struct Names {
  std::string prefix, ns_a, ns_b, in_a, in_b, host_a, host_b;  // namespaces; veth ends in them;
                                                               // host ends
  fs::path dir, state_file, log_file, pid_file, exit_file;
  explicit Names(const std::string& p)
      : prefix(p),
        ns_a(p + "-a"),
        ns_b(p + "-b"),
        in_a(p + "-a0"),
        in_b(p + "-b0"),
        host_a(p + "-a1"),
        host_b(p + "-b1"),
        dir(fs::path(kLabStateDir) / p),
        state_file(dir / "state"),
        log_file(dir / "bridge.log"),
        pid_file(dir / "bridge.pid"),
        exit_file(dir / "bridge.exit") {}
};

bool ValidPrefix(const std::string& p) {
  if (p.empty() || p.size() > 8) return false;
  for (char c : p)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  return true;
}

bool NetnsExists(const std::string& ns) { return fs::exists(fs::path("/run/netns") / ns); }
bool LinkExists(const std::string& dev) { return fs::exists(fs::path("/sys/class/net") / dev); }

std::string Slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One thing the lab made, as its state file records it: "netns txb-a", "link txb-a1",
// "bridge 1234", "file /run/txbatch-lab/txb/bridge.log".
struct Made {
  std::string kind, name;
};

// The lab's state: what it made, one line each, appended as each thing is made (after the step
// succeeded, so a name that was there before is never recorded). `down` removes these, nothing
// else: a line that names something not of this lab's naming is ignored.
std::vector<Made> ReadState(const Names& n) {
  std::vector<Made> made;
  std::ifstream in(n.state_file);
  std::string kind, name;
  while (in >> kind >> name) {
    const bool ours = (kind == "netns" && (name == n.ns_a || name == n.ns_b)) ||
                      (kind == "link" && (name == n.host_a || name == n.host_b)) ||
                      (kind == "file" && fs::path(name).parent_path() == n.dir) ||
                      (kind == "bridge" && !name.empty() && name.size() < 10 &&
                       name.find_first_not_of("0123456789") == std::string::npos);
    if (ours) made.push_back({kind, name});
  }
  return made;
}

Status Record(const Names& n, const std::string& kind, const std::string& name) {
  std::ofstream out(n.state_file, std::ios::app);
  out << kind << ' ' << name << '\n';
  out.flush();
  if (!out)
    return MakeError(EIO, fmt::format("cannot write the lab's state {}", n.state_file.string()));
  return {};
}

// Whether `pid` still runs this lab's `txbatch bridge` (a pid may have been reused).
bool RunningBridge(const Names& n, pid_t pid) {
  if (pid <= 1) return false;
  const std::string cmdline = Slurp(fmt::format("/proc/{}/cmdline", pid));
  std::vector<std::string> argv;
  for (size_t at = 0; at < cmdline.size();) {
    const size_t end = cmdline.find('\0', at);
    argv.push_back(cmdline.substr(at, end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return argv.size() > 4 && argv[0].find("txbatch") != std::string::npos && argv[1] == "bridge" &&
         argv[3] == "net_af_packet0,iface=" + n.host_a;
}

std::optional<pid_t> RecordedBridge(const std::vector<Made>& made) {
  for (const Made& m : made)
    if (m.kind == "bridge") return static_cast<pid_t>(std::stol(m.name));
  return std::nullopt;
}

// How the bridge ended, as its watcher wrote it to bridge.exit ("exited 3", "killed by signal 9
// (SIGKILL)"); waits up to kExitLineWait for the line. Empty where none came.
std::string BridgeExitLine(const Names& n) {
  const auto deadline = Clock::now() + kExitLineWait;
  for (;;) {
    std::string line = Slurp(n.exit_file);
    if (!line.empty() && line.back() == '\n') {
      line.pop_back();
      return line;
    }
    if (Clock::now() > deadline) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The watcher: a child of `lab up` in a session of its own that starts the bridge (`argv`, its
// output to the log), writes its pid to `pid_fd`, outlives `lab up`, reaps the bridge and writes
// how it ended to bridge.exit — what only a parent can know, for `down` to say where the bridge
// died before it. Exits as the bridge did (128 + a signal that ended it), so `up` reads the
// bridge's exit status from its own child. Runs after fork(): no allocation, no locks.
[[noreturn]] void WatchBridge(const Names& n, std::vector<char*>& argv, int pid_fd) {
  setsid();  // not in the caller's session: it outlives `lab up`
  // Nothing of `lab up`'s goes with it: its stdout and stderr (a caller reading them to their end
  // would wait for the bridge), its other files.
  const int out = fcntl(pid_fd, F_DUPFD, 10);
  const int null = open("/dev/null", O_RDWR);
  if (null >= 0)
    for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
  close_range(3, static_cast<unsigned>(out) - 1, 0);
  close_range(static_cast<unsigned>(out) + 1, ~0u, 0);
  const pid_t pid = fork();
  if (pid == 0) {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    close(out);
    const int log = open(n.log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log >= 0) {
      dup2(log, 1);
      dup2(log, 2);
    }
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  ssize_t w;
  do w = write(out, &pid, sizeof pid);
  while (w < 0 && errno == EINTR);
  close(out);
  if (pid < 0) _exit(kExitInternal);
  for (const int sig : kStopSignals) std::signal(sig, SIG_IGN);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  char line[96];
  const int len = WIFEXITED(st) ? std::snprintf(line, sizeof line, "exited %d\n", WEXITSTATUS(st))
                                : std::snprintf(line, sizeof line, "killed by signal %d (SIG%s)\n",
                                                WTERMSIG(st), sigabbrev_np(WTERMSIG(st)));
  // One write of a whole line: `down` takes the line once it ends in a newline.
  const int fd = open(n.exit_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0 && len > 0) {
    (void)!write(fd, line, static_cast<size_t>(len));
    close(fd);
  }
  _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

// Stops the bridge with SIGTERM and waits for it: as long as the drain it announces ("waiting
// up to X s", what its links still hold) and kBridgeStopGrace, then SIGKILL. Returns the final
// summary (its books) from its log, empty if it had to be killed.
std::string StopBridge(const Names& n, pid_t pid, bool* killed) {
  *killed = false;
  if (!RunningBridge(n, pid)) return {};
  const size_t log_start = Slurp(n.log_file).size();
  kill(pid, SIGTERM);
  auto deadline = Clock::now() + kBridgeStopGrace;
  bool announced = false;
  while (RunningBridge(n, pid)) {
    if (!announced) {
      const std::string text = Slurp(n.log_file);
      std::smatch m;
      const std::string tail = text.size() > log_start ? text.substr(log_start) : std::string();
      if (std::regex_search(tail, m, std::regex(R"(stopping: waiting up to ([\d.]+) s)"))) {
        announced = true;
        const double s = std::stod(m[1]);
        fmt::print("lab {}: the bridge delivers what its links hold first (up to {:.1f} s)\n",
                   n.prefix, s);
        std::fflush(stdout);
        deadline = Clock::now() + kBridgeStopGrace +
                   std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
      }
    }
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      *killed = true;
      for (int i = 0; i < 50 && RunningBridge(n, pid); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      return {};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::string text = Slurp(n.log_file);
  const size_t at = text.find("\nstopped after", log_start > 0 ? log_start - 1 : 0);
  return at == std::string::npos ? std::string() : text.substr(at + 1);
}

std::vector<pid_t> PidsIn(const std::string& ns) {
  std::vector<pid_t> pids;
  auto out = Exec({"ip", "netns", "pids", ns});
  if (!out) return pids;
  std::istringstream in(*out);
  pid_t pid;
  while (in >> pid)
    if (pid > 1 && pid != getpid()) pids.push_back(pid);
  return pids;
}

// Ends the processes left in namespace `ns` (an `iperf3 -s -D` outlives the namespace it runs
// in otherwise): SIGTERM, then SIGKILL what still runs after kProcessGrace. Says what it ended.
std::vector<std::string> EndProcessesIn(const std::string& ns) {
  std::vector<std::string> ended;
  const std::vector<pid_t> pids = PidsIn(ns);
  if (pids.empty()) return ended;
  for (pid_t p : pids) {
    std::string comm = Slurp(fmt::format("/proc/{}/comm", p));
    while (!comm.empty() && comm.back() == '\n') comm.pop_back();
    ended.push_back(fmt::format("process {} ({}) in {}", p, comm.empty() ? "?" : comm, ns));
    kill(p, SIGTERM);
  }
  const auto deadline = Clock::now() + kProcessGrace;
  while (!PidsIn(ns).empty() && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::vector<pid_t> left = PidsIn(ns);
  for (pid_t p : left) kill(p, SIGKILL);
  for (int i = 0; i < 50 && !left.empty() && !PidsIn(ns).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (!left.empty()) ended.push_back(fmt::format("{} of them killed", left.size()));
  return ended;
}

// What tearing down the lab did: the bridge's books (if it ran) and what was removed.
struct Removal {
  std::string summary;  // the bridge's final lines, its books
  bool bridge_killed = false;
  // The bridge had ended before `down` came: how (its watcher's line, empty if not known), and
  // where its log was kept.
  std::optional<pid_t> bridge_died;
  std::string died_how;
  fs::path kept_log;
  std::vector<std::string> removed;
};

// What Remove does with the log of a bridge that had ended before it: `down` keeps it (it holds
// the bridge's last words), `up` clearing what a crashed lab of its prefix left does not.
enum class DeadBridgeLog { kKeep, kRemove };

// Removes exactly what the state says the lab made, in the reverse order: the bridge first
// (its books), the processes left in the namespaces, the namespaces (and with them the veth
// ends in them and their pairs), the links, the files; then the state and its folder. A bridge
// that had ended before is named with how it ended; with kKeep its log stays, renamed
// bridge-PID.log (a later `up` of the prefix writes bridge.log anew), and so does the folder.
Removal Remove(const Names& n, DeadBridgeLog dead_log = DeadBridgeLog::kRemove) {
  Removal r;
  const std::vector<Made> made = ReadState(n);
  if (const auto pid = RecordedBridge(made); pid && RunningBridge(n, *pid)) {
    r.summary = StopBridge(n, *pid, &r.bridge_killed);
    r.removed.push_back(fmt::format("bridge pid {}{}", *pid, r.bridge_killed ? " (killed)" : ""));
    (void)BridgeExitLine(n);  // its watcher is done with the folder
  } else if (pid) {
    r.bridge_died = pid;
    r.died_how = BridgeExitLine(n);
    // Stopped by a SIGTERM someone else sent, it wrote its books.
    const std::string text = Slurp(n.log_file);
    const size_t at = text.find("\nstopped after");
    if (at != std::string::npos) r.summary = text.substr(at + 1);
    std::error_code ec;
    const fs::path kept = n.dir / fmt::format("bridge-{}.log", *pid);
    if (dead_log == DeadBridgeLog::kKeep && fs::exists(n.log_file, ec)) {
      fs::rename(n.log_file, kept, ec);
      if (!ec) r.kept_log = kept;
    }
  }
  for (const Made& m : made)
    if (m.kind == "netns" && NetnsExists(m.name))
      for (std::string& e : EndProcessesIn(m.name)) r.removed.push_back(std::move(e));
  for (auto m = made.rbegin(); m != made.rend(); ++m) {
    if (m->kind == "netns" && NetnsExists(m->name) && Exec({"ip", "netns", "del", m->name}))
      r.removed.push_back("namespace " + m->name);
    // Deleting a namespace deletes the veth end in it, and with it the pair.
    if (m->kind == "link" && LinkExists(m->name) && Exec({"ip", "link", "del", m->name}))
      r.removed.push_back("link " + m->name);
  }
  std::error_code ec;
  for (const Made& m : made)
    if (m.kind == "file" && fs::remove(m.name, ec)) r.removed.push_back(m.name);
  fs::remove(n.state_file, ec);
  if (fs::remove(n.dir, ec)) r.removed.push_back(n.dir.string());  // only if it is empty
  return r;
}

// One side: a namespace, a veth pair with one end in it, its address, TX checksum offload off
// in it, both ends up at `mtu`, IPv6 off on the pair (its router solicitations would cross the
// bridge). Each thing is recorded as soon as it exists; stops early when a signal came.
Status MakeSide(const Names& n, const std::string& ns, const std::string& in,
                const std::string& host, const std::string& addr, unsigned mtu) {
  for (const auto& [what, there] : {std::pair{"namespace " + ns, NetnsExists(ns)},
                                    std::pair{"interface " + host, LinkExists(host)}})
    if (there)
      return MakeError(EEXIST, fmt::format("{} exists and is not lab {}'s; valid: another "
                                           "--prefix, or remove it first",
                                           what, n.prefix));
  if (auto r = Exec({"ip", "netns", "add", ns}); !r) return r.error();
  if (Status s = Record(n, "netns", ns); !s) return s;
  if (g_signal) return {};
  if (auto r = Exec({"ip", "link", "add", host, "type", "veth", "peer", "name", in, "netns", ns});
      !r)
    return r.error();
  if (Status s = Record(n, "link", host); !s) return s;
  const std::string m = std::to_string(mtu);
  const std::vector<std::vector<std::string>> steps = {
      {"ip", "netns", "exec", ns, "sh", "-c",
       fmt::format("echo 1 > /proc/sys/net/ipv6/conf/{}/disable_ipv6", in)},
      {"sh", "-c", fmt::format("echo 1 > /proc/sys/net/ipv6/conf/{}/disable_ipv6", host)},
      {"ip", "-n", ns, "addr", "add", addr + "/24", "dev", in},
      {"ip", "-n", ns, "link", "set", "lo", "up"},
      {"ip", "-n", ns, "link", "set", in, "mtu", m, "up"},
      {"ip", "netns", "exec", ns, "ethtool", "-K", in, "tx", "off"},
      {"ip", "link", "set", host, "mtu", m, "up"},
  };
  for (const auto& s : steps) {
    if (g_signal) return {};
    if (auto r = Exec(s); !r) return r.error();
  }
  return {};
}

// The bridge's --mtu among the options `up` passes on (checked by the caller already).
unsigned BridgeMtu(const std::vector<std::string>& bridge_args) {
  CLI::App check;
  BridgeArgs b;
  AddBridgeOptions(check, b);
  std::vector<std::string> args = {"--port-a", "x", "--port-b", "y"};
  args.insert(args.end(), bridge_args.begin(), bridge_args.end());
  std::reverse(args.begin(), args.end());
  try {
    check.parse(args);
  } catch (const CLI::ParseError&) {
  }
  return b.queue.mtu;
}

// Ends `bridge`, however far it got (before its exec its command line is still `lab up`'s, so
// Remove's check by command line would pass it by): SIGTERM, up to 5 s for it to stop cleanly,
// then SIGKILL; its watcher, this process's child, reaped either way (it exits once the bridge
// has).
void EndBridge(pid_t bridge, pid_t watcher) {
  kill(bridge, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    int st = 0;
    if (waitpid(watcher, &st, WNOHANG) == watcher) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(bridge, SIGKILL);
  waitpid(watcher, nullptr, 0);
}

// Exit status of a `lab up` that a signal interrupted, as a shell reports one a signal ended.
// `bridge` and its `watcher`: if it got that far.
int Interrupted(const Names& n, pid_t bridge = 0, pid_t watcher = 0) {
  const int sig = g_signal;
  if (bridge > 0) EndBridge(bridge, watcher);
  (void)Remove(n);
  std::fprintf(stderr, "txbatch: lab up was interrupted by %s; what it had made is removed\n",
               sig == SIGINT   ? "SIGINT"
               : sig == SIGHUP ? "SIGHUP"
                               : "SIGTERM");
  return 128 + sig;
}

// What `lab up` is given, checked before anything is made: the prefix, root, the bridge's MTU (the
// veths'), and no lab of this prefix up already.
Result<unsigned> CheckLabUp(const LabArgs& a, const Names& n) {
  if (!ValidPrefix(a.prefix))
    return Error{EINVAL, fmt::format("--prefix '{}' is not valid; valid: 1 to 8 lowercase letters "
                                     "or digits (the interface names must fit 15 bytes)",
                                     a.prefix)};
  if (geteuid() != 0)
    return Error{EPERM,
                 "lab up creates network namespaces and veth pairs, which needs root; valid: run "
                 "it as root"};
  const unsigned mtu = BridgeMtu(a.bridge_args);
  if (mtu < kMinMtu || mtu > kMaxMtu)
    return Error{ERANGE,
                 fmt::format("--mtu {} is out of range; valid: {}..{}", mtu, kMinMtu, kMaxMtu)};
  if (const auto pid = RecordedBridge(ReadState(n)); pid && RunningBridge(n, *pid))
    return Error{EEXIST, fmt::format("lab '{}' is up already (bridge pid {}); valid: txbatch lab "
                                     "down --prefix {} first, or another --prefix",
                                     a.prefix, *pid, a.prefix)};
  return mtu;
}

// A step of `lab up` failed: what it made is removed; a missing tool or a lab up already is bad
// input, anything else internal.
int Failed(const Names& n, const Error& e) {
  (void)Remove(n);
  return Fail(e.err == ENOENT || e.err == EEXIST ? kExitBadInput : kExitInternal, e);
}

// The bridge between the two host ends, started under a watcher process that records its exit
// (WatchBridge): its pid and the watcher's, recorded; else the exit status of the failure.
struct StartedBridge {
  pid_t pid = -1, watcher = -1;
};
std::variant<StartedBridge, int> StartBridge(const LabArgs& a, const Names& n,
                                             const std::vector<std::string>& eal_args) {
  std::vector<std::string> argv = {"txbatch",  "bridge",
                                   "--port-a", "net_af_packet0,iface=" + n.host_a,
                                   "--port-b", "net_af_packet1,iface=" + n.host_b};
  argv.insert(argv.end(), a.bridge_args.begin(), a.bridge_args.end());
  if (!eal_args.empty()) {
    argv.push_back("--");
    argv.insert(argv.end(), eal_args.begin(), eal_args.end());
  }
  if (Status s = Record(n, "file", n.log_file.string()); !s) return Failed(n, s.error());
  if (Status s = Record(n, "file", n.exit_file.string()); !s) return Failed(n, s.error());
  std::vector<char*> args;
  for (auto& s : argv) args.push_back(s.data());
  args.push_back(nullptr);
  int pid_pipe[2];
  if (pipe2(pid_pipe, O_CLOEXEC) != 0) return Failed(n, Error{errno, "cannot create a pipe"});
  const pid_t watcher = fork();
  if (watcher < 0) return Failed(n, Error{errno, "cannot fork the bridge"});
  if (watcher == 0) WatchBridge(n, args, pid_pipe[1]);
  close(pid_pipe[1]);
  pid_t pid = -1;
  ssize_t got;
  do got = read(pid_pipe[0], &pid, sizeof pid);
  while (got < 0 && errno == EINTR);
  close(pid_pipe[0]);
  if (got != sizeof pid || pid <= 0) {
    waitpid(watcher, nullptr, 0);
    return Failed(n, Error{EAGAIN, "cannot fork the bridge"});
  }
  if (Status s = Record(n, "bridge", std::to_string(pid)); !s) {
    kill(pid, SIGKILL);
    waitpid(watcher, nullptr, 0);
    return Failed(n, s.error());
  }
  std::ofstream(n.pid_file) << pid << "\n";  // for whoever wants the pid alone
  if (Status s = Record(n, "file", n.pid_file.string()); !s) return Failed(n, s.error());
  return StartedBridge{pid, watcher};
}

// Up when the bridge says it forwards (within 30 s: EAL's start-up and the ports' links); its own
// sentence if it exits first. kExitOk, or the exit status of the failure.
int AwaitForwarding(const Names& n, const StartedBridge& b) {
  const pid_t pid = b.pid, watcher = b.watcher;
  bool forwarding = false;
  for (int i = 0; i < 600 && !forwarding; ++i) {  // 30 s: EAL start-up and the ports' links
    if (g_signal) return Interrupted(n, pid, watcher);
    int st = 0;
    if (waitpid(watcher, &st, WNOHANG) == watcher) {  // it exits as the bridge did
      std::string text = Slurp(n.log_file);
      const size_t at = text.rfind("txbatch: ");
      std::string why = at == std::string::npos ? text : text.substr(at + 9);
      while (!why.empty() && why.back() == '\n') why.pop_back();
      (void)Remove(n);
      return Fail(WIFEXITED(st) && WEXITSTATUS(st) == kExitBadInput ? kExitBadInput : kExitInternal,
                  Error{EIO, why.empty() ? "the bridge exited at start-up" : why});
    }
    forwarding = Slurp(n.log_file).find("\nforwarding") != std::string::npos;
    if (!forwarding) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (g_signal) return Interrupted(n, pid, watcher);
  if (!forwarding)
    return Failed(n, Error{ETIMEDOUT,
                           fmt::format("the bridge did not start forwarding within 30 s; see {}",
                                       n.log_file.string())});
  return kExitOk;
}

// What is up, and how to use it: the namespaces, addresses and the bridge, the link, the
// offloads turned off, TCP's congestion control there, and the commands.
void PrintLabUp(const LabArgs& a, const Names& n, pid_t pid, unsigned mtu) {
  const std::string link_line = [&] {
    const std::string t = Slurp(n.log_file);
    const size_t at = t.find("link a>b:");
    return at == std::string::npos ? std::string() : t.substr(at, t.find('\n', at) - at);
  }();
  fmt::print(
      "lab {} is up: namespace {} ({} on {}) and namespace {} ({} on {}), joined by the "
      "txbatch bridge (pid {}) on {} and {}, MTU {}\n",
      a.prefix, n.ns_a, kLabAddrA, n.in_a, n.ns_b, kLabAddrB, n.in_b, pid, n.host_a, n.host_b, mtu);
  if (!link_line.empty()) fmt::print("  {}\n", link_line);
  fmt::print(
      "  TX checksum offload is off on {} and {}: the kernel would hand the bridge TCP "
      "frames whose checksum holds only the pseudo-header (CHECKSUM_PARTIAL), which "
      "nothing after a userspace bridge completes\n",
      n.in_a, n.in_b);
  // A new namespace takes the host's default congestion control (bbr on some hosts), which
  // reads loss quite differently from cubic: "1 % loss" gave 759 Mbit/s under bbr here.
  const auto cc = [](const std::string& ns) {
    auto r = Exec({"ip", "netns", "exec", ns, "cat", "/proc/sys/net/ipv4/tcp_congestion_control"});
    std::string name = r ? *r : std::string("unknown");
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    return name;
  };
  const std::string cc_a = cc(n.ns_a), cc_b = cc(n.ns_b);
  fmt::print(
      "  TCP congestion control: {} (the host's default; iperf3 -C NAME picks another for "
      "one test)\n",
      cc_a == cc_b ? cc_a : fmt::format("{} in {}, {} in {}", cc_a, n.ns_a, cc_b, n.ns_b));
  fmt::print("  ping:   ip netns exec {} ping {}\n", n.ns_a, kLabAddrB);
  fmt::print("  iperf3: ip netns exec {} iperf3 -s -D; ip netns exec {} iperf3 -c {}\n", n.ns_b,
             n.ns_a, kLabAddrB);
  fmt::print("  bridge log (statistics every second): {}\n", n.log_file.string());
  fmt::print("  stop and remove it all: txbatch lab down --prefix {}\n", a.prefix);
}

}  // namespace

int LabUp(const LabArgs& a, const std::vector<std::string>& eal_args) {
  const Names n(a.prefix);
  auto mtu = CheckLabUp(a, n);
  if (!mtu) return Fail(kExitBadInput, mtu.error());
  (void)Remove(n);  // what a crashed lab of this name recorded
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (const int sig : kStopSignals) sigaction(sig, &sa, nullptr);  // SIGHUP: a closed terminal
  std::error_code ec;
  fs::create_directories(n.dir, ec);
  if (ec)
    return Failed(
        n, Error{ec.value(), fmt::format("cannot create {}: {}", n.dir.string(), ec.message())});
  if (Status s = MakeSide(n, n.ns_a, n.in_a, n.host_a, kLabAddrA, *mtu); !s)
    return Failed(n, s.error());
  if (g_signal) return Interrupted(n);
  if (Status s = MakeSide(n, n.ns_b, n.in_b, n.host_b, kLabAddrB, *mtu); !s)
    return Failed(n, s.error());
  if (g_signal) return Interrupted(n);
  const auto bridge = StartBridge(a, n, eal_args);
  if (const int* failed = std::get_if<int>(&bridge)) return *failed;
  const StartedBridge& b = std::get<StartedBridge>(bridge);
  if (const int up = AwaitForwarding(n, b); up != kExitOk) return up;
  PrintLabUp(a, n, b.pid, *mtu);
  return kExitOk;
}

int LabDown(const std::string& prefix) {
  if (!ValidPrefix(prefix))
    return Fail(kExitBadInput, Error{EINVAL, fmt::format("--prefix '{}' is not valid; valid: 1 to "
                                                         "8 lowercase letters or digits",
                                                         prefix)});
  if (geteuid() != 0)
    return Fail(kExitBadInput, Error{EPERM,
                                     "lab down stops the lab's bridge and removes its "
                                     "network namespaces and veth pairs, which needs "
                                     "root; valid: run it as root"});
  const Names n(prefix);
  if (!fs::exists(n.state_file))
    return Fail(kExitBadInput,
                Error{ENOENT, fmt::format("there is no lab with prefix '{}' ({} does not exist), "
                                          "so nothing is removed; valid: the --prefix a lab up "
                                          "was given (a lab an older txbatch made has no state "
                                          "file: ip netns del {}-a; ip netns del {}-b)",
                                          prefix, n.state_file.string(), prefix, prefix)});
  const Removal r = Remove(n, DeadBridgeLog::kKeep);
  // The bridge's final summary (its books), from its log.
  if (!r.summary.empty()) fmt::print("{}", r.summary);
  if (r.bridge_killed)
    fmt::print("lab {}: the bridge did not stop in time and was killed: no books\n", prefix);
  if (r.removed.empty())
    fmt::print("lab {}: nothing to remove\n", prefix);
  else
    fmt::print("lab {} removed: {}\n", prefix, fmt::join(r.removed, ", "));
  if (!r.bridge_died) return kExitOk;
  // Nothing crossed the lab from the moment the bridge ended: a script must not take what ran
  // there as a good run (exit 1). Books only where it stopped cleanly (someone's SIGTERM).
  std::fflush(stdout);
  std::string how = "how is not known (no exit status was recorded)";
  if (r.died_how.rfind("exited ", 0) == 0)
    how = "with exit status " + r.died_how.substr(7);
  else if (!r.died_how.empty())
    how = r.died_how;
  return Fail(
      kExitInternal,
      Error{ECHILD,
            fmt::format("lab {}: the bridge (pid {}) had ended before lab down, "
                        "{}: {}; {}",
                        prefix, *r.bridge_died, how,
                        r.summary.empty() ? "its books are lost" : "its books above are from then",
                        r.kept_log.empty() ? "its log is gone"
                                           : "its log is kept: " + r.kept_log.string())});
}

}  // namespace txbatch
