#!/usr/bin/env bash
# The VM lab: txbatch on real PMDs (and verbs on soft RoCE) inside QEMU guests, without hardware.
#
#   scripts/vm-lab.sh image [DIR]           kernel + initramfs with the built txbatch in DIR (and
#                                           the programs TXBATCH_VM_BINS names)
#   scripts/vm-lab.sh boot DIR JOB OUT -- QEMU-ARGS...
#                                           boots one guest that runs JOB (a shell script run by
#                                           the guest's busybox sh); OUT/console.log is the serial
#                                           console, OUT/results.txt what the job wrote with
#                                           `result FILE` (see below), OUT/exit the job's status
#
# DIR defaults to build/vm of this checkout; relative paths are the caller's. The kernel is
# Debian's linux-image-*-amd64 (the full one: it has rdma_rxe), unpacked with `apt-get download`
# + `dpkg -x`, never installed. The guest runs under TCG (`-accel tcg,thread=multi -cpu max`):
# KVM is used only where it really works, and on this kind of machine /dev/kvm exists but guests
# fail (ENV-NOTES). Guests have no network but what the QEMU-ARGS give them: use `-netdev
# user,restrict=on`, `socket` between two guests, never a bridge to the host's network.
#
# In the guest a job has: /bin (busybox), txbatch, DPDK's e1000, virtio and mempool plugins, the
# kernel modules for uio_pci_generic, vfio-pci, rdma_rxe, the kernel's e1000/e1000e and virtio-net
# drivers, pktgen and sch_fq, Debian's tc, ss and ethtool (/usr/sbin/tc, /usr/bin/ss,
# /usr/sbin/ethtool: busybox's applets of the same names come first on PATH), plus these shell
# functions:
#   bind BDF DRIVER      unbinds the PCI device BDF and binds it to DRIVER (loads the module)
#   hugepages N          reserves N 2 MB hugepages
#   result NAME FILE     sends FILE to the host as OUT/NAME
#   rxe_up NETDEV        loads soft RoCE and creates rxe0 on NETDEV once its carrier is up and
#                        its IPv6 addresses are usable (no duplicate address detection)
set -euo pipefail
here=$PWD  # relative DIR, JOB and OUT are the caller's
cd "$(dirname "$0")/.."

# The kernel: the version Debian's linux-image-amd64 names today (a pinned one leaves the archive
# at the next ABI bump), or TXBATCH_VM_KERNEL.
default_kernel() {
  apt-cache depends linux-image-amd64 2>/dev/null \
    | sed -n 's/^ *Depends: linux-image-\([0-9][^ ]*-amd64\)$/\1/p' | head -1
}
KVER=${TXBATCH_VM_KERNEL:-$(default_kernel)}
KVER=${KVER:-6.1.0-57-amd64}

die() { echo "vm-lab: $*" >&2; exit 2; }

# Copies PATH into ROOT at the same path, following every symlink on the way (each kept as a
# symlink), so that a library that is both linked and a DPDK plugin stays one file in the guest.
add_path() {
  local root=$1 path=$2
  [[ -e $root$path || -L $root$path ]] && return 0
  local dir
  dir=$(dirname "$path")
  if [[ $dir != / ]]; then
    add_path "$root" "$dir"
  fi
  if [[ -L $path ]]; then
    local target
    target=$(readlink "$path")
    ln -s "$target" "$root$path"
    [[ $target == /* ]] || target=$dir/$target
    add_path "$root" "$target"
  elif [[ -d $path ]]; then
    mkdir -p "$root$path"
  else
    cp "$path" "$root$path"
  fi
}

# Every shared library PATH loads.
add_libs() {
  local root=$1 path=$2 lib
  for lib in $(ldd "$path" | awk '/=> \// {print $3} /^\t\/lib/ {print $1}'); do
    add_path "$root" "$lib"
  done
}

# PATH and every shared library it loads.
add_with_libs() {
  add_path "$1" "$2"
  add_libs "$1" "$2"
}

kernel() {
  local dir=$1 cache=$1/kernel-pkg
  if [[ -f $dir/vmlinuz && -d $dir/modules/$KVER ]]; then return 0; fi
  mkdir -p "$cache"
  if ! compgen -G "$cache/linux-image-${KVER}_*.deb" >/dev/null; then
    (cd "$cache" && apt-get download "linux-image-$KVER" >/dev/null 2>&1) \
      || (apt-get update -qq >/dev/null 2>&1 && cd "$cache" && apt-get download "linux-image-$KVER" >/dev/null) \
      || die "the VM lab unpacks Debian's kernel package at test time, and linux-image-$KVER could not be downloaded from Debian's archive (apt-get download failed; a machine without the archive cannot run the vm suite, or set TXBATCH_VM_KERNEL to a version the archive has)"
  fi
  rm -rf "$cache/x"
  dpkg -x "$cache"/linux-image-"${KVER}"_*.deb "$cache/x"
  cp "$cache/x/boot/vmlinuz-$KVER" "$dir/vmlinuz"
  mkdir -p "$dir/modules"
  rm -rf "$dir/modules/$KVER"
  mv "$cache/x/lib/modules/$KVER" "$dir/modules/$KVER"
  rm -rf "$cache/x"
}

# The modules the guest may load and what they depend on (a module's .modinfo `depends=`):
# DPDK's bindings, the kernel's own NIC drivers, soft RoCE, and for the kernel's own TX path
# (scripts/kernel-ref.sh) pktgen, fq, virtio-net and tcp_diag (ss reads sockets through it).
GUEST_MODULES=(uio_pci_generic vfio-pci vfio_iommu_type1 e1000 e1000e crc32_generic rdma_rxe
  pktgen sch_fq virtio_pci virtio_net tcp_diag)

add_module() {
  local root=$1 src=$2 name=$3 file dep
  file=$(find "$src/kernel" -name "$name.ko" -print -quit)
  [[ -n $file ]] || file=$(find "$src/kernel" -name "${name//_/-}.ko" -print -quit)
  [[ -n $file ]] || die "kernel $KVER has no module $name"
  local rel=${file#"$src"/}
  [[ -f $root/lib/modules/$KVER/$rel ]] && return 0
  mkdir -p "$(dirname "$root/lib/modules/$KVER/$rel")"
  cp "$file" "$root/lib/modules/$KVER/$rel"
  for dep in $(grep -a -o 'depends=[^[:cntrl:]]*' "$file" | head -1 | cut -d= -f2 | tr ',' ' '); do
    add_module "$root" "$src" "$dep"
  done
}

image() {
  local dir=$1
  local bin=$PWD/build/tools/txbatch
  [[ -z ${TXBATCH_BIN:-} ]] || bin=$(cd "$here" && realpath -m "$TXBATCH_BIN")
  [[ -x $bin ]] || die "build txbatch first (meson setup build && ninja -C build)"
  command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86 is not installed (scripts/setup.sh)"
  [[ -x /bin/busybox ]] || die "busybox-static is not installed (scripts/setup.sh)"
  mkdir -p "$dir"
  kernel "$dir"
  local root=$dir/root
  rm -rf "$root"
  mkdir -p "$root"/{usr/bin,usr/sbin,usr/lib,usr/lib64,proc,sys,dev,tmp,run,etc,mnt,var}
  ln -s ../run "$root/var/run"
  ln -s usr/bin "$root/bin"
  ln -s usr/sbin "$root/sbin"
  ln -s usr/lib "$root/lib"
  ln -s usr/lib64 "$root/lib64"
  cp /bin/busybox "$root/usr/bin/busybox"
  cp "$bin" "$root/usr/bin/txbatch"
  add_libs "$root" "$bin"
  # More programs for the guest's jobs (the vm suite adds tests/hw/hw_tests), by their names.
  local extra
  for extra in ${TXBATCH_VM_BINS:-}; do
    [[ -x $extra ]] || die "TXBATCH_VM_BINS names $extra, which is not an executable"
    cp "$extra" "$root/usr/bin/$(basename "$extra")"
    add_libs "$root" "$extra"
  done
  # DPDK's plugins: EAL loads every *.so / *.so.23.0 in its plugin folder, so only these go in.
  local pmds=/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0 p
  for p in bus_pci bus_vdev net_e1000 net_virtio mempool_ring mempool_stack; do
    add_with_libs "$root" "$pmds/librte_$p.so"
    add_path "$root" "$pmds/librte_$p.so.23.0"
  done
  # libibverbs and the rxe provider, for verbs on soft RoCE.
  if [[ -f /etc/libibverbs.d/rxe.driver ]]; then
    add_path "$root" /etc/libibverbs.d/rxe.driver
    for p in /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so; do
      [[ -e $p ]] && add_with_libs "$root" "$p"
    done
  fi
  for p in /usr/bin/ibv_devinfo /usr/bin/ibv_ud_pingpong /usr/bin/rdma; do
    [[ -x $p ]] && add_with_libs "$root" "$p"
  done
  # iproute2's tc and ss and ethtool, Debian's (scripts/setup.sh installs them), for the kernel's
  # own runs: busybox has neither a tc that shows statistics nor an ss.
  for p in /usr/sbin/tc /usr/bin/ss /usr/sbin/ethtool; do
    [[ -x $p ]] || die "$p is missing (iproute2, ethtool: scripts/setup.sh)"
    add_with_libs "$root" "$p"
  done
  local m
  for m in "${GUEST_MODULES[@]}"; do add_module "$root" "$dir/modules/$KVER" "$m"; done
  cp "$dir/modules/$KVER"/modules.{order,builtin} "$root/lib/modules/$KVER/" 2>/dev/null || true
  cp tests/vm/guest-init.sh "$root/init"
  chmod +x "$root/init"
  (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$dir/initramfs.cpio.gz.tmp"
  # Zeros to a 4-byte boundary: the kernel reads an uncompressed archive after it (the job) only
  # where it starts 4-byte aligned.
  truncate -s %4 "$dir/initramfs.cpio.gz.tmp"
  mv "$dir/initramfs.cpio.gz.tmp" "$dir/initramfs.cpio.gz"
  rm -rf "$root"
  echo "vm-lab: $dir/vmlinuz and $dir/initramfs.cpio.gz ($(du -h "$dir/initramfs.cpio.gz" | cut -f1))"
}

boot() {
  local dir=$1 job=$2 out=$3
  shift 3
  [[ ${1:-} == -- ]] && shift
  [[ -f $dir/initramfs.cpio.gz ]] || die "no image in $dir (scripts/vm-lab.sh image $dir)"
  [[ -f $job ]] || die "no job file $job"
  mkdir -p "$out"
  rm -f "$out/console.log" "$out/results.txt" "$out/exit"
  # The job rides in a second cpio archive after the image (the kernel unpacks both).
  local jobroot
  jobroot=$(mktemp -d)
  cp "$job" "$jobroot/job.sh"
  (cd "$jobroot" && echo job.sh | cpio -o -H newc --quiet) >"$out/job.cpio"
  rm -rf "$jobroot"
  cat "$dir/initramfs.cpio.gz" "$out/job.cpio" >"$out/initrd"
  rm -f "$out/job.cpio"
  local accel=(-accel tcg,thread=multi -cpu max)
  local rc=0
  timeout --foreground "${TXBATCH_VM_TIMEOUT:-300}" qemu-system-x86_64 "${accel[@]}" \
    -m "${TXBATCH_VM_MEM:-1024}" -smp "${TXBATCH_VM_CPUS:-2}" -nodefaults -no-user-config \
    -display none -monitor none -no-reboot \
    -kernel "$dir/vmlinuz" -initrd "$out/initrd" \
    -append "console=ttyS0 panic=-1 quiet loglevel=3 ${TXBATCH_VM_CMDLINE:-}" \
    -serial "file:$out/console.log" -serial "file:$out/results.txt" \
    "$@" || rc=$?
  rm -f "$out/initrd"
  if ((rc == 124)); then
    echo "vm-lab: the guest did not power off within ${TXBATCH_VM_TIMEOUT:-300} s" >&2
    return 1
  fi
  ((rc == 0)) || { echo "vm-lab: qemu exited with status $rc" >&2; return 1; }
  # The job's status, as the guest printed it last on its results port.
  local status
  status=$(tr -d '\r' <"$out/results.txt" | sed -n 's/^txbatch-vm-exit \([0-9]*\)$/\1/p' | tail -1)
  [[ -n $status ]] || { echo "vm-lab: the guest never finished its job (see $out/console.log)" >&2; return 1; }
  echo "$status" >"$out/exit"
  # Split results.txt into the files the job sent.
  tr -d '\r' <"$out/results.txt" | awk -v out="$out" '
    /^txbatch-vm-begin / { name = out "/" $2; printf "" > name; inside = 1; next }
    /^txbatch-vm-end$/ { close(name); inside = 0; next }
    inside { print >> name }'
  return 0
}

case ${1:-} in
  image)
    if [[ -n ${2:-} ]]; then image "$(cd "$here" && realpath -m "$2")"; else image "$PWD/build/vm"; fi
    ;;
  boot)
    (($# >= 4)) || die "usage: scripts/vm-lab.sh boot DIR JOB OUT -- QEMU-ARGS..."
    shift
    dir=$(cd "$here" && realpath -m "$1") job=$(cd "$here" && realpath -m "$2")
    out=$(cd "$here" && realpath -m "$3")
    shift 3
    boot "$dir" "$job" "$out" "$@"
    ;;
  *) die "usage: scripts/vm-lab.sh image [DIR] | boot DIR JOB OUT -- QEMU-ARGS..." ;;
esac
