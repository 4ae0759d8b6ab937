// Issue 44, item 13: a reader that opens an output and stops reading (a FIFO nobody drains, a
// pipe into a program held up) blocked a grid in pipe_write, and the first SIGINT did not end
// it: no --json, the runtime folder left. Now a write that makes no progress for a second after
// the first stop signal is abandoned (base/output_file: GiveUpOnStalledReaders), the capture's
// writer is unblocked by reading off what its reader does not take, and the other outputs are
// still written. Each test holds a FIFO's read end open without reading, starts txbatch in the
// background, waits until the FIFO's pipe is full (the writer is held), sends SIGINT and gives
// it a bounded time to end.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/test_files.h"
#include "tests/txbatch_bin.h"

namespace txbatch::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The FIFO's pipe is cut to one page (F_SETPIPE_SZ) so that a few cell events fill it.
constexpr int kPipeBytes = 4096;

// How long a stopped txbatch may take to end once signalled: the cell in progress (0.02 s
// here) and its drain, the stalled write abandoned a second after the signal, EAL's exit
// (~0.4 s), the files written — 20 s leaves a shared 2-vCPU machine ample room.
constexpr auto kEndWithin = std::chrono::seconds(20);

// txbatch ARGS in the background (through bash), stdout and stderr to files in `d`.
struct Background {
  Background(const fs::path& d, const std::string& args) : out(d / "stdout"), err(d / "stderr") {
    pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      const std::string cmd = "exec " + TxbatchBinary() + " " + args + " >" + out.string() +
                              " 2>" + err.string();
      ::execl("/bin/bash", "bash", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~Background() {
    if (pid > 0 && status < -1) {  // never reaped: a test that failed early
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  // Its exit status, or -1 after SIGKILL when it did not end within `limit`.
  int Wait(Clock::duration limit) {
    const auto deadline = Clock::now() + limit;
    int st = 0;
    while (Clock::now() < deadline) {
      if (::waitpid(pid, &st, WNOHANG) == pid) {
        status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // Where each thread waits, for the failure's message.
    for (const auto& t : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task"))
      stuck += Slurp(t.path() / "comm") + " " + Slurp(t.path() / "wchan") + "\n";
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    status = -1;
    return status;
  }
  // Whether it still runs (without reaping it).
  bool Running() const {
    siginfo_t info{};
    return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == 0;
  }
  pid_t pid = -1;
  int status = -2;
  std::string stuck;  // each thread's name and wait channel, where Wait gave up
  fs::path out, err;
};

// A FIFO at `path` whose read end is held open and never read.
struct StalledReader {
  explicit StalledReader(const fs::path& path) {
    if (::mkfifo(path.c_str(), 0600) == 0) fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
    if (fd >= 0) (void)::fcntl(fd, F_SETPIPE_SZ, kPipeBytes);
  }
  ~StalledReader() {
    if (fd >= 0) ::close(fd);
  }
  int Pending() const {
    int n = 0;
    return ::ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
  }
  // Waits up to `limit` until the writer is held: bytes wait in the pipe, unchanged for a
  // second while `b` still runs (a writer with room would have added its next line or block
  // within a second: a cell here takes ~0.05 s). False if not.
  bool Full(const Background& b, Clock::duration limit) const {
    const auto deadline = Clock::now() + limit;
    int last = -1;
    auto since = Clock::now();
    while (Clock::now() < deadline && b.Running()) {
      const int now = Pending();
      if (now != last) {
        last = now;
        since = Clock::now();
      } else if (now > 0 && Clock::now() - since > std::chrono::seconds(1)) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  int fd = -1;
};

// How a run interrupted while a stalled reader held it ended.
struct Interrupted {
  int status = 0;
  std::string err, out;
};

// Holds the read end of a FIFO at `d`/fifo open without reading, starts txbatch `args` (which
// name the FIFO as an output) in the background, waits up to `limit` until the FIFO holds its
// writer (`what` it writes there, for a failure's message), then interrupts it (SIGINT) and
// waits for its end: its exit status, stderr and stdout in `*end`. In ASSERT_NO_FATAL_FAILURE:
// a FIFO that could not be made or was never full, or a run still going kEndWithin after the
// signal (killed, where each of its threads waited said), ends the test.
void InterruptWhileStalled(const fs::path& d, const std::string& args, Clock::duration limit,
                           const char* what, Interrupted* end) {
  const StalledReader reader(d / "fifo");
  ASSERT_GE(reader.fd, 0) << std::strerror(errno);
  Background run(d, args);
  ASSERT_TRUE(reader.Full(run, limit))
      << what << " never filled the FIFO (" << reader.Pending() << " bytes)";
  ASSERT_EQ(::kill(run.pid, SIGINT), 0);
  end->status = run.Wait(kEndWithin);
  end->err = Slurp(run.err);
  end->out = Slurp(run.out);
  ASSERT_NE(end->status, -1) << "still running " << kEndWithin.count()
                             << " s after SIGINT: " << end->err << run.stuck;
}

// A grid long enough to fill a pipe with its cell events (32 cell runs, each event a record of
// several KB) and to be stopped in the middle.
const std::string kGrid =
    "run --driver emu:null --proto udp --size 64 --procs 1 --batch 1,2,4,8,16,32,64,128 "
    "--rounds 4 --duration 0.02 --warmup 0.01";

TEST(Stall, AStalledStatsJsonReaderEndsAtTheFirstSignalAndJsonIsWritten) {
  const fs::path d = Scratch("stall", "stats_json");
  Interrupted end;
  ASSERT_NO_FATAL_FAILURE(InterruptWhileStalled(
      d, kGrid + " --stats-json " + (d / "fifo").string() + " --json " + (d / "r.json").string(),
      std::chrono::seconds(60), "the cell events", &end));
  EXPECT_EQ(end.status, 4) << end.err;  // interrupted, what was measured written
  EXPECT_NE(end.err.find("its reader stopped reading"), std::string::npos) << end.err;
  const auto doc = nlohmann::json::parse(Slurp(d / "r.json"), nullptr, false);
  ASSERT_TRUE(doc.is_object()) << Slurp(d / "r.json");
  EXPECT_FALSE(doc["records"].empty());
  fs::remove_all(d);
}

TEST(Stall, AStalledJsonReaderEndsAtTheFirstSignalAndTheStreamIsWritten) {
  const fs::path d = Scratch("stall", "json");
  // The document (32 records, ~30 KB) is larger than the pipe: its write waits once the grid is
  // done.
  Interrupted end;
  ASSERT_NO_FATAL_FAILURE(InterruptWhileStalled(
      d, kGrid + " --json " + (d / "fifo").string() + " --stats-json " + (d / "s.ndjson").string(),
      std::chrono::seconds(90), "the document", &end));
  EXPECT_NE(end.status, 0) << end.err;  // the document was not written whole
  EXPECT_NE(end.err.find("its reader stopped reading"), std::string::npos) << end.err;
  EXPECT_NE(Slurp(d / "s.ndjson").find(R"({"event":"end")"), std::string::npos);
  fs::remove_all(d);
}

TEST(Stall, AStalledCaptureReaderEndsAtTheFirstSignal) {
  const fs::path d = Scratch("stall", "capture");
  Interrupted end;
  ASSERT_NO_FATAL_FAILURE(InterruptWhileStalled(
      d,
      "run --driver ethdev:net_ring0 --proto udp --size 1000 --procs 1 --batch 32 --rounds 1 "
      "--duration 30 --warmup 0.01 --capture " +
          (d / "fifo").string() + " --json " + (d / "r.json").string(),
      std::chrono::seconds(30), "the capture", &end));
  EXPECT_NE((end.err + end.out).find("its reader stopped reading"), std::string::npos)
      << end.err << end.out;
  const auto doc = nlohmann::json::parse(Slurp(d / "r.json"), nullptr, false);
  EXPECT_TRUE(doc.is_object()) << end.err;
  fs::remove_all(d);
}

}  // namespace
}  // namespace txbatch::test
