//! Smoke test of the soft-RoCE VM test bed: rxe0 is up and stock perftest runs a pair; and
//! `rdmaperf doctor` on rxe0 prints its facts and finds nothing wrong (exit 0).

mod common;
use common::vm;

/// A perftest BW result row: bytes, iterations, then numbers (e.g. `65536 100 21.86 20.19 0.000323`).
fn has_result_row(out: &str) -> bool {
    out.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 5 && f.iter().all(|x| x.parse::<f64>().is_ok())
    })
}

#[test]
fn result_row_detection() {
    assert!(has_result_row(
        " 65536      100              21.86              20.19  \t\t   0.000323\n"
    ));
    assert!(!has_result_row(
        " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
    ));
    assert!(!has_result_row(" Couldn't connect to 127.0.0.1:18515\n"));
}

#[test]
fn vm_runs_stock_perftest_pair() {
    let script = r#"
single devinfo 'ibv_devinfo -d rxe0'
single doctor '"$RDMAPERF_BIN" doctor -d rxe0'
pair write_bw 'ib_write_bw -d rxe0 -x 0 -F -n 100 -p $PORT' 'ib_write_bw -d rxe0 -x 0 -F -n 100 -p $PORT 127.0.0.1'
"#;
    let Some(r) = vm::Batch::rdmaperf().run_or_skip(script) else {
        return;
    };
    println!(
        "vm: status {} boot {:?} s, script {:?} s, total {:.1} s",
        r.status, r.boot_s, r.script_s, r.total_s
    );
    assert_eq!(r.status, 0, "VM batch failed:\n{}", r.console);

    // ibv_devinfo lists rxe0 with its port active; doctor finds nothing wrong on it.
    r.single("devinfo")
        .assert_ok_with(&["hca_id:\trxe0", "PORT_ACTIVE"]);
    r.single("doctor").assert_ok_with(&[
        "rxe0",
        "port 1  ACTIVE",
        "no PCIe function (software device)",
        "host",
        "doctor: nothing wrong found",
    ]);

    let p = r.ok_pair("write_bw");
    for (side, out) in [("server", &p.server.out), ("client", &p.client.out)] {
        assert!(has_result_row(out), "{side} printed no result row:\n{out}");
    }
}
