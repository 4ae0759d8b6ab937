#include "tools/lab.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "dataplane/error.h"
#include "tools/session.h"

namespace txbatch {
namespace {

namespace fs = std::filesystem;

// Runs `argv` (no shell), its stdout and stderr captured; an error holds the command and what
// it said.
Result<std::string> Exec(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe(fds) != 0) return MakeError(errno, "cannot create a pipe");
  const pid_t pid = fork();
  if (pid < 0) return MakeError(errno, "cannot fork");
  if (pid == 0) {
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
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
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
  std::string ns_a, ns_b, in_a, in_b, host_a, host_b;  // namespaces; veth ends in them; host ends
  fs::path dir, pid_file, log_file;
  explicit Names(const std::string& p)
      : ns_a(p + "-a"),
        ns_b(p + "-b"),
        in_a(p + "-a0"),
        in_b(p + "-b0"),
        host_a(p + "-a1"),
        host_b(p + "-b1"),
        dir(fs::path(kLabStateDir) / p),
        pid_file(dir / "bridge.pid"),
        log_file(dir / "bridge.log") {}
};

bool ValidPrefix(const std::string& p) {
  if (p.empty() || p.size() > 8) return false;
  for (char c : p)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  return true;
}

// The bridge's pid from the pid file, if that process still runs `txbatch bridge`.
std::optional<pid_t> RunningBridge(const Names& n) {
  std::ifstream in(n.pid_file);
  pid_t pid = 0;
  if (!(in >> pid) || pid <= 1) return std::nullopt;
  std::ifstream cmdline(fmt::format("/proc/{}/cmdline", pid));
  std::string argv0, argv1;
  if (!std::getline(cmdline, argv0, '\0') || !std::getline(cmdline, argv1, '\0')) return {};
  if (argv1 != "bridge" || argv0.find("txbatch") == std::string::npos) return std::nullopt;
  return pid;
}

bool NetnsExists(const std::string& ns) { return fs::exists(fs::path("/run/netns") / ns); }
bool LinkExists(const std::string& dev) { return fs::exists(fs::path("/sys/class/net") / dev); }

// Stops the bridge (SIGTERM, then SIGKILL after its drain has had time) and removes the
// namespaces, links and state of `prefix`; says what it removed.
std::vector<std::string> Remove(const Names& n) {
  std::vector<std::string> removed;
  if (const auto pid = RunningBridge(n)) {
    kill(*pid, SIGTERM);
    bool gone = false;
    for (int i = 0; i < 150 && !gone; ++i) {  // 15 s: the drain waits for the links
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      gone = kill(*pid, 0) != 0 || !RunningBridge(n);
    }
    if (!gone) kill(*pid, SIGKILL);
    removed.push_back(fmt::format("bridge pid {}{}", *pid, gone ? "" : " (killed)"));
  }
  for (const auto& ns : {n.ns_a, n.ns_b})
    if (NetnsExists(ns) && Exec({"ip", "netns", "del", ns})) removed.push_back("namespace " + ns);
  // Deleting a namespace deletes the veth end in it, and with it the pair.
  for (const auto& dev : {n.host_a, n.host_b})
    if (LinkExists(dev) && Exec({"ip", "link", "del", dev})) removed.push_back("link " + dev);
  std::error_code ec;
  if (fs::exists(n.dir, ec)) {
    fs::remove_all(n.dir, ec);
    removed.push_back(n.dir.string());
  }
  return removed;
}

// One side: a namespace, a veth pair with one end in it, its address, TX checksum offload off
// in it, both ends up, IPv6 off on the pair (its router solicitations would cross the bridge).
Status MakeSide(const std::string& ns, const std::string& in, const std::string& host,
                const std::string& addr) {
  const std::vector<std::vector<std::string>> steps = {
      {"ip", "netns", "add", ns},
      {"ip", "link", "add", host, "type", "veth", "peer", "name", in, "netns", ns},
      {"ip", "netns", "exec", ns, "sh", "-c",
       fmt::format("echo 1 > /proc/sys/net/ipv6/conf/{}/disable_ipv6", in)},
      {"sh", "-c", fmt::format("echo 1 > /proc/sys/net/ipv6/conf/{}/disable_ipv6", host)},
      {"ip", "-n", ns, "addr", "add", addr + "/24", "dev", in},
      {"ip", "-n", ns, "link", "set", "lo", "up"},
      {"ip", "-n", ns, "link", "set", in, "up"},
      {"ip", "netns", "exec", ns, "ethtool", "-K", in, "tx", "off"},
      {"ip", "link", "set", host, "up"},
  };
  for (const auto& s : steps)
    if (auto r = Exec(s); !r) return r.error();
  return {};
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
  const Names n(a.prefix);
  if (const auto pid = RunningBridge(n))
    return Fail(kExitBadInput,
                Error{EEXIST, fmt::format("lab '{}' is up already (bridge pid {}); valid: txbatch "
                                          "lab down --prefix {} first, or another --prefix",
                                          a.prefix, *pid, a.prefix)});
  (void)Remove(n);  // what a crashed lab of this name left behind
  const auto fail = [&](const Error& e) {
    (void)Remove(n);
    return Fail(e.err == ENOENT ? kExitBadInput : kExitInternal, e);
  };
  if (Status s = MakeSide(n.ns_a, n.in_a, n.host_a, kLabAddrA); !s) return fail(s.error());
  if (Status s = MakeSide(n.ns_b, n.in_b, n.host_b, kLabAddrB); !s) return fail(s.error());
  std::error_code ec;
  fs::create_directories(n.dir, ec);
  if (ec) return fail(Error{ec.value(), fmt::format("cannot create {}: {}", n.dir.string(),
                                                    ec.message())});

  std::vector<std::string> argv = {"txbatch", "bridge", "--port-a",
                                   "net_af_packet0,iface=" + n.host_a, "--port-b",
                                   "net_af_packet1,iface=" + n.host_b};
  argv.insert(argv.end(), a.bridge_args.begin(), a.bridge_args.end());
  if (!eal_args.empty()) {
    argv.push_back("--");
    argv.insert(argv.end(), eal_args.begin(), eal_args.end());
  }
  const pid_t pid = fork();
  if (pid < 0) return fail(Error{errno, "cannot fork the bridge"});
  if (pid == 0) {
    setsid();  // not in the caller's session: it outlives `lab up`
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
  std::ofstream(n.pid_file) << pid << "\n";
  // Up when the bridge says it forwards; its own sentence if it exits first.
  const auto log_text = [&] {
    std::ifstream in(n.log_file);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  for (int i = 0; i < 600; ++i) {  // 30 s: EAL start-up and the ports' links
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      std::string text = log_text();
      const size_t at = text.rfind("txbatch: ");
      std::string why = at == std::string::npos ? text : text.substr(at + 9);
      while (!why.empty() && why.back() == '\n') why.pop_back();
      (void)Remove(n);
      return Fail(WIFEXITED(st) && WEXITSTATUS(st) == kExitBadInput ? kExitBadInput
                                                                     : kExitInternal,
                  Error{EIO, why.empty() ? "the bridge exited at start-up" : why});
    }
    if (log_text().find("\nforwarding") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (log_text().find("\nforwarding") == std::string::npos)
    return fail(Error{ETIMEDOUT, fmt::format("the bridge did not start forwarding within 30 s; "
                                             "see {}",
                                             n.log_file.string())});
  const std::string link_line = [&] {
    const std::string t = log_text();
    const size_t at = t.find("link a>b:");
    return at == std::string::npos ? std::string() : t.substr(at, t.find('\n', at) - at);
  }();
  fmt::print("lab {} is up: namespace {} ({} on {}) and namespace {} ({} on {}), joined by the "
             "txbatch bridge (pid {}) on {} and {}\n",
             a.prefix, n.ns_a, kLabAddrA, n.in_a, n.ns_b, kLabAddrB, n.in_b, pid, n.host_a,
             n.host_b);
  if (!link_line.empty()) fmt::print("  {}\n", link_line);
  fmt::print("  TX checksum offload is off on {} and {}: the kernel would hand the bridge TCP "
             "frames whose checksum holds only the pseudo-header (CHECKSUM_PARTIAL), which "
             "nothing after a userspace bridge completes\n",
             n.in_a, n.in_b);
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
  const Names n(prefix);
  // The bridge's final summary (its books) goes to the log when it stops: show it.
  const auto pid = RunningBridge(n);
  const fs::path log = n.log_file;
  std::string summary;
  std::vector<std::string> removed;
  if (pid) {
    removed.push_back(fmt::format("bridge pid {}", *pid));
    kill(*pid, SIGTERM);
    for (int i = 0; i < 150 && RunningBridge(n); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream in(log);
    std::stringstream s;
    s << in.rdbuf();
    const std::string text = s.str();
    if (const size_t at = text.find("\nstopped after"); at != std::string::npos)
      summary = text.substr(at + 1);
  }
  for (std::string& r : Remove(n)) removed.push_back(std::move(r));
  if (!summary.empty()) fmt::print("{}", summary);
  if (removed.empty())
    fmt::print("lab {}: nothing to remove\n", prefix);
  else
    fmt::print("lab {} removed: {}\n", prefix, fmt::join(removed, ", "));
  return kExitOk;
}

}  // namespace txbatch
