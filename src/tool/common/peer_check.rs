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
    }
}

/// `exchange_versions`, then the comparison with an rdmaperf peer's parameters.
pub(crate) fn versions(sess: &mut Session, p: &Params) -> Result<PeerVersion, Fail> {
    let v = sess.exchange_versions().map_err(Fail::ctrl)?;
    if let Some(theirs) = &v.params {
        compare(p, &local_params(p), theirs)?;
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

/// Both sides' values, or the refusal naming them.
pub(crate) fn compare(p: &Params, mine: &PeerParams, theirs: &PeerParams) -> Result<(), Fail> {
    let side = if p.listens() { "client" } else { "server" };
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
        let mut theirs = mine;
        assert!(compare(&p, &mine, &theirs).is_ok());
        theirs.conn = b'U';
        let e = compare(&p, &mine, &theirs).unwrap_err();
        assert!(e.msg.contains("we run -c RC, the server runs -c UC"), "{e}");
        theirs = mine;
        theirs.num_qps = 2;
        let e = compare(&p, &mine, &theirs).unwrap_err();
        assert!(e.msg.contains("-q 1, the server runs -q 2"), "{e}");
        theirs = mine;
        theirs.iters = 2000;
        let e = compare(&p, &mine, &theirs).unwrap_err();
        assert!(e.msg.contains("-n 1000, the server runs -n 2000"), "{e}");
        // write-bw: the server's -n does not matter (the client drives).
        let w = params(Verb::Write, |a| a.iters = Some(1000));
        assert!(compare(&w, &local_params(&w), &theirs).is_ok());
        // --reversed on one side only: both would send (or both wait).
        theirs = mine;
        theirs.reversed = true;
        let e = compare(&p, &mine, &theirs).unwrap_err();
        assert!(
            e.msg
                .contains("the server runs with --reversed, we without"),
            "{e}"
        );
        let r = params(Verb::Send, |a| {
            a.iters = Some(1000);
            a.reversed = true;
        });
        let e = compare(&r, &local_params(&r), &mine).unwrap_err();
        assert!(
            e.msg.contains("we run with --reversed, the server without"),
            "{e}"
        );
        theirs = mine;
        theirs.data_validation = true;
        let e = compare(&p, &mine, &theirs).unwrap_err();
        assert!(
            e.msg
                .contains("the server runs with --data_validation, we without"),
            "{e}"
        );
    }
}
