#!/bin/busybox sh
# PID 1 of the soft-RoCE test VM (copied into the initramfs by scripts/setup.sh as /init).
# Loads the modules, makes the host root (9p, read-only) writable in RAM with overlayfs,
# mounts the results share, brings up rxe0 on dummy0, then runs the batch script that
# scripts/rxe-vm.sh left in the share, inside a chroot of the host root. Its exit status
# goes to the share as the marker the host reads; then the VM powers off.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev

R=/newroot/rdmaperf-results   # $RESULTS inside the chroot is /rdmaperf-results
fail() {
    echo "rxe-vm init: $*"
    [ -d $R/.vm ] && echo "$*" > $R/.vm/init-error
    sync
    poweroff -f
}

for m in $(cat /mods/order); do
    insmod /mods/$m.ko || fail "insmod $m failed"
done

o=trans=virtio,version=9p2000.L,msize=262144
# rdmaperf.root_cache=MODE on the kernel command line (rxe-vm.sh: RDMAPERF_VM_ROOT_CACHE) sets
# the host root's 9p cache mode; the results share is always uncached (the host reads it live).
rc_mode=$(sed -n 's/.*rdmaperf\.root_cache=\([a-z]*\).*/\1/p' /proc/cmdline)
mount -t 9p -o $o,ro${rc_mode:+,cache=$rc_mode} host /lower || fail "cannot mount the host root (9p tag 'host')"
mount -t tmpfs -o mode=755 upper /upper
mkdir -p /upper/u /upper/w
if ! mount -t overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w overlay /newroot; then
    # Without overlayfs: the read-only root plus a private /tmp.
    mount --bind /lower /newroot
    mount -t tmpfs tmp /newroot/tmp
fi
mkdir -p $R 2>/dev/null
mount -t 9p -o $o results $R || fail "cannot mount the results share (9p tag 'results')"
mount -t proc proc /newroot/proc
mount -t sysfs sys /newroot/sys
mount -t devtmpfs dev /newroot/dev
mkdir -p /newroot/dev/shm /newroot/dev/pts
mount -t tmpfs shm /newroot/dev/shm
mount -t devpts pts /newroot/dev/pts
mount -t tmpfs run /newroot/run

# rxe cannot bind lo: bind it to dummy0. Fixed MAC -> fixed link-local GID 0
# (fe80::ff:fe00:701); no DAD wait. 169.254.7.1 gives GID 1 for rdma_cm (perftest -R).
echo 0 > /proc/sys/net/ipv6/conf/dummy0/accept_dad
chroot /newroot /bin/sh -c '
    ip link set lo up &&
    ip link set dummy0 address 02:00:00:00:07:01 &&
    ip link set dummy0 up &&
    rdma link add rxe0 type rxe netdev dummy0 &&
    ip addr add 169.254.7.1/16 dev dummy0' || fail "rxe0 setup failed"
p=/sys/class/infiniband/rxe0/ports/1
i=0
until grep -q ACTIVE $p/state 2>/dev/null && [ "$(cat $p/gids/1 2>/dev/null)" = "0000:0000:0000:0000:0000:ffff:a9fe:0701" ]; do
    i=$((i + 1))
    [ $i -gt 100 ] && fail "rxe0 not ACTIVE with GIDs after 10 s: state $(cat $p/state 2>/dev/null)"
    sleep 0.1
done

# A serving VM (scripts/rxe-vm.sh --serve): run batches until told to stop. The loop is read
# from the host's repo at run time (so changing it does not rebuild this initramfs) and is
# sourced, so that it runs as PID 1, the one process a batch's clean-up never kills.
if [ -f $R/.vm/serve ]; then
    SERVE_REPO=$(cat $R/.vm/serve)
    . /lower$SERVE_REPO/scripts/vm-serve.sh
    echo 0 > $R/.vm/rc
    sync
    umount $R
    poweroff -f
fi

t1=$(cut -d' ' -f1 /proc/uptime)
chroot /newroot /bin/bash /rdmaperf-results/.vm/main.sh
rc=$?
t2=$(cut -d' ' -f1 /proc/uptime)
echo "boot_s=$t1 script_s=$(awk "BEGIN{print $t2 - $t1}")" > $R/.vm/times
echo $rc > $R/.vm/rc
sync
umount $R
poweroff -f
