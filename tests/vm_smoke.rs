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
    if let Err(why) = vm::available() {
        println!("SKIPPED: {why}");
        return;
    }
    let r = vm::Batch::new().bin(env!("CARGO_BIN_EXE_rdmaperf")).run(
        r#"
single devinfo 'ibv_devinfo -d rxe0'
single doctor '"$RDMAPERF_BIN" doctor -d rxe0'
pair write_bw 'ib_write_bw -d rxe0 -x 0 -F -n 100 -p $PORT' 'ib_write_bw -d rxe0 -x 0 -F -n 100 -p $PORT 127.0.0.1'
"#,
    );
    println!(
        "vm: status {} boot {:?} s, script {:?} s, total {:.1} s",
        r.status, r.boot_s, r.script_s, r.total_s
    );
    assert_eq!(r.status, 0, "VM batch failed:\n{}", r.console);

    let info = r.single("devinfo");
    assert_eq!(info.rc, Some(0), "ibv_devinfo failed:\n{}", info.out);
    assert!(
        info.out.contains("hca_id:\trxe0"),
        "no rxe0 in:\n{}",
        info.out
    );
    assert!(
        info.out.contains("PORT_ACTIVE"),
        "rxe0 port not active:\n{}",
        info.out
    );

    let d = r.single("doctor");
    assert_eq!(d.rc, Some(0), "doctor found something on rxe0:\n{}", d.out);
    for want in [
        "rxe0",
        "port 1  ACTIVE",
        "no PCIe function (software device)",
        "host",
        "doctor: nothing wrong found",
    ] {
        assert!(
            d.out.contains(want),
            "doctor printed no '{want}':\n{}",
            d.out
        );
    }

    let p = r.pair("write_bw");
    p.assert_ok();
    for (side, out) in [("server", &p.server.out), ("client", &p.client.out)] {
        assert!(has_result_row(out), "{side} printed no result row:\n{out}");
    }
}
