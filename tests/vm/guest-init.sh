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

# rxe_up NETDEV: soft RoCE on NETDEV (modules in the order rdma_rxe needs; the netdev's carrier up
# first, else `rdma link add` fails).
rxe_up() {
  for m in crc32_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe; do
    modprobe "$m" || return 1
  done
  ip link set "$1" up
  i=0
  while [ "$(cat "/sys/class/net/$1/carrier" 2>/dev/null)" != 1 ]; do
    i=$((i + 1))
    [ $i -gt 100 ] && { echo "rxe_up: $1 has no carrier"; return 1; }
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
