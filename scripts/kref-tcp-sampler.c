// The kernel reference's TCP sampler (scripts/kernel-ref.sh, doc/fidelity.md "The kernel's own
// run"): every established IPv4 TCP socket to one destination port, every INTERVAL ms for
// SECONDS, through NETLINK_SOCK_DIAG (inet_diag, as iproute2's `ss` reads it) — without ss's
// fork and exec, which under TCG came only every 0.5-1.3 s. Built static on the host by
// kernel-ref.sh (gcc -O2 -static) and put into the guest's initramfs beside its job.
//
//   kref-tcp-sampler -p PORT [-i INTERVAL_MS] [-d SECONDS]
//
// One line a socket a sample on stdout, after a `#` line naming the columns:
//   t sport wmem_alloc pacing_rate min_rtt rtt cwnd delivery_rate bytes_acked snd_mss unacked
//   notsent wmem_queued snd_wnd busy_us rwnd_limited_us sndbuf_limited_us
// t: CLOCK_BOOTTIME seconds (/proc/uptime's clock); wmem_alloc: sk_wmem_alloc less the socket's
// own reference (SK_MEMINFO_WMEM_ALLOC, ss's skmem t: the bytes below the socket, in the qdisc
// and the driver's ring until tcp_wfree); pacing_rate, delivery_rate: bytes a second
// (tcp_info); min_rtt, rtt: us; cwnd, unacked: segments; snd_wnd: the peer's window; busy_us,
// rwnd_limited_us, sndbuf_limited_us: tcp_info's chronos (us, since the connection began:
// sending, held by the peer's window, by the send buffer); the rest bytes. A sample is taken at
// each INTERVAL on an absolute schedule (a late sample does not shift the next ones); the
// output is buffered and written at the end. Exit status 0; 2 on bad usage; 1 when netlink
// failed (said on stderr).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { kTcpEstablished = 1 };  // TCP_ESTABLISHED in the kernel's tcp_states.h

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// One dump request: IPv4 TCP, established sockets to `port`, with tcp_info and the memory
// counters. inet_diag_dump_icsk skips sockets whose dport differs where id.idiag_dport is set.
static int Request(int fd, uint16_t port) {
  struct {
    struct nlmsghdr nlh;
    struct inet_diag_req_v2 req;
  } msg;
  memset(&msg, 0, sizeof(msg));
  msg.nlh.nlmsg_len = sizeof(msg);
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  msg.req.sdiag_family = AF_INET;
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = 1u << kTcpEstablished;
  msg.req.idiag_ext = (1u << (INET_DIAG_INFO - 1)) | (1u << (INET_DIAG_SKMEMINFO - 1));
  msg.req.id.idiag_dport = htons(port);
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  return sendto(fd, &msg, sizeof(msg), 0, (struct sockaddr*)&kernel, sizeof(kernel)) < 0 ? -1
                                                                                            : 0;
}

// Prints one socket's line from its inet_diag_msg and attributes.
static void PrintSocket(FILE* out, double t, const struct nlmsghdr* h, uint16_t port) {
  const struct inet_diag_msg* m = NLMSG_DATA(h);
  if (ntohs(m->id.idiag_dport) != port) return;
  struct tcp_info info;
  memset(&info, 0, sizeof(info));
  uint32_t mem[SK_MEMINFO_VARS];
  memset(mem, 0, sizeof(mem));
  int have_info = 0, have_mem = 0;
  int len = (int)h->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*m));
  for (const struct rtattr* a = (const struct rtattr*)(m + 1); RTA_OK(a, len);
       a = RTA_NEXT(a, len)) {
    const size_t n = RTA_PAYLOAD(a);
    if (a->rta_type == INET_DIAG_INFO) {
      // A kernel's tcp_info may be shorter or longer than these headers': the common part.
      memcpy(&info, RTA_DATA(a), n < sizeof(info) ? n : sizeof(info));
      have_info = 1;
    } else if (a->rta_type == INET_DIAG_SKMEMINFO) {
      memcpy(mem, RTA_DATA(a), n < sizeof(mem) ? n : sizeof(mem));
      have_mem = 1;
    }
  }
  if (!have_info || !have_mem) return;
  fprintf(out, "%.6f %u %u %llu %u %u %u %llu %llu %u %u %u %u %u %llu %llu %llu\n", t,
          ntohs(m->id.idiag_sport),
          mem[SK_MEMINFO_WMEM_ALLOC], (unsigned long long)info.tcpi_pacing_rate,
          info.tcpi_min_rtt, info.tcpi_rtt, info.tcpi_snd_cwnd,
          (unsigned long long)info.tcpi_delivery_rate, (unsigned long long)info.tcpi_bytes_acked,
          info.tcpi_snd_mss, info.tcpi_unacked, info.tcpi_notsent_bytes,
          mem[SK_MEMINFO_WMEM_QUEUED], info.tcpi_snd_wnd,
          (unsigned long long)info.tcpi_busy_time, (unsigned long long)info.tcpi_rwnd_limited,
          (unsigned long long)info.tcpi_sndbuf_limited);
}

// One sample: the dump's messages until NLMSG_DONE. Returns 0, or -1 with errno.
static int Sample(int fd, FILE* out, uint16_t port, char* buf, size_t size) {
  const double t = Now();
  if (Request(fd, port) < 0) return -1;
  for (;;) {
    const ssize_t got = recv(fd, buf, size, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    int left = (int)got;
    for (const struct nlmsghdr* h = (const struct nlmsghdr*)buf; NLMSG_OK(h, left);
         h = NLMSG_NEXT(h, left)) {
      if (h->nlmsg_type == NLMSG_DONE) return 0;
      if (h->nlmsg_type == NLMSG_ERROR) {
        const struct nlmsgerr* e = NLMSG_DATA(h);
        errno = -e->error;
        return -1;
      }
      if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY) PrintSocket(out, t, h, port);
    }
  }
}

static int Usage(void) {
  fprintf(stderr, "usage: kref-tcp-sampler -p PORT [-i INTERVAL_MS] [-d SECONDS]\n");
  return 2;
}

int main(int argc, char** argv) {
  long port = 0;
  double interval_ms = 10, seconds = 5;
  int c;
  while ((c = getopt(argc, argv, "p:i:d:")) != -1) {
    switch (c) {
      case 'p': port = strtol(optarg, NULL, 10); break;
      case 'i': interval_ms = strtod(optarg, NULL); break;
      case 'd': seconds = strtod(optarg, NULL); break;
      default: return Usage();
    }
  }
  if (port <= 0 || port > 65535 || !(interval_ms > 0) || !(seconds > 0)) return Usage();
  const int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) {
    perror("kref-tcp-sampler: socket(NETLINK_SOCK_DIAG)");
    return 1;
  }
  // Held in memory and written at the end: a write a sample would be the guest's own load.
  size_t cap = 0;
  char* held = NULL;
  FILE* out = open_memstream(&held, &cap);
  static char buf[1 << 16];
  fprintf(out, "# t sport wmem_alloc pacing_rate min_rtt rtt cwnd delivery_rate bytes_acked "
               "snd_mss unacked notsent wmem_queued snd_wnd busy_us rwnd_limited_us "
               "sndbuf_limited_us\n");
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  const double end = Now() + seconds;
  const long step_ns = (long)(interval_ms * 1e6);
  unsigned long samples = 0, late = 0;
  while (Now() < end) {
    if (Sample(fd, out, (uint16_t)port, buf, sizeof(buf)) < 0) {
      perror("kref-tcp-sampler: inet_diag dump");
      return 1;
    }
    ++samples;
    next.tv_nsec += step_ns;
    while (next.tv_nsec >= 1000000000L) {
      next.tv_nsec -= 1000000000L;
      ++next.tv_sec;
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec >= next.tv_nsec)) {
      ++late;  // the sample took longer than the interval: the next one at once
      next = now;
      continue;
    }
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
  }
  fprintf(out, "# samples %lu late %lu interval_ms %g\n", samples, late, interval_ms);
  fclose(out);
  fwrite(held, 1, cap, stdout);
  free(held);
  close(fd);
  return 0;
}
