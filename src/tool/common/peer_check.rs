//! Parameters both sides must agree on, checked during the handshake with
//! what perftest's messages already carry: an rdmaperf peer's `-c`, `-q`
//! and `-n` ride in its version message's padding ([`PeerParams`]); with
//! any peer, the QP numbers of the two key rounds give away a different
//! `-q`. A mismatch is refused on both sides, naming both values, instead
//! of running into garbage numbers or a stall.

use super::fail::Fail;
use crate::cli::params::{Conn, Kind, Params, Verb};
use crate::ctrl::wire::PeerParams;
use crate::ctrl::{Dest, PeerVersion, Session};

/// What we send after our version string.
pub(crate) fn local_params(p: &Params) -> PeerParams {
    PeerParams {
        conn: match p.conn {
            Conn::Rc => b'R',
            Conn::Uc => b'U',
            Conn::Ud => b'D',
        },
        num_qps: p.num_qps.min(u16::MAX as u32) as u16,
        iters: if p.is_duration() || p.iters > u32::MAX as u64 {
            0
        } else {
            p.iters as u32
        },
        reversed: p.reversed,
        data_validation: p.data_validation,
        explain: p.explain,
        compare: p.compare,
    }
}

/// `exchange_versions`, then the comparison with an rdmaperf peer's parameters.
pub(crate) fn versions(sess: &mut Session, p: &Params) -> Result<PeerVersion, Fail> {
    let v = sess.exchange_versions().map_err(Fail::ctrl)?;
    if let Some(theirs) = &v.params {
        compare(p, &local_params(p), theirs)?;
    } else if p.compare {
        return Err(stock_compare_peer(p, &v));
    } else if p.data_validation {
        return Err(Fail::new(format!(
            "--data_validation: the peer is stock perftest {} - rdmaperf validates against \
             rdmaperf only (perftest master's validation is a protocol of its own: a longer key \
             message with a tail-marker address, a chunked ring of patterns and an atomic per \
             chunk, which rdmaperf does not speak; 4.5 has none); run rdmaperf on both sides, \
             or drop --data_validation (a write test's server can run --check-landing)",
            v.text
        )));
    }
    Ok(v)
}

/// `rdmaperf compare`'s peer sent no parameters: stock perftest, or an
/// rdmaperf without compare between hosts.
fn stock_compare_peer(p: &Params, v: &PeerVersion) -> Fail {
    let (side, tool) = if p.listens() {
        ("client", "the client")
    } else {
        ("server", "the server")
    };
    let what = if v.is_rdmaperf() {
        format!("rdmaperf {} without compare between hosts", v.text)
    } else {
        format!("stock perftest {}", v.text)
    };
    Fail::new(format!(
        "the {side} is {what}: compare between hosts needs `rdmaperf compare {}` on both \
         hosts (after each run the two sides tell each other the post method and whether more \
         runs follow, which perftest does not carry); run rdmaperf compare as {tool}, or \
         compare in loopback on one host",
        p.tool.name()
    ))
}

/// Both sides' values, or the refusal naming them.
pub(crate) fn compare(p: &Params, mine: &PeerParams, theirs: &PeerParams) -> Result<(), Fail> {
    let side = if p.listens() { "client" } else { "server" };
    if mine.compare != theirs.compare {
        let t = p.tool.name();
        let who = if mine.compare {
            format!("we run `rdmaperf compare {t}`, the {side} runs plain `rdmaperf {t}`")
        } else {
            format!("the {side} runs `rdmaperf compare {t}`, we run plain `rdmaperf {t}`")
        };
        return Err(Fail::new(format!(
            "{who} — run `rdmaperf compare {t}` on both hosts (its server serves every \
             method's runs), or plain `rdmaperf {t}` on both"
        )));
    }
    if mine.conn != theirs.conn {
        return Err(Fail::new(format!(
            "connection type differs: we run -c {}, the {side} runs -c {} — give both sides the same -c",
            mine.conn_name(),
            theirs.conn_name()
        )));
    }
    let flags = [
        (
            "--reversed",
            mine.reversed,
            theirs.reversed,
            "traffic direction differs: ",
            "give --reversed to both sides or to neither (perftest's flag is symmetric)",
        ),
        (
            "--data_validation",
            mine.data_validation,
            theirs.data_validation,
            "",
            "give it to both sides (the sender lays out the data the receiver checks)",
        ),
    ];
    for (flag, ours, peers, what, fix) in flags {
        if ours != peers {
            let who = if ours {
                format!("we run with {flag}, the {side} without")
            } else {
                format!("the {side} runs with {flag}, we without")
            };
            return Err(Fail::new(format!("{what}{who} — {fix}")));
        }
    }
    if mine.num_qps != theirs.num_qps {
        return Err(Fail::new(format!(
            "number of QPs differs: we run -q {}, the {side} runs -q {} — give both sides the same -q",
            mine.num_qps, theirs.num_qps
        )));
    }
    // Only where the receiver counts messages: send tools, latency, -b.
    let counted = p.tool.verb == Verb::Send || p.tool.kind == Kind::Lat || p.duplex;
    if counted && mine.iters != 0 && theirs.iters != 0 && mine.iters != theirs.iters {
        return Err(Fail::new(format!(
            "iterations differ: we run -n {}, the {side} runs -n {} — give both sides the same -n",
            mine.iters, theirs.iters
        )));
    }
    Ok(())
}

/// After the key message for QP `qp` arrived: the peer's QP numbers must be
/// distinct in the first round and repeat in the same order after connect;
/// otherwise its `-q` differs from ours. `first` holds the first round's keys.
pub(crate) fn key(
    p: &Params,
    first: &[Dest],
    got: &Dest,
    qp: usize,
    after_connect: bool,
) -> Result<(), Fail> {
    let side = if p.listens() { "client" } else { "server" };
    let fewer = || {
        Fail::new(format!(
            "number of QPs differs: we run -q {}, the {side} runs fewer (its key message for our \
             QP {qp} repeats QP {:#x}) — give both sides the same -q",
            p.num_qps, got.qpn
        ))
    };
    let more = || {
        Fail::new(format!(
            "number of QPs differs: we run -q {}, the {side} runs more (after connect its key \
             message for QP {qp} names QP {:#x}, not {:#x}) — give both sides the same -q",
            p.num_qps,
            got.qpn,
            first.get(qp).map_or(0, |d| d.qpn)
        ))
    };
    if !after_connect {
        if first[..qp.min(first.len())]
            .iter()
            .any(|d| d.qpn == got.qpn)
        {
            return Err(fewer());
        }
        return Ok(());
    }
    match first.get(qp) {
        Some(d) if d.qpn == got.qpn => Ok(()),
        _ if first.iter().any(|d| d.qpn == got.qpn) => Err(fewer()),
        _ => Err(more()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::PerfArgs;
    use crate::cli::params::{resolve, Tool as PTool};

    fn dest(qpn: u32) -> Dest {
        Dest {
            qpn,
            ..Default::default()
        }
    }

    fn params(verb: Verb, f: impl FnOnce(&mut PerfArgs)) -> Params {
        let mut a = PerfArgs {
            post: "auto".into(),
            timeout: 30,
            cq_timeout: 10,
            server: Some("host".into()),
            ..Default::default()
        };
        f(&mut a);
        let tool = PTool {
            verb,
            kind: Kind::Bw,
        };
        resolve(tool, &a).unwrap()
    }

    #[test]
    fn a_different_q_is_seen_in_either_key_round() {
        let p = params(Verb::Send, |a| a.qps = Some(2));
        let first = [dest(17), dest(18)];
        // The peer has one QP: our second key gets its first QP again.
        let e = key(&p, &first[..1], &dest(17), 1, false).unwrap_err();
        assert!(e.msg.contains("we run -q 2, the server runs fewer"), "{e}");
        // The peer has more: after connect it names a QP we never saw.
        let e = key(&p, &first, &dest(19), 0, true).unwrap_err();
        assert!(e.msg.contains("runs more"), "{e}");
        assert!(key(&p, &first, &dest(18), 1, true).is_ok());
        assert!(key(&p, &first, &dest(18), 1, false).is_ok());
    }

    #[test]
    fn an_rdmaperf_peer_with_other_values_is_refused_naming_both() {
        let p = params(Verb::Send, |a| a.iters = Some(1000));
        let mine = local_params(&p);
        assert!(compare(&p, &mine, &mine).is_ok());
        // The server differs from us in one value: the refusal names both.
        let refused = |change: fn(&mut PeerParams), want: &str| {
            let mut theirs = mine;
            change(&mut theirs);
            let e = compare(&p, &mine, &theirs).unwrap_err();
            assert!(e.msg.contains(want), "{want:?} missing: {e}");
        };
        refused(|t| t.conn = b'U', "we run -c RC, the server runs -c UC");
        refused(|t| t.num_qps = 2, "-q 1, the server runs -q 2");
        refused(|t| t.iters = 2000, "-n 1000, the server runs -n 2000");
        // --reversed on one side only: both would send (or both wait).
        refused(
            |t| t.reversed = true,
            "the server runs with --reversed, we without",
        );
        refused(
            |t| t.data_validation = true,
            "the server runs with --data_validation, we without",
        );
        // write-bw: the server's -n does not matter (the client drives).
        let w = params(Verb::Write, |a| a.iters = Some(1000));
        let mut theirs = mine;
        theirs.iters = 2000;
        assert!(compare(&w, &local_params(&w), &theirs).is_ok());
        let r = params(Verb::Send, |a| {
            a.iters = Some(1000);
            a.reversed = true;
        });
        let e = compare(&r, &local_params(&r), &mine).unwrap_err();
        assert!(
            e.msg.contains("we run with --reversed, the server without"),
            "{e}"
        );
    }

    /// compare between hosts: a plain rdmaperf peer on either end is
    /// refused, naming which side runs what.
    #[test]
    fn compare_and_plain_rdmaperf_do_not_mix() {
        let mut c = params(Verb::Write, |_| {});
        c.compare = true;
        let plain = params(Verb::Write, |_| {});
        let e = compare(&c, &local_params(&c), &local_params(&plain)).unwrap_err();
        assert!(
            e.msg
                .contains("we run `rdmaperf compare write-bw`, the server runs plain"),
            "{e}"
        );
        let e = compare(&plain, &local_params(&plain), &local_params(&c)).unwrap_err();
        assert!(
            e.msg
                .contains("the server runs `rdmaperf compare write-bw`, we run plain"),
            "{e}"
        );
        assert!(compare(&c, &local_params(&c), &local_params(&c)).is_ok());
    }

    /// A stock perftest peer (its version message carries nothing after the
    /// string) talking to a compare side over a real control connection:
    /// refused right after the version exchange, with the reason.
    #[test]
    fn a_stock_perftest_peer_of_compare_is_refused() {
        use crate::ctrl::Listener;
        use std::io::{Read, Write};
        let l = Listener::bind(Some("127.0.0.1"), 0).unwrap();
        let port = l.port();
        let stock = std::thread::spawn(move || {
            let t = std::time::Duration::from_secs(10);
            let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(t)).unwrap();
            let mut v = [0u8; 16];
            v[..4].copy_from_slice(b"6.06");
            s.write_all(&v).unwrap();
            let mut got = [0u8; 16];
            s.read_exact(&mut got).unwrap();
            got
        });
        let ch = l.accept(Some(std::time::Duration::from_secs(10))).unwrap();
        let mut sess = Session::new(ch);
        let mut p = params(Verb::Send, |a| a.server = None);
        p.compare = true;
        sess.set_local_params(local_params(&p));
        let e = versions(&mut sess, &p).unwrap_err();
        assert!(
            e.msg.starts_with("the client is stock perftest 6.06: compare between hosts needs `rdmaperf compare send-bw` on both hosts"),
            "{e}"
        );
        let sent = stock.join().unwrap();
        assert_eq!(sent[8], crate::ctrl::wire::COMPARE_MARK, "{sent:?}");
        // An rdmaperf without compare between hosts reads as such.
        let v = PeerVersion::from_text("6.27-rs").unwrap();
        let mut c = params(Verb::Write, |_| {});
        c.compare = true;
        let e = stock_compare_peer(&c, &v);
        assert!(
            e.msg
                .starts_with("the server is rdmaperf 6.27-rs without compare"),
            "{e}"
        );
    }
}
