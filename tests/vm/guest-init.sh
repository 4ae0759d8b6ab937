#!/bin/busybox sh
# /init of the VM lab's guests (scripts/vm-lab.sh): mounts what DPDK needs, runs /job.sh with the
# helpers below, sends its status to the host on the second serial port, and powers off.
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
mkdir -p /dev/hugepages /dev/shm
mount -t hugetlbfs hugetlbfs /dev/hugepages
mount -t tmpfs shm /dev/shm
ip link set lo up
depmod 2>/dev/null
RESULTS=/dev/ttyS1
stty -F "$RESULTS" raw -echo 2>/dev/null

# bind BDF DRIVER: the PCI device BDF, taken from whatever driver has it, bound to DRIVER.
bind() {
  modprobe "$2" || return 1
  # vfio's container needs an IOMMU driver, a soft dependency modprobe does not follow.
  if [ "$2" = vfio-pci ]; then modprobe vfio_iommu_type1 || return 1; fi
  if [ -e "/sys/bus/pci/devices/$1/driver" ]; then
    echo "$1" > "/sys/bus/pci/devices/$1/driver/unbind"
  fi
  echo "$2" > "/sys/bus/pci/devices/$1/driver_override"
  echo "$1" > /sys/bus/pci/drivers_probe
  [ "$(basename "$(readlink "/sys/bus/pci/devices/$1/driver")")" = "$2" ] \
    || { echo "bind: $1 is not bound to $2"; return 1; }
}

# hugepages N: N 2 MB pages for EAL.
hugepages() {
  echo "$1" > /proc/sys/vm/nr_hugepages
  [ "$(cat /proc/sys/vm/nr_hugepages)" -ge "$1" ] || { echo "hugepages: got fewer than $1"; return 1; }
}

# result NAME FILE: FILE to the host, as OUT/NAME.
result() {
  { echo "txbatch-vm-begin $1"; cat "$2"; echo; echo "txbatch-vm-end"; } > "$RESULTS"
}

# ipv6_ready NETDEV: NETDEV has its link-local IPv6 address and none still in duplicate address
# detection (/proc/net/if_inet6: address, index, prefix, scope, flags, name; scope 20 is link,
# flag 0x40 IFA_F_TENTATIVE).
ipv6_ready() {
  found=
  while read -r _ _ _ scope flags dev; do
    [ "$dev" = "$1" ] || continue
    [ $((0x$flags & 0x40)) -eq 0 ] || return 1
    [ "$scope" = 20 ] && found=1
  done < /proc/net/if_inet6
  [ -n "$found" ]
}

# rxe_up NETDEV: soft RoCE on NETDEV (modules in the order rdma_rxe needs; the netdev's carrier up
# first, else `rdma link add` fails). Returns once NETDEV's IPv6 addresses are usable: rxe's
# RoCE v2 GIDs are its addresses, and one still tentative has no local route, so an address
# handle to it waits for a neighbour that never answers and fails after 1 s (ETIMEDOUT). The
# lab's guests have MACs of their own: no duplicate address detection.
rxe_up() {
  for m in crc32_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe; do
    modprobe "$m" || return 1
  done
  echo 0 > "/proc/sys/net/ipv6/conf/$1/accept_dad"
  ip link set "$1" up
  i=0
  while [ "$(cat "/sys/class/net/$1/carrier" 2>/dev/null)" != 1 ] || ! ipv6_ready "$1"; do
    i=$((i + 1))
    [ $i -gt 100 ] && { echo "rxe_up: $1 has no carrier or no usable link-local IPv6 address"; return 1; }
    sleep 0.1
  done
  rdma link add rxe0 type rxe netdev "$1"
}

echo "txbatch-vm: job starts"
status=0
( set -e; . /job.sh ) || status=$?
echo "txbatch-vm: job ended with status $status"
# The kernel's log, whatever the console's level let through (an IOMMU fault is an error line).
dmesg > /tmp/dmesg.txt 2>/dev/null && result dmesg.txt /tmp/dmesg.txt
echo "txbatch-vm-exit $status" > "$RESULTS"
sync
poweroff -f
