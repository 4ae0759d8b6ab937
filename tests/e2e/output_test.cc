// What a command's output paths name, end to end through the binary (issue 16, items 1-4):
// `--json -` puts the document alone on stdout (tables on stderr), a FIFO, a device or a process
// substitution is written into and never replaced, a folder is refused before anything runs, and
// a sweep on a full disk leaves nothing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "tests/test_files.h"
#include "tests/txbatch_bin.h"
#include "tests/txbatch_run.h"
namespace txbatch::test {
namespace {

namespace fs = std::filesystem;

fs::path Scratch(const std::string& name) { return test::Scratch("output", name); }

using Outcome = test::TxbatchRun;
using test::RunTxbatchAsGiven;  // through bash: process substitution works

// Refused: exit status 2 and `sentence` on stderr.
void ExpectRefused(const Outcome& o, const std::string& sentence) {
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_NE(o.err.find(sentence), std::string::npos) << o.err;
}

// One short cell: a few tens of milliseconds of emu:null.
const std::string kRun =
    "run --driver emu:null --proto udp --size 64 --procs 1 --batch 1 --rounds 1 --duration 0.05 "
    "--warmup 0.01";

TEST(Output, JsonDashPutsTheDocumentAloneOnStdoutAndTheTablesOnStderr) {
  const fs::path d = Scratch("dash");
  const Outcome o = RunTxbatchAsGiven(kRun + " --json -");
  ASSERT_EQ(o.status, 0) << o.err;
  const auto doc = nlohmann::json::parse(o.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded()) << "stdout is not one JSON document:\n" << o.out;
  EXPECT_EQ(doc["records"].size(), 1u);
  EXPECT_NE(o.err.find("txbatch "), std::string::npos) << o.err;  // the header and tables
  EXPECT_NE(o.err.find("MB/s"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists("-"));
  EXPECT_TRUE(fs::is_empty(d));
}

TEST(Output, JsonDevStdoutIsStandardOutputAndStaysASymlink) {
  const fs::path d = Scratch("devstdout");
  const Outcome o = RunTxbatchAsGiven(kRun + " --json /dev/stdout");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_FALSE(nlohmann::json::parse(o.out, nullptr, false).is_discarded()) << o.out;
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status("/dev/stdout")));
}

TEST(Output, AProcessSubstitutionAndAFifoAreWrittenInto) {
  const fs::path d = Scratch("fifo");
  const fs::path got = d / "via_cat.json";
  const Outcome sub = RunTxbatchAsGiven(kRun + " --json >(cat > " + got.string() + ")");
  ASSERT_EQ(sub.status, 0) << sub.err;
  for (int i = 0; i < 200 && Slurp(got).empty(); ++i)  // cat may still be writing
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(nlohmann::json::parse(Slurp(got), nullptr, false).is_discarded()) << Slurp(got);

  const fs::path fifo = d / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string read;
  std::thread reader([&] { read = Slurp(fifo); });
  const Outcome o = RunTxbatchAsGiven(kRun + " --json " + fifo.string());
  // Ends the reader even if txbatch never opened the FIFO (then `read` stays empty and fails).
  if (const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK); fd >= 0) ::close(fd);
  reader.join();
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_FALSE(nlohmann::json::parse(read, nullptr, false).is_discarded()) << read;
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(fifo)));
}

// A private /dev/full: the run measures, then cannot write, and says so (exit 2); the device
// is still a device (it became a 10 KB regular file before).
TEST(Output, AFullDeviceIsNeverReplaced) {
  const fs::path d = Scratch("full");
  const fs::path full = d / "full";
  ASSERT_EQ(::mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0) << std::strerror(errno);
  const Outcome o = RunTxbatchAsGiven(kRun + " --json " + full.string());
  ExpectRefused(o, "No space left on device");
  EXPECT_TRUE(fs::is_character_file(fs::symlink_status(full)));
}

// Issue 16 (item 20): the header said "DPDK DPDK 22.11.11", and a cell where nothing receives
// showed latency as "null" in the human table.
// Issue 44, item 18: `run --json p.json >/dev/full` lost its tables and exited 0. Standard
// output that cannot be written (not a reader that left: that is `| head`, exit 0) is said in
// one sentence and exits 2, as any named output that could not be written; --json is whole. A
// private /dev/full (root makes device nodes).
TEST(Output, AStandardOutputThatCannotBeWrittenExitsTwoAndJsonIsWhole) {
  const fs::path d = Scratch("stdout_full");
  const fs::path full = d / "full", json = d / "p.json";
  ASSERT_EQ(::mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0) << std::strerror(errno);
  const std::string err = (d / "stderr").string();
  const std::string cmd = test::TxbatchBinary() + " " + kRun + " --json " + json.string() + " >" +
                          full.string() + " 2>" + err;
  const int rc = std::system(cmd.c_str());
  const std::string said = Slurp(err);
  EXPECT_EQ(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, 2) << said;
  EXPECT_NE(said.find("standard output could not be written ("), std::string::npos) << said;
  const auto doc = nlohmann::json::parse(Slurp(json), nullptr, false);
  ASSERT_TRUE(doc.is_object()) << said;
  EXPECT_EQ(doc["records"].size(), 1u);
  fs::remove_all(d);
}

TEST(Output, TheHumanTablesSayDpdkOnceAndADashForNoLatency) {
  const fs::path d = Scratch("tables");
  const Outcome o = RunTxbatchAsGiven(
      "run --driver ethdev:net_null0 --proto udp --size 64 --procs 1 "
      "--batch 1 --duration 0.05 --warmup 0.01");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out.find("DPDK DPDK"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("DPDK 2"), std::string::npos) << o.out;
  EXPECT_FALSE(std::regex_search(o.out, std::regex("\\bnull\\b"))) << o.out;  // not net_null0
}

// Folders where a file belongs are refused before anything runs: no header, no EAL, quickly.
TEST(Output, AFolderForAFileIsRefusedBeforeAnythingRuns) {
  const fs::path d = Scratch("folder");
  for (const std::string& args :
       {kRun + " --json " + d.string(), "calibrate --out " + d.string(),
        "calibrate --json " + d.string() + " --out " + (d / "m.json").string(),
        "sink --port net_null0 --duration 1 --json " + d.string(),
        kRun + " --stats-json " + d.string(),
        "bridge --port-a net_null0 --port-b net_null1 --duration 1 --stats-json " + d.string(),
        "sink --port net_null0 --duration 1 --capture " + d.string()}) {
    const auto started = std::chrono::steady_clock::now();
    const Outcome o = RunTxbatchAsGiven(args);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    EXPECT_EQ(o.status, 2) << args << ": " << o.err;
    EXPECT_NE(o.err.find("is a folder"), std::string::npos) << args << ": " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << args << ": " << o.err;
    EXPECT_TRUE(o.out.empty()) << args << ": " << o.out;
    EXPECT_LT(s, 5.0) << args;  // a calibration measures for ~25 s
    EXPECT_TRUE(fs::is_empty(d)) << args;
  }
}

// A refusal that comes after --stats-json was named leaves no stream file behind: the stream is
// opened after every other check (tools/command_outputs.h). Before, run --capture on a driver
// with no DPDK port, and bridge, respond or sink with a --capture that cannot be written, were
// refused after the stream's file had been made (an empty file, exit 2).
TEST(Output, ARefusedCommandLeavesNoStatsJsonFile) {
  const fs::path d = Scratch("stream_last");
  const std::string stream = " --stats-json " + (d / "s.ndjson").string();
  const std::string folder = (d / "f").string();
  for (const std::string& args :
       {kRun + " --capture " + (d / "c.pcapng").string() + stream,
        "run --driver ethdev:net_null0 --duration 0.05 --capture " + folder + stream,
        "bridge --port-a net_null0 --port-b net_null1 --duration 1 --capture " + folder + stream,
        "respond --port net_null0 --ip 10.0.0.1 --duration 1 --capture " + folder + stream,
        "sink --port net_null0 --duration 1 --capture " + folder + stream}) {
    fs::create_directory(folder);
    const Outcome o = RunTxbatchAsGiven(args);
    EXPECT_EQ(o.status, 2) << args << ": " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << args << ": " << o.err;
    fs::remove(folder);
    EXPECT_TRUE(fs::is_empty(d)) << args << ": " << o.err;
    fs::remove_all(d);
    fs::create_directories(d);
  }
}

// The checks come before anything is made, in one order: a --stats-json that is refused leaves a
// capture file already there as it was (run opens its capture before EAL, truncating it: that
// comes after every check), and standard output named twice is claimed by --stats-json first.
TEST(Output, ARefusedStatsJsonLeavesAnEarlierCaptureAsItWasAndStdoutGoesToTheStream) {
  const fs::path d = Scratch("capture_kept");
  const fs::path earlier = d / "earlier.pcapng";
  std::ofstream(earlier) << "an earlier capture";
  const Outcome o = RunTxbatchAsGiven("run --driver ethdev:net_null0 --duration 0.05 --capture " +
                                      earlier.string() + " --stats-json " +
                                      (d / "no_such_folder" / "s.ndjson").string());
  ExpectRefused(o, "--stats-json file");
  EXPECT_EQ(Slurp(earlier.string()), "an earlier capture");
  const Outcome both = RunTxbatchAsGiven(
      "bridge --port-a net_null0 --port-b net_null1 --duration 1 "
      "--stats-json - --capture -");
  ExpectRefused(both, "--capture file '-' is standard output, which the --stats-json file");
}

// A sweep whose files do not fit (a 16 KiB tmpfs) leaves none of them, and says so; report of a
// comparison with --out is refused before it makes a folder.
TEST(Output, ASweepOnAFullDiskLeavesNothingAndAComparisonHasNoSweepFiles) {
  const fs::path d = Scratch("sweep_full");
  const fs::path small = d / "small";
  fs::create_directories(small);
  ASSERT_EQ(::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=16k"), 0) << std::strerror(errno);
  const Outcome o = RunTxbatchAsGiven(
      "sweep --driver emu:null --proto udp --size 64 --procs 1 --batch "
      "1,8 --rounds 1 --duration 0.05 --warmup 0.01 --out " +
      (small / "s").string());
  const bool left_nothing = fs::is_empty(small);
  ::umount2(small.c_str(), MNT_DETACH);
  ExpectRefused(o, "No space left on device");
  EXPECT_TRUE(left_nothing);  // neither the files that fitted nor the folder

  // A compare document: report --out has no sweep to write.
  const fs::path cmp = d / "cmp.json";
  const Outcome c = RunTxbatchAsGiven(
      "compare --driver emu:null --proto udp --size 64 --batch 1,8 "
      "--rounds 2 --duration 0.03 --warmup 0.01 --json " +
      cmp.string());
  ASSERT_EQ(c.status, 0) << c.err;
  const Outcome r = RunTxbatchAsGiven("report " + cmp.string() + " --out " + (d / "rep").string());
  ExpectRefused(r, "comparison");
  EXPECT_FALSE(fs::exists(d / "rep"));
}

// `jq FILTER` over `text` (jq -c, one result a line), or "jq failed" with its error where a line
// is no JSON.
std::string Jq(const fs::path& d, const std::string& filter, const std::string& text) {
  const fs::path in = d / "jq_in", out = d / "jq_out";
  std::ofstream(in) << text;
  const int rc = std::system(
      ("jq -c '" + filter + "' < " + in.string() + " > " + out.string() + " 2>&1").c_str());
  std::string got = Slurp(out);
  fs::remove(in);
  fs::remove(out);
  return rc == 0 ? got : "jq failed: " + got;
}

// --stats-json (issue 20, item 3): NDJSON as iperf3 --json-stream writes it. On standard output
// it is all there is (jq reads every line); a start event, a cell event per cell run as it
// finishes — the very record --json holds — and an end event; compare's end carries its verdict.
TEST(Output, StatsJsonStreamsACellEventPerCellRunThatJqReads) {
  const fs::path d = Scratch("stats_json");
  const fs::path doc = d / "doc.json";
  const Outcome o = RunTxbatchAsGiven(
      "run --driver emu:null --proto udp --size 64 --procs 1 --batch 1,8 "
      "--rounds 2 --duration 0.05 --warmup 0.01 --json " +
      doc.string() + " --stats-json -");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(Jq(d, ".event", o.out), "\"start\"\n\"cell\"\n\"cell\"\n\"cell\"\n\"cell\"\n\"end\"\n")
      << o.out;
  EXPECT_EQ(
      Jq(d, "select(.event == \"start\") | [.data.command, .data.cell_runs, .data.rounds]", o.out),
      "[\"run\",4,2]\n");
  EXPECT_EQ(
      Jq(d, "select(.event == \"end\") | [.data.state, .data.cell_runs, .data.balanced]", o.out),
      "[\"done\",4,true]\n");
  EXPECT_NE(o.err.find("MB/s"), std::string::npos) << o.err;  // the tables went to stderr
  // Each cell event is the record the --json document holds, in its order.
  const auto records = nlohmann::json::parse(Slurp(doc))["records"];
  std::istringstream lines(o.out);
  size_t i = 0;
  for (std::string line; std::getline(lines, line);) {
    const auto event = nlohmann::json::parse(line);
    if (event["event"] != "cell") continue;
    ASSERT_LT(i, records.size());
    EXPECT_EQ(event["data"], records[i]) << "cell event " << i;
    ++i;
  }
  EXPECT_EQ(i, records.size());

  const Outcome c = RunTxbatchAsGiven(
      "compare --driver emu:null --proto udp --size 64 --batch 1,8 "
      "--rounds 2 --duration 0.03 --warmup 0.01 --stats-json " +
      (d / "cmp.ndjson").string());
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_EQ(Jq(d, "[.event, .data.side // .data.comparison.axis // .data.command]",
               Slurp(d / "cmp.ndjson")),
            "[\"start\",\"compare\"]\n[\"cell\",\"A\"]\n[\"cell\",\"B\"]\n[\"cell\",\"A\"]\n"
            "[\"cell\",\"B\"]\n[\"end\",\"--batch/--policy\"]\n");
}

// Both on standard output cannot be told apart: one sentence, exit 2, nothing run or written.
TEST(Output, StatsJsonAndJsonBothOnStandardOutputAreRefused) {
  const fs::path d = Scratch("stats_json_both");
  for (const char* both : {" --json - --stats-json -", " --json - --stats-json /dev/stdout"}) {
    const Outcome o = RunTxbatchAsGiven(kRun + both);
    EXPECT_EQ(o.status, 2) << both << ": " << o.err;
    EXPECT_NE(o.err.find("is standard output, which the --json file already takes"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_TRUE(o.out.empty()) << o.out;
  }
  EXPECT_TRUE(fs::is_empty(d));
  // The file standard output was redirected to is standard output, also after --json - moved
  // descriptor 1 (the stream would truncate what the document is written into).
  const Outcome r =
      RunTxbatchAsGiven(kRun + " --json - --stats-json " + (d / "stdout").string(), d.string());
  ExpectRefused(r, "is standard output, which the --json file already takes");
}

// Two outputs naming one file would each replace what the other wrote: refused, nothing run.
TEST(Output, TwoOutputsNamingOneFileAreRefused) {
  const fs::path d = Scratch("one_file");
  const std::string f = (d / "r.json").string();
  for (const std::string& args :
       {kRun + " --json " + f + " --stats-json " + f,
        "sweep --driver emu:null --proto udp --size 64 --procs 1 --batch 1 --rounds 1 "
        "--duration 0.05 --warmup 0.01 --out " +
            d.string() + " --stats-json " + (d / "results.json").string(),
        "sink --port net_null0 --duration 1 --stats-json " + f + " --json " + f,
        "sink --port net_null0 --duration 1 --stats-json " + f + " --capture " + f,
        // (--capture needs a DPDK port: on emu that is said first.)
        "run --driver ethdev:net_null0 --duration 0.05 --json " + f + " --capture " + f}) {
    const Outcome o = RunTxbatchAsGiven(args);
    EXPECT_EQ(o.status, 2) << args << ": " << o.err;
    EXPECT_NE(o.err.find("names too"), std::string::npos) << args << ": " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_TRUE(fs::is_empty(d)) << args;
  }
  // /dev/null may take both.
  const Outcome n = RunTxbatchAsGiven(kRun + " --json /dev/null --stats-json /dev/null");
  EXPECT_EQ(n.status, 0) << n.err;
}

// run --capture (issue 20, item 2): what the loopback's one port sent and received, as tshark
// reads the pcapng file — every frame written or counted as the capture's drop, each sent frame
// once outbound and once inbound (net_ring is its own loopback), over two cells (one file, the
// ports made again for each). A driver with no DPDK port is refused with one sentence, no file.
TEST(Output, RunCaptureHoldsWhatTheLoopbackSentAndReceived) {
  const fs::path d = Scratch("run_capture");
  const std::string f = (d / "run.pcapng").string(), j = (d / "run.json").string();
  const Outcome o = RunTxbatchAsGiven(
      "run --driver ethdev:net_ring0 --proto udp --size 1000 --procs 1 "
      "--batch 1,32 --rounds 1 --duration 0.1 --warmup 0.02 --rate "
      "20kpps --json " +
      j + " --capture " + f);
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  const nlohmann::json doc = nlohmann::json::parse(Slurp(j));
  // What the port sent and what came back to it (a frame purged in flight is in neither).
  uint64_t sent = 0, received = 0;
  for (const auto& r : doc["records"]) {
    sent += r["results"]["accounting"]["sent"].get<uint64_t>();
    received += r["results"]["accounting"]["received"].get<uint64_t>();
  }
  ASSERT_GT(sent, 0u);
  const std::optional<CaptureSaid> said = CaptureLine(o.out);
  ASSERT_TRUE(said) << o.out;
  const uint64_t written = said->written, dropped = said->dropped;
  EXPECT_EQ(written + dropped, sent + received) << o.out;
  const fs::path counts = d / "counts";
  ASSERT_EQ(std::system(("tshark -r " + f +
                         " -T fields -e frame.packet_flags_direction 2>/dev/null | sort | uniq -c "
                         "> " +
                         counts.string())
                            .c_str()),
            0);
  const std::string by_direction = Slurp(counts);
  uint64_t in = 0, out = 0;
  std::smatch m;
  if (std::regex_search(by_direction, m, std::regex(R"((\d+) 0x00000001)"))) in = std::stoull(m[1]);
  if (std::regex_search(by_direction, m, std::regex(R"((\d+) 0x00000002)")))
    out = std::stoull(m[1]);
  EXPECT_EQ(in + out, written) << by_direction;
  if (dropped == 0) {
    EXPECT_EQ(in, received) << by_direction;
    EXPECT_EQ(out, sent) << by_direction;
  }
  fs::remove_all(d);

  const fs::path e = Scratch("run_capture_emu");
  const Outcome emu = RunTxbatchAsGiven("run --driver emu:null --duration 0.05 --capture " +
                                        (e / "x.pcapng").string());
  ExpectRefused(emu, "--capture records what DPDK ports");
  EXPECT_TRUE(fs::is_empty(e));
}

// A pcapng file's blocks, walked by their own lengths: how many enhanced packet blocks it
// holds, or -1 where it does not end on a whole block (or a length is not a block's).
long WholePcapngPackets(const std::string& bytes) {
  const auto u32 = [&bytes](size_t at) {
    uint32_t v = 0;
    std::memcpy(&v, bytes.data() + at, sizeof v);
    return v;
  };
  long packets = 0;
  size_t at = 0;
  while (at < bytes.size()) {
    if (bytes.size() - at < 12) return -1;
    const uint32_t len = u32(at + 4);
    if (len < 12 || len % 4 != 0 || len > bytes.size() - at || u32(at + len - 4) != len) return -1;
    if (at == 0 && u32(0) != 0x0A0D0D0A) return -1;  // a section header first
    packets += u32(at) == 6;
    at += len;
  }
  return at == 0 ? -1 : packets;
}

// A tmpfs of `size` at `dir` for one test, unmounted whatever happens.
struct SmallDisk {
  fs::path dir;
  bool mounted = false;
  SmallDisk(fs::path d, const char* size) : dir(std::move(d)) {
    fs::create_directories(dir);
    mounted = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, (std::string("size=") + size).c_str()) == 0;
  }
  ~SmallDisk() {
    if (mounted) ::umount2(dir.c_str(), MNT_DETACH);
  }
};

// Issue 44, item 21: a capture the disk could not take stayed cut mid-block (tshark: "cut short
// in the middle of a packet"), and `--capture /dev/full` said "Resource temporarily unavailable"
// (EAGAIN: the errno sigtimedwait left after DPDK's write had failed with ENOSPC). Now one
// sentence names the file and the error, exit 2; the file is cut back to its last whole block,
// which tshark reads, holding as many frames as the sentence says — on a full tmpfs (ENOSPC) and
// past `ulimit -f` (EFBIG, where SIGXFSZ ended txbatch before).
TEST(Output, ACaptureTheDiskCannotTakeEndsOnAWholeBlockAndSaysWhy) {
  const fs::path d = Scratch("capture_full");
  const std::string run =
      "run --driver ethdev:net_null0 --proto udp --size 200 --procs 1 --batch 32 --rounds 1 "
      "--duration 0.3 --warmup 0.01 --capture ";
  const fs::path full = d / "full";
  ASSERT_EQ(::mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0) << std::strerror(errno);
  const Outcome dev = RunTxbatchAsGiven(run + full.string());
  ExpectRefused(dev, "txbatch: --capture '" + full.string() +
                         "': cannot write its first blocks (the section header, an interface "
                         "block per port): No space left on device\n");
  EXPECT_EQ(dev.err.find("temporarily unavailable"), std::string::npos) << dev.err;
  EXPECT_TRUE(fs::is_character_file(fs::symlink_status(full)));

  const auto check = [&run](const Outcome& o, const fs::path& f, const char* error) {
    EXPECT_EQ(o.status, 2) << o.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(
        o.err, m,
        std::regex("txbatch: cannot write --capture file '" + f.string() + "': " + error +
                   "; it ends on its last whole block, a valid pcapng \\((\\d+) frames "
                   "written\\)\n")))
        << o.err;
    const std::string bytes = Slurp(f);
    EXPECT_GT(bytes.size(), 32u * 1024);
    EXPECT_EQ(WholePcapngPackets(bytes), std::stol(m[1])) << bytes.size() << " bytes";
    EXPECT_EQ(std::system(("tshark -r " + f.string() + " >/dev/null 2>&1").c_str()), 0) << run;
  };
  {
    SmallDisk small(d / "small", "128k");
    ASSERT_TRUE(small.mounted) << std::strerror(errno);
    const fs::path f = small.dir / "c.pcapng";
    check(RunTxbatchAsGiven(run + f.string()), f, "No space left on device");
  }
  const fs::path big = d / "big.pcapng";
  const std::string err = (d / "stderr").string();
  const int rc = std::system(("bash -c 'ulimit -f 100; exec " + test::TxbatchBinary() + " " + run +
                              big.string() + "' >/dev/null 2>" + err)
                                 .c_str());
  check({WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, "", Slurp(err)}, big, "File too large");
  EXPECT_LE(fs::file_size(big), 100u * 1024);
  fs::remove_all(d);
}

// Issue 44, item 13: a FIFO nobody reads given as --json was found only once the measurement was
// over (the run measured for its whole duration, then waited for a reader and failed). It is
// opened when the options are checked: without a reader within the few seconds a reader
// started beside txbatch needs, one sentence and exit 2 before EAL starts, the FIFO still a
// FIFO; with one, the document reaches it at the end (the FIFO held open meanwhile: the reader
// sees no end of file before it).
TEST(Output, AFifoWithNoReaderAsJsonIsRefusedBeforeTheMeasurement) {
  const fs::path d = Scratch("fifo_no_reader");
  const fs::path fifo = d / "f";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  const std::string run =
      "run --driver emu:null --proto udp --size 64 --procs 1 --batch 1,8 --rounds 1 --duration 10 "
      "--warmup 0.01 --json ";
  const auto started = std::chrono::steady_clock::now();
  const Outcome o = RunTxbatchAsGiven(run + fifo.string());
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(o.status, 2) << o.err << o.out;
  EXPECT_EQ(o.err, "txbatch: cannot write --json file '" + fifo.string() +
                       "': no process opened the FIFO for reading within 3 s; valid: start its "
                       "reader first (jq . < FIFO &), or a regular file\n");
  EXPECT_EQ(o.out, "") << "nothing ran";
  EXPECT_LT(took, 8.0) << "the 20 s grid was measured first";
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(fifo)));

  // A reader that opens it a moment after txbatch starts, as `jq < f &` beside it does.
  const fs::path got = d / "got.json";
  const std::string reader = "sleep 1; cat " + fifo.string() + " > " + got.string();
  std::thread cat([&reader] { (void)std::system(reader.c_str()); });
  const Outcome ok = RunTxbatchAsGiven(
      "run --driver emu:null --proto udp --size 64 --procs 1 --batch 1 --rounds 1 --duration "
      "0.05 --warmup 0.01 --json " +
      fifo.string());
  cat.join();
  EXPECT_EQ(ok.status, 0) << ok.err;
  const auto doc = nlohmann::json::parse(Slurp(got), nullptr, false);
  ASSERT_TRUE(doc.is_object()) << Slurp(got);
  EXPECT_EQ(doc["records"].size(), 1u);
  fs::remove_all(d);
}

// The statistics block a forwarding command's capture ends with (one per port still there) went
// through the whole-block check of b658ad2, which read the block back from a descriptor opened
// write-only: every sink, bridge and respond capture then failed, "Input/output error", exit 2.
// A sink's capture on net_null ends whole with its statistics block, exit 0.
TEST(Output, ASinksCaptureEndsWithItsStatisticsBlock) {
  const fs::path d = Scratch("sink_capture");
  const fs::path f = d / "s.pcapng";
  const Outcome o =
      RunTxbatchAsGiven("sink --port net_null0 --duration 0.3 --stats 0 --capture " + f.string());
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("capture: 0 frames written to " + f.string()), std::string::npos) << o.out;
  const std::string bytes = Slurp(f);
  EXPECT_EQ(WholePcapngPackets(bytes), 0) << bytes.size() << " bytes";
  uint32_t last = 0, len = 0;  // the last block's type: its length ends it
  if (bytes.size() >= 12) {
    std::memcpy(&len, bytes.data() + bytes.size() - 4, sizeof len);
    if (len <= bytes.size()) std::memcpy(&last, bytes.data() + bytes.size() - len, sizeof last);
  }
  EXPECT_EQ(last, 5u) << "an interface statistics block last";
  fs::remove_all(d);
}

}  // namespace
}  // namespace txbatch::test
