// What EAL start-up clears: the runtime folders SIGKILLed txbatch processes left behind, and
// nothing else. What the user's EAL arguments do to txbatch's own.
#include "dataplane/eal.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace txbatch::test {
namespace {

namespace fs = std::filesystem;

// --eal-extra adds after txbatch's choice (EAL takes the last of an option given twice), and the
// header's reason says so; arguments after -- replace the choice.
TEST(EalPlan, ExtraArgumentsComeAfterTxbatchsOwnAndAfterDashDashReplaceThem) {
  auto own = PlanEal(1 << 20, {}, EalMemory::kNoHuge);
  ASSERT_TRUE(own) << own.error().message;
  auto extra =
      PlanEal(1 << 20, {{}, {"--telemetry", "--log-level=lib.eal:debug"}}, EalMemory::kNoHuge);
  ASSERT_TRUE(extra) << extra.error().message;
  std::vector<std::string> want = own->args;
  want.push_back("--telemetry");
  want.push_back("--log-level=lib.eal:debug");
  // The file prefix names the pid: the same process, the same prefix.
  EXPECT_EQ(extra->args, want);
  EXPECT_EQ(extra->mode, "no-huge");
  EXPECT_NE(extra->why.find("--eal-extra added --telemetry --log-level=lib.eal:debug"),
            std::string::npos)
      << extra->why;
  auto replaced = PlanEal(1 << 20, {{"--no-huge", "-m", "64"}, {}}, EalMemory::kNoHuge);
  ASSERT_TRUE(replaced);
  EXPECT_EQ(replaced->args, (std::vector<std::string>{"txbatch", "--no-huge", "-m", "64"}));
  EXPECT_EQ(replaced->mode, "user");
}

// Hugepages under a file-size limit (ulimit -f): --in-memory's hugepage files (one a page in
// DPDK 22.11) cannot be sized past it, and EAL started without memory ("error allocating rte
// services array": CI, with 256 hugepages reserved, `ulimit -f 100`). auto now takes no-huge and
// says why; in-memory forced is one sentence. A limit of a page or more is no obstacle — 4 MB
// under a 100 MB pool: each file is one 2 MB page (EAL started so here under ulimit -f 4096) —
// unless --single-file-segments makes the pool one file. 512 MB free cover every estimate here.
TEST(EalPlan, AFileSizeLimitBelowAHugepageKeepsEalOffHugepageFiles) {
  constexpr uint64_t kPool = 100 << 20;
  const EalHost roomy{.free_huge_bytes = 512ull << 20};
  auto huge = PlanEal(kPool, {}, EalMemory::kAuto, roomy);
  ASSERT_TRUE(huge) << huge.error().message;
  EXPECT_EQ(huge->mode, "in-memory");
  const EalHost limited{.free_huge_bytes = 512ull << 20, .file_size_limit = 100 << 10};
  auto aut = PlanEal(kPool, {}, EalMemory::kAuto, limited);
  ASSERT_TRUE(aut) << aut.error().message;
  EXPECT_EQ(aut->mode, "no-huge");
  EXPECT_NE(aut->why.find("the file-size limit (ulimit -f) of 100 KB is below a 2048 KB "
                          "hugepage"),
            std::string::npos)
      << aut->why;
  auto forced = PlanEal(kPool, {}, EalMemory::kInMemory, limited);
  ASSERT_FALSE(forced);
  EXPECT_EQ(forced.error().message,
            "--eal-memory in-memory cannot start: the file-size limit (ulimit -f) of 100 KB is "
            "below a 2048 KB hugepage, and --in-memory's hugepages are files; valid: a limit of "
            "at least 2048 KB (ulimit -f), or --eal-memory no-huge or auto.");
  EXPECT_TRUE(PlanEal(kPool, {}, EalMemory::kInMemory, roomy));

  const EalHost pages{.free_huge_bytes = 512ull << 20, .file_size_limit = 4 << 20};
  auto page_files = PlanEal(kPool, {}, EalMemory::kAuto, pages);
  ASSERT_TRUE(page_files);
  EXPECT_EQ(page_files->mode, "in-memory") << page_files->why;
  auto one_file = PlanEal(kPool, {{}, {"--single-file-segments"}}, EalMemory::kAuto, pages);
  ASSERT_TRUE(one_file);
  EXPECT_EQ(one_file->mode, "no-huge") << one_file->why;
  const EalHost gigantic{.free_huge_bytes = 4ull << 30, .huge_page_bytes = 1ull << 30,
                         .file_size_limit = 512ull << 20};
  auto big_pages = PlanEal(kPool, {}, EalMemory::kAuto, gigantic);
  ASSERT_TRUE(big_pages);
  EXPECT_EQ(big_pages->mode, "no-huge") << "a 1 GB page is a 1 GB file";
}

// A core list in --eal-extra replaces txbatch's -l: EAL 22.11 refuses a second one ("Option -l
// is ignored, because (-l) is set!"), so `--eal-extra "-l 1"` never started.
TEST(EalPlan, ACoreListAmongTheExtraArgumentsReplacesTxbatchsOwn) {
  const auto lcore_options = [](const EalPlan& p) {
    return std::count_if(p.args.begin(), p.args.end(), [](const std::string& a) {
      return a.starts_with("-l") || a.starts_with("-c") || a.starts_with("--lcores");
    });
  };
  auto own = PlanEal(1 << 20, {}, EalMemory::kNoHuge);
  ASSERT_TRUE(own);
  EXPECT_EQ(lcore_options(*own), 1);
  for (std::vector<std::string> extra : std::vector<std::vector<std::string>>{
           {"-l", "1"}, {"-l1"}, {"-c", "0x2"}, {"--lcores", "1"}, {"--lcores=1@1"}}) {
    auto plan = PlanEal(1 << 20, {{}, extra}, EalMemory::kNoHuge);
    ASSERT_TRUE(plan);
    EXPECT_EQ(lcore_options(*plan), 1) << fmt::format("{}", fmt::join(plan->args, " "));
    EXPECT_EQ(plan->args.back(), extra.back());
  }
}

// Issue 44 item 16: EAL's help option among the user's EAL arguments made rte_eal_init print its
// usage (to /dev/null: txbatch silences EAL's start-up) and exit 0 from inside — txbatch ran
// nothing and said nothing. Every spelling EAL 22.11's getopt reads as help is refused; an h
// that is another option's value, or after "--", is not EAL's help.
TEST(EalPlan, EalsOwnHelpOptionAmongTheUsersArgumentsIsRefused) {
  for (const std::vector<std::string>& help : std::vector<std::vector<std::string>>{
           {"--help"}, {"-h"}, {"--hel"}, {"--he"}, {"-vh"}, {"-hv"}, {"--no-huge", "-h"}}) {
    const std::string said = fmt::format("{}", fmt::join(help, " "));
    EXPECT_FALSE(EalHelpOption(help).empty()) << said;
    for (const EalUserArgs& user : {EalUserArgs{{}, help}, EalUserArgs{help, {}}}) {
      auto plan = PlanEal(1 << 20, user, EalMemory::kNoHuge);
      ASSERT_FALSE(plan) << said;
      EXPECT_EQ(plan.error().err, EINVAL);
      EXPECT_NE(plan.error().message.find("EAL's own help option"), std::string::npos)
          << plan.error().message;
      EXPECT_EQ(plan.error().message.find('\n'), std::string::npos);
    }
  }
  EXPECT_NE(CheckEalUserArgs({{}, {"-h"}}).error().message.find("--eal-extra holds '-h'"),
            std::string::npos);
  EXPECT_NE(CheckEalUserArgs({{"--help"}, {}}).error().message.find("after -- holds '--help'"),
            std::string::npos);
  for (const std::vector<std::string>& not_help : std::vector<std::vector<std::string>>{
           {"-l", "-h"},  // -l's value (EAL refuses it as a core list)
           {"-lh"},
           {"--huge-dir", "/mnt/huge"},
           {"--h"},  // ambiguous: EAL refuses it, as it refuses any unknown option
           {"--no-huge", "--", "-h"},
           {"-v", "--log-level=lib.eal:debug"}})
    EXPECT_EQ(EalHelpOption(not_help), "") << fmt::format("{}", fmt::join(not_help, " "));
}

// Where dpdk-telemetry.py finds a process: its --file-prefix (the last one: EAL takes it), EAL's
// default "rte" without one, none with --no-telemetry.
TEST(EalPlan, TheTelemetryPrefixIsTheLastFilePrefixOrNone) {
  EXPECT_EQ(TelemetryPrefix({"txbatch", "--file-prefix=txbatch-7", "--no-huge"}), "txbatch-7");
  EXPECT_EQ(TelemetryPrefix({"--file-prefix=a", "--file-prefix", "b"}), "b");
  EXPECT_EQ(TelemetryPrefix({"--no-huge"}), "rte");
  EXPECT_EQ(TelemetryPrefix({"--file-prefix=a", "--no-telemetry"}), "");
  EXPECT_EQ(TelemetryLine({"--no-telemetry"}), "");
  auto plan = PlanEal(1 << 20, {.replace = {}, .extra = {}, .telemetry = true}, EalMemory::kNoHuge);
  ASSERT_TRUE(plan);
  EXPECT_EQ(std::count(plan->args.begin(), plan->args.end(), "--no-telemetry"), 0);
  EXPECT_EQ(TelemetryPrefix(plan->args), "txbatch-" + std::to_string(getpid()));
  auto off = PlanEal(1 << 20, {}, EalMemory::kNoHuge);
  ASSERT_TRUE(off);
  EXPECT_EQ(std::count(off->args.begin(), off->args.end(), "--no-telemetry"), 1);
}

// The pid of a process that has exited and been reaped: no process has it (until reused).
pid_t DeadPid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  int st = 0;
  waitpid(pid, &st, 0);
  return pid;
}

// The txbatch processes pinned to one CPU alone (their main lcore) are found by their name and
// their affinity; another name, another CPU or more than one CPU is not theirs.
TEST(EalNeighbours, TxbatchProcessesPinnedToTheCpuAloneAreFound) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  struct Reap {
    pid_t pid;
    ~Reap() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reap{child};
  const fs::path proc = fs::path(::testing::TempDir()) / "eal_neighbours_proc";
  fs::remove_all(proc);
  fs::create_directories(proc / std::to_string(child));
  fs::create_directories(proc / "self");
  const auto name = [&](const char* comm) {
    std::ofstream(proc / std::to_string(child) / "comm") << comm << "\n";
  };
  const auto pin = [&](std::vector<int> cpus) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : cpus) CPU_SET(c, &set);
    return sched_setaffinity(child, sizeof set, &set) == 0;
  };
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  const int cpu = allowed.back();
  name("txbatch");
  ASSERT_TRUE(pin({cpu}));
  EXPECT_EQ(TxbatchProcessesOnCpu(cpu, proc.string()), std::vector<int>{child});
  if (allowed.size() > 1) {
    EXPECT_TRUE(TxbatchProcessesOnCpu(allowed.front(), proc.string()).empty());
    ASSERT_TRUE(pin(allowed));  // not pinned to one CPU: a process that has not started EAL
    EXPECT_TRUE(TxbatchProcessesOnCpu(cpu, proc.string()).empty());
    ASSERT_TRUE(pin({cpu}));
  }
  name("txbatch-other");
  EXPECT_TRUE(TxbatchProcessesOnCpu(cpu, proc.string()).empty());
  fs::remove_all(proc);
}

TEST(EalRuntimeDirs, OnlyEmptyFoldersOfTxbatchProcessesThatAreGoneAreRemoved) {
  const fs::path root = fs::path(::testing::TempDir()) / ("dpdk-root-" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  const pid_t dead = DeadPid();
  const pid_t live = getppid();  // whoever started this test: alive while it runs
  const std::string d = std::to_string(dead);
  const std::vector<std::string> removed = {"txbatch-" + d};
  const std::vector<std::string> kept = {
      "txbatch-" + std::to_string(live),      // its process runs
      "txbatch-" + std::to_string(getpid()),  // our own
      "txbatch-" + d + "x",                   // not txbatch-<pid> exactly
      "txbatch-+" + d,
      "txbatch-0",
      "txbatch-",
      "rte",         // DPDK's default prefix
      "other-" + d,  // someone else's
  };
  for (const auto& n : removed) fs::create_directory(root / n);
  for (const auto& n : kept) fs::create_directory(root / n);
  // A dead pid's folder with something in it (a config file EAL with shared config writes): not
  // empty, not ours to judge.
  const std::string full = "txbatch-" + std::to_string(DeadPid());
  fs::create_directory(root / full);
  std::ofstream(root / full / "config") << "x";

  // A dead pid's folder holding only its telemetry socket (its exit never unlinked it): removed.
  // A regular file of the socket's name: not a socket, kept.
  const std::string with_socket = "txbatch-" + std::to_string(DeadPid());
  fs::create_directory(root / with_socket);
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = (root / with_socket / "dpdk_telemetry.v2").string();
  ASSERT_LT(path.size(), sizeof addr.sun_path) << path;
  std::copy(path.begin(), path.end(), addr.sun_path);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << path;
  close(fd);
  const std::string fake_socket = "txbatch-" + std::to_string(DeadPid());
  fs::create_directory(root / fake_socket);
  std::ofstream(root / fake_socket / "dpdk_telemetry.v2") << "x";

  EXPECT_EQ(RemoveStaleRuntimeDirs(root.string()), removed.size() + 1);
  for (const auto& n : removed) EXPECT_FALSE(fs::exists(root / n)) << n;
  for (const auto& n : kept) EXPECT_TRUE(fs::exists(root / n)) << n;
  EXPECT_TRUE(fs::exists(root / full / "config"));
  EXPECT_FALSE(fs::exists(root / with_socket));
  EXPECT_TRUE(fs::exists(root / fake_socket / "dpdk_telemetry.v2"));
  EXPECT_EQ(RemoveStaleRuntimeDirs((root / "no-such-root").string()), 0u);
  fs::remove_all(root);
}

}  // namespace
}  // namespace txbatch::test
