//! raw-eth-bw `-v` (MAC forwarding) as the tool runs it
//! (`tool::runs::raw_fw::run_loop` over `run::raw_fw`): a server with `-v`
//! forwards what a client running `-b` (`common::raw_duplex_session`)
//! sends, on two model hosts (`common::raw_host`), each with its own flow
//! table from its command line. Both command lines carry `-v`: the client's
//! only forces `-b` (perftest's rule) and it runs `-b`'s session; the
//! server's SQ sends from its receive buffer, as the tool sets it up.
//! Checked: the client gets exactly its own `-n` frames back, each with
//! source and destination MAC swapped and every other byte the same
//! (etherparse on the headers); the server counts `-n` in and forwards
//! `-n`; its table and lines. The wire is left at
//! target/raw-bw-mac-fwd.pcap.

#[cfg(not(feature = "model"))]
#[test]
fn raw_fw_model_needs_the_model_feature() {
    println!("SKIPPED: the raw-eth-bw -v model tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use super::common::raw_duplex_session::{duplex, ring_cfg, Ran};
    use super::common::raw_host::{self as host, Host, Pair};
    use super::common::raw_steer_model::{params, CLIENT, SERVER};
    use std::time::Duration;

    use etherparse::{Ethernet2Header, Ipv4Header, UdpHeader};
    use rdmaperf::mlx5::raw_sq::{RawPkt, RawSq};
    use rdmaperf::model::ModelMmio;
    use rdmaperf::post::PostError;
    use rdmaperf::raw::ctx::Side;
    use rdmaperf::raw::params::RawParams;
    use rdmaperf::raw::tools::RawTool;
    use rdmaperf::run::raw_bw::RawPost;
    use rdmaperf::run::raw_fw::{FwBuf, FwError};
    use rdmaperf::run::raw_recv::DirectRx;
    use rdmaperf::tool::runs::raw_fw::{self, Forwarded};

    /// What a side ran: the client `-b`'s session, the server forwarding.
    enum Run {
        Client(Ran),
        Server(Forwarded, String),
    }

    fn session(p: &RawParams, h: Host<'_>, stall: Duration) -> Run {
        if p.raw.side != Some(Side::Server) {
            return Run::Client(duplex(p, h, stall));
        }
        // SAFETY: the ring's buffer is registered for local write and
        // outlives the session (the host keeps it); only the model's NIC and
        // the loop (a slot between its receive and its send) touch it.
        let buf = unsafe { FwBuf::new(ring_cfg(h.ring)) };
        let recv = (h.rq, h.rcq, &buf);
        let fw = if p.post.as_deref() == Some("direct-mpw") {
            let mut mpw = Mpw(&mut h.post.0, 0);
            let fw = raw_fw::run_loop::<_, _, _, _, DirectRx>(p, (&mut mpw, h.scq), recv, stall);
            let posted = fw.as_ref().map_or(0, |f| f.out.sent.posted);
            assert_eq!(mpw.1, posted, "every forward by eMPW");
            fw
        } else {
            raw_fw::run_loop::<_, _, _, _, DirectRx>(p, (h.post, h.scq), recv, stall)
        };
        let fw = fw.unwrap();
        let report = raw_fw::report(p, &fw, Some(100.0)).unwrap();
        Run::Server(fw, report)
    }

    /// Client and server with `extra`; `same_ports`: the client's port
    /// (`-K`) made the server's (`-k`), so that its own frames, which come
    /// back with only the MACs swapped, match its rule.
    /// `direct-mpw` on the host's SQ (the tool's `DirectMpw`, borrowed),
    /// counting the frames it posted: each list of forwards one eMPW
    /// session by pointer.
    struct Mpw<'a>(&'a mut RawSq<ModelMmio>, u64);
    impl RawPost for Mpw<'_> {
        fn post_frames(&mut self, f: &[RawPkt], _: u64, signal: bool) -> Result<(), PostError> {
            if signal {
                self.0.signal_list_end();
            }
            self.0.post_mpw(f, false)?;
            self.1 += f.len() as u64;
            Ok(())
        }
    }

    fn run(extra: &str, same_ports: bool, drop_nth: Option<u64>, stall: Duration) -> Pair<Run> {
        let line = |side: &str| {
            let side = if same_ports {
                side.replace("-K 6000", "-K 5000")
            } else {
                side.to_string()
            };
            params(RawTool::Bw, &format!("{side} {extra}"))
        };
        host::pair_of((line(CLIENT), line(SERVER)), drop_nth, stall, session)
    }

    fn sides(pair: &Pair<Run>) -> (&Ran, (&Forwarded, &str)) {
        match (&pair.client.run, &pair.server.run) {
            (Run::Client(c), Run::Server(f, r)) => (c, (f, r)),
            _ => panic!("the sides ran the wrong sessions"),
        }
    }

    /// Frame `f`'s Ethernet, IPv4 and UDP headers (etherparse).
    fn headers(f: &[u8], at: &str) -> (Ethernet2Header, Ipv4Header, UdpHeader) {
        let (eth, rest) = Ethernet2Header::from_slice(f).expect(at);
        let (ip, rest) = Ipv4Header::from_slice(rest).expect(at);
        let (udp, _) = UdpHeader::from_slice(rest).expect(at);
        (eth, ip, udp)
    }

    #[test]
    fn the_client_gets_its_own_frames_back_with_the_macs_swapped() {
        for extra in [
            "-v -n 300",
            "-v -n 200 -s 128 -Q 8",
            "-v -n 100 -s 1518 -t 32",
            "-v -n 304 -l 4",
            "-v -n 200 -l 8 -s 128 -Q 8 --post direct-mpw",
        ] {
            let pair = run(extra, true, None, Duration::from_secs(5));
            let n = pair.client.p.raw.iters;
            let (c, (fw, report)) = sides(&pair);
            assert_eq!(
                (c.error.as_ref(), c.out.error.as_ref()),
                (None, None),
                "{extra}"
            );
            assert_eq!((c.out.posted, c.out.completed), (n, n), "{extra}");
            let cc = &c.counts;
            assert_eq!(
                (cc.packets, cc.ipv4, cc.udp, cc.csum_ok),
                (n, n, n, n),
                "{extra}"
            );
            assert_eq!(
                (cc.csum_bad, cc.errors, pair.client.no_match),
                (0, 0, 0),
                "{extra}"
            );
            let o = &fw.out;
            assert_eq!(o.error, None, "{extra}");
            assert_eq!(
                (o.received, o.sent.posted, o.sent.completed),
                (n, n, n),
                "{extra}"
            );
            assert_eq!((fw.counts.packets, fw.counts.csum_ok), (n, n), "{extra}");
            assert_eq!(pair.server.no_match, 0, "{extra}");
            check_report(report, n, pair.server.p.size, extra);
            check_wire(&pair, n, extra);
            if extra == "-v -n 300" {
                assert_eq!(host::write_pcap(&pair.log, "raw-bw-mac-fwd.pcap"), 600);
            }
        }
    }

    /// The table's `#iterations` is the forwards; the received and
    /// forwarded lines.
    fn check_report(report: &str, n: u64, size: u64, at: &str) {
        let row = report
            .lines()
            .find(|l| l.trim_start().starts_with(&size.to_string()));
        let cols: Vec<&str> = row.expect(at).split_whitespace().collect();
        assert_eq!(cols[1], n.to_string(), "{at}: #iterations");
        for line in [
            format!("received: {n} of the peer's {n} frames"),
            format!("forwarded: {n} frames, MACs swapped"),
        ] {
            assert!(report.contains(&line), "{at}: {line} in {report}");
        }
    }

    /// The server's k-th frame on the wire is the client's k-th with the
    /// MACs swapped, byte for byte otherwise; and it left after it.
    fn check_wire(pair: &Pair<Run>, n: u64, extra: &str) {
        let mine = |client: bool| -> Vec<&Vec<u8>> {
            let log = pair.log.iter().filter(|(c, _, _)| *c == client);
            log.map(|(_, _, f)| f).collect()
        };
        let (sent, back) = (mine(true), mine(false));
        assert_eq!((sent.len() as u64, back.len() as u64), (n, n), "{extra}");
        for (k, (s, b)) in sent.iter().zip(&back).enumerate() {
            let at = format!("{extra}: frame {k}");
            let ((se, sip, su), (be, bip, bu)) = (headers(s, &at), headers(b, &at));
            assert_eq!(
                (be.source, be.destination),
                (se.destination, se.source),
                "{at}"
            );
            assert_eq!((bip, bu), (sip, su), "{at}");
            assert_eq!(b.len(), s.len(), "{at}");
            assert_eq!(b[12..], s[12..], "{at}");
        }
        let first_back = pair.log.iter().position(|(client, _, _)| !client);
        assert!(first_back > Some(0), "{extra}: the server sent first");
    }

    /// `-v -D 4 -l 4` against a `-b -D 4` client: the forwarder runs about
    /// 4 s from its first frame (warm-up 1 s, sample 2 s, cool-down 1 s,
    /// perftest's D/4 margins) and ends with no error though the peer
    /// stopped first. Counts hold together: what the server took is what
    /// it counted, it forwarded no more than it took and the client sent,
    /// the client got back no more than was forwarded; the table's
    /// #iterations are the forwards completed inside the sample, fewer than
    /// all of them; each forwarded frame is one of the client's with its
    /// MACs swapped.
    #[test]
    fn forwarding_for_a_duration_ends_in_time_with_its_counts_consistent() {
        let t0 = std::time::Instant::now();
        let pair = run("-v -D 4 -l 4 -s 64", true, None, Duration::from_secs(5));
        let took = t0.elapsed();
        let (c, (fw, report)) = sides(&pair);
        let o = &fw.out;
        let s = &o.sent;
        println!(
            "-v -D 4: {took:?}; client sent {}, got back {}; server took {}, forwarded {} \
             ({} completed, {} measured); {} frames on the wire",
            c.out.posted,
            c.counts.packets,
            o.received,
            s.posted,
            s.completed,
            s.measured,
            pair.log.len()
        );
        assert!(took >= Duration::from_secs(4) && took < Duration::from_secs(30));
        assert_eq!(
            (c.error.as_ref(), c.out.error, o.error.as_ref()),
            (None, None, None)
        );
        assert_eq!(fw.counts.packets, o.received);
        assert!(o.received > 0 && o.received <= c.out.posted);
        assert!(s.completed <= s.posted && s.posted <= o.received, "{s:?}");
        assert!(c.counts.packets > 0 && c.counts.packets <= s.posted);
        assert!(s.measured > 0 && s.measured < s.completed, "{s:?}");
        assert!(s.t_end > s.t_start);
        let first_client = Duration::from_micros(pair.log[0].1);
        let last_server = pair.log.iter().rev().find(|(client, _, _)| !client);
        let last_server = Duration::from_micros(last_server.expect("frames back").1);
        assert!(
            last_server >= first_client + Duration::from_millis(2900),
            "the window runs from the first frame: {last_server:?}"
        );
        let row = report.lines().find(|l| l.trim_start().starts_with("64 "));
        let cols: Vec<&str> = row.expect(report).split_whitespace().collect();
        assert_eq!(cols[1], s.measured.to_string(), "#iterations: {report}");
        for line in [
            format!("received: {} of the peer's frames in 4 s", o.received),
            format!("forwarded: {} frames, MACs swapped", s.completed),
        ] {
            assert!(report.contains(&line), "{line} in {report}");
        }
        let sent: std::collections::HashSet<&[u8]> = pair
            .log
            .iter()
            .filter(|(client, _, _)| *client)
            .map(|(_, _, f)| &f[..])
            .collect();
        let back = pair.log.iter().filter(|(client, _, _)| !client);
        for (k, (_, _, f)) in back.enumerate() {
            let mut f = f.clone();
            let (d, src) = f.split_at_mut(6);
            d.swap_with_slice(&mut src[..6]);
            assert!(
                sent.contains(&f[..]),
                "forward {k} is no client frame swapped"
            );
        }
    }

    /// Client frame 50 of 100 lost: the server forwards 99 (with `-l 4`
    /// its last list short, sent once nothing more came) and stalls naming
    /// them; the client, owed 100, stalls at 99 too.
    #[test]
    fn a_lost_frame_stalls_the_forwarder_at_what_came_in() {
        for extra in ["-v -n 100", "-v -n 100 -l 4"] {
            let pair = run(extra, true, Some(50), Duration::from_millis(300));
            let (c, (fw, _)) = sides(&pair);
            assert_eq!(c.counts.packets, 99, "{extra}");
            let o = &fw.out;
            assert_eq!((o.received, o.sent.posted), (99, 99), "{extra}");
            assert!(
                matches!(
                    o.error,
                    Some(FwError::Stalled {
                        received: 99,
                        sent: 99,
                        ..
                    })
                ),
                "{extra}: {:?}",
                o.error
            );
            let words = raw_fw::error_words(o.error.as_ref().unwrap(), o, 100);
            assert!(
                words.contains("99 of 100 frames in") && words.contains("-b"),
                "{extra}: {words}"
            );
        }
    }

    /// perftest's forwarder swaps the MACs only: a client whose ports
    /// differ (`-k 5000 -K 6000`) has a rule for the server's ports the
    /// other way, so its own frames come back to no rule and it stalls,
    /// while the server forwards all of them.
    #[test]
    fn with_other_ports_the_frames_come_back_to_no_rule() {
        let pair = run("-v -n 50", false, None, Duration::from_millis(300));
        let (c, (fw, _)) = sides(&pair);
        assert_eq!((fw.out.error.as_ref(), fw.out.sent.completed), (None, 50));
        assert_eq!((c.counts.packets, pair.client.no_match), (0, 50));
        assert!(c.error.is_some());
        let note = raw_fw::ports_note(&pair.server.p).expect("the server's note");
        assert!(note.contains("-k and -K the same"), "{note}");
        let same = run("-v -n 10", true, None, Duration::from_secs(5));
        assert_eq!(raw_fw::ports_note(&same.server.p), None);
    }
}
