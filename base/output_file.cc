#include "base/output_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>

#include "base/path_walk.h"

namespace txbatch {
namespace {

namespace fs = std::filesystem;

// How long a FIFO with nobody reading it is waited for before the write gives up (a reader
// started alongside txbatch, `jq < fifo &`, may open it a moment later).
constexpr double kFifoReaderWaitS = 3;

// Set once a stop signal came (GiveUpOnStalledReaders): a write that then makes no progress for
// kStalledReaderGraceS is abandoned.
std::atomic<bool> give_up{false};

// How long a write makes no progress after a stop signal before it is abandoned: a reader that
// is reading drains a pipe's 64 KiB in far less.
constexpr auto kStalledReaderGraceS = std::chrono::seconds(1);

// At most what a pipe with room takes without blocking (PIPE_BUF): after poll says POLLOUT, a
// write this size never waits, so a reader that stalls can hold up a write only in poll, where
// a stop signal is seen.
constexpr size_t kPipeChunk = PIPE_BUF;

// Writes all of `text` to `fd`, retrying short writes and EINTR; errno on failure. SIGPIPE is
// held back meanwhile: a reader that went away (`--json >(head -c 10)`) is EPIPE, one sentence,
// not death by a signal that leaves EAL's files behind. Where the reader stops reading (a FIFO,
// a pipe, a terminal held), the write waits for it — until a stop signal came and a second
// passed with nothing taken: then ECANCELED (a grid's --stats-json, a --json FIFO: the first
// signal ended nothing while a stalled reader held the write).
int WriteAllTo(int fd, std::string_view text) {
  sigset_t pipe, old;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, &old);
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  auto progress = std::chrono::steady_clock::now();
  int err = 0;
  while (!text.empty()) {
    if (!regular) {
      pollfd p{fd, POLLOUT, 0};
      const int ready = ::poll(&p, 1, 100);
      if (ready < 0 && errno != EINTR) {
        err = errno;
        break;
      }
      if (ready <= 0) {
        if (give_up.load(std::memory_order_relaxed) &&
            std::chrono::steady_clock::now() - progress > kStalledReaderGraceS) {
          err = ECANCELED;
          break;
        }
        continue;
      }
    }
    const ssize_t n =
        ::write(fd, text.data(), regular ? text.size() : std::min(text.size(), kPipeChunk));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      err = errno;
      break;
    }
    text.remove_prefix(static_cast<size_t>(n));
    progress = std::chrono::steady_clock::now();
  }
  if (err == EPIPE) {  // take the SIGPIPE this write raised before unblocking
    const timespec now{0, 0};
    while (sigtimedwait(&pipe, nullptr, &now) == SIGPIPE) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return err;
}

// The cause in a sentence: strerror's, or for an abandoned write what happened.
std::string Cause(int err) {
  if (err == ECANCELED)
    return "its reader stopped reading, and txbatch stopped waiting for it a second after the "
           "stop signal";
  return std::strerror(err);
}

// Opens what `w` names — something that exists and is not a regular file (a FIFO, a device, a
// descriptor by its /proc name) — for writing in place, never through a symlink planted since
// the walk, and without blocking on a FIFO nobody reads: it waits up to kFifoReaderWaitS for a
// reader, then says so (ENXIO). Nothing is created or truncated but a descriptor's own file.
int OpenInPlace(const WalkedPath& w) {
  const int flags = O_WRONLY | O_CLOEXEC | O_NONBLOCK | (w.magic() ? O_TRUNC : O_NOFOLLOW);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(kFifoReaderWaitS);
  for (;;) {
    const int fd = ::openat(w.folder(), w.name().c_str(), flags);
    if (fd >= 0) {
      struct stat st {};
      if (!w.magic() && (::fstat(fd, &st) != 0 || st.st_dev != w.st().st_dev ||
                         st.st_ino != w.st().st_ino)) {
        ::close(fd);  // replaced since the walk: not what was checked
        errno = EAGAIN;
        return -1;
      }
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      return fd;
    }
    if (errno != ENXIO || std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// A new file with a unique name in `folder` (".NAME.XXXXXX", so a rename over NAME in the same
// folder is atomic), created there by descriptor; returns its descriptor and fills `tmp` (its
// name in `folder`), or -1 with errno set.
int MakeTemporary(int folder, const std::string& name, std::string* tmp) {
  static constexpr char kChars[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  for (int attempt = 0; attempt < 100; ++attempt) {
    unsigned char r[6];
    if (::getrandom(r, sizeof r, 0) != sizeof r) return -1;
    std::string suffix;
    for (unsigned char c : r) suffix.push_back(kChars[c % (sizeof kChars - 1)]);
    *tmp = fmt::format(".{}.{}", name, suffix);
    const int fd = ::openat(folder, tmp->c_str(),
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

mode_t NewFileMode() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

// Whether a temporary file can be made (and is removed again) in `folder`: the one check that
// sees a read-only or pseudo file system, and permissions, as the real write will.
int ProbeFolder(int folder) {
  std::string tmp;
  const int fd = MakeTemporary(folder, "probe", &tmp);
  if (fd < 0) return errno;
  ::close(fd);
  ::unlinkat(folder, tmp.c_str(), 0);
  return 0;
}

// Writes `text` into a unique temporary in `folder` beside `name` (mode: `mode`); its name in
// `tmp`. On failure the temporary is gone and errno is returned.
int WriteTemporary(int folder, const std::string& name, std::string_view text, mode_t mode,
                   std::string* tmp) {
  const int fd = MakeTemporary(folder, name, tmp);
  if (fd < 0) return errno;
  int err = WriteAllTo(fd, text);
  if (err == 0 && ::fchmod(fd, mode) != 0) err = errno;
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) ::unlinkat(folder, tmp->c_str(), 0);
  return err;
}

// The mode a replaced file gets: its own permission bits if it is this user's (never setuid,
// setgid or sticky: a document is not a program), else a new file's.
mode_t ReplacedFileMode(const struct stat& st) {
  return st.st_uid == ::geteuid() ? (st.st_mode & 0666) : NewFileMode();
}

// Whether `st` is the file this process's standard output already writes to (so "--json
// /dev/stdout", or a path the shell redirected stdout to, means "-"). /dev/null and other
// non-terminal character devices are never taken for it.
// Standard output as it was before an output claimed it (ClaimStdout points descriptor 1 at
// standard error): -1 until then.
int original_stdout = -1;

bool IsStdout(const struct stat& st) {
  struct stat out {};
  if (::fstat(original_stdout >= 0 ? original_stdout : STDOUT_FILENO, &out) != 0) return false;
  if (S_ISCHR(st.st_mode) && !::isatty(STDOUT_FILENO)) return false;
  return out.st_dev == st.st_dev && out.st_ino == st.st_ino;
}

// Whether `st` is the file or pipe standard error writes to (a terminal may take a document).
bool IsStderrFile(const struct stat& st) {
  struct stat err {};
  if (::fstat(STDERR_FILENO, &err) != 0 || S_ISCHR(err.st_mode)) return false;
  return err.st_dev == st.st_dev && err.st_ino == st.st_ino;
}

}  // namespace

Result<OutputFile> OutputFile::Check(std::string path, std::string what) {
  const auto refuse = [&](int err, const std::string& why) {
    return MakeError(err, fmt::format("cannot write {} '{}': {}", what, path, why));
  };
  if (path.empty())
    return MakeError(EINVAL, fmt::format("{} needs a name; valid: a file name, or - for standard "
                                         "output",
                                         what));
  OutputFile out(path, what);
  const auto claimed = [&]() -> Result<OutputFile> {
    if (stdout_claimed_by_.empty()) return out;
    return MakeError(EINVAL, fmt::format("{} '{}' is standard output, which the {} already "
                                         "takes; valid: one of them standard output, the "
                                         "others files",
                                         what, path, stdout_claimed_by_));
  };
  // Names of descriptor 1, which a claim points at standard error: still standard output.
  if (path == "-" || path == "/dev/stdout" || path == "/dev/fd/1" || path == "/proc/self/fd/1") {
    out.to_stdout_ = true;
    return claimed();
  }
  auto w = WalkedPath::Walk(path, what);
  if (!w) return w.error();
  if (!w->missing().empty()) {
    if (const int err = ProbeFolder(w->folder()); err != 0) return refuse(err, std::strerror(err));
    return out;
  }
  const struct stat& st = w->st();
  if (w->name().empty() || S_ISDIR(st.st_mode))
    return refuse(EISDIR, "it is a folder; valid: a file name, or - for standard output");
  if (IsStdout(st)) {
    out.to_stdout_ = true;
    return claimed();
  }
  if (IsStderrFile(st))
    return refuse(EINVAL, "it is where standard error goes, and txbatch's messages would mix "
                          "with the document; valid: a file of its own, or - for standard output");
  if (S_ISREG(st.st_mode) && !w->magic()) {
    if (const int err = ProbeFolder(w->folder()); err != 0) return refuse(err, std::strerror(err));
  } else if (::faccessat(w->folder(), w->name().c_str(), W_OK, 0) != 0) {
    return refuse(errno, std::strerror(errno));
  } else if (S_ISFIFO(st.st_mode)) {
    // Its reader is there now or never: a FIFO nobody reads, found at the end, cost the whole
    // measurement (and waited kFifoReaderWaitS more).
    const int fd = OpenInPlace(*w);
    if (fd < 0) return out.OpenFailure(errno);
    out.held_ = std::make_shared<Held>();
    out.held_->fd = fd;
  }
  return out;
}

OutputFile::Held::~Held() {
  if (fd >= 0) ::close(fd);
}

std::string OutputFile::stdout_claimed_by_;

void GiveUpOnStalledReaders() { give_up.store(true, std::memory_order_relaxed); }

bool GivingUpOnStalledReaders() { return give_up.load(std::memory_order_relaxed); }

Status DistinctOutputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  std::vector<std::pair<std::string, std::string>> seen;  // canonical path, option
  for (const auto& [option, path] : outputs) {
    if (path.empty() || path == "-") continue;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) continue;  // /dev/null, a FIFO
    // A dangling symlink names the file it would create: weakly_canonical stops at the link
    // (its target does not exist), so follow it first (`--capture link` where the link aims at
    // --json's new file escaped this check).
    fs::path named = path;
    for (int links = 0; links < 40; ++links) {
      std::error_code lec;
      if (!fs::is_symlink(fs::symlink_status(named, lec))) break;
      const fs::path target = fs::read_symlink(named, lec);
      if (lec) break;
      named = target.is_absolute() ? target : named.parent_path() / target;
    }
    std::error_code ec;
    const std::string canonical = fs::weakly_canonical(named, ec).string();
    if (ec) continue;
    for (const auto& [other, other_option] : seen)
      if (other == canonical)
        return MakeError(EINVAL, fmt::format("{} '{}' is the file {} names too; valid: a file of "
                                             "its own for each",
                                             option, path, other_option));
    seen.emplace_back(canonical, option);
  }
  return {};
}

void OutputFile::ClaimStdout() {
  if (!to_stdout_ || stdout_fd_ >= 0) return;
  stdout_claimed_by_ = what_;
  std::fflush(stdout);
  stdout_fd_ = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  original_stdout = stdout_fd_;
  if (stdout_fd_ >= 0) ::dup2(STDERR_FILENO, STDOUT_FILENO);
}

Status OutputFile::Write(std::string_view text) const {
  const auto fail = [&](int err) {
    return MakeError(err, fmt::format("cannot write {} '{}': {}", what_, path_, Cause(err)));
  };
  if (to_stdout_) {
    std::fflush(stdout);
    const int err = WriteAllTo(stdout_fd_ >= 0 ? stdout_fd_ : STDOUT_FILENO, text);
    return err == 0 ? Status{} : Status{fail(err)};
  }
  if (held_ && held_->fd >= 0) {  // the FIFO Check opened: written, then closed (its end of file)
    const int fd = std::exchange(held_->fd, -1);
    int err = WriteAllTo(fd, text);
    if (::close(fd) != 0 && err == 0) err = errno;
    return err == 0 ? Status{} : Status{fail(err)};
  }
  // Walked again: the check was before the measurement, and names may have changed since.
  auto w = WalkedPath::Walk(path_, what_);
  if (!w) return w.error();
  if (!w->missing().empty() || (S_ISREG(w->st().st_mode) && !w->magic())) {
    if (w->missing().size() > 1) return fail(ENOENT);
    std::string tmp;
    const mode_t mode = w->exists() ? ReplacedFileMode(w->st()) : NewFileMode();
    if (const int err = WriteTemporary(w->folder(), w->name(), text, mode, &tmp); err != 0)
      return fail(err);
    if (::renameat(w->folder(), tmp.c_str(), w->folder(), w->name().c_str()) != 0) {
      const int err = errno;
      ::unlinkat(w->folder(), tmp.c_str(), 0);
      return fail(err);
    }
    return {};
  }
  // A FIFO, a device or /dev/fd/N: written into, never replaced.
  const int fd = OpenInPlace(*w);
  if (fd < 0) return OpenFailure(errno);
  int err = WriteAllTo(fd, text);
  if (::close(fd) != 0 && err == 0) err = errno;
  return err == 0 ? Status{} : Status{fail(err)};
}

Error OutputFile::OpenFailure(int err) const {
  if (err == ENXIO)
    return MakeError(ENXIO, fmt::format("cannot write {} '{}': no process opened the FIFO for "
                                        "reading within {:.0f} s; valid: start its reader first "
                                        "(jq . < FIFO &), or a regular file",
                                        what_, path_, kFifoReaderWaitS));
  if (err == EAGAIN)
    return MakeError(EAGAIN, fmt::format("cannot write {} '{}': it was replaced by something "
                                         "else while txbatch opened it; nothing was written",
                                         what_, path_));
  return MakeError(err, fmt::format("cannot write {} '{}': {}", what_, path_, std::strerror(err)));
}

Result<int> OutputFile::OpenStream() {
  if (to_stdout_) {
    ClaimStdout();
    const int fd = ::fcntl(stdout_fd_ >= 0 ? stdout_fd_ : STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) return OpenFailure(errno);
    return fd;
  }
  if (held_ && held_->fd >= 0) return std::exchange(held_->fd, -1);  // Check's, handed over
  auto w = WalkedPath::Walk(path_, what_);
  if (!w) return w.error();
  if (w->missing().size() > 1) return OpenFailure(ENOENT);
  if (w->exists() && (!S_ISREG(w->st().st_mode) || w->magic())) {
    const int fd = OpenInPlace(*w);
    if (fd < 0) return OpenFailure(errno);
    return fd;
  }
  // A new or regular file, opened in the folder walked, never through a link, and checked before
  // anything in it changes: one planted since the walk is left as it was.
  const int fd = ::openat(w->folder(), w->name().c_str(),
                          O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
  if (fd < 0) return OpenFailure(errno);
  struct stat st {}, folder {};
  if (::fstat(fd, &st) != 0 || ::fstat(w->folder(), &folder) != 0 || !S_ISREG(st.st_mode) ||
      Planted(st, folder)) {
    ::close(fd);
    return OpenFailure(EAGAIN);
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  // One writer a file: a second txbatch streaming into the same path would interleave its
  // lines or blocks with this one's (the lock goes with the descriptor, at exit too).
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK)
      return MakeError(EBUSY, fmt::format("cannot write {} '{}': another process is writing it "
                                          "(it holds its lock); valid: a file of its own for each",
                                          what_, path_));
    return OpenFailure(err);
  }
  if (::ftruncate(fd, 0) != 0 ||
      ((st.st_mode & (S_ISUID | S_ISGID | S_ISVTX)) && ::fchmod(fd, st.st_mode & 0777) != 0)) {
    const int err = errno;
    ::close(fd);
    return OpenFailure(err);
  }
  return fd;
}

Result<LineStream> LineStream::Open(OutputFile out) {
  auto fd = out.OpenStream();
  if (!fd) return fd.error();
  // Only a file opened here: standard output redirected to a file may be shared with other
  // writers (`> f 2>&1`, `>>`), and taking a line back there could cut what they wrote.
  struct stat st {};
  const bool regular = !out.to_stdout_ && ::fstat(*fd, &st) == 0 && S_ISREG(st.st_mode) &&
                       (::fcntl(*fd, F_GETFL) & O_APPEND) == 0;
  return LineStream(std::move(out), *fd, regular);
}

LineStream::LineStream(LineStream&& other) noexcept
    : out_(std::move(other.out_)),
      fd_(std::exchange(other.fd_, -1)),
      regular_(other.regular_),
      failure_(std::move(other.failure_)) {}

LineStream::~LineStream() {
  if (fd_ >= 0) ::close(fd_);
}

bool LineStream::WriteLine(std::string_view line) {
  if (!failure_.empty() || fd_ < 0) return false;
  const off_t before = regular_ ? ::lseek(fd_, 0, SEEK_CUR) : -1;
  std::string text;
  text.reserve(line.size() + 1);
  text.append(line).push_back('\n');
  if (const int err = WriteAllTo(fd_, text); err != 0) {
    // Part of the line may be in (a disk that filled half-way through it): take it back, so a
    // reader of the file finds whole lines only.
    if (before >= 0 && ::ftruncate(fd_, before) == 0) (void)::lseek(fd_, before, SEEK_SET);
    failure_ =
        fmt::format("cannot write {} '{}': {}", out_.what(), out_.path(), Cause(err));
    return false;
  }
  return true;
}

namespace {

// The folder `w` (walked with missing_ok) names, when it exists: an O_PATH descriptor of it (the
// caller's), or -1 with the sentence in `why`. Another user's folder in a folder others can write
// is refused as a planted file is: what is written there, that user could redirect.
int ExistingFolder(const WalkedPath& w, const std::string& dir, std::string* why) {
  if (w.name().empty()) return ::fcntl(w.folder(), F_DUPFD_CLOEXEC, 3);
  struct stat folder {};
  if (::fstat(w.folder(), &folder) != 0) {
    *why = std::strerror(errno);
    return -1;
  }
  if (!S_ISDIR(w.st().st_mode)) {
    *why = "it exists and is not a folder";
    return -1;
  }
  if (Planted(w.st(), folder)) {
    *why = fmt::format("'{}' is a folder of user {} in a folder other users can write, and "
                       "txbatch writes into no such folder; valid: a folder only you can write",
                       dir, w.st().st_uid);
    return -1;
  }
  const int fd =
      ::openat(w.folder(), w.name().c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) *why = std::strerror(errno);
  return fd;
}

}  // namespace

Result<OutputDir> OutputDir::Check(std::string dir) {
  const auto refuse = [&](int err, const std::string& why) {
    return MakeError(err, fmt::format("cannot write --out folder '{}': {}", dir, why));
  };
  if (dir.empty()) return MakeError(EINVAL, "--out needs a folder name");
  if (dir == "-")
    return refuse(EINVAL, "--out names a folder for several files; valid: a folder name");
  // The folder itself, or the nearest folder above it that exists (the rest is made on writing).
  auto w = WalkedPath::Walk(dir, "--out folder", /*missing_ok=*/true);
  if (!w) return w.error();
  int folder = w->folder();
  std::string why;
  int own = -1;
  if (w->missing().empty()) {
    own = ExistingFolder(*w, dir, &why);
    if (own < 0) return refuse(ENOTDIR, why);
    folder = own;
  }
  const int err = ProbeFolder(folder);
  if (own >= 0) ::close(own);
  if (err != 0) return refuse(err, std::strerror(err));
  return OutputDir(std::move(dir));
}

Status OutputDir::WriteAll(const std::vector<std::pair<std::string, std::string>>& files) const {
  const auto fail = [&](int err, const std::string& name) {
    return MakeError(err, fmt::format("cannot write '{}': {}", (fs::path(dir_) / name).string(),
                                      std::strerror(err)));
  };
  auto w = WalkedPath::Walk(dir_, "--out folder", /*missing_ok=*/true);
  if (!w) return w.error();
  // Descriptors of the folders walked and made (closed at the end), and the folders this call
  // made as (parent, name), outermost first, to remove again if nothing is written.
  std::vector<int> fds;
  std::vector<std::pair<int, std::string>> made;
  const auto close_all = [&] {
    for (int fd : fds) ::close(fd);
  };
  int folder = -1;
  if (w->missing().empty()) {
    std::string why;
    folder = ExistingFolder(*w, dir_, &why);
    if (folder < 0)
      return MakeError(ENOTDIR, fmt::format("cannot write --out folder '{}': {}", dir_, why));
    fds.push_back(folder);
  } else {
    folder = w->folder();
    for (const std::string& name : w->missing()) {
      int sub = -1;
      if (::mkdirat(folder, name.c_str(), 0777) == 0) {
        made.emplace_back(folder, name);
        sub = ::openat(folder, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      }
      if (sub < 0) {
        const int err = errno;
        for (auto it = made.rbegin(); it != made.rend(); ++it)
          ::unlinkat(it->first, it->second.c_str(), AT_REMOVEDIR);
        close_all();
        return MakeError(err, fmt::format("cannot create --out folder '{}': {}", dir_,
                                          std::strerror(err)));
      }
      fds.push_back(sub);
      folder = sub;
    }
  }
  const auto undo = [&](const std::vector<std::string>& temporaries) {
    for (const std::string& t : temporaries) ::unlinkat(folder, t.c_str(), 0);
    for (auto it = made.rbegin(); it != made.rend(); ++it)
      ::unlinkat(it->first, it->second.c_str(), AT_REMOVEDIR);
    close_all();
  };
  std::vector<std::string> temporaries;
  const mode_t mode = NewFileMode();
  for (const auto& [name, text] : files) {
    std::string tmp;
    if (const int err = WriteTemporary(folder, name, text, mode, &tmp); err != 0) {
      undo(temporaries);
      return fail(err, name);
    }
    temporaries.push_back(tmp);
  }
  for (size_t i = 0; i < files.size(); ++i)
    if (::renameat(folder, temporaries[i].c_str(), folder, files[i].first.c_str()) != 0) {
      const int err = errno;
      for (size_t j = i; j < files.size(); ++j) ::unlinkat(folder, temporaries[j].c_str(), 0);
      close_all();
      return fail(err, files[i].first);
    }
  close_all();
  return {};
}

}  // namespace txbatch
