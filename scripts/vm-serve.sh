# The serving VM's loop (busybox sh), sourced by scripts/vm-init.sh as PID 1 once rxe0 is up
# and the results share ($R) holds .vm/serve (scripts/rxe-vm.sh --serve DIR).
#
# The host (scripts/vm-job.sh) drops a batch as $R/jobs/TAG (renamed into place whole); this
# loop takes the oldest, moves it to $R/run/TAG, and runs its .vm/main.sh as a fresh boot
# would: in a new in-RAM overlay over the host's root, with TAG's directory as
# /rdmaperf-results, in the foreground (signal dispositions as at boot), killed after
# .vm/timeout seconds. Then every process but this one is
# killed, the network is put back as booted (scripts/vm-reset.sh), and the batch's root is
# unmounted. Markers written into TAG/.vm: console (the batch's output), times, rc, reset.
# A reset that cannot restore the boot state writes $R/.vm/broken and ends the loop (the VM
# powers off and later batches boot their own).

J=/job
mkdir -p $J/upper $J/root

serve_now() { cut -d' ' -f1 /proc/uptime; }

# serve_mount DIR: the batch's root, as vm-init.sh builds /newroot.
serve_mount() {
    mount -t tmpfs -o mode=755 jobupper $J/upper || return 1
    mkdir -p $J/upper/u $J/upper/w
    if ! mount -t overlay -o lowerdir=/lower,upperdir=$J/upper/u,workdir=$J/upper/w overlay $J/root; then
        mount --bind /lower $J/root || return 1
        mount -t tmpfs tmp $J/root/tmp
    fi
    mkdir -p $J/root/rdmaperf-results 2>/dev/null
    mount --bind "$1" $J/root/rdmaperf-results || return 1
    mount -t proc proc $J/root/proc
    mount -t sysfs sys $J/root/sys
    mount -t devtmpfs dev $J/root/dev
    mkdir -p $J/root/dev/shm $J/root/dev/pts
    mount -t tmpfs shm $J/root/dev/shm
    mount -t devpts pts $J/root/dev/pts
    mount -t tmpfs run $J/root/run
}

# serve_umount: everything under the batch's root, deepest first.
serve_umount() {
    for m in $(awk -v r="$J/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do
        umount "$m" 2>/dev/null || umount -l "$m"
    done
}

# serve_run DIR: runs one batch; leaves its status in DIR/.vm/rc.
serve_run() {
    d=$1
    limit=$(cat "$d/.vm/timeout" 2>/dev/null || echo 1800)
    if ! serve_mount "$d"; then
        echo "rxe-vm serve: cannot build the batch's root" > "$d/.vm/init-error"
        serve_umount
        return
    fi
    t1=$(serve_now)
    # In the foreground, as at boot: a background job of a non-interactive shell starts with
    # SIGINT and SIGQUIT ignored, and every process of the batch would inherit that (a stock
    # perftest stopped with SIGINT would spin on). busybox's timeout execs the batch itself and
    # kills it from a watcher process.
    timeout -s KILL "$limit" chroot $J/root /bin/bash /rdmaperf-results/.vm/main.sh > "$d/.vm/console" 2>&1
    rc=$?
    if awk -v a="$t1" -v b="$(serve_now)" -v l="$limit" 'BEGIN{exit !(b - a >= l)}'; then
        echo "rxe-vm serve: the batch ran past ${limit}s (RDMAPERF_VM_TIMEOUT) and was killed" >> "$d/.vm/console"
        rc=124
    fi
    t2=$(serve_now)
    # What the batch started and left running goes with it, as at power-off.
    kill -9 -1 2>/dev/null
    sleep 0.2
    if ! chroot $J/root /bin/bash "$SERVE_REPO/scripts/vm-reset.sh" > "$d/.vm/reset" 2>&1; then
        cp "$d/.vm/reset" $R/.vm/broken
    fi
    serve_umount
    echo "boot_s=0 script_s=$(awk "BEGIN{print $t2 - $t1}")" > "$d/.vm/times"
    echo $rc > "$d/.vm/rc"
    sync
}

echo "up_s=$(serve_now)" > $R/.vm/ready
while [ ! -f $R/.vm/stop ] && [ ! -f $R/.vm/broken ]; do
    tag=$(ls $R/jobs 2>/dev/null | grep -v '\.new$' | sort | head -n 1)
    if [ -z "$tag" ]; then
        sleep 0.2
        continue
    fi
    mv "$R/jobs/$tag" "$R/run/$tag" || continue
    serve_run "$R/run/$tag"
done
