//! `params::resolve`: defaults, derived values and the rules' messages.

use super::*;

const WRITE_BW: Tool = Tool {
    verb: Verb::Write,
    kind: Kind::Bw,
};
const READ_LAT: Tool = Tool {
    verb: Verb::Read,
    kind: Kind::Lat,
};
const SEND_BW: Tool = Tool {
    verb: Verb::Send,
    kind: Kind::Bw,
};

/// `resolve` on the default flags changed by `f`.
fn with(tool: Tool, f: impl FnOnce(&mut PerfArgs)) -> Result<Params, String> {
    let mut a = args();
    f(&mut a);
    resolve(tool, &a)
}

fn args() -> PerfArgs {
    PerfArgs {
        post: "auto".into(),
        timeout: 30,
        cq_timeout: 10,
        ..Default::default()
    }
}

#[test]
fn write_bw_defaults() {
    let p = resolve(WRITE_BW, &args()).unwrap();
    assert_eq!(p.sizes, vec![65536]);
    assert_eq!(p.iters, 5000);
    assert_eq!(p.tx_depth, 128);
    // 64 KiB > 8 KiB: perftest signals every message unless -Q is given.
    assert_eq!(p.cq_mod, 1);
    assert_eq!(p.port, 18515);
    assert!(p.is_server());
}

#[test]
fn data_validation_rules() {
    let try_it = |tool: Tool, f: fn(&mut PerfArgs)| {
        with(tool, |a| {
            a.data_validation = true;
            f(a);
        })
    };
    let read_bw = Tool {
        verb: Verb::Read,
        kind: Kind::Bw,
    };
    let send_bw = SEND_BW;
    assert!(try_it(WRITE_BW, |_| {}).unwrap().data_validation);
    assert!(try_it(read_bw, |a| a.duration = Some(2)).is_ok());
    for (tool, f, want) in [
        (
            READ_LAT,
            (|_| {}) as fn(&mut PerfArgs),
            "only supported in bandwidth tests",
        ),
        (send_bw, |_| {}, "only supported with WRITE or READ"),
        (
            WRITE_BW,
            |a| a.write_with_imm = true,
            "only supported with WRITE or READ",
        ),
        (
            WRITE_BW,
            |a| a.connection = Some("UC".into()),
            "requires RC",
        ),
        (WRITE_BW, |a| a.all = true, "incompatible with -a"),
        (
            WRITE_BW,
            |a| a.mr_per_qp = true,
            "incompatible with --mr_per_qp",
        ),
        (WRITE_BW, |a| a.use_null_mr = true, "own pattern"),
        (WRITE_BW, |a| a.bidirectional = true, "not implemented yet"),
        (WRITE_BW, |a| a.threads = Some(2), "not implemented yet"),
    ] {
        let e = try_it(tool, f).unwrap_err();
        assert!(e.contains("--data_validation") && e.contains(want), "{e}");
    }
}

#[test]
fn reversed_swaps_the_traffic_role_not_the_connection() {
    let rev = |server: Option<&str>| {
        with(WRITE_BW, |a| {
            a.reversed = true;
            a.server = server.map(Into::into);
        })
        .unwrap()
    };
    let listener = rev(None);
    assert!(listener.listens() && !listener.is_server());
    let connector = rev(Some("host"));
    assert!(!connector.listens() && connector.is_server());
    let refused = |tool: Tool, f: fn(&mut PerfArgs)| {
        with(tool, |a| {
            a.reversed = true;
            f(a);
        })
        .unwrap_err()
    };
    let e = refused(READ_LAT, |_| {});
    assert!(e.contains("bandwidth tests only"), "{e}");
    let e = refused(WRITE_BW, |a| a.rdma_cm = true);
    assert!(e.contains("--reversed with -R/-z"), "{e}");
    let e = refused(WRITE_BW, |a| a.comm_rdma_cm = true);
    assert!(e.contains("--reversed with -R/-z"), "{e}");
    let e = refused(WRITE_BW, |a| a.threads = Some(2));
    assert!(e.contains("--reversed with --threads"), "{e}");
}

#[test]
fn rdma_cm_rules() {
    let cm = |conn: &str, post: &str| {
        with(WRITE_BW, |a| {
            a.rdma_cm = true;
            a.connection = Some(conn.into());
            a.post = post.into();
        })
    };
    assert!(cm("RC", "auto").unwrap().rdma_cm);
    let e = cm("UC", "auto").unwrap_err();
    assert!(e.contains("UC is not supported in librdmacm"), "{e}");
    let e = cm("RC", "direct").unwrap_err();
    assert!(e.contains("-R with --post direct"), "{e}");
}

#[test]
fn small_messages_keep_cq_mod() {
    let p = with(WRITE_BW, |a| a.size = Some(64)).unwrap();
    assert_eq!(p.cq_mod, 100);
}

#[test]
fn post_list_sets_cq_mod_and_checks_iters() {
    let p = with(WRITE_BW, |a| {
        a.post_list = Some(4);
        a.iters = Some(100);
    })
    .unwrap();
    assert_eq!(p.cq_mod, 4);
    let e = with(WRITE_BW, |a| {
        a.post_list = Some(3);
        a.iters = Some(100);
    })
    .unwrap_err();
    assert!(e.contains("multiple of the post list"), "{e}");
}

#[test]
fn duration_rules() {
    let p = with(WRITE_BW, |a| a.duration = Some(8)).unwrap();
    assert_eq!(p.mode, Mode::Duration { secs: 8, margin: 2 });
    assert_eq!(p.iters, 0);
    assert!(p.no_peak);
    let e = with(WRITE_BW, |a| {
        a.duration = Some(4);
        a.margin = Some(2);
    })
    .unwrap_err();
    assert!(e.contains("twice the margin"), "{e}");
    let e = with(WRITE_BW, |a| {
        a.duration = Some(4);
        a.all = true;
    })
    .unwrap_err();
    assert!(e.contains("-D and -a"), "{e}");
}

#[test]
fn tool_rules() {
    let e = with(READ_LAT, |a| a.qps = Some(2)).unwrap_err();
    assert!(e.contains("bw tests"), "{e}");
    let e = with(READ_LAT, |a| a.connection = Some("UC".into())).unwrap_err();
    assert!(e.contains("UC connection not possible"), "{e}");
    let e = with(WRITE_BW, |a| a.events = true).unwrap_err();
    assert!(e.contains("WRITE verb"), "{e}");
    let e = with(WRITE_BW, |a| a.connection = Some("UD".into())).unwrap_err();
    assert!(e.contains("SEND verb"), "{e}");
    let e = with(WRITE_BW, |a| a.post = "fast".into()).unwrap_err();
    assert!(e.contains("post-send, wr-api, direct, auto"), "{e}");
}

#[test]
fn old_post_send_alias() {
    let p = with(WRITE_BW, |a| a.use_old_post_send = true).unwrap();
    assert_eq!(p.post, PostChoice::PostSend);
    let e = with(WRITE_BW, |a| {
        a.use_old_post_send = true;
        a.post = "wr-api".into();
    })
    .unwrap_err();
    assert!(e.contains("contradicts"), "{e}");
}

#[test]
fn threads_rules() {
    let p = with(WRITE_BW, |a| a.threads = Some(2)).unwrap();
    assert_eq!((p.threads, p.num_qps), (2, 2));
    let e = with(WRITE_BW, |a| {
        a.threads = Some(4);
        a.qps = Some(2);
    })
    .unwrap_err();
    assert!(e.contains("every thread needs its own QP"), "{e}");
    let e = with(READ_LAT, |a| a.threads = Some(2)).unwrap_err();
    assert!(e.contains("bw tests only"), "{e}");
    let p = with(WRITE_BW, |a| a.cpus = Some("0-1".into())).unwrap();
    assert_eq!(p.cpus, Some(vec![0, 1]));
    assert!(with(WRITE_BW, |a| a.cpus = Some("a".into()))
        .unwrap_err()
        .starts_with("--cpus"));
}

#[test]
fn perftest_limits_and_notices() {
    // -q 0 names -q, not a --threads that was never given.
    let e = with(WRITE_BW, |a| a.qps = Some(0)).unwrap_err();
    assert!(e.starts_with("-q 0: the number of QPs must be 1.."), "{e}");
    // -n above perftest master's MAX_ITER.
    let e = with(WRITE_BW, |a| a.iters = Some(MAX_ITER + 1)).unwrap_err();
    assert!(e.contains("at most 4294967296 iterations"), "{e}");
    assert!(with(WRITE_BW, |a| a.iters = Some(MAX_ITER)).is_ok());
    // -l without -Q: perftest's notice; with -Q none.
    let p = with(WRITE_BW, |a| {
        a.post_list = Some(4);
        a.iters = Some(100);
    })
    .unwrap();
    assert_eq!(
        p.notices,
        ["Post List requested - CQ moderation will be the size of the post list"]
    );
    let p = with(WRITE_BW, |a| {
        a.post_list = Some(4);
        a.cq_mod = Some(2);
        a.iters = Some(100);
    })
    .unwrap();
    assert!(p.notices.is_empty());
}

#[test]
fn pace_flag_rules() {
    let send_bw = SEND_BW;
    type Case = (Tool, fn(&mut PerfArgs), &'static str);
    let cases: &[Case] = &[
        (
            WRITE_BW,
            |a| a.latency_gap = Some(5),
            "only for latency tests",
        ),
        (
            send_bw,
            |a| a.perform_warm_up = true,
            "write, read and atomic bw",
        ),
        (
            READ_LAT,
            |a| a.perform_warm_up = true,
            "write, read and atomic bw",
        ),
        (
            WRITE_BW,
            |a| {
                a.perform_warm_up = true;
                a.write_with_imm = true;
            },
            "WRITE_IMM",
        ),
        (
            WRITE_BW,
            |a| {
                a.perform_warm_up = true;
                a.bidirectional = true;
            },
            "not implemented yet",
        ),
        (WRITE_BW, |a| a.cqe_poll = Some(0), "1..65535"),
        (WRITE_BW, |a| a.cqe_poll = Some(65536), "1..65535"),
        (
            READ_LAT,
            |a| a.cqe_poll = Some(4),
            "one completion at a time",
        ),
        (WRITE_BW, |a| a.report_both = true, "add -b"),
        (READ_LAT, |a| a.report_both = true, "-bw tool with -b"),
        (
            WRITE_BW,
            |a| {
                a.report_both = true;
                a.bidirectional = true;
                a.all = true;
            },
            "drop -a",
        ),
    ];
    for (t, f, want) in cases {
        let e = with(*t, f).unwrap_err();
        assert!(e.contains(want), "{e} (wanted '{want}')");
    }
    let p = with(READ_LAT, |a| a.latency_gap = Some(7)).unwrap();
    assert_eq!(p.latency_gap_us, 7);
    let p = with(WRITE_BW, |a| {
        a.perform_warm_up = true;
        a.cqe_poll = Some(64);
    })
    .unwrap();
    assert!(p.warm_up);
    assert_eq!(
        (p.cqe_poll, resolve(WRITE_BW, &args()).unwrap().cqe_poll),
        (64, 16)
    );
    let p = with(WRITE_BW, |a| {
        a.rate_limit = Some("2".into());
        a.rate_limit_type = Some("SW".into());
        a.tx_depth = Some(32);
    })
    .unwrap();
    assert_eq!(p.rate.as_ref().map(|r| r.burst), Some(32));
    assert_eq!(p.notices, ["Setting burst size to tx depth = 32"]);
}

#[test]
fn recv_post_list_rules() {
    let send_bw = SEND_BW;
    let p = with(send_bw, |a| a.recv_post_list = Some(4)).unwrap();
    assert_eq!(
        (
            p.recv_post_list,
            resolve(send_bw, &args()).unwrap().recv_post_list
        ),
        (4, 1)
    );
    type Case = (Tool, fn(&mut PerfArgs), &'static str);
    let cases: &[Case] = &[
        (send_bw, |a| a.recv_post_list = Some(0), "at least one WR"),
        (READ_LAT, |a| a.recv_post_list = Some(2), "BW tests only"),
        (
            send_bw,
            |a| {
                a.recv_post_list = Some(3);
                a.iters = Some(100);
            },
            "use -n 102",
        ),
        (
            WRITE_BW,
            |a| a.recv_post_list = Some(2),
            "not implemented yet",
        ),
        (
            send_bw,
            |a| {
                a.recv_post_list = Some(8);
                a.rx_depth = Some(4);
            },
            "raise -r",
        ),
    ];
    for (t, f, want) in cases {
        let e = with(*t, *f).unwrap_err();
        assert!(e.contains(want), "{e} (wanted '{want}')");
    }
}

#[test]
fn tx_depth_clamped_to_iters() {
    let p = with(WRITE_BW, |a| {
        a.iters = Some(10);
        a.size = Some(64);
    })
    .unwrap();
    assert_eq!(p.tx_depth, 10);
    assert_eq!(p.cq_mod, 10);
}

/// perftest's parser: `-o` only on the READ and atomic verbs.
#[test]
fn outs_only_for_read_and_atomic() {
    let e = with(WRITE_BW, |a| a.outs = Some(4)).unwrap_err();
    assert!(e.starts_with("-o: setting outstanding reads"), "{e}");
    let e = with(SEND_BW, |a| a.outs = Some(4)).unwrap_err();
    assert!(e.contains("use read-bw"), "{e}");
    assert_eq!(with(READ_LAT, |a| a.outs = Some(4)).unwrap().outs, Some(4));
    let atomic = Tool {
        verb: Verb::Atomic,
        kind: Kind::Bw,
    };
    assert!(with(atomic, |a| a.outs = Some(4)).is_ok());
}
