#include "base/input_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace txbatch {
namespace {

std::string KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string MiB(uint64_t bytes) { return fmt::format("{} MiB", bytes >> 20); }

}  // namespace

Result<std::string> ReadInputFile(const std::string& path, std::string_view what,
                                  uint64_t max_bytes, std::string_view valid) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. Regular files
  // ignore it.
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return MakeError(errno, fmt::format("cannot read {} '{}': {}; valid: {}", what, path,
                                        std::strerror(errno), valid));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    close(fd);
    return MakeError(err != 0 ? err : EINVAL, fmt::format("{} '{}' is {}; valid: {}", what, path,
                                                          KindOf(st.st_mode), valid));
  }
  const auto too_big = [&] {
    return MakeError(EFBIG, fmt::format("{} '{}' is larger than the {} txbatch reads; valid: {}",
                                        what, path, MiB(max_bytes), valid));
  };
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    close(fd);
    return too_big();
  }
  std::string text;
  text.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return MakeError(err, fmt::format("cannot read {} '{}': {}; valid: {}", what, path,
                                        std::strerror(err), valid));
    }
    if (n == 0) break;
    // A file growing while it is read (or a /proc file, size 0) stops at the bound too.
    if (text.size() + static_cast<size_t>(n) > max_bytes) {
      close(fd);
      return too_big();
    }
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

}  // namespace txbatch
