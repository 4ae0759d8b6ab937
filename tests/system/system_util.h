#pragma once
// What the system tests share: the txbatch under test, shell commands, and processes the test
// starts itself (each with its own log), signals by their pid and always reaps.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_files.h"
#include "tests/txbatch_bin.h"
#include "tests/txbatch_run.h"

namespace txbatch::system_test {

// The binary under test, its runs to the end and files read back: the helpers every tier that
// runs txbatch shares.
using test::CaptureLine;
using test::CaptureSaid;
using test::RunTxbatch;
using test::Slurp;
using test::TxbatchRun;
// The binary for a shell command: TxbatchBinary ($TXBATCH_BIN, else the one built beside this
// test binary).
inline std::string Txbatch() { return test::TxbatchBinary(); }

// The CPUs this process may run on, ascending; its children start on the first (their main
// lcore). A prefix that runs a command on the last CPU this process may use ("taskset -c N "; empty
// with one CPU). Every txbatch process polls on the first CPU it may use (its main lcore): a
// bridge and a sink both there forwarded ~3 kpps of 100 offered (doc/bridge.md).
inline std::vector<int> CpusAllowed() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}
inline std::string OnLastCpu() {
  const std::vector<int> cpus = CpusAllowed();
  if (cpus.size() < 2) return "";
  return "taskset -c " + std::to_string(cpus.back()) + " ";
}

struct Ran {
  int status = -1;  // the exit status; -1 when killed by a signal or not started
  std::string out;  // stdout and stderr together
};

// Runs `cmd` through the shell.
inline Ran Sh(const std::string& cmd) {
  Ran r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// A command (through /bin/sh, exec'd: the pid is the command's) writing to its own log. The
// destructor kills it (SIGKILL) if it still runs and reaps it.
class Process {
 public:
  Process(const std::string& cmd, std::string log) : log_(std::move(log)) {
    // Emptied before the fork: a WaitFor right after must not read an earlier run's log.
    ::close(::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = ::open(log_.c_str(), O_WRONLY | O_APPEND);
      dup2(fd, 1);
      dup2(fd, 2);
      execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), nullptr);
      _exit(127);
    }
  }
  ~Process() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Wait();
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // Waits up to `timeout_s` for `text` in the log; whether it appeared.
  bool WaitFor(const std::string& text, double timeout_s) const {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (Log().find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }
  void Signal(int sig) const {
    if (pid_ > 0) kill(pid_, sig);
  }
  // Reaps it: its exit status, -(signal) if a signal ended it.
  int Wait() {
    if (pid_ <= 0) return status_;
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1;
    return status_;
  }
  // Reaps it if it ends within `timeout_s`: whether it did (then Wait() gives its status).
  bool EndsWithin(double timeout_s) {
    if (pid_ <= 0) return true;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    int st = 0;
    while (waitpid(pid_, &st, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = -1;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1;
    return true;
  }
  std::string Log() const { return Slurp(log_); }
  pid_t pid() const { return pid_; }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int status_ = -1;
};

}  // namespace txbatch::system_test
