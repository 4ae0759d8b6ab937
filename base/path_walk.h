#pragma once
// A path an output is written at, walked one name at a time the way the kernel's
// fs.protected_symlinks / protected_fifos / protected_regular reason, but whatever those sysctls
// say (this machine has them all 0): txbatch often runs as root, and root writing through a name
// another user may plant is how a stranger's symlink in /tmp rewrites a root-only file. Control
// plane.
//
// The rule: an entry owned by another user — neither this process's effective user nor the owner
// of the folder it is in — in a folder others can write (world- or group-writable) is not
// followed when it is a symlink, and not written into or replaced when it is the file itself.
// Every folder on the way is opened by descriptor (O_PATH, O_NOFOLLOW), so what is created or
// renamed afterwards lands in the folder that was checked even if a name on the way is swapped
// meanwhile. /proc's magic links (/dev/fd/N, /proc/self/fd/N: descriptors this process holds)
// are left to the kernel.

#include <sys/stat.h>

#include <string>
#include <vector>

#include "base/error.h"

namespace txbatch {

class WalkedPath {
 public:
  // Walks `path` for `what` ("--json file"). Fails with one sentence (EINVAL for bad input: a
  // planted name, a name on the way that is not a folder, a loop) when a folder on the way is
  // missing — unless `missing_ok`, when the names from the first missing one on are kept in
  // missing() (a folder the caller will make). A path naming "/" or "." leaves name() empty.
  static Result<WalkedPath> Walk(const std::string& path, const std::string& what,
                                 bool missing_ok = false);
  WalkedPath(WalkedPath&& other) noexcept;
  WalkedPath& operator=(WalkedPath&& other) noexcept;
  WalkedPath(const WalkedPath&) = delete;
  WalkedPath& operator=(const WalkedPath&) = delete;
  ~WalkedPath();

  // The folder that holds name() (an O_PATH descriptor, this object's), or the deepest folder
  // that exists where missing() is not empty.
  int folder() const { return dir_; }
  // The last name, in folder(); with missing() not empty, its first name.
  const std::string& name() const { return name_; }
  // Names below folder() that do not exist yet, outermost first (the first is name()).
  const std::vector<std::string>& missing() const { return missing_; }
  // Whether name() exists in folder(), and what it is (lstat; a magic link: what it points to).
  bool exists() const { return exists_; }
  const struct stat& st() const { return st_; }
  // name() is a /proc magic link (a descriptor this process holds): open it by that name,
  // following it.
  bool magic() const { return magic_; }

 private:
  WalkedPath() = default;
  int dir_ = -1;
  std::string name_;
  std::vector<std::string> missing_;
  bool exists_ = false;
  bool magic_ = false;
  struct stat st_ {};
};

// Whether an entry `st` in a folder `folder` is one this process must not follow or write:
// another user's (not ours, not the folder owner's) in a folder others can write.
bool Planted(const struct stat& st, const struct stat& folder);

}  // namespace txbatch
