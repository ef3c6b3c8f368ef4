//! `rdmaperf fabric` under `mpirun` in the soft-RoCE VM (one boot for the
//! whole file): every pattern for write-bw and write-lat on 4 and 5 ranks
//! sharing rxe0, the JSON / CSV / heatmap read back and checked pair by pair
//! against the pattern's plan, `--expect-bw` both ways, a rank killed mid-step
//! and SIGTERM to every rank (scancel).

mod common;

#[cfg(not(feature = "mpi"))]
#[test]
fn fabric_needs_the_mpi_feature() {
    println!("SKIPPED: built without the `mpi` feature (cargo test --all-features runs the fabric VM tests)");
}

#[cfg(feature = "mpi")]
mod with_mpi {
    use super::common::{fabric_steps, vm};
    use rdmaperf::fabric::heatmap;
    use rdmaperf::fabric::pattern::{Direction, Pair, Pattern, Plan};
    use serde_json::Value;
    use std::collections::BTreeSet;
    use std::sync::OnceLock;

    static BATCH: OnceLock<vm::BatchResult> = OnceLock::new();

    /// (case name, ranks, tool, pattern flags, plan).
    fn cases() -> Vec<(String, usize, &'static str, &'static str, Pattern, bool)> {
        let mut v = Vec::new();
        for np in [4usize, 5] {
            for tool in ["write-bw", "write-lat"] {
                for (tag, flags, pat, serial) in [
                    ("pairs", "--pattern pairs", Pattern::Pairs, false),
                    ("serial", "--pattern pairs --serial", Pattern::Pairs, true),
                    (
                        "bisection",
                        "--pattern bisection",
                        Pattern::Bisection,
                        false,
                    ),
                    ("incast", "--pattern incast 2", Pattern::Incast(2), false),
                    ("alltoall", "--pattern alltoall", Pattern::AllToAll, false),
                ] {
                    v.push((format!("{tool}-{tag}-{np}"), np, tool, flags, pat, serial));
                }
            }
        }
        v
    }

    fn script() -> String {
        let mut s = String::from(
            r#"
hostname fabricvm   # Open MPI refuses the VM's "(none)"
# Shared memory between the ranks of this one host; no network fabric components.
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_pml=ob1 \
       OMPI_MCA_mtl=^ofi,psm,psm2 OMPI_MCA_coll=basic,libnbc,self OMPI_MCA_osc=pt2pt OMPI_MCA_io=^ompio,romio321
command -v mpirun > $RESULTS/mpirun.path || { echo "no mpirun" > $RESULTS/mpirun.path; exit 0; }
MPI="timeout -k 5 400 mpirun --allow-run-as-root --oversubscribe --bind-to none"
fab() { # NAME NP TOOL FLAGS...
    local name=$1 np=$2 tool=$3 n=40; shift 3
    [ $tool = write-lat ] && n=20
    local s=$(date +%s.%N)
    $MPI -np $np $RDMAPERF_BIN fabric $tool -d rxe0 -x 0 -s 64 -n $n --timeout 30 "$@" \
        --out_json_file=$RESULTS/$name.json --csv $RESULTS/$name.csv --heatmap $RESULTS/$name.svg \
        > $RESULTS/$name.out 2>&1
    echo $? > $RESULTS/$name.rc
    echo "$name $(echo "$(date +%s.%N) - $s" | bc)" >> $RESULTS/times
}
"#,
        );
        // RDMAPERF_FABRIC_FAULTS_ONLY=1: only the fault cases (to rerun those alone).
        let faults_only = std::env::var_os("RDMAPERF_FABRIC_FAULTS_ONLY").is_some();
        for (name, np, tool, flags, _, _) in cases().into_iter().filter(|_| !faults_only) {
            let extra = if name == "write-bw-bisection-4" {
                " --expect-bw 0.000001"
            } else {
                ""
            };
            s.push_str(&format!("fab {name} {np} {tool} {flags}{extra}\n"));
        }
        let fake = crate::common::fake_cuda::fake_cuda_dir(false);
        s.push_str(
            &r#"
fab expect-high 4 write-bw --pattern bisection --expect-bw 1000000
# GPU memory against the project's fake libcuda (host memory posing as two GPUs, peer-memory
# path): each local rank its CUDA ordinal; `auto` on rxe (no PCIe place) is refused.
FAKE="-x LD_LIBRARY_PATH=@FAKE@ -x FAKE_CUDA_DEVICES=2"
MPI="$MPI $FAKE" fab gpu-list 2 write-bw --use_cuda 1,0
MPI="$MPI $FAKE" fab gpu-auto 2 write-bw --use_cuda auto
fab explain 4 write-bw --pattern bisection --explain
# A rank killed (SIGKILL, by itself: the binary's test hook RDMAPERF_FABRIC_SIGNAL) 1 s into
# step 2; mpirun --enable-recovery keeps the others running.
s=$(date +%s.%N)
# Each rank under sh, which records the rank's own exit status: with --enable-recovery
# mpirun's status says nothing about its ranks.
RDMAPERF_FABRIC_SIGNAL=3:2:9:1000 $MPI --enable-recovery -x RDMAPERF_FABRIC_SIGNAL -np 4 sh -c \
    "$RDMAPERF_BIN fabric write-bw -d rxe0 -x 0 -s 64 -D 4 --timeout 6 --out_json_file=$RESULTS/kill.json; \
     echo \$? > $RESULTS/kill.rank\$OMPI_COMM_WORLD_RANK.rc" > $RESULTS/kill.out 2>&1
echo $? > $RESULTS/kill.rc
echo "total=$(echo "$(date +%s.%N) - $s" | bc)" > $RESULTS/kill.info
sleep 1; echo "left=$(pgrep -c -f 'rdmaperf fabric')" >> $RESULTS/kill.info
# A rank that stops answering: rank 3 SIGSTOPs itself as the last step (3 of 3) starts. Rank 0
# must name it within --timeout of its last sign of life and exit non-zero; mpirun then ends the
# job, the stopped rank included. Each line is stamped with its arrival time.
{ timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -x RDMAPERF_FABRIC_SIGNAL=3:3:19:0 \
    -np 4 $RDMAPERF_BIN fabric write-bw -d rxe0 -x 0 -s 64 -n 200 --timeout 5 \
    --out_json_file=$RESULTS/stop.json 2>&1; echo "rc=$?"; } \
    | while IFS= read -r l; do echo "$(date +%s.%N) $l"; done > $RESULTS/stop.out
sleep 1; echo "left=$(pgrep -c -f 'rdmaperf fabric')" > $RESULTS/stop.info
# SIGTERM to every rank 1 s into step 2 (what scancel does).
RDMAPERF_FABRIC_SIGNAL='*:2:15:1000' $MPI -x RDMAPERF_FABRIC_SIGNAL -np 4 $RDMAPERF_BIN fabric write-bw \
    -d rxe0 -x 0 -s 64 -D 4 --timeout 10 --out_json_file=$RESULTS/term.json > $RESULTS/term.out 2>&1
echo $? > $RESULTS/term.rc
sleep 1; echo "left=$(pgrep -c -f 'rdmaperf fabric')" > $RESULTS/term.info
"#
            .replace("@FAKE@", &fake.to_string_lossy()),
        );
        s
    }

    fn batch() -> Option<&'static vm::BatchResult> {
        let r = vm::shared_batch(&BATCH, env!("CARGO_BIN_EXE_rdmaperf"), 3000, script)?;
        if r.mpirun_missing() {
            return None;
        }
        if let Some(t) = r.file("times") {
            println!("fabric case times [s]:\n{t}");
        }
        Some(r)
    }

    /// Every pair of the plan, in every step, measured with positive values.
    fn check_case(
        r: &vm::BatchResult,
        name: &str,
        np: usize,
        tool: &str,
        pat: Pattern,
        serial: bool,
    ) {
        let out = r.expect_file(&format!("{name}.out"));
        assert_eq!(
            r.expect_file(&format!("{name}.rc")).trim(),
            "0",
            "{name}: exit status\n{out}"
        );
        let v = r.json(name);
        let plan = Plan::new(pat, np, Direction::Uni, serial).unwrap();
        assert_eq!(v["complete"], true, "{name}");
        assert_eq!(v["ranks"].as_array().unwrap().len(), np, "{name}");
        let lat = tool.ends_with("-lat");
        // perftest's JSON keeps 2 decimals of BW_average: under TCG a slow alltoall
        // pair can round to 0.00 MB/sec; its message rate (6 decimals) must be > 0.
        fabric_steps::check_steps(&v, &plan, name, out, |ok| {
            if lat {
                ok["lat"]["t_typical"].as_f64().unwrap_or(-1.0) > 0.0
            } else {
                ok["bw"].as_f64().unwrap_or(-1.0) >= 0.0
            }
        });
        // The matrix: exactly the plan's ordered pairs have a value.
        let all: BTreeSet<Pair> = (0..plan.steps()).flat_map(|i| plan.pairs(i)).collect();
        let rows = v["matrix"]["values"].as_array().unwrap();
        assert_eq!(rows.len(), np);
        for (c, row) in rows.iter().enumerate() {
            let row = row.as_array().unwrap();
            assert_eq!(row.len(), np);
            for (s, cell) in row.iter().enumerate() {
                let has = all.contains(&Pair::new(c, s));
                assert_eq!(
                    cell.as_f64().is_some_and(|x| x >= 0.0),
                    has,
                    "{name}: matrix[{c}][{s}] = {cell}"
                );
            }
        }
        // The CSV: a header of N labels, N rows; values where the plan has pairs.
        let csv = r.expect_file(&format!("{name}.csv"));
        let lines: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
        assert_eq!(lines.len(), np + 1, "{name}.csv\n{csv}");
        assert!(lines.iter().all(|l| l.len() == np + 1), "{name}.csv\n{csv}");
        assert!(
            lines[1][0].starts_with("fabricvm:rxe0"),
            "{name}.csv labels\n{csv}"
        );
        for (c, l) in lines[1..].iter().enumerate() {
            for (s, cell) in l[1..].iter().enumerate() {
                let has = all.contains(&Pair::new(c, s));
                assert_eq!(
                    cell.parse::<f64>().is_ok_and(|x| x >= 0.0),
                    has,
                    "{name}.csv [{c}][{s}] = {cell:?}"
                );
            }
        }
        // The heatmap: an SVG of the documented size with a cell per pair.
        let svg = r.expect_file(&format!("{name}.svg"));
        let (_, _, w, h) = heatmap::geometry(np);
        assert!(
            svg.contains(&format!("width=\"{w}\"")) && svg.contains(&format!("height=\"{h}\"")),
            "{name}.svg size"
        );
        assert!(svg.matches("<rect").count() > np * np, "{name}.svg cells");
        assert!(svg.trim_end().ends_with("</svg>"), "{name}.svg complete");
        // Per pair rows and the summary on rank 0.
        assert!(out.contains("fabric summary"), "{name}\n{out}");
        assert_eq!(
            out.matches("fabric: step ").count(),
            plan.steps(),
            "{name}: a progress line per step\n{out}"
        );
    }

    #[test]
    fn every_pattern_on_4_and_5_ranks() {
        let Some(r) = batch() else { return };
        for (name, np, tool, _, pat, serial) in cases() {
            check_case(r, &name, np, tool, pat, serial);
        }
        // Odd N, pairs: one rank idle per step.
        let v = r.json("write-bw-pairs-5");
        assert_eq!(v["steps"].as_array().unwrap().len(), 5);
        // alltoall: each rank's share of the message rate.
        let out = r.expect_file("write-bw-alltoall-5.out");
        assert!(
            out.contains("message rate per rank") && out.contains("fabric total"),
            "{out}"
        );
    }

    #[test]
    fn expect_bw_fails_and_passes() {
        let Some(r) = batch() else { return };
        let low = r.expect_file("write-bw-bisection-4.out");
        assert!(
            low.contains("--expect-bw 0.000001") && low.contains("every pair passes"),
            "{low}"
        );
        let out = r.expect_file("expect-high.out");
        assert_ne!(
            r.expect_file("expect-high.rc").trim(),
            "0",
            "--expect-bw above rxe's rate must fail\n{out}"
        );
        assert!(out.contains("2 pair(s) miss it"), "{out}");
        for pair in ["(0) -> fabricvm:rxe0 (2)", "(1) -> fabricvm:rxe0 (3)"] {
            assert!(
                out.lines().filter(|l| l.contains(pair)).count() >= 2,
                "failing pair {pair} named\n{out}"
            );
        }
        let v = r.json("expect-high");
        assert_eq!(
            v["failed_thresholds"][0]["pairs"].as_array().unwrap().len(),
            2
        );
    }

    /// `--explain` on every pair: each row ends with the pair's top finding
    /// (a rule's or fact's code, or "clean"), the JSON marks every pair
    /// explained, and each worst pair says why (evidence, or clean counters).
    #[test]
    fn explain_puts_each_pairs_finding_in_the_table() {
        let Some(r) = batch() else { return };
        let out = r.expect_file("explain.out");
        assert_eq!(r.expect_file("explain.rc").trim(), "0", "{out}");
        let codes: Vec<&str> = rdmaperf::explain::rules::RULES
            .iter()
            .map(|r| r.code)
            .chain([
                "clean",
                "numa_far",
                "pcie_below_max",
                "pcie_below_port",
                "mtu_limited",
                "port_down",
                // From both ends' counters (explain::direction, bracket::with_peer).
                "return_path_loss",
                "reordered",
                "mtu_mismatch",
                "link_rate_mismatch",
            ])
            .collect();
        // The per-pair rows: a step number, then the pair.
        let data: Vec<&str> = out
            .lines()
            .filter(|l| {
                l.contains(") -> ")
                    && l.split_whitespace()
                        .next()
                        .is_some_and(|t| t.parse::<usize>().is_ok())
            })
            .collect();
        assert!(data.len() >= 2, "bisection of 4 ranks: two pairs:\n{out}");
        for row in &data {
            let last = row.split_whitespace().last().unwrap_or("");
            let last = last.strip_suffix("@server").unwrap_or(last);
            assert!(
                codes.contains(&last),
                "row ends with no finding code: {row}\n{out}"
            );
        }
        assert!(
            out.lines()
                .skip_while(|l| !l.contains("worst pairs:"))
                .nth(1)
                .is_some_and(|l| l.contains("(counters clean)") || l.contains(": ")),
            "the worst pair says why:\n{out}"
        );
        let v = r.json("explain");
        let steps = v["steps"].as_array().expect("steps");
        assert!(!steps.is_empty(), "{v}");
        for s in steps {
            for p in s["pairs"].as_array().expect("pairs") {
                assert_eq!(p["ok"]["explained"], true, "{p}");
            }
        }
        assert!(
            v["summary"]["worst"][0].get("finding").is_some(),
            "{}",
            v["summary"]
        );
    }

    /// `--use_cuda 1,0`: each local rank's buffers on its own (fake) GPU, named in the rows,
    /// the JSON's ranks and the CSV; `--use_cuda auto` on rxe says why it cannot choose.
    #[test]
    fn gpu_ranks_run_on_their_gpu_and_auto_says_why_not() {
        let Some(r) = batch() else { return };
        let out = r.expect_file("gpu-list.out");
        assert_eq!(r.expect_file("gpu-list.rc").trim(), "0", "{out}");
        assert!(
            out.contains("fabricvm:rxe0+cuda1 (0) -> fabricvm:rxe0+cuda0 (1)"),
            "each rank's GPU in the rows:\n{out}"
        );
        let v = r.json("gpu-list");
        let ranks = v["ranks"].as_array().expect("ranks");
        assert_eq!(ranks[0]["gpu"], "cuda1", "{v}");
        assert_eq!(ranks[1]["gpu"], "cuda0", "{v}");
        for s in v["steps"].as_array().expect("steps") {
            for p in s["pairs"].as_array().expect("pairs") {
                assert!(p["ok"].is_object(), "a GPU pair failed: {p}");
            }
        }
        let auto = r.expect_file("gpu-auto.out");
        assert_ne!(r.expect_file("gpu-auto.rc").trim(), "0", "{auto}");
        // The VM has no NVIDIA GPU at all (rxe0's missing PCIe place is the unit tests' case).
        assert!(
            auto.contains("--use_cuda auto: no NVIDIA GPU on fabricvm"),
            "auto without a GPU names why:\n{auto}"
        );
        assert!(
            auto.contains("fabricvm:rxe0+? (0)"),
            "no stand-in GPU in the names:\n{auto}"
        );
    }

    #[test]
    fn killed_rank_is_reported_and_nothing_is_left() {
        // Rank 3 kills itself 1 s into step 2, where it pairs with rank 1.
        let Some(r) = batch() else { return };
        let out = r.expect_file("kill.out");
        let info = r.expect_file("kill.info");
        println!("{info}\n{out}");
        assert_eq!(
            r.expect_file("kill.rank0.rc").trim(),
            "1",
            "rank 0 must exit 1 when a rank is gone\n{out}"
        );
        assert_eq!(
            r.expect_file("kill.rank3.rc").trim(),
            "137",
            "rank 3 was killed (SIGKILL)\n{out}"
        );
        assert!(
            out.contains("rank 3 (fabricvm:rxe0) stopped answering"),
            "{out}"
        );
        assert!(
            out.lines()
                .any(|l| l.contains("FAILED") && l.contains("(3)")),
            "failed pairs named\n{out}"
        );
        let total: f64 = info
            .split("total=")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok())
            .unwrap();
        // --timeout 6, -D 4: rank 0 waits for a step's results at most 10 + 2 x 6 s;
        // MPI start-up under TCG is 10-30 s; three steps of ~5 s.
        assert!(
            total < 120.0,
            "the run took {total} s with a rank killed\n{out}"
        );
        assert!(info.contains("left=0"), "ranks left running: {info}");
        // What was measured before the kill is in the JSON.
        let v: Value = serde_json::from_str(r.expect_file("kill.json")).expect("kill.json parses");
        assert_eq!(v["complete"], false);
        assert!(
            v["steps"][0]["pairs"]
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p["ok"].is_object()),
            "{v}"
        );
    }

    #[test]
    fn silent_rank_is_named_within_the_timeout() {
        // Rank 3 stops (SIGSTOP) as step 3 starts; --timeout 5.
        let Some(r) = batch() else { return };
        let out = r.expect_file("stop.out");
        let info = r.expect_file("stop.info");
        println!("{info}\n{out}");
        let at = |what: &str| -> f64 {
            out.lines()
                .find(|l| l.contains(what))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("no line with '{what}' in stop.out\n{out}"))
        };
        let stopped = at("test hook: signal 19 to itself in step 3");
        let named = at("rank 3 (fabricvm:rxe0) stopped answering in step 3");
        let rc_line = out
            .lines()
            .find_map(|l| l.split(" rc=").nth(1))
            .unwrap_or("?");
        let ended = at(" rc=");
        println!(
            "silent rank: named {:.2} s and the job ended {:.2} s after it stopped (rc {rc_line})",
            named - stopped,
            ended - stopped
        );
        // Named for its silence, not for something else that noticed it
        // sooner: rank 0's own count of the quiet time (from its last sign
        // of life or the step's go) is the timeout.
        let quiet: f64 = out
            .split("stopped answering in step 3: nothing from it for ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no 'nothing from it for X s' on rank 0's line\n{out}"));
        assert!(
            (5.0..5.5).contains(&quiet),
            "rank 0 counted {quiet} s of silence (--timeout 5)\n{out}"
        );
        // Within the timeout of the stop, seen from outside: the slack covers
        // rank 0's 10 ms polls and mpirun's output forwarding under TCG (the
        // hook's own line reaches us a few hundred ms after the stop).
        assert!(
            named - stopped <= 5.0 + 1.5,
            "rank 0 named the silent rank {:.2} s after it stopped (--timeout 5)\n{out}",
            named - stopped
        );
        // After it: the step's other pairs, the report, mpirun ending the job.
        assert!(
            ended - stopped <= 5.0 + 8.0,
            "the job ended {:.2} s after the rank stopped\n{out}",
            ended - stopped
        );
        assert_ne!(rc_line.trim(), "0", "non-zero exit with a rank gone\n{out}");
        assert!(
            out.lines()
                .any(|l| l.contains("FAILED") && l.contains("(3)")),
            "its pair named as failed\n{out}"
        );
        assert!(
            info.contains("left=0"),
            "ranks left running (the stopped one?): {info}"
        );
    }

    #[test]
    fn sigterm_to_every_rank_writes_what_was_measured() {
        let Some(r) = batch() else { return };
        let out = r.expect_file("term.out");
        println!("{out}");
        assert_ne!(r.expect_file("term.rc").trim(), "0", "{out}");
        assert!(
            r.expect_file("term.info").contains("left=0"),
            "ranks left running"
        );
        let v: Value = serde_json::from_str(r.expect_file("term.json")).expect("term.json parses");
        assert_eq!(v["complete"], false, "{v}");
        assert!(
            v["stopped"].as_str().unwrap_or("").contains("signal 15"),
            "{v}"
        );
        assert!(
            v["steps"][0]["pairs"]
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p["ok"].is_object()),
            "{v}"
        );
    }
}
