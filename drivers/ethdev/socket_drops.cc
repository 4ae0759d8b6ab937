#include "drivers/ethdev/socket_drops.h"

#include <dirent.h>
#include <linux/if_packet.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace txbatch::ethdev {
namespace {

// The socket's inode if `fd` is a socket (0 otherwise).
ino_t SocketInode(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
  return st.st_ino;
}

}  // namespace

SocketDrops SocketDrops::Find(unsigned if_index) {
  SocketDrops found;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return found;
  const int own = ::dirfd(dir);
  while (const dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;
    const ino_t inode = SocketInode(static_cast<int>(fd));
    if (inode == 0) continue;
    int domain = 0;
    socklen_t len = sizeof domain;
    if (::getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 ||
        domain != AF_PACKET)
      continue;
    sockaddr_ll addr{};
    len = sizeof addr;
    if (::getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        addr.sll_ifindex != static_cast<int>(if_index))
      continue;
    found.sockets_.push_back({static_cast<int>(fd), inode});
  }
  ::closedir(dir);
  return found;
}

uint64_t SocketDrops::Total() {
  for (const Socket& s : sockets_) {
    if (SocketInode(s.fd) != s.inode) continue;
    // TPACKET_V2's statistics; a TPACKET_V3 socket reports a longer struct that starts the same.
    tpacket_stats st{};
    socklen_t len = sizeof st;
    if (::getsockopt(s.fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0) total_ += st.tp_drops;
  }
  return total_;
}

}  // namespace txbatch::ethdev
