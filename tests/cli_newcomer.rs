//! What a newcomer meets first, run through the binary: the command list,
//! `help <command>`, perftest names as links and as commands, the sentence
//! for a near-miss flag, `fabric --help`, the connection types a refusal
//! suggests, the exit statuses, selfcheck's hint, `--samples-file`'s columns.

mod common;
use common::cli::{outcome, refused_before_run, run_rdmaperf as run};
use std::process::Command;

#[test]
fn help_lists_every_command_and_help_sub_works() {
    let (rc, out, _) = run(&["--help"]);
    assert_eq!(rc, 0);
    for sub in [
        "compare",
        "fabric",
        "doctor",
        "selfcheck",
        "devices",
        "write-bw",
        "raw-eth-bw",
        "raw-eth-lat",
        "raw-eth-burst-lat",
        "raw-eth-fs-rate",
    ] {
        assert!(
            out.lines().any(|l| l.trim_start().starts_with(sub)),
            "{sub} missing from --help:\n{out}"
        );
    }
    assert!(
        out.contains("Exit status: 0 done; 1 a run that failed"),
        "{out}"
    );
    for (sub, want) in [
        ("doctor", "usage: rdmaperf doctor"),
        ("selfcheck", "Usage: rdmaperf selfcheck"),
        ("fabric", "--worst N"),
        ("write-bw", "--report_gbits"),
        ("ib_send_lat", "--samples-file"),
        ("raw-eth-bw", "Usage: rdmaperf raw-eth-bw"),
    ] {
        let (rc, out, err) = run(&["help", sub]);
        assert_eq!(rc, 0, "help {sub}: {err}");
        assert!(out.contains(want), "help {sub}:\n{out}");
    }
}

#[test]
fn perftest_names_as_commands_and_links() {
    // `rdmaperf ib_write_bw` parses as write-bw: a write-bw-only refusal shows it.
    let (rc, _, err) = run(&["ib_write_bw", "-c", "UD"]);
    assert_eq!(rc, 2);
    assert!(err.starts_with("rdmaperf write-bw: -c UD"), "{err}");
    let (rc, _, err) = run(&["ib_write_bw_postlist", "-s", "64"]);
    assert_eq!(rc, 2);
    assert!(
        err.contains("ib_write_bw_postlist is not a tool rdmaperf provides"),
        "{err}"
    );
    let dir = std::env::temp_dir().join(format!("rdmaperf-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // raw_ethernet_bw is provided (raw-eth-bw); perftest's source-file name is not a tool.
    let link = dir.join("raw_ethernet_send_bw");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_rdmaperf"), &link).unwrap();
    let o = outcome(Command::new(&link).arg("-h").output().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(o.0, 2);
    assert!(
        o.2.contains("raw_ethernet_send_bw is not a tool rdmaperf provides"),
        "{}",
        o.2
    );
    assert!(o.2.contains("ib_write_bw, ib_read_bw"), "{}", o.2);
    assert!(o.2.contains("raw_ethernet_bw, raw_ethernet_lat"), "{}", o.2);
}

#[test]
fn near_miss_flags_name_the_flag_meant() {
    for (args, want) in [
        (
            &["write-bw", "--report-gbits"][..],
            "the flag meant is --report_gbits;",
        ),
        (&["send-bw", "--use_srq"], "the flag meant is --use-srq;"),
        (
            &["write-bw", "--use_dm"],
            "the flag meant is --use_ib_dm_dmabuf;",
        ),
    ] {
        let (rc, out, err) = run(args);
        assert_eq!(rc, 2, "{args:?}");
        assert!(
            out.is_empty() && err.lines().count() == 1,
            "{args:?}: {err}"
        );
        assert!(err.contains(want), "{args:?}: {err}");
        for clap_text in ["tip:", "Usage:", "--use_cuda"] {
            assert!(!err.contains(clap_text), "{args:?}: {err}");
        }
    }
}

#[test]
fn refused_connection_types_suggest_what_the_tool_takes() {
    for (tool, c, want) in [
        ("write-bw", "DC", "use -c RC or UC"),
        ("write-lat", "XRC", "use -c RC or UC"),
        ("read-bw", "XRC", "use -c RC"),
        ("atomic-lat", "DC", "use -c RC"),
        ("send-bw", "DC", "use -c RC, UC or UD"),
    ] {
        let (rc, _, err) = run(&[tool, "-c", c]);
        assert_eq!(rc, 2, "{tool} -c {c}");
        assert!(err.trim_end().ends_with(want), "{tool} -c {c}: {err}");
    }
}

#[test]
fn fabric_help_lists_worst_and_the_bandwidth_unit() {
    let (rc, out, _) = run(&["fabric", "--help"]);
    assert_eq!(rc, 0);
    assert!(out.contains("--worst N"), "{out}");
    assert!(
        out.contains("MB/sec") && out.contains("--report_gbits"),
        "{out}"
    );
    let (_, top, _) = run(&["--help"]);
    let fabric_line = top
        .lines()
        .find(|l| l.trim_start().starts_with("fabric"))
        .unwrap();
    if cfg!(feature = "mpi") {
        assert!(!out.contains("built without MPI"), "{out}");
    } else {
        assert!(out.contains("built without MPI"), "{out}");
        assert!(
            fabric_line.contains("this build has no MPI"),
            "{fabric_line}"
        );
    }
}

#[test]
fn selfcheck_names_d_only_when_it_was_not_given() {
    let (rc, _, err) = run(&["selfcheck", "-d", "nosuch_dev0"]);
    if rc == 0 {
        println!("SKIPPED: a device named nosuch_dev0 opened");
        return;
    }
    assert_eq!(rc, 1, "{err}");
    assert!(!err.contains("give the device with -d"), "{err}");
    assert!(err.contains("-d nosuch_dev0"), "{err}");
}

#[test]
fn send_lat_help_names_the_csv_columns() {
    let (rc, out, _) = run(&["send-lat", "--help"]);
    assert_eq!(rc, 0);
    assert!(out.contains("size,index,cycles,usec"), "{out}");
    assert!(!out.contains("CSV: index, TSC cycles, usec"), "{out}");
}

#[test]
fn cpus_is_taken_by_every_tool() {
    // Shown in every tool's help now that it pins a single-thread run too.
    for tool in ["write-lat", "send-bw"] {
        let (_, out, _) = run(&[tool, "--help"]);
        assert!(out.contains("--cpus"), "{tool}:\n{out}");
    }
}

#[test]
fn cpus_pins_a_single_thread_run() {
    // doctor's advice (`--cpus LIST` added to the command line) parses for
    // every tool, and a single-thread run is pinned before anything opens:
    // a core no process may use is refused (status 2), ahead of the device.
    let p = common::cli::params("write-lat --cpus 0");
    assert_eq!(p.cpus.as_deref(), Some(&[0][..]));
    refused_before_run(
        &[
            "write-lat",
            "--cpus",
            "1000",
            "-d",
            "nosuch_dev0",
            "127.0.0.1",
        ],
        "--cpus 1000: the run cannot be pinned there",
    );
}

#[test]
fn refusals_before_a_run_exit_2() {
    // Refused by the tool (not the CLI's rules), before any device is opened.
    refused_before_run(&["write-lat", "--mr_per_qp", "127.0.0.1"], "--mr_per_qp");
    // A run that cannot start (no such device) is a failed run.
    let (rc, _, err) = run(&["write-bw", "-d", "nosuch_dev0", "127.0.0.1"]);
    assert_eq!(rc, 1, "{err}");
}
