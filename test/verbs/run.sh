#!/usr/bin/env bash
# run.sh runs weft over verbs;ofi_rxm between two QEMU virtual machines
# joined on this machine's loopback, each with a Soft-RoCE device (rdma_rxe
# on its virtio NIC): real two-node RDMA verbs, emulated in software. It is
# the opt-in target `make test-verbs`; it needs root and takes minutes
# (QEMU without KVM).
#
#   test/verbs/run.sh [OUTDIR]
#
# What it does:
#   1. installs qemu-system-x86, busybox-static and kmod if missing, and
#      downloads Debian 12's kernel package (linux-image-$KVER, ~70 MB,
#      kept in $WEFT_VERBS_CACHE, default /var/cache/weft-verbs);
#   2. builds fabrun, hello and test/cluster/hybrid, and an initramfs of
#      busybox plus the kernel modules (virtio, 9p, rdma_rxe, rdma_cm...)
#      in dependency order;
#   3. boots two VMs (TCG, 1 vCPU, 1 GiB each). Each mounts this machine's
#      root file system read-only over 9p and chroots into it, so the
#      guests use this machine's libfabric, sshd and the binaries; sets
#      eth0 to 10.213.9.N, adds rxe0 on it and starts sshd;
#   4. on VM 1: fabrun --launcher ssh over both VMs, 4 ranks, 2 per VM,
#      no provider named: hello (fabric directly) must choose
#      verbs;ofi_rxm by itself (FI_UNIVERSE_SIZE from the job size) and
#      pass its ring; hybrid (endpoints, typed messages, collectives,
#      windows) must run on verbs;ofi_rxm too, its endpoints in
#      match-header mode (verbs;ofi_rxm grants 4 bytes of remote CQ data,
#      the match word takes 8), and pass. It prints each guest's log and
#      exits 0 when all of that held.
#
# Environment: KVER (default 6.1.0-56-amd64), WEFT_VERBS_TIMEOUT (seconds
# for the VMs, default 900), WEFT_VERBS_CACHE.
set -euo pipefail

KVER=${KVER:-6.1.0-56-amd64}
CACHE=${WEFT_VERBS_CACHE:-/var/cache/weft-verbs}
TIMEOUT=${WEFT_VERBS_TIMEOUT:-900}
root=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "test-verbs: needs root (QEMU's 9p export of /, the rxe set-up in the guests)" >&2; exit 1; }

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[ -x /bin/busybox ] || need+=(busybox-static)
command -v depmod >/dev/null || need+=(kmod)
if [ ${#need[@]} -gt 0 ]; then
	echo "test-verbs: installing ${need[*]}" >&2
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
for t in ssh sshd ssh-keygen rdma; do
	command -v $t >/dev/null || [ -x /usr/sbin/$t ] || { echo "test-verbs: $t missing (openssh-server, openssh-client, iproute2)" >&2; exit 1; }
done

mkdir -p "$CACHE"
kdir="$CACHE/linux-$KVER"
if [ ! -f "$kdir/boot/vmlinuz-$KVER" ]; then
	(cd "$CACHE" && apt-get download "linux-image-$KVER" >/dev/null)
	rm -rf "$kdir"
	dpkg-deb -x "$CACHE"/linux-image-"$KVER"_*.deb "$kdir"
	depmod -b "$kdir" "$KVER"
fi

work=$(mktemp -d /tmp/weft-verbs.XXXXXX)
out=${1:-$work/out}
mkdir -p "$out" "$work/build" "$work/initrd"
chmod 755 "$work" "$work/build"
ok=0
cleanup() {
	for p in $(cat "$work"/qemu*.pid 2>/dev/null); do kill "$p" 2>/dev/null || true; done
	if [ $ok = 1 ]; then
		rm -rf "$work"
	else
		rm -rf "$work/initrd" "$work/build" "$work"/*.gz
		echo "test-verbs: logs kept in $work" >&2
	fi
}
trap cleanup EXIT

echo "test-verbs: building" >&2
(cd "$root" && go build -o "$work/build/" ./cmd/fabrun ./examples/hello ./test/cluster/hybrid)
ssh-keygen -q -t ed25519 -N '' -f "$work/build/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$work/build/id"
chmod 644 "$work/build/id"
cat >"$work/build/sshd_config" <<CONF
Port 22
HostKey /mnt/build/host_key
PidFile /run/sshd.pid
AuthorizedKeysFile /mnt/build/id.pub
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
CONF
cat >"$work/build/ssh_config" <<CONF
Host *
  User root
  IdentityFile /tmp/id
  BatchMode yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
CONF

# The guest script: run inside the chroot of this machine's root.
cat >"$work/build/guest.sh" <<'GUEST'
#!/bin/sh
# $1: VM number (1 or 2)
n=$1
o=/mnt/out
log() { echo "vm$n: $*"; }
hostname vm$n
ip link set lo up
ip link set eth0 up
ip addr add 10.213.9.$n/24 dev eth0
rdma link add rxe0 type rxe netdev eth0 || { log "rdma link add failed"; exit 1; }
ibv_devices 2>/dev/null || true
mkdir -p /run/sshd && chmod 755 /run/sshd
cp /mnt/build/id /tmp/id && chmod 600 /tmp/id
/usr/sbin/sshd -f /mnt/build/sshd_config -E /tmp/sshd.log || { log "sshd failed"; exit 1; }
if [ "$n" = 2 ]; then
	log "ready"
	touch $o/vm2.ready
	while [ ! -e $o/vm1.done ]; do sleep 1; done
	exit 0
fi
while [ ! -e $o/vm2.ready ]; do sleep 1; done
log "both VMs up"
ssh="ssh -F /mnt/build/ssh_config"
$ssh 10.213.9.2 hostname || log "ssh to vm2 failed"
fi_info -p 'verbs;ofi_rxm' -t FI_EP_RDM 2>&1 | head -5
rc=0
for prog in hello hybrid; do
	log "fabrun $prog, no provider named"
	if /mnt/build/fabrun --launcher ssh --ssh "$ssh" --hosts 10.213.9.1:2,10.213.9.2:2 -n 4 --pmi-host 10.213.9.1 \
		--timeout 600s --tag-output --env WEFT_LOG_LEVEL=debug /mnt/build/$prog >$o/$prog.out 2>$o/$prog.err; then
		log "$prog passed"
	else
		log "$prog FAILED ($?)"; rc=1
	fi
	cat $o/$prog.out
	grep -h "selected provider\|provider fallback\|WARN\|ERROR" $o/$prog.err | cut -c1-300 | head -8
done
# hello (fabric directly) and hybrid (endpoint) must both run on
# verbs;ofi_rxm; it grants 4 bytes of remote CQ data, so endpoint carries
# its match word in a header (match_header=true in the world's debug line).
grep -q 'selected provider: info="verbs;ofi_rxm' $o/hello.err || { log "hello did not select verbs;ofi_rxm"; rc=1; }
grep -q 'world up.*verbs;ofi_rxm.*match_header=true' $o/hybrid.err &&
	grep -q 'hybrid ok .*provider verbs;ofi_rxm' $o/hybrid.out || { log "hybrid did not run its endpoints on verbs;ofi_rxm in match-header mode"; rc=1; }
echo $rc >$o/result
touch $o/vm1.done
GUEST
chmod 755 "$work/build/guest.sh"

# initramfs: busybox, the modules in dependency order, /init.
mods="crc32_generic virtio_pci 9p 9pnet_virtio virtio_net rdma_rxe rdma_ucm ib_uverbs"
order=$(for m in $mods; do modprobe -d "$kdir" -S "$KVER" --show-depends "$m"; done | awk '$1=="insmod"{print $2}' | awk '!seen[$0]++')
mkdir -p "$work/initrd"/{bin,mod,proc,sys,dev,host}
cp /bin/busybox "$work/initrd/bin/"
for f in $order; do
	case $f in
	*.ko.xz) xz -dc "$f" >"$work/initrd/mod/$(basename "${f%.xz}")" ;;
	*) cp "$f" "$work/initrd/mod/" ;;
	esac
	echo "$(basename "${f%.xz}")" >>"$work/initrd/mod/order"
done
cat >"$work/initrd/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $(cat /mod/order); do insmod /mod/$m 2>/dev/null; done
n=$(sed 's/.*weftvm=\([0-9]\).*/\1/' /proc/cmdline)
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 hostroot /host
mount -t proc proc /host/proc; mount -t sysfs sys /host/sys; mount -t devtmpfs dev /host/dev
mkdir -p /host/dev/shm
for d in tmp run root dev/shm mnt; do mount -t tmpfs tmpfs /host/$d; done
mkdir -p /host/mnt/build /host/mnt/out
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 build /host/mnt/build
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none out /host/mnt/out
chroot /host /bin/sh /mnt/build/guest.sh $n >/host/mnt/out/vm$n.log 2>&1
sync
echo o >/proc/sysrq-trigger
INIT
chmod 755 "$work/initrd/init"
(cd "$work/initrd" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1 >"$work/initrd.gz")

port=$((20000 + RANDOM % 20000))
vm() { # vm N NETDEV
	timeout "$TIMEOUT" qemu-system-x86_64 -accel tcg -cpu max -smp 1 -m 1024 -nographic -no-reboot -monitor none \
		-serial file:"$work/console$1.log" -kernel "$kdir/boot/vmlinuz-$KVER" -initrd "$work/initrd.gz" \
		-append "console=ttyS0 rdinit=/init panic=-1 loglevel=4 weftvm=$1" \
		-netdev "$2" -device virtio-net-pci,netdev=n0,mac=52:54:00:12:34:0$1 \
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
		-virtfs local,path="$work/build",mount_tag=build,security_model=none,readonly=on \
		-virtfs local,path="$out",mount_tag=out,security_model=none \
		-pidfile "$work/qemu$1.pid"
}
echo "test-verbs: booting two VMs (TCG; this takes minutes)" >&2
start=$SECONDS
vm 2 "socket,id=n0,listen=127.0.0.1:$port" &
v2=$!
sleep 2
vm 1 "socket,id=n0,connect=127.0.0.1:$port" &
v1=$!
wait $v1 || true
wait $v2 || true
echo "test-verbs: VMs done after $((SECONDS - start)) s" >&2
for f in vm1.log vm2.log; do echo "== $f"; cat "$out/$f" 2>/dev/null || echo "(none)"; done
if [ "$(cat "$out/result" 2>/dev/null)" != 0 ]; then
	echo "== console of VM 1"; tail -30 "$work/console1.log" 2>/dev/null || true
	echo "test-verbs: FAILED (outputs in $out)" >&2
	exit 1
fi
ok=1
echo "test-verbs: hello and hybrid (endpoints in match-header mode) passed over verbs;ofi_rxm between two VMs" >&2
