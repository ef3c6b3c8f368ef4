//! A fabric rank SIGKILLed from outside (by its pid, the way a node's OOM
//! killer or an operator ends it) at several moments of a 6-rank serial
//! pairs run under plain `mpirun` in the soft-RoCE VM, each moment twice in
//! one boot: during set-up (MPI start and the endpoint exchange), mid-pair
//! (a member running its pair), between steps (a member idle, waiting for
//! the next go), and rank 0 mid-pair. Every run must end non-zero, name the
//! killed rank (rank 0's "stopped answering" line or mpirun's own report),
//! end within `--timeout` (+ slack for mpirun's teardown under TCG) of the
//! kill, and leave no rank running. The mid-pair, between-steps and root
//! moments again under `mpirun --enable-recovery`, which does not end the
//! job itself: every surviving rank must end non-zero (its own status,
//! recorded by an `sh` around it) within `--timeout` + slack of the kill,
//! the loss named (rank 0's line, or the others' "nothing from rank 0").

mod common;

#[cfg(not(feature = "mpi"))]
#[test]
fn fabric_kill_needs_the_mpi_feature() {
    println!("SKIPPED: built without the `mpi` feature (cargo test --all-features runs the fabric VM tests)");
}

#[cfg(feature = "mpi")]
mod with_mpi {
    use super::common::vm;

    /// --timeout of the runs, and what mpirun's teardown may add under TCG.
    const TIMEOUT_S: f64 = 10.0;
    const SLACK_S: f64 = 10.0;

    /// (case, victim rank, moment): the serial pairs plan of 6 ranks runs
    /// (0,5), (1,4), (2,3), ... one pair per step, so rank 4 pairs in step 2,
    /// rank 3 idles in steps 1 and 2, rank 0 pairs in step 1.
    const CASES: [(&str, usize, &str); 8] = [
        ("setup-a", 2, "setup"),
        ("setup-b", 4, "setup"),
        ("midpair-a", 4, "midpair"),
        ("midpair-b", 4, "midpair"),
        ("between-a", 3, "between"),
        ("between-b", 3, "between"),
        ("root-a", 0, "root"),
        ("root-b", 0, "root"),
    ];

    const SCRIPT: &str = r#"
hostname fabricvm   # Open MPI refuses the VM's "(none)"
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_pml=ob1 \
       OMPI_MCA_mtl=^ofi,psm,psm2 OMPI_MCA_coll=basic,libnbc,self OMPI_MCA_osc=pt2pt OMPI_MCA_io=^ompio,romio321
command -v mpirun > $RESULTS/mpirun.path || { echo "no mpirun" > $RESULTS/mpirun.path; exit 0; }
# The pid of rank $1's rdmaperf (its environment names its rank; not the sh around it), or nothing.
rank_pid() {
    for p in $(pgrep -f "$RDMAPERF_BIN fabric"); do
        [ "$(cat /proc/$p/comm 2>/dev/null)" = rdmaperf ] || continue
        tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo $p; return; }
    done
}
# Polls (at most $2 s) until command $1 succeeds.
until_() { local i=0; while [ $i -lt $(( $2 * 10 )) ]; do eval "$1" && return 0; sleep 0.1; i=$((i+1)); done; return 1; }
FAB="fabric write-bw -d rxe0 -x 0 -s 64 --pattern pairs --serial -D 2 --timeout 10"
# kr NAME RANK MOMENT [recovery]: a 6-rank serial pairs run, rank RANK SIGKILLed at MOMENT.
# With `recovery`, mpirun --enable-recovery leaves the job to the surviving ranks, each under
# sh recording its own status and end time (NAME.rankN: "rc time").
kr() {
    local name=$1 rank=$2 when=$3 out=$RESULTS/$1.out pid= k=
    if [ "${4:-}" = recovery ]; then
        timeout -k 5 150 mpirun --allow-run-as-root --oversubscribe --bind-to none --enable-recovery -np 6 \
            sh -c "$RDMAPERF_BIN $FAB; rc=\$?; echo \$rc \$(date +%s.%N) > $RESULTS/$name.rank\$OMPI_COMM_WORLD_RANK; exit \$rc" \
            > $out 2>&1 &
    else
        timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 6 \
            $RDMAPERF_BIN $FAB > $out 2>&1 &
    fi
    local mp=$!
    case $when in
        # As soon as the rank's process exists: MPI start and the exchange take seconds under TCG.
        setup) until_ '[ -n "$(rank_pid '$rank')" ]' 60 && sleep 0.5 ;;
        # One second into step 2 (rank 4's pair with rank 1): step 1's row is out.
        midpair) until_ "grep -q '^ *1  ' $out" 90 && sleep 1 ;;
        # Rank 3 idles in step 2: killed as rank 0 prints step 1 and sends the next go.
        between) until_ "grep -q '^ *1  ' $out" 90 ;;
        # Rank 0 one second into step 1 (its own pair with rank 5).
        root) until_ "grep -q 'client -> server' $out" 90 && sleep 1 ;;
    esac
    pid=$(rank_pid $rank)
    k=$(date +%s.%N)
    [ -n "$pid" ] && kill -9 $pid
    wait $mp; local rc=$?
    local e=$(date +%s.%N)
    sleep 0.5
    echo "$name rc=$rc pid=${pid:-none} kill=$k end=$e left=$(pgrep -c -f "$RDMAPERF_BIN fabric")" >> $RESULTS/kills
    pkill -9 -f "$RDMAPERF_BIN fabric" 2>/dev/null; sleep 0.2
}
"#;

    /// The same moments under `mpirun --enable-recovery`, which leaves a
    /// lost rank to the others: their own decisions end the job.
    const RECOVERY: [(&str, usize, &str); 3] = [
        ("r-midpair", 4, "midpair"),
        ("r-between", 3, "between"),
        ("r-root", 0, "root"),
    ];

    /// The plain-mpirun cases this run takes: each moment once (the `-a`
    /// cases); `RDMAPERF_KILL_REPEAT=1` adds the `-b` repeats (the whole set
    /// ran twice by hand: docs/fabric.md); `RDMAPERF_KILL_RECOVERY_ONLY=1`
    /// none (to rerun the recovery cases alone). Open MPI itself ends these
    /// runs, so once each keeps the suite's time for the recovery cases,
    /// where rdmaperf's own decisions end the job.
    fn plain_cases() -> impl Iterator<Item = (&'static str, usize, &'static str)> {
        let recovery_only = std::env::var_os("RDMAPERF_KILL_RECOVERY_ONLY").is_some();
        let repeat = std::env::var_os("RDMAPERF_KILL_REPEAT").is_some();
        CASES
            .into_iter()
            .filter(move |(name, _, _)| !recovery_only && (repeat || name.ends_with("-a")))
    }

    fn script() -> String {
        let mut s = SCRIPT.to_string();
        for (name, rank, when) in plain_cases() {
            s.push_str(&format!("kr {name} {rank} {when}\n"));
        }
        for (name, rank, when) in RECOVERY {
            s.push_str(&format!("kr {name} {rank} {when} recovery\n"));
        }
        s
    }

    /// `key=value` of a `kills` line.
    fn field<'a>(line: &'a str, key: &str) -> &'a str {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
            .unwrap_or("")
    }

    /// The moments above rest on the plan's order: (0,5), (1,4), (2,3) first.
    #[test]
    fn the_victims_pair_or_idle_where_the_cases_say() {
        use rdmaperf::fabric::pattern::{Direction, Pattern, Plan};
        let plan = Plan::new(Pattern::Pairs, 6, Direction::Uni, true).unwrap();
        let ranks = |i: usize| {
            let p = plan.pairs(i);
            assert_eq!(p.len(), 1, "serial: one pair per step");
            let mut v = [p[0].client, p[0].server];
            v.sort();
            v
        };
        assert_eq!([ranks(0), ranks(1), ranks(2)], [[0, 5], [1, 4], [2, 3]]);
    }

    #[test]
    fn fields_are_read_from_a_kills_line() {
        let l = "setup-a rc=137 pid=42 kill=10.5 end=12.25 left=0";
        assert_eq!(field(l, "rc"), "137");
        assert_eq!(field(l, "end"), "12.25");
        assert_eq!(field(l, "nope"), "");
    }

    #[test]
    fn a_killed_rank_ends_the_job_non_zero_within_the_timeout() {
        let Some(r) = vm::Batch::new()
            .bin(env!("CARGO_BIN_EXE_rdmaperf"))
            .timeout_s(1500)
            .run_or_skip(&script())
        else {
            return;
        };
        if r.mpirun_missing() {
            return;
        }
        let kills = r.expect_file("kills");
        println!("{kills}");
        let mut bad = Vec::new();
        for (name, rank, when) in plain_cases() {
            let out = r.expect_file(&format!("{name}.out"));
            let Some(line) = kills.lines().find(|l| l.starts_with(&format!("{name} "))) else {
                bad.push(format!("{name}: no result line"));
                continue;
            };
            let num = |k: &str| field(line, k).parse::<f64>().unwrap_or(f64::NAN);
            let took = num("end") - num("kill");
            println!("{name} ({when}, rank {rank}): {line}; ended {took:.2} s after the kill");
            let named = [
                format!("rank {rank} (fabricvm:rxe0) stopped answering"),
                format!("process rank {rank} with PID"),
            ];
            let why = if field(line, "pid") == "none" {
                "the rank's process was not found to kill".to_string()
            } else if field(line, "rc") == "0" {
                "exited 0 with a rank killed".to_string()
            } else if !named.iter().any(|n| out.contains(n.as_str())) {
                format!("rank {rank} not named")
            } else if took.is_nan() || took > TIMEOUT_S + SLACK_S {
                format!("ended {took:.2} s after the kill (--timeout {TIMEOUT_S})")
            } else if field(line, "left") != "0" {
                "ranks left running".to_string()
            } else {
                continue;
            };
            bad.push(format!("{name}: {why}: {line}\n{out}"));
        }
        for (name, rank, when) in RECOVERY {
            let out = r.expect_file(&format!("{name}.out"));
            let Some(line) = kills.lines().find(|l| l.starts_with(&format!("{name} "))) else {
                bad.push(format!("{name}: no result line"));
                continue;
            };
            let kill: f64 = field(line, "kill").parse().unwrap_or(f64::NAN);
            println!("{name} ({when}, rank {rank}, --enable-recovery): {line}");
            let named = if rank == 0 {
                "nothing from rank 0 for ".to_string()
            } else {
                format!("rank {rank} (fabricvm:rxe0) stopped answering")
            };
            let mut why = Vec::new();
            if field(line, "pid") == "none" {
                why.push("the rank's process was not found to kill".to_string());
            }
            if !out.contains(named.as_str()) {
                why.push(format!("no '{named}'"));
            }
            // mpirun's own status under --enable-recovery is printed, not
            // asserted: with every rank under an sh that exited 0 it was 0
            // (the sh's status, not the ranks'); the sh now passes the rank's on.
            println!("  mpirun --enable-recovery: status {}", field(line, "rc"));
            for other in (0..6).filter(|&o| o != rank) {
                let f = r.file(&format!("{name}.rank{other}")).unwrap_or("");
                let mut w = f.split_whitespace();
                let (rc, end) = (w.next().unwrap_or("?"), w.next().unwrap_or(""));
                let took = end.parse::<f64>().unwrap_or(f64::NAN) - kill;
                println!("  rank {other}: status {rc}, ended {took:.2} s after the kill");
                if rc == "0" || rc == "?" {
                    why.push(format!("rank {other} ended with status {rc}"));
                }
                if took.is_nan() || took > TIMEOUT_S + SLACK_S {
                    why.push(format!("rank {other} ended {took:.2} s after the kill"));
                }
            }
            if !why.is_empty() {
                bad.push(format!("{name}: {}: {line}\n{out}", why.join("; ")));
            }
        }
        assert!(bad.is_empty(), "{}", bad.join("\n---\n"));
    }
}
