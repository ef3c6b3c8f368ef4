# Helpers for batch scripts run inside the soft-RoCE VM by scripts/rxe-vm.sh.
# Source it from a case script:   . "$VM_LIB"    (or . scripts/vm-lib.sh; cwd is the repo)
#
#   pair NAME 'SERVER CMD' 'CLIENT CMD'
#       Runs the server, waits until it listens on $PORT, runs the client. Both commands are
#       eval'ed with $PORT set to a fresh TCP port (use single quotes so $PORT expands then).
#       Writes $RESULTS/NAME.{server,client}.{out,rc} (out = stdout+stderr) and NAME.time.
#       A failed client gets the server killed after PAIR_GRACE seconds (a perftest server
#       would otherwise wait forever). Returns 0 iff both sides exited 0.
#   single NAME 'CMD'       runs one command -> $RESULTS/NAME.{out,rc}
#   wait_port PORT [PID]    waits until a TCP listener on PORT shows (gives up when PID exits)
#   wait_cm_port PORT [PID] the same for an rdma_cm listener (-R servers)
#
# Knobs (set in the case script before use): PAIR_TIMEOUT (s per side, default 120),
# PAIR_BEFORE_CLIENT (a command eval'ed once the server listens, before the client starts;
# e.g. a relay that the client then connects to),
# PAIR_PORT (first port, default 18515), PAIR_GRACE (1), PAIR_CM_WAIT (3: rdma_cm servers,
# perftest -R/-z, do not listen on TCP; used only when the `rdma` tool is missing),
# WAIT_PORT_TIMEOUT (30).

: "${RESULTS:?vm-lib.sh: RESULTS is not set; run this inside scripts/rxe-vm.sh}"
PAIR_TIMEOUT=${PAIR_TIMEOUT:-120}
PAIR_GRACE=${PAIR_GRACE:-1}
PAIR_CM_WAIT=${PAIR_CM_WAIT:-3}
WAIT_PORT_TIMEOUT=${WAIT_PORT_TIMEOUT:-30}
_vm_next_port=${PAIR_PORT:-18515}

_vm_now() { cut -d' ' -f1 /proc/uptime; }

# _vm_wait_listen WHO PORT PID WHAT CHECK...: polls CHECK until it succeeds; fails naming WHO
# when process PID (if given) exits first, or after WAIT_PORT_TIMEOUT seconds.
_vm_wait_listen() {
    local who=$1 port=$2 pid=$3 what=$4 deadline
    shift 4
    deadline=$(awk "BEGIN{print $(_vm_now) + $WAIT_PORT_TIMEOUT}")
    while :; do
        "$@" && return 0
        if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
            echo "$who: process $pid exited before port $port listened" >&2
            return 1
        fi
        if awk "BEGIN{exit !($(_vm_now) > $deadline)}"; then
            echo "$who: $what on port $port after ${WAIT_PORT_TIMEOUT}s" >&2
            return 1
        fi
        sleep 0.05
    done
}

_vm_tcp_listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
_vm_cm_listening() { rdma res show cm_id 2>/dev/null | grep -q "state LISTEN .*src-addr [0-9.]*:$1\b"; }

wait_port() { # PORT [PID]
    _vm_wait_listen wait_port "$1" "${2:-}" "nothing listens" _vm_tcp_listening "$1"
}

# Like wait_port for an rdma_cm listener (perftest/rdmaperf -R listen through the RDMA CM,
# not TCP): `rdma res show cm_id` lists it; without the rdma tool, a fixed PAIR_CM_WAIT.
wait_cm_port() { # PORT [PID]
    if ! command -v rdma >/dev/null; then sleep "$PAIR_CM_WAIT"; return 0; fi
    _vm_wait_listen wait_cm_port "$1" "${2:-}" "no rdma_cm listener" _vm_cm_listening "$1"
}

# Starts one side in the background: its pid in $_vm_pid. Line-buffered so a killed side
# still leaves its output.
_vm_start() { # NAME SIDE CMD
    timeout -k 5 "$PAIR_TIMEOUT" stdbuf -oL -eL bash -c "$3" > "$RESULTS/$1.$2.out" 2>&1 &
    _vm_pid=$!
}

_vm_finish() { # NAME SIDE PID -> writes rc file, returns the rc
    local rc=0
    wait "$3" || rc=$?
    echo "$rc" > "$RESULTS/$1.$2.rc"
    return "$rc"
}

pair() {
    local name=$1 scmd=$2 ccmd=$3 t0 spid cpid src crc
    export PORT=$_vm_next_port
    _vm_next_port=$((_vm_next_port + 1))
    t0=$(_vm_now)
    _vm_start "$name" server "$scmd"; spid=$_vm_pid
    # Variables in the command ($O ...) are expanded to look for the rdma_cm flags.
    case " $(eval echo "$scmd") " in
        *" -R "*|*" --rdma_cm "*|*" -z "*|*" --comm_rdma_cm "*)
            wait_cm_port "$PORT" "$spid" 2>>"$RESULTS/$name.server.out" ;;
        *) wait_port "$PORT" "$spid" 2>>"$RESULTS/$name.server.out" ;;
    esac
    if [ -n "${PAIR_BEFORE_CLIENT:-}" ]; then eval "$PAIR_BEFORE_CLIENT"; fi
    _vm_start "$name" client "$ccmd"; cpid=$_vm_pid
    _vm_finish "$name" client "$cpid"; crc=$?
    if [ "$crc" != 0 ] && kill -0 "$spid" 2>/dev/null; then
        sleep "$PAIR_GRACE"
        kill "$spid" 2>/dev/null
    fi
    _vm_finish "$name" server "$spid"; src=$?
    awk "BEGIN{printf \"%.2f\n\", $(_vm_now) - $t0}" > "$RESULTS/$name.time"
    echo "pair $name: server rc=$src client rc=$crc ($(cat "$RESULTS/$name.time") s)"
    [ "$src" = 0 ] && [ "$crc" = 0 ]
}

single() {
    local name=$1 rc=0
    timeout -k 5 "$PAIR_TIMEOUT" bash -c "$2" > "$RESULTS/$name.out" 2>&1 || rc=$?
    echo "$rc" > "$RESULTS/$name.rc"
    echo "single $name: rc=$rc"
    return "$rc"
}

# DEV: wait until GID 0 is set (a veth's IPv6 link-local address, after DAD); 10 s at most.
gid0_ready() {
    local i g
    for i in $(seq 50); do
        g=$(cat /sys/class/infiniband/$1/ports/1/gids/0 2>/dev/null)
        [ -n "$g" ] && [ "$g" != 0000:0000:0000:0000:0000:0000:0000:0000 ] && return 0
        sleep 0.2
    done
    return 1
}
