// The fq_codel reference's sender (scripts/kernel-ref.sh --fq-codel, tests/vm/fq_codel_ref_test.cc):
// UDP frames of a few flows, written whole (Ethernet, IPv4, UDP) to an AF_PACKET socket in a
// fixed order, one sendto a frame. packet_snd hands each to dev_queue_xmit in the caller's
// context, so the qdisc's enqueues happen in exactly this order, and a flow is its UDP source
// port (the flow dissector's 4-tuple: what fq_codel hashes), its frame size and its TOS.
// Built static on the host by kernel-ref.sh (gcc -O2 -static) and put into the guest's image.
//
//   kref-fq-send -i IFACE -f PORT:BYTES:TOS ... -s PATTERN
//
// -f defines flow 0, 1, ... in turn: its UDP source port, its frame's bytes without the FCS
// (60..1514) and the IPv4 TOS byte (2: ECT(0), 0: not ECN-capable). PATTERN is the order of the
// frames as flow numbers, a repeat as COUNTxGROUP: "3x(012)" is 012012012, "20x0" twenty frames
// of flow 0; groups concatenate with '.': "4x(01).30x2". Every frame carries its sequence number
// (from 0, in the order sent) in the first 4 payload bytes, big-endian.
// Prints "seq flow bytes" a frame on stdout. Exit status 0 when every frame was taken (a
// sendto that fails is an error: fq_codel never refuses one), 2 on bad usage, 1 otherwise.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

enum { kMaxFlows = 16, kMaxFrames = 4096, kHeaders = 14 + 20 + 8 };

struct Flow {
  unsigned port, bytes, tos;
};

static struct Flow flows[kMaxFlows];
static int nflows;
static int order[kMaxFrames];
static int nframes;

static int Usage(const char* why) {
  fprintf(stderr, "kref-fq-send: %s\nusage: kref-fq-send -i IFACE -f PORT:BYTES:TOS ... -s PATTERN\n",
          why);
  return 2;
}

// Parses PATTERN from *p up to `end` (')' or NUL) into order[]; 0 on success.
static int Pattern(const char** p, char end) {
  while (**p && **p != end) {
    if (**p == '.') {
      ++*p;
      continue;
    }
    unsigned repeat = 1;
    if (**p >= '0' && **p <= '9') {
      char* x;
      unsigned long n = strtoul(*p, &x, 10);
      if (*x == 'x') {
        repeat = (unsigned)n;
        *p = x + 1;
      }
    }
    const int from = nframes;
    if (**p == '(') {
      ++*p;
      if (Pattern(p, ')') != 0 || **p != ')') return 1;
      ++*p;
    } else if (**p >= '0' && **p <= '9') {
      const int f = **p - '0';
      if (f >= nflows || nframes >= kMaxFrames) return 1;
      order[nframes++] = f;
      ++*p;
    } else {
      return 1;
    }
    const int len = nframes - from;
    for (unsigned r = 1; r < repeat; ++r) {
      if (nframes + len > kMaxFrames) return 1;
      memcpy(&order[nframes], &order[from], sizeof(int) * (size_t)len);
      nframes += len;
    }
  }
  return 0;
}

static uint16_t Checksum(const uint8_t* p, size_t n) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < n; i += 2) sum += (uint32_t)(p[i] << 8 | p[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return (uint16_t)~sum;
}

int main(int argc, char** argv) {
  const char* iface = NULL;
  const char* pattern = NULL;
  int opt;
  while ((opt = getopt(argc, argv, "i:f:s:")) != -1) {
    if (opt == 'i') {
      iface = optarg;
    } else if (opt == 'f') {
      if (nflows == kMaxFlows) return Usage("too many flows");
      struct Flow* f = &flows[nflows++];
      if (sscanf(optarg, "%u:%u:%u", &f->port, &f->bytes, &f->tos) != 3 || f->port == 0 ||
          f->port > 65535 || f->bytes < 60 || f->bytes > 1514 || f->tos > 255)
        return Usage("-f is PORT:BYTES:TOS, bytes 60..1514");
    } else if (opt == 's') {
      pattern = optarg;
    } else {
      return Usage("unknown option");
    }
  }
  if (!iface || !pattern || nflows == 0) return Usage("-i, -f and -s are required");
  const char* p = pattern;
  if (Pattern(&p, '\0') != 0 || nframes == 0) return Usage("bad pattern (or a flow not defined)");

  const int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_IP));
  if (fd < 0) {
    perror("kref-fq-send: socket");
    return 1;
  }
  struct ifreq ifr;
  memset(&ifr, 0, sizeof(ifr));
  snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", iface);
  if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0) {
    perror("kref-fq-send: SIOCGIFHWADDR");
    return 1;
  }
  struct sockaddr_ll to;
  memset(&to, 0, sizeof(to));
  to.sll_family = AF_PACKET;
  to.sll_protocol = htons(ETH_P_IP);
  to.sll_ifindex = (int)if_nametoindex(iface);
  to.sll_halen = 6;
  static const uint8_t kDst[6] = {0x02, 0, 0, 0, 0, 0x99};
  memcpy(to.sll_addr, kDst, 6);

  // Every frame built first: the sends then follow one another as fast as the stack takes them.
  static uint8_t frames[kMaxFrames][1514];
  for (int i = 0; i < nframes; ++i) {
    const struct Flow* f = &flows[order[i]];
    uint8_t* b = frames[i];
    memset(b, 0, f->bytes);
    memcpy(b, kDst, 6);
    memcpy(b + 6, ifr.ifr_hwaddr.sa_data, 6);
    b[12] = 0x08;
    b[13] = 0x00;
    uint8_t* ip = b + 14;
    const unsigned ip_len = f->bytes - 14;
    ip[0] = 0x45;
    ip[1] = (uint8_t)f->tos;
    ip[2] = (uint8_t)(ip_len >> 8);
    ip[3] = (uint8_t)ip_len;
    ip[6] = 0x40;  // DF
    ip[8] = 64;
    ip[9] = IPPROTO_UDP;
    const uint8_t src[4] = {10, 0, 2, 15}, dst[4] = {10, 0, 2, 99};
    memcpy(ip + 12, src, 4);
    memcpy(ip + 16, dst, 4);
    const uint16_t sum = Checksum(ip, 20);
    ip[10] = (uint8_t)(sum >> 8);
    ip[11] = (uint8_t)sum;
    uint8_t* udp = ip + 20;
    const unsigned udp_len = ip_len - 20;
    udp[0] = (uint8_t)(f->port >> 8);
    udp[1] = (uint8_t)f->port;
    udp[2] = 0x13;  // port 5001
    udp[3] = 0x89;
    udp[4] = (uint8_t)(udp_len >> 8);
    udp[5] = (uint8_t)udp_len;  // checksum 0: none (IPv4)
    if (f->bytes >= kHeaders + 4) {
      udp[8] = (uint8_t)(i >> 24);
      udp[9] = (uint8_t)(i >> 16);
      udp[10] = (uint8_t)(i >> 8);
      udp[11] = (uint8_t)i;
    }
  }
  int failed = 0;
  for (int i = 0; i < nframes; ++i) {
    const unsigned bytes = flows[order[i]].bytes;
    if (sendto(fd, frames[i], bytes, 0, (const struct sockaddr*)&to, sizeof(to)) != (ssize_t)bytes) {
      perror("kref-fq-send: sendto");
      failed = 1;
    }
  }
  for (int i = 0; i < nframes; ++i) printf("%d %d %u\n", i, order[i], flows[order[i]].bytes);
  return failed;
}
