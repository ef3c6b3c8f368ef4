#!/bin/bash
# Puts the serving VM's network back as scripts/vm-init.sh left it at boot, after a batch
# (scripts/vm-serve.sh runs it in the batch's root, once the batch's processes are gone):
# no namespace, no link but lo and dummy0, no qdisc on dummy0, dummy0's IPv4 address
# 169.254.7.1/16 alone, rxe0 alone on dummy0 (added again if a batch deleted it), ACTIVE with
# GID 0 = fe80::ff:fe00:701 and GID 1 = ::ffff:169.254.7.1, and no huge pages reserved.
# Exit 1, naming what differs, when that state cannot be restored.
#
# Most batches change none of it, and a process start costs ~0.3 s under TCG: the state is
# first read with shell builtins only (sysfs, /proc), and the tools run only when it differs.
set -u
shopt -s nullglob

GID0=fe80:0000:0000:0000:0000:00ff:fe00:0701
GID1=0000:0000:0000:0000:0000:ffff:a9fe:0701
P=/sys/class/infiniband/rxe0/ports/1

# untouched: the boot state, read without starting a process. An IPv4 or global IPv6 address
# added to dummy0 shows as GID 2 on rxe0 (rxe mirrors dummy0's addresses into its GID table).
untouched() {
    local ns=(/run/netns/*) nets=(/sys/class/net/*) ibs=(/sys/class/infiniband/*) v
    [ ${#ns[@]} = 0 ] || return 1
    [ "${nets[*]}" = "/sys/class/net/dummy0 /sys/class/net/lo" ] || return 1
    [ "${ibs[*]}" = /sys/class/infiniband/rxe0 ] || return 1
    read -r v < $P/state && [[ $v == *ACTIVE* ]] || return 1
    read -r v < $P/gids/0 && [ "$v" = $GID0 ] || return 1
    read -r v < $P/gids/1 && [ "$v" = $GID1 ] || return 1
    read -r v < $P/gids/2 && [ "$v" = 0000:0000:0000:0000:0000:0000:0000:0000 ] || return 1
    read -r v < /sys/class/net/dummy0/mtu && [ "$v" = 1500 ] || return 1
    read -r v < /proc/sys/vm/nr_hugepages && [ "$v" = 0 ] || return 1
}
untouched && exit 0

links() { ip -o link show | awk -F': ' '{sub(/@.*/, "", $2); print $2}'; }
rdma_links() { rdma link show 2>/dev/null | awk '{sub(/\/.*/, "", $2); print $2}'; }

ip -all netns delete 2>/dev/null
for l in $(links); do
    case $l in lo | dummy0) ;; *) ip link del "$l" 2>/dev/null ;; esac
done
tc qdisc del dev dummy0 root 2>/dev/null
tc qdisc del dev dummy0 ingress 2>/dev/null
# rxe on a veth that lived in a namespace goes when the namespace does (asynchronously).
for _ in $(seq 50); do
    [ -z "$(rdma_links | grep -vx rxe0)" ] && break
    sleep 0.1
done
for d in $(rdma_links | grep -vx rxe0); do rdma link delete "$d"; done
ip link set dummy0 mtu 1500 up
for a in $(ip -4 -o addr show dev dummy0 | awk '{print $4}' | grep -vx 169.254.7.1/16); do
    ip addr del "$a" dev dummy0
done
ip -4 -o addr show dev dummy0 | grep -q ' 169.254.7.1/16 ' || ip addr add 169.254.7.1/16 dev dummy0
rdma_links | grep -qx rxe0 || rdma link add rxe0 type rxe netdev dummy0
echo 0 > /proc/sys/vm/nr_hugepages

state() {
    local why=()
    [ -z "$(ip netns list)" ] || why+=("namespaces: $(ip netns list | tr '\n' ' ')")
    [ "$(links | sort | tr '\n' ' ')" = "dummy0 lo " ] || why+=("links: $(links | tr '\n' ' ')")
    [ "$(rdma_links | tr '\n' ' ')" = "rxe0 " ] || why+=("rdma links: $(rdma_links | tr '\n' ' ')")
    grep -q ACTIVE $P/state 2>/dev/null || why+=("rxe0 state: $(cat $P/state 2>/dev/null)")
    [ "$(cat $P/gids/0 2>/dev/null)" = $GID0 ] || why+=("rxe0 GID 0: $(cat $P/gids/0 2>/dev/null)")
    [ "$(cat $P/gids/1 2>/dev/null)" = $GID1 ] || why+=("rxe0 GID 1: $(cat $P/gids/1 2>/dev/null)")
    [ ${#why[@]} = 0 ] && return 0
    printf '%s\n' "${why[@]}"
    return 1
}

for _ in $(seq 100); do
    state > /dev/null && exit 0
    sleep 0.1
done
echo "vm-reset.sh: the VM's boot state could not be restored after a batch:"
state
exit 1
