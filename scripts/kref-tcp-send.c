// The kernel reference's TCP sender (scripts/kernel-ref.sh): N bulk streams to HOST:PORT for
// SECONDS, each a process writing 64 KiB of zeros a call, as fast as its socket takes them.
// busybox nc, the sender before it, copies stdin in 1 KiB reads and writes: under TCG that
// syscall rate, not TCP, bounded one stream (1 KiB skbs the commonest, 760 bytes not yet sent
// at the median), and a stream bounded by its writer never meets TCP Small Queues.
// Built static on the host by kernel-ref.sh (gcc -O2 -static) and put into the guest's image.
//
//   kref-tcp-send -c HOST -p PORT [-n STREAMS] [-d SECONDS]
//
// Exit status 0 when every stream connected and wrote until its time was up; 2 on bad usage;
// 1 otherwise (said on stderr).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kWrite = 64 * 1024 };  // bytes a write: TCP's whole size goal in one call

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// One stream: connect, write until `end`, close. Returns the process's exit status.
static int Stream(const struct sockaddr_in* to, double end) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (const struct sockaddr*)to, sizeof(*to)) < 0) {
    perror("kref-tcp-send: connect");
    return 1;
  }
  // A blocking write returns within a send buffer's worth; SO_SNDTIMEO bounds a stalled one so
  // that the stream stops near its time.
  const struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  static char zeros[kWrite];
  while (Now() < end) {
    if (write(fd, zeros, sizeof(zeros)) < 0 && errno != EAGAIN && errno != EINTR) {
      perror("kref-tcp-send: write");
      return 1;
    }
  }
  close(fd);
  return 0;
}

int main(int argc, char** argv) {
  const char* host = NULL;
  long port = 0, streams = 1;
  double seconds = 5;
  int c;
  while ((c = getopt(argc, argv, "c:p:n:d:")) != -1) {
    switch (c) {
      case 'c': host = optarg; break;
      case 'p': port = strtol(optarg, NULL, 10); break;
      case 'n': streams = strtol(optarg, NULL, 10); break;
      case 'd': seconds = strtod(optarg, NULL); break;
      default: goto usage;
    }
  }
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (!host || inet_pton(AF_INET, host, &to.sin_addr) != 1 || port <= 0 || port > 65535 ||
      streams < 1 || streams > 64 || !(seconds > 0))
    goto usage;
  const double end = Now() + seconds;
  for (long i = 0; i < streams; ++i) {
    const pid_t pid = fork();
    if (pid < 0) {
      perror("kref-tcp-send: fork");
      return 1;
    }
    if (pid == 0) _exit(Stream(&to, end));
  }
  int rc = 0, status;
  while (wait(&status) > 0)
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  return rc;
usage:
  fprintf(stderr, "usage: kref-tcp-send -c HOST -p PORT [-n STREAMS] [-d SECONDS]\n");
  return 2;
}
