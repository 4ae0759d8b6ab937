// Output files (--json, --out): a new path or a regular file is replaced whole and atomically,
// anything else that exists (a FIFO, a device, a symlink) is written into and never replaced, a
// folder where a file belongs is refused when checked, and a set of files appears whole or not at
// all. Issue 16's finds: /dev/full became a regular file, two writers shared one temporary name,
// a sweep on a full disk left 2 of 8 files.
#include "base/output_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_files.h"
namespace txbatch {
namespace {

namespace fs = std::filesystem;

using test::Slurp;

fs::path Scratch(const std::string& name) { return test::Scratch("output_file", name); }

// A 64 KiB tmpfs mounted on `dir` for the test's life: a file system that fills. `error` says
// why it could not be mounted (the tests run as root).
struct SmallTmpfs {
  explicit SmallTmpfs(const fs::path& dir) : path(dir) {
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=64k") != 0)
      error = std::string("cannot mount a small tmpfs here: ") + std::strerror(errno);
  }
  ~SmallTmpfs() {
    if (error.empty()) ::umount2(path.c_str(), MNT_DETACH);
  }
  fs::path path;
  std::string error;
};

// Files in `dir` other than `keep`: temporaries left behind.
std::vector<std::string> Others(const fs::path& dir, const std::vector<std::string>& keep) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (std::find(keep.begin(), keep.end(), e.path().filename().string()) == keep.end())
      out.push_back(e.path().filename().string());
  return out;
}

TEST(OutputFile, ANewPathOrARegularFileIsReplacedWholeLeavingNoTemporary) {
  const fs::path d = Scratch("regular");
  const fs::path p = d / "out.json";
  auto f = OutputFile::Check(p.string(), "--json file");
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_FALSE(f->to_stdout());
  ASSERT_TRUE(f->Write("first\n").ok());
  EXPECT_EQ(Slurp(p), "first\n");
  ::chmod(p.c_str(), 0640);
  ASSERT_TRUE(f->Write("second\n").ok());
  EXPECT_EQ(Slurp(p), "second\n");
  EXPECT_EQ(fs::status(p).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_TRUE(Others(d, {"out.json"}).empty());
}

// Reads a FIFO to its end on a thread, for at most kDeadlineS. The FIFO is opened here, before
// any writer (O_NONBLOCK: the open waits for none), so the reader holds the FIFO itself, not its
// name: a writer that replaced the name with a file instead of writing into it leaves the reader
// with no writer, and the deadline ends the read with a sentence (a blocking open of the name
// waited for ever, and the case with it).
class FifoReader {
 public:
  // The writer waits up to 3 s for a reader (OutputFile's kFifoReaderWaitS) and writes at once.
  static constexpr int kDeadlineS = 10;

  explicit FifoReader(fs::path p)
      : p_(std::move(p)), fd_(::open(p_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)) {
    EXPECT_GE(fd_, 0) << "cannot open the FIFO " << p_ << ": " << std::strerror(errno);
    if (fd_ >= 0) t_ = std::thread([this] { Read(); });
  }
  ~FifoReader() { Take(); }
  // What was read once every writer closed the FIFO; where none did within the deadline, what
  // was read by then, and the case fails.
  std::string Take() {
    if (t_.joinable()) {
      t_.join();
      if (!why_.empty()) ADD_FAILURE() << "reading the FIFO " << p_ << ": " << why_;
    }
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    return got_;
  }

 private:
  void Read() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(kDeadlineS);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      pollfd pfd{fd_, POLLIN, 0};
      // Before any writer opened it, poll reports nothing (a FIFO's hang-up is only for a reader
      // that has seen a writer): it waits for one.
      const int r = left.count() > 0 ? ::poll(&pfd, 1, static_cast<int>(left.count())) : 0;
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) {
        why_ = "no writer wrote into it and closed it within " + std::to_string(kDeadlineS) +
               " s (" + std::to_string(got_.size()) + " bytes read): was it replaced?";
        return;
      }
      char buf[4096];
      const ssize_t n = r < 0 ? -1 : ::read(fd_, buf, sizeof buf);
      if (n > 0) {
        got_.append(buf, static_cast<size_t>(n));
      } else if (n == 0) {
        return;  // every writer closed it
      } else if (errno != EAGAIN && errno != EINTR) {
        why_ = std::strerror(errno);
        return;
      }
    }
  }

  fs::path p_;
  int fd_;
  std::string got_, why_;
  std::thread t_;
};

TEST(OutputFile, AFifoIsWrittenIntoAndStaysAFifo) {
  const fs::path d = Scratch("fifo");
  const fs::path p = d / "pipe";
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
  FifoReader reader(p);  // there before the check: Check opens the FIFO (issue 44, item 13)
  auto f = OutputFile::Check(p.string(), "--json file");
  ASSERT_TRUE(f.ok()) << f.error().message;
  const Status s = f->Write("{\"x\": 1}\n");
  EXPECT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(reader.Take(), "{\"x\": 1}\n");
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(p)));
  EXPECT_TRUE(Others(d, {"pipe"}).empty());
}

// A FIFO nobody reads is not waited for forever (a blocking open ignored SIGINT): the check
// refuses it, before anything is measured (issue 44, item 13: Write found it, after), leaving
// it a FIFO; and a reader that goes away early is EPIPE, one sentence, not SIGPIPE ending the
// process (this test's).
TEST(OutputFile, AFifoWithoutAReaderOrWhoseReaderLeavesIsOneSentence) {
  const fs::path d = Scratch("fifo_alone");
  const fs::path p = d / "pipe";
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
  const auto alone = OutputFile::Check(p.string(), "--json file");
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.error().message,
            "cannot write --json file '" + p.string() +
                "': no process opened the FIFO for reading within 3 s; valid: start its reader "
                "first (jq . < FIFO &), or a regular file");
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(p)));
  std::thread leaver([&] {
    const int fd = ::open(p.c_str(), O_RDONLY);
    char c;
    (void)!::read(fd, &c, 1);
    ::close(fd);
  });
  auto f = OutputFile::Check(p.string(), "--json file");  // the leaver opens it meanwhile
  ASSERT_TRUE(f.ok()) << f.error().message;
  const Status gone = f->Write(std::string(4 << 20, 'x'));
  leaver.join();
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.error().message.find("Broken pipe"), std::string::npos) << gone.error().message;
}

TEST(OutputFile, ASymlinkIsFollowedAndKept) {
  const fs::path d = Scratch("symlink");
  std::ofstream(d / "target") << "old";
  fs::create_symlink(d / "target", d / "link");
  auto f = OutputFile::Check((d / "link").string(), "--json file");
  ASSERT_TRUE(f.ok()) << f.error().message;
  ASSERT_TRUE(f->Write("new\n").ok());
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(d / "link")));
  EXPECT_EQ(Slurp(d / "target"), "new\n");
}

// A private copy of /dev/full and /dev/null (root makes device nodes; the machine's own are
// never at risk in this test, even on code that would replace them).
TEST(OutputFile, ACharacterDeviceIsWrittenIntoNeverReplaced) {
  const fs::path d = Scratch("device");
  const fs::path full = d / "full", null = d / "null";
  if (::mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0 ||
      ::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0)
    FAIL() << "cannot make device nodes here (the tests run as root): " << std::strerror(errno);
  auto n = OutputFile::Check(null.string(), "--json file");
  ASSERT_TRUE(n.ok()) << n.error().message;
  EXPECT_TRUE(n->Write("discarded\n").ok());
  EXPECT_TRUE(fs::is_character_file(fs::symlink_status(null)));
  auto f = OutputFile::Check(full.string(), "--json file");
  ASSERT_TRUE(f.ok()) << f.error().message;
  const Status s = f->Write("no room\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("No space left on device"), std::string::npos)
      << s.error().message;
  EXPECT_NE(s.error().message.find(full.string()), std::string::npos) << s.error().message;
  EXPECT_TRUE(fs::is_character_file(fs::symlink_status(full)));
  EXPECT_TRUE(Others(d, {"full", "null"}).empty());
}

TEST(OutputFile, AFolderAMissingFolderOrNoNameIsRefusedWhenChecked) {
  const fs::path d = Scratch("refused");
  auto dir = OutputFile::Check(d.string(), "--json file");
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.error().message.find("is a folder"), std::string::npos) << dir.error().message;
  auto missing = OutputFile::Check((d / "no" / "x.json").string(), "--json file");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("does not exist"), std::string::npos)
      << missing.error().message;
  auto empty = OutputFile::Check("", "--json file");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message.find("- for standard output"), std::string::npos);
  auto proc = OutputFile::Check("/proc/self/no-such-file", "--json file");
  EXPECT_FALSE(proc.ok());
  // Nothing was left behind by the checks.
  EXPECT_TRUE(Others(d, {}).empty());
}

TEST(OutputFile, DashIsStandardOutput) {
  auto f = OutputFile::Check("-", "--json file");
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->to_stdout());
}

// Four writers, each replacing one path with its own document many times: every write succeeds
// and the file is always one writer's document whole (with one fixed temporary name, writers
// truncated each other's temporary and renames failed).
TEST(OutputFile, WritersOfOnePathNeverMixOrFail) {
  const fs::path d = Scratch("race");
  const fs::path p = d / "race.json";
  constexpr int kWriters = 4, kWrites = 40;
  std::vector<std::string> docs;
  for (int w = 0; w < kWriters; ++w) docs.push_back(std::string(256 * 1024, char('a' + w)));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w)
    threads.emplace_back([&, w] {
      auto f = OutputFile::Check(p.string(), "--out file");
      if (!f) {
        ++failures;
        return;
      }
      for (int i = 0; i < kWrites; ++i)
        if (!f->Write(docs[w]).ok()) ++failures;
    });
  int mixed = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string now = Slurp(p);
    if (!now.empty() && std::find(docs.begin(), docs.end(), now) == docs.end()) ++mixed;
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mixed, 0);
  EXPECT_NE(std::find(docs.begin(), docs.end(), Slurp(p)), docs.end());
  EXPECT_TRUE(Others(d, {"race.json"}).empty());
}

TEST(OutputDir, IsCheckedWithoutBeingMadeAndRefusesAFileOrDash) {
  const fs::path d = Scratch("dir_check");
  auto fresh = OutputDir::Check((d / "a" / "b").string());
  ASSERT_TRUE(fresh.ok()) << fresh.error().message;
  EXPECT_FALSE(fs::exists(d / "a"));  // made only when something is written
  std::ofstream(d / "file") << "x";
  auto file = OutputDir::Check((d / "file").string());
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.error().message.find("not a folder"), std::string::npos);
  auto under_file = OutputDir::Check((d / "file" / "sub").string());
  EXPECT_FALSE(under_file.ok());
  EXPECT_FALSE(OutputDir::Check("-").ok());
  EXPECT_FALSE(OutputDir::Check("").ok());
}

TEST(OutputDir, WritesEveryFileAndReplacesOldOnes) {
  const fs::path d = Scratch("dir_write");
  auto out = OutputDir::Check((d / "sweep").string());
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(out->WriteAll({{"a.txt", "A"}, {"b.csv", "B"}}).ok());
  EXPECT_EQ(Slurp(d / "sweep" / "a.txt"), "A");
  ASSERT_TRUE(out->WriteAll({{"a.txt", "A2"}, {"b.csv", "B2"}}).ok());
  EXPECT_EQ(Slurp(d / "sweep" / "b.csv"), "B2");
  EXPECT_TRUE(Others(d / "sweep", {"a.txt", "b.csv"}).empty());
}

// On a full file system (a 64 KiB tmpfs) a set that does not fit leaves nothing: not the files
// that fitted, not the temporaries, not the folder it made. One that fits is written.
TEST(OutputDir, ASetThatDoesNotFitLeavesNothing) {
  const fs::path d = Scratch("dir_full");
  const SmallTmpfs full(d);
  ASSERT_TRUE(full.error.empty()) << full.error;
  auto out = OutputDir::Check((d / "sweep").string());
  ASSERT_TRUE(out.ok()) << out.error().message;
  const Status s = out->WriteAll({{"small.txt", std::string(1000, 's')},
                                  {"big.json", std::string(200 * 1024, 'b')},
                                  {"after.svg", "x"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("big.json"), std::string::npos) << s.error().message;
  EXPECT_FALSE(fs::exists(d / "sweep"));
  EXPECT_TRUE(Others(d, {}).empty());
  // Into an existing folder: its old files stay as they were.
  fs::create_directories(d / "kept");
  std::ofstream(d / "kept" / "small.txt") << "old";
  auto kept = OutputDir::Check((d / "kept").string());
  ASSERT_TRUE(kept.ok());
  EXPECT_FALSE(
      kept->WriteAll({{"small.txt", "new"}, {"big.json", std::string(200 * 1024, 'b')}}).ok());
  EXPECT_EQ(Slurp(d / "kept" / "small.txt"), "old");
  EXPECT_TRUE(Others(d / "kept", {"small.txt"}).empty());
}

// --stats-json's NDJSON on a disk that fills: the line that did not fit is taken back whole
// (before, the file ended with the part of it the disk took), the failure is one sentence, and
// nothing more is written.
TEST(LineStream, ALineAFullDiskCutShortIsTakenBackWhole) {
  const fs::path d = Scratch("stream_full");
  const SmallTmpfs full(d);
  ASSERT_TRUE(full.error.empty()) << full.error;
  auto out = OutputFile::Check((d / "stats.ndjson").string(), "--stats-json file");
  ASSERT_TRUE(out.ok()) << out.error().message;
  auto stream = LineStream::Open(std::move(*out));
  ASSERT_TRUE(stream.ok()) << stream.error().message;
  // Lines of 5000 bytes: a page and a fraction, so the one that fills the disk goes in part.
  std::string want;
  int written = 0;
  for (; written < 100; ++written) {
    const std::string line(4999, static_cast<char>('a' + written % 26));
    if (!stream->WriteLine(line)) break;
    want += line + "\n";
  }
  ASSERT_GT(written, 0);
  ASSERT_LT(written, 100);
  EXPECT_NE(stream->failure().find("No space left on device"), std::string::npos)
      << stream->failure();
  EXPECT_EQ(Slurp(d / "stats.ndjson"), want);
  EXPECT_FALSE(stream->WriteLine("after"));
  EXPECT_EQ(Slurp(d / "stats.ndjson"), want);
}

// Issue 44 item 11: as root, another user's symlink, FIFO or file in a folder others can write
// (/tmp) redirected txbatch's documents: a link rewrote a root-only file, a dangling one created
// a file in a root-only folder, a linked folder took a sweep, a FIFO read root's document, a
// setuid file stayed setuid. kStranger is any uid not ours (nobody's); the shared folder is
// /tmp's mode (1777), the private one root's 0700.
constexpr uid_t kStranger = 65534;

struct SharedAndPrivate {
  explicit SharedAndPrivate(const std::string& name) : root(Scratch(name)) {
    fs::create_directories(root / "private");
    fs::create_directories(root / "shared");
    ::chmod((root / "private").c_str(), 0700);
    ::chmod((root / "shared").c_str(), 01777);
    std::ofstream(root / "private" / "secret") << "root's";
    ::chmod((root / "private" / "secret").c_str(), 0600);
  }
  // A symlink at `at` to `to`, owned by kStranger.
  void StrangersLink(const fs::path& to, const fs::path& at) const {
    fs::create_symlink(to, at);
    ASSERT_EQ(::lchown(at.c_str(), kStranger, kStranger), 0) << std::strerror(errno);
  }
  fs::path root;
};

void ExpectRefusedNaming(const Error& e, const std::string& what) {
  EXPECT_NE(e.message.find(what), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("65534"), std::string::npos) << e.message;
}

TEST(OutputFile, AStrangersSymlinkInASharedFolderIsNeverFollowed) {
  ASSERT_EQ(::geteuid(), 0u) << "the tests run as root: files are made another user's";
  const SharedAndPrivate t("stranger_link");
  const fs::path shared = t.root / "shared", priv = t.root / "private";
  t.StrangersLink(priv / "secret", shared / "out.json");
  t.StrangersLink(priv / "new.json", shared / "dangling.json");
  t.StrangersLink(priv, shared / "linked");
  for (const fs::path& p : {shared / "out.json", shared / "dangling.json",
                            shared / "linked" / "x.json"}) {
    auto f = OutputFile::Check(p.string(), "--json file");
    ASSERT_FALSE(f.ok()) << p;
    ExpectRefusedNaming(f.error(), "symlink");
  }
  auto dir = OutputDir::Check((shared / "linked" / "sweep").string());
  ASSERT_FALSE(dir.ok());
  ExpectRefusedNaming(dir.error(), "symlink");
  EXPECT_EQ(Slurp(priv / "secret"), "root's");
  EXPECT_FALSE(fs::exists(priv / "new.json"));
  EXPECT_FALSE(fs::exists(priv / "sweep"));
  EXPECT_EQ(fs::status(priv / "secret").permissions(),
            fs::perms::owner_read | fs::perms::owner_write);
}

// A link planted after the check (the measurement runs between them) is found when writing: the
// document, the stream and the folder of files each walk the path again.
TEST(OutputFile, ASymlinkPlantedAfterTheCheckIsFoundWhenWriting) {
  ASSERT_EQ(::geteuid(), 0u) << "the tests run as root: files are made another user's";
  const SharedAndPrivate t("planted_late");
  const fs::path shared = t.root / "shared", priv = t.root / "private";
  auto doc = OutputFile::Check((shared / "out.json").string(), "--json file");
  auto stream = OutputFile::Check((shared / "stats.ndjson").string(), "--stats-json file");
  auto dir = OutputDir::Check((shared / "sweep").string());
  ASSERT_TRUE(doc.ok() && stream.ok() && dir.ok());
  t.StrangersLink(priv / "secret", shared / "out.json");
  t.StrangersLink(priv / "secret", shared / "stats.ndjson");
  t.StrangersLink(priv, shared / "sweep");
  const Status wrote = doc->Write("new\n");
  ASSERT_FALSE(wrote.ok());
  ExpectRefusedNaming(wrote.error(), "symlink");
  auto opened = LineStream::Open(std::move(*stream));
  ASSERT_FALSE(opened.ok());
  ExpectRefusedNaming(opened.error(), "symlink");
  const Status files = dir->WriteAll({{"results.json", "x"}});
  ASSERT_FALSE(files.ok());
  EXPECT_EQ(Slurp(priv / "secret"), "root's");
  EXPECT_FALSE(fs::exists(priv / "results.json"));
  EXPECT_TRUE(Others(priv, {"secret"}).empty());
}

TEST(OutputFile, AStrangersFifoFileOrFolderInASharedFolderIsNotWritten) {
  ASSERT_EQ(::geteuid(), 0u) << "the tests run as root: files are made another user's";
  const SharedAndPrivate t("stranger_files");
  const fs::path shared = t.root / "shared";
  ASSERT_EQ(::mkfifo((shared / "fifo").c_str(), 0666), 0);
  std::ofstream(shared / "file") << "theirs";
  fs::create_directories(shared / "folder");
  for (const char* name : {"fifo", "file", "folder"})
    ASSERT_EQ(::chown((shared / name).c_str(), kStranger, kStranger), 0);
  auto fifo = OutputFile::Check((shared / "fifo").string(), "--json file");
  ASSERT_FALSE(fifo.ok());
  ExpectRefusedNaming(fifo.error(), "a FIFO");
  auto file = OutputFile::Check((shared / "file").string(), "--stats-json file");
  ASSERT_FALSE(file.ok());
  ExpectRefusedNaming(file.error(), "a file");
  auto folder = OutputDir::Check((shared / "folder").string());
  ASSERT_FALSE(folder.ok());
  ExpectRefusedNaming(folder.error(), "folder");
  EXPECT_EQ(Slurp(shared / "file"), "theirs");
  EXPECT_TRUE(Others(shared / "folder", {}).empty());
  // Our own link in the shared folder, and a stranger's link in a folder only we write, are
  // followed as before.
  fs::create_symlink(t.root / "private" / "mine.json", shared / "mine.json");
  auto mine = OutputFile::Check((shared / "mine.json").string(), "--json file");
  ASSERT_TRUE(mine.ok()) << mine.error().message;
  ASSERT_TRUE(mine->Write("ours\n").ok());
  EXPECT_EQ(Slurp(t.root / "private" / "mine.json"), "ours\n");
  t.StrangersLink(t.root / "private" / "secret", t.root / "private" / "theirs.json");
  ::chmod((t.root / "private").c_str(), 0755);
  EXPECT_TRUE(OutputFile::Check((t.root / "private" / "theirs.json").string(), "--json file").ok());
}

// A replaced file gets its own permission bits without setuid, setgid, sticky or exec, and a
// stranger's (in a folder only we write) a new file's mode: 4777 became root-owned -rwsrwxrwx.
TEST(OutputFile, AReplacedOrStreamedFileIsNeverSetuid) {
  const fs::path d = Scratch("setuid");
  for (const char* name : {"doc.json", "stream.ndjson"}) {
    std::ofstream(d / name) << "old";
    ASSERT_EQ(::chmod((d / name).c_str(), 04777), 0);
  }
  auto doc = OutputFile::Check((d / "doc.json").string(), "--json file");
  ASSERT_TRUE(doc.ok());
  ASSERT_TRUE(doc->Write("new\n").ok());
  auto out = OutputFile::Check((d / "stream.ndjson").string(), "--stats-json file");
  ASSERT_TRUE(out.ok());
  auto stream = LineStream::Open(std::move(*out));
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(stream->WriteLine("{}"));
  for (const char* name : {"doc.json", "stream.ndjson"}) {
    struct stat st {};
    ASSERT_EQ(::stat((d / name).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & (S_ISUID | S_ISGID | S_ISVTX), 0u) << name;
  }
  struct stat st {};
  ASSERT_EQ(::stat((d / "doc.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);  // its own bits, less exec
}

// --json /dev/stderr where standard error is a file: txbatch's messages and the document would
// share it (it was truncated, and rc 0 with invalid JSON). A terminal is fine.
TEST(OutputFile, TheFileStandardErrorGoesToIsRefused) {
  const fs::path d = Scratch("stderr");
  const int log = ::open((d / "err.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(log, 0);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(log, STDERR_FILENO);
  auto named = OutputFile::Check("/dev/stderr", "--json file");
  auto by_path = OutputFile::Check((d / "err.log").string(), "--json file");
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(log);
  ASSERT_FALSE(named.ok());
  EXPECT_NE(named.error().message.find("standard error"), std::string::npos)
      << named.error().message;
  EXPECT_FALSE(by_path.ok());
}

// Issue 44, item 21: two processes streaming into one --stats-json or --capture path
// interleaved their lines silently; the second is refused (the first holds a lock on it as long
// as its descriptor lives). And a --capture through a dangling symlink aimed at --json's new
// file escaped the check that outputs are distinct.
TEST(LineStream, ASecondWriterOfOneStreamIsRefused) {
  const fs::path d = Scratch("stream_lock");
  auto first = OutputFile::Check((d / "s.ndjson").string(), "--stats-json file");
  ASSERT_TRUE(first.ok());
  auto held = LineStream::Open(std::move(*first));
  ASSERT_TRUE(held.ok()) << held.error().message;
  ASSERT_TRUE(held->WriteLine("{\"first\": 1}"));
  auto second = OutputFile::Check((d / "s.ndjson").string(), "--stats-json file");
  ASSERT_TRUE(second.ok());
  auto refused = LineStream::Open(std::move(*second));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("another process is writing it"), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(Slurp(d / "s.ndjson"), "{\"first\": 1}\n");  // not truncated by the refused one
}

TEST(OutputFile, ADanglingSymlinkToAnotherOutputIsTheSameFile) {
  const fs::path d = Scratch("dangling_same");
  fs::create_symlink(d / "r.json", d / "cap.pcapng");
  const Status s = DistinctOutputs(
      {{"--json", (d / "r.json").string()}, {"--capture", (d / "cap.pcapng").string()}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("--capture"), std::string::npos) << s.error().message;
  fs::create_symlink("elsewhere.json", d / "other");
  EXPECT_TRUE(DistinctOutputs({{"--json", (d / "r.json").string()},
                               {"--capture", (d / "other").string()}})
                  .ok());
}

}  // namespace
}  // namespace txbatch
