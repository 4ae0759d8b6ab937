#include "base/output_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>

namespace txbatch {
namespace {

namespace fs = std::filesystem;

std::string FolderOf(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// How long a FIFO with nobody reading it is waited for before the write gives up (a reader
// started alongside txbatch, `jq < fifo &`, may open it a moment later).
constexpr double kFifoReaderWaitS = 3;

// Writes all of `text` to `fd`, retrying short writes and EINTR; errno on failure. SIGPIPE is
// held back meanwhile: a reader that went away (`--json >(head -c 10)`) is EPIPE, one sentence,
// not death by a signal that leaves EAL's files behind.
int WriteAllTo(int fd, std::string_view text) {
  sigset_t pipe, old;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, &old);
  int err = 0;
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  if (err == EPIPE) {  // take the SIGPIPE this write raised before unblocking
    const timespec now{0, 0};
    while (sigtimedwait(&pipe, nullptr, &now) == SIGPIPE) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return err;
}

// Opens what `path` names for writing in place without blocking on a FIFO nobody reads: it
// waits up to kFifoReaderWaitS for a reader, then says so (ENXIO).
int OpenInPlace(const std::string& path) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(kFifoReaderWaitS);
  for (;;) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0666);
    if (fd >= 0) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      return fd;
    }
    if (errno != ENXIO || std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// A new file with a unique name beside `path` (".NAME.XXXXXX" in the same folder, so a rename
// over `path` is atomic); returns its descriptor and fills `tmp`, or -1 with errno set.
int MakeTemporary(const std::string& path, std::string* tmp) {
  const fs::path p(path);
  *tmp = (fs::path(FolderOf(path)) / fmt::format(".{}.XXXXXX", p.filename().string())).string();
  return ::mkostemp(tmp->data(), O_CLOEXEC);
}

mode_t NewFileMode() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

// Whether a temporary file can be made (and is removed again) in `folder`: the one check that
// sees a read-only or pseudo file system, and permissions, as the real write will.
int ProbeFolder(const std::string& folder) {
  std::string tmp;
  const int fd = MakeTemporary((fs::path(folder) / "probe").string(), &tmp);
  if (fd < 0) return errno;
  ::close(fd);
  ::unlink(tmp.c_str());
  return 0;
}

// Writes `text` into a unique temporary beside `path` (mode: `mode`); its name in `tmp`. On
// failure the temporary is gone and errno is returned.
int WriteTemporary(const std::string& path, std::string_view text, mode_t mode, std::string* tmp) {
  const int fd = MakeTemporary(path, tmp);
  if (fd < 0) return errno;
  int err = WriteAllTo(fd, text);
  if (err == 0 && ::fchmod(fd, mode) != 0) err = errno;
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) ::unlink(tmp->c_str());
  return err;
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
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return refuse(EISDIR, "it is a folder; valid: a file name, or - for standard output");
    if (IsStdout(st)) {
      out.to_stdout_ = true;
      return claimed();
    }
    struct stat lst {};
    const bool regular = ::lstat(path.c_str(), &lst) == 0 && S_ISREG(lst.st_mode);
    if (regular) {
      if (const int err = ProbeFolder(FolderOf(path)); err != 0)
        return refuse(err, std::strerror(err));
    } else if (::access(path.c_str(), W_OK) != 0) {
      return refuse(errno, std::strerror(errno));
    }
    return out;
  }
  if (errno != ENOENT) return refuse(errno, std::strerror(errno));
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) == 0) return out;  // a dangling symlink: created through it
  const std::string folder = FolderOf(path);
  struct stat dst {};
  if (::stat(folder.c_str(), &dst) != 0)
    return refuse(errno, errno == ENOENT ? fmt::format("folder '{}' does not exist", folder)
                                         : std::string(std::strerror(errno)));
  if (!S_ISDIR(dst.st_mode)) return refuse(ENOTDIR, fmt::format("'{}' is not a folder", folder));
  if (const int err = ProbeFolder(folder); err != 0) return refuse(err, std::strerror(err));
  return out;
}

std::string OutputFile::stdout_claimed_by_;

Status DistinctOutputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  std::vector<std::pair<std::string, std::string>> seen;  // canonical path, option
  for (const auto& [option, path] : outputs) {
    if (path.empty() || path == "-") continue;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) continue;  // /dev/null, a FIFO
    std::error_code ec;
    const std::string canonical = fs::weakly_canonical(path, ec).string();
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
    return MakeError(err, fmt::format("cannot write {} '{}': {}", what_, path_,
                                      std::strerror(err)));
  };
  if (to_stdout_) {
    std::fflush(stdout);
    const int err = WriteAllTo(stdout_fd_ >= 0 ? stdout_fd_ : STDOUT_FILENO, text);
    return err == 0 ? Status{} : Status{fail(err)};
  }
  struct stat lst {};
  const bool exists = ::lstat(path_.c_str(), &lst) == 0;
  if (!exists || S_ISREG(lst.st_mode)) {
    std::string tmp;
    const mode_t mode = exists ? (lst.st_mode & 07777) : NewFileMode();
    if (const int err = WriteTemporary(path_, text, mode, &tmp); err != 0) return fail(err);
    if (::rename(tmp.c_str(), path_.c_str()) != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      return fail(err);
    }
    return {};
  }
  // A symlink, FIFO, device or /dev/fd/N: written into, never replaced.
  const int fd = OpenInPlace(path_);
  if (fd < 0 && errno == ENXIO)
    return MakeError(ENXIO, fmt::format("cannot write {} '{}': no process opened the FIFO for "
                                        "reading within {:.0f} s",
                                        what_, path_, kFifoReaderWaitS));
  if (fd < 0) return fail(errno);
  int err = WriteAllTo(fd, text);
  if (::close(fd) != 0 && err == 0) err = errno;
  return err == 0 ? Status{} : Status{fail(err)};
}

Result<int> OutputFile::OpenStream() {
  if (to_stdout_) {
    ClaimStdout();
    const int fd = ::fcntl(stdout_fd_ >= 0 ? stdout_fd_ : STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
      return MakeError(errno,
                       fmt::format("cannot write {} '{}': {}", what_, path_, std::strerror(errno)));
    return fd;
  }
  const int fd = OpenInPlace(path_);
  if (fd < 0 && errno == ENXIO)
    return MakeError(ENXIO, fmt::format("cannot write {} '{}': no process opened the FIFO for "
                                        "reading within {:.0f} s",
                                        what_, path_, kFifoReaderWaitS));
  if (fd < 0)
    return MakeError(errno,
                     fmt::format("cannot write {} '{}': {}", what_, path_, std::strerror(errno)));
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
        fmt::format("cannot write {} '{}': {}", out_.what(), out_.path(), std::strerror(err));
    return false;
  }
  return true;
}

Result<OutputDir> OutputDir::Check(std::string dir) {
  const auto refuse = [&](int err, const std::string& why) {
    return MakeError(err, fmt::format("cannot write --out folder '{}': {}", dir, why));
  };
  if (dir.empty()) return MakeError(EINVAL, "--out needs a folder name");
  if (dir == "-")
    return refuse(EINVAL, "--out names a folder for several files; valid: a folder name");
  // The folder itself, or the nearest folder above it that exists (the rest is made on writing).
  fs::path p = fs::path(dir).lexically_normal();
  for (;;) {
    struct stat st {};
    if (::stat(p.empty() ? "." : p.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        return refuse(ENOTDIR, p.string() == fs::path(dir).lexically_normal().string()
                                   ? std::string("it exists and is not a folder")
                                   : fmt::format("'{}' is not a folder", p.string()));
      if (const int err = ProbeFolder(p.empty() ? "." : p.string()); err != 0)
        return refuse(err, std::strerror(err));
      return OutputDir(std::move(dir));
    }
    if (errno != ENOENT) return refuse(errno, std::strerror(errno));
    if (!p.has_relative_path() || p.parent_path() == p) return refuse(ENOENT, "no such folder");
    p = p.parent_path();
  }
}

Status OutputDir::WriteAll(const std::vector<std::pair<std::string, std::string>>& files) const {
  const auto fail = [&](int err, const std::string& name) {
    return MakeError(err, fmt::format("cannot write '{}': {}", (fs::path(dir_) / name).string(),
                                      std::strerror(err)));
  };
  // The folders this call makes, outermost first, to remove again if nothing is written.
  std::vector<fs::path> made;
  for (fs::path p = fs::path(dir_).lexically_normal(); !p.empty() && !fs::exists(p);
       p = p.parent_path())
    made.insert(made.begin(), p);
  const auto undo = [&](const std::vector<std::string>& temporaries) {
    for (const std::string& t : temporaries) ::unlink(t.c_str());
    for (auto it = made.rbegin(); it != made.rend(); ++it) ::rmdir(it->c_str());
  };
  for (const fs::path& p : made)
    if (::mkdir(p.c_str(), 0777) != 0 && errno != EEXIST) {
      const int err = errno;
      undo({});
      return MakeError(err, fmt::format("cannot create --out folder '{}': {}", dir_,
                                        std::strerror(err)));
    }
  std::vector<std::string> temporaries;
  const mode_t mode = NewFileMode();
  for (const auto& [name, text] : files) {
    std::string tmp;
    if (const int err = WriteTemporary((fs::path(dir_) / name).string(), text, mode, &tmp);
        err != 0) {
      undo(temporaries);
      return fail(err, name);
    }
    temporaries.push_back(tmp);
  }
  for (size_t i = 0; i < files.size(); ++i)
    if (::rename(temporaries[i].c_str(), (fs::path(dir_) / files[i].first).c_str()) != 0) {
      const int err = errno;
      for (size_t j = i; j < files.size(); ++j) ::unlink(temporaries[j].c_str());
      return fail(err, files[i].first);
    }
  return {};
}

}  // namespace txbatch
