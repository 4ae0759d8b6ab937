#include "base/path_walk.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <utility>

namespace txbatch {
namespace {

// Symlinks followed in one walk before it is a loop (the kernel's MAXSYMLINKS).
constexpr int kMaxLinks = 40;

std::deque<std::string> Split(const std::string& path) {
  std::deque<std::string> out;
  size_t i = 0;
  while (i < path.size()) {
    const size_t j = path.find('/', i);
    const std::string part = path.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (!part.empty() && part != ".") out.push_back(part);
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

std::string Join(const std::string& folder, const std::string& name) {
  if (folder.empty()) return name;
  return folder.back() == '/' ? folder + name : folder + "/" + name;
}

std::string KindOf(const struct stat& st) {
  if (S_ISLNK(st.st_mode)) return "a symlink";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISREG(st.st_mode)) return "a file";
  if (S_ISDIR(st.st_mode)) return "a folder";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "a device";
}

bool OnProc(int dir) {
  struct statfs fs {};
  return ::fstatfs(dir, &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
}

}  // namespace

bool Planted(const struct stat& st, const struct stat& folder) {
  const bool others_write = (folder.st_mode & (S_IWOTH | S_IWGRP)) != 0;
  return others_write && st.st_uid != ::geteuid() && st.st_uid != folder.st_uid;
}

WalkedPath::WalkedPath(WalkedPath&& other) noexcept
    : dir_(std::exchange(other.dir_, -1)),
      name_(std::move(other.name_)),
      missing_(std::move(other.missing_)),
      exists_(other.exists_),
      magic_(other.magic_),
      st_(other.st_) {}

WalkedPath& WalkedPath::operator=(WalkedPath&& other) noexcept {
  if (this != &other) {
    if (dir_ >= 0) ::close(dir_);
    dir_ = std::exchange(other.dir_, -1);
    name_ = std::move(other.name_);
    missing_ = std::move(other.missing_);
    exists_ = other.exists_;
    magic_ = other.magic_;
    st_ = other.st_;
  }
  return *this;
}

WalkedPath::~WalkedPath() {
  if (dir_ >= 0) ::close(dir_);
}

Result<WalkedPath> WalkedPath::Walk(const std::string& path, const std::string& what,
                                    bool missing_ok) {
  const auto refuse = [&](int err, const std::string& why) {
    return MakeError(err, fmt::format("cannot write {} '{}': {}", what, path, why));
  };
  WalkedPath w;
  const auto open_root = [&](bool absolute) {
    const int fd = ::open(absolute ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
      if (w.dir_ >= 0) ::close(w.dir_);
      w.dir_ = fd;
    }
    return fd >= 0;
  };
  if (!open_root(!path.empty() && path.front() == '/')) return refuse(errno, std::strerror(errno));
  std::string shown = !path.empty() && path.front() == '/' ? "/" : "";  // the folder, as named
  std::deque<std::string> rest = Split(path);
  int links = 0;
  while (!rest.empty()) {
    std::string name = std::move(rest.front());
    rest.pop_front();
    const bool last = rest.empty();
    const std::string here = Join(shown, name);
    if (name == "..") {
      const int up = ::openat(w.dir_, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (up < 0) return refuse(errno, std::strerror(errno));
      ::close(w.dir_);
      w.dir_ = up;
      shown = here;
      continue;
    }
    struct stat folder {};
    if (::fstat(w.dir_, &folder) != 0) return refuse(errno, std::strerror(errno));
    struct stat st {};
    if (::fstatat(w.dir_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      const int err = errno;
      if (err != ENOENT) return refuse(err, std::strerror(err));
      if (!last && !missing_ok)
        return refuse(ENOENT, fmt::format("folder '{}' does not exist", here));
      w.name_ = name;
      w.missing_.push_back(std::move(name));
      for (auto& n : rest)
        if (n == "..") return refuse(ENOENT, fmt::format("folder '{}' does not exist", here));
      w.missing_.insert(w.missing_.end(), rest.begin(), rest.end());
      return w;
    }
    if (S_ISLNK(st.st_mode)) {
      if (Planted(st, folder))
        return refuse(EINVAL,
                      fmt::format("'{}' is a symlink of user {} in a folder other users can "
                                  "write, and txbatch follows no such link (a stranger's link "
                                  "would aim its writes, as fs.protected_symlinks says); valid: "
                                  "a path in a folder only you can write",
                                  here, st.st_uid));
      if (last && OnProc(w.dir_)) {
        // /dev/fd/N or /proc/self/fd/N: a descriptor this process holds.
        w.magic_ = true;
        w.name_ = std::move(name);
        w.exists_ = ::fstatat(w.dir_, w.name_.c_str(), &w.st_, 0) == 0;
        if (!w.exists_) return refuse(errno, std::strerror(errno));
        return w;
      }
      if (++links > kMaxLinks) return refuse(ELOOP, std::strerror(ELOOP));
      std::string target(PATH_MAX, '\0');
      const ssize_t n = ::readlinkat(w.dir_, name.c_str(), target.data(), target.size());
      if (n < 0) return refuse(errno, std::strerror(errno));
      target.resize(static_cast<size_t>(n));
      std::deque<std::string> more = Split(target);
      rest.insert(rest.begin(), more.begin(), more.end());
      if (!target.empty() && target.front() == '/') {
        if (!open_root(true)) return refuse(errno, std::strerror(errno));
        shown = "/";
      }
      if (rest.empty()) {  // a link to "/" or "."
        w.name_.clear();
        return w;
      }
      continue;
    }
    if (last) {
      if (!S_ISDIR(st.st_mode) && Planted(st, folder))
        return refuse(EINVAL,
                      fmt::format("'{}' is {} of user {} in a folder other users can write, and "
                                  "txbatch writes into no such file (as fs.protected_fifos and "
                                  "protected_regular say); valid: a path in a folder only you can "
                                  "write, or that user removes it first",
                                  here, KindOf(st), st.st_uid));
      w.name_ = std::move(name);
      w.exists_ = true;
      w.st_ = st;
      return w;
    }
    if (!S_ISDIR(st.st_mode)) return refuse(ENOTDIR, fmt::format("'{}' is not a folder", here));
    const int sub = ::openat(w.dir_, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) return refuse(errno, std::strerror(errno));
    ::close(w.dir_);
    w.dir_ = sub;
    shown = here;
  }
  w.name_.clear();  // "/" or "."
  return w;
}

}  // namespace txbatch
