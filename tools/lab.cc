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

#include "base/error.h"
#include "base/stop_signals.h"
#include "dataplane/frame.h"
#include "engine/session.h"
#include "tools/bridge_cmd.h"

namespace txbatch {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// How long `down` gives the bridge to stop beyond the drain it announces (EAL and the ports'
// teardown), and how long processes left in the namespaces get between SIGTERM and SIGKILL.
constexpr std::chrono::seconds kBridgeStopGrace{10};
constexpr std::chrono::seconds kProcessGrace{2};

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
  fs::path dir, state_file, log_file, pid_file;
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
        pid_file(dir / "bridge.pid") {}
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
  std::vector<std::string> removed;
};

// Removes exactly what the state says the lab made, in the reverse order: the bridge first
// (its books), the processes left in the namespaces, the namespaces (and with them the veth
// ends in them and their pairs), the links, the files; then the state and its folder.
Removal Remove(const Names& n) {
  Removal r;
  const std::vector<Made> made = ReadState(n);
  if (const auto pid = RecordedBridge(made); pid && RunningBridge(n, *pid)) {
    r.summary = StopBridge(n, *pid, &r.bridge_killed);
    r.removed.push_back(fmt::format("bridge pid {}{}", *pid, r.bridge_killed ? " (killed)" : ""));
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

// Ends `pid`, this process's own child bridge, however far it got (before its exec its command
// line is still `lab up`'s, so Remove's check by command line would pass it by): SIGTERM, up to
// 5 s for it to stop cleanly, then SIGKILL; reaped either way.
void EndChild(pid_t pid) {
  kill(pid, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// Exit status of a `lab up` that a signal interrupted, as a shell reports one a signal ended.
// `bridge`: the bridge it forked, if it got that far.
int Interrupted(const Names& n, pid_t bridge = 0) {
  const int sig = g_signal;
  if (bridge > 0) EndChild(bridge);
  (void)Remove(n);
  std::fprintf(stderr, "txbatch: lab up was interrupted by %s; what it had made is removed\n",
               sig == SIGINT ? "SIGINT" : sig == SIGHUP ? "SIGHUP" : "SIGTERM");
  return 128 + sig;
}

}  // namespace

int LabUp(const LabArgs& a, const std::vector<std::string>& eal_args) {
  if (!ValidPrefix(a.prefix))
    return Fail(kExitBadInput, Error{EINVAL, fmt::format("--prefix '{}' is not valid; valid: 1 to "
                                                         "8 lowercase letters or digits (the "
                                                         "interface names must fit 15 bytes)",
                                                         a.prefix)});
  if (geteuid() != 0)
    return Fail(kExitBadInput, Error{EPERM, "lab up creates network namespaces and veth pairs, "
                                            "which needs root; valid: run it as root"});
  const unsigned mtu = BridgeMtu(a.bridge_args);
  if (mtu < kMinMtu || mtu > kMaxMtu)
    return Fail(kExitBadInput, Error{ERANGE, fmt::format("--mtu {} is out of range; valid: {}..{}",
                                                         mtu, kMinMtu, kMaxMtu)});
  const Names n(a.prefix);
  if (const auto pid = RecordedBridge(ReadState(n)); pid && RunningBridge(n, *pid))
    return Fail(kExitBadInput,
                Error{EEXIST, fmt::format("lab '{}' is up already (bridge pid {}); valid: txbatch "
                                          "lab down --prefix {} first, or another --prefix",
                                          a.prefix, *pid, a.prefix)});
  (void)Remove(n);  // what a crashed lab of this name recorded
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (const int sig : kStopSignals) sigaction(sig, &sa, nullptr);  // SIGHUP: a closed terminal
  const auto fail = [&](const Error& e) {
    (void)Remove(n);
    return Fail(e.err == ENOENT || e.err == EEXIST ? kExitBadInput : kExitInternal, e);
  };
  std::error_code ec;
  fs::create_directories(n.dir, ec);
  if (ec) return fail(Error{ec.value(), fmt::format("cannot create {}: {}", n.dir.string(),
                                                    ec.message())});
  if (Status s = MakeSide(n, n.ns_a, n.in_a, n.host_a, kLabAddrA, mtu); !s) return fail(s.error());
  if (g_signal) return Interrupted(n);
  if (Status s = MakeSide(n, n.ns_b, n.in_b, n.host_b, kLabAddrB, mtu); !s) return fail(s.error());
  if (g_signal) return Interrupted(n);

  std::vector<std::string> argv = {"txbatch", "bridge", "--port-a",
                                   "net_af_packet0,iface=" + n.host_a, "--port-b",
                                   "net_af_packet1,iface=" + n.host_b};
  argv.insert(argv.end(), a.bridge_args.begin(), a.bridge_args.end());
  if (!eal_args.empty()) {
    argv.push_back("--");
    argv.insert(argv.end(), eal_args.begin(), eal_args.end());
  }
  if (Status s = Record(n, "file", n.log_file.string()); !s) return fail(s.error());
  const pid_t pid = fork();
  if (pid < 0) return fail(Error{errno, "cannot fork the bridge"});
  if (pid == 0) {
    setsid();  // not in the caller's session: it outlives `lab up`
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    const int log = open(n.log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null = open("/dev/null", O_RDONLY);
    if (log >= 0) {
      dup2(log, 1);
      dup2(log, 2);
    }
    if (null >= 0) dup2(null, 0);
    std::vector<char*> args;
    for (auto& s : argv) args.push_back(s.data());
    args.push_back(nullptr);
    execv("/proc/self/exe", args.data());
    _exit(127);
  }
  if (Status s = Record(n, "bridge", std::to_string(pid)); !s) {
    kill(pid, SIGKILL);
    return fail(s.error());
  }
  std::ofstream(n.pid_file) << pid << "\n";  // for whoever wants the pid alone
  if (Status s = Record(n, "file", n.pid_file.string()); !s) return fail(s.error());
  // Up when the bridge says it forwards; its own sentence if it exits first.
  bool forwarding = false;
  for (int i = 0; i < 600 && !forwarding; ++i) {  // 30 s: EAL start-up and the ports' links
    if (g_signal) return Interrupted(n, pid);
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      std::string text = Slurp(n.log_file);
      const size_t at = text.rfind("txbatch: ");
      std::string why = at == std::string::npos ? text : text.substr(at + 9);
      while (!why.empty() && why.back() == '\n') why.pop_back();
      (void)Remove(n);
      return Fail(WIFEXITED(st) && WEXITSTATUS(st) == kExitBadInput ? kExitBadInput
                                                                     : kExitInternal,
                  Error{EIO, why.empty() ? "the bridge exited at start-up" : why});
    }
    forwarding = Slurp(n.log_file).find("\nforwarding") != std::string::npos;
    if (!forwarding) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (g_signal) return Interrupted(n, pid);
  if (!forwarding)
    return fail(Error{ETIMEDOUT, fmt::format("the bridge did not start forwarding within 30 s; "
                                             "see {}",
                                             n.log_file.string())});
  const std::string link_line = [&] {
    const std::string t = Slurp(n.log_file);
    const size_t at = t.find("link a>b:");
    return at == std::string::npos ? std::string() : t.substr(at, t.find('\n', at) - at);
  }();
  fmt::print("lab {} is up: namespace {} ({} on {}) and namespace {} ({} on {}), joined by the "
             "txbatch bridge (pid {}) on {} and {}, MTU {}\n",
             a.prefix, n.ns_a, kLabAddrA, n.in_a, n.ns_b, kLabAddrB, n.in_b, pid, n.host_a,
             n.host_b, mtu);
  if (!link_line.empty()) fmt::print("  {}\n", link_line);
  fmt::print("  TX checksum offload is off on {} and {}: the kernel would hand the bridge TCP "
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
  fmt::print("  TCP congestion control: {} (the host's default; iperf3 -C NAME picks another for "
             "one test)\n",
             cc_a == cc_b ? cc_a : fmt::format("{} in {}, {} in {}", cc_a, n.ns_a, cc_b, n.ns_b));
  fmt::print("  ping:   ip netns exec {} ping {}\n", n.ns_a, kLabAddrB);
  fmt::print("  iperf3: ip netns exec {} iperf3 -s -D; ip netns exec {} iperf3 -c {}\n", n.ns_b,
             n.ns_a, kLabAddrB);
  fmt::print("  bridge log (statistics every second): {}\n", n.log_file.string());
  fmt::print("  stop and remove it all: txbatch lab down --prefix {}\n", a.prefix);
  return kExitOk;
}

int LabDown(const std::string& prefix) {
  if (!ValidPrefix(prefix))
    return Fail(kExitBadInput, Error{EINVAL, fmt::format("--prefix '{}' is not valid; valid: 1 to "
                                                         "8 lowercase letters or digits",
                                                         prefix)});
  if (geteuid() != 0)
    return Fail(kExitBadInput, Error{EPERM, "lab down stops the lab's bridge and removes its "
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
  const Removal r = Remove(n);
  // The bridge's final summary (its books), from its log.
  if (!r.summary.empty()) fmt::print("{}", r.summary);
  if (r.bridge_killed)
    fmt::print("lab {}: the bridge did not stop in time and was killed: no books\n", prefix);
  if (r.removed.empty())
    fmt::print("lab {}: nothing to remove\n", prefix);
  else
    fmt::print("lab {} removed: {}\n", prefix, fmt::join(r.removed, ", "));
  return kExitOk;
}

}  // namespace txbatch
