//! perftest's connection flags on soft-RoCE in the VM (one boot): `-T/--tos`
//! with `-R` (the ToS read back from the data QP's traffic class, or the run
//! fails), `-z` (control messages over rdma_cm, data QPs by hand), `--ipv6`
//! (GID auto-selection picks dummy0's fe80:: GID 0 over ::ffff:169.254.7.1),
//! `--ipv6-addr` (the TCP control connection over ::1 and over a link-local
//! fe80::%dummy0 address) and `--bind_source_ip` / 4.5's `--source_ip` (the
//! control socket's source, seen by `ss` while the pair runs). rdmaperf
//! against itself, and against stock perftest 4.5 both ways where 4.5 has
//! the flag (4.5 has no --ipv6-addr), and `-g`/`-M` (UD multicast,
//! send-bw) with a group this host joined at the IP level (see the script).

mod common;
use common::vm;
use common::vm_script::{cm_pair, cmd, pair_to, pairs, Ends, CM_ADDR, RDMAPERF};
use std::sync::OnceLock;

/// dummy0's link-local address (fixed MAC 02:00:00:00:07:01 in the VM init).
const LL: &str = "fe80::ff:fe00:701%dummy0";

fn script() -> String {
    let r = RDMAPERF;
    let bw = "-d rxe0 -F -s 64 -n 200";
    // The pairs a sampler watches (ss, `rdma res show`) run for a fixed
    // time: 200 iterations end under TCG before a sampler that spawns a
    // process every 50 ms is sure to see the connection.
    let bwd = "-d rxe0 -F -s 64 -D 2";
    let mut s = String::from("PAIR_TIMEOUT=90\n");
    // (A stock -R/-z client's lost connect runs the pair once more: vm_script::cm_pair.)
    // -T with -R.
    let tos = format!("{bw} -R -T 96");
    for e in Ends::ALL {
        s += &cm_pair("tos", e, "write-bw", &tos, &tos);
    }
    // -z: 4.5 spells it --com_rdma_cm, master --comm_rdma_cm.
    let z = format!("{bw} -x 0 -z");
    for (e, flag) in [
        (Ends::Rr, "--comm_rdma_cm"),
        (Ends::Sr, "--com_rdma_cm"),
        (Ends::Rs, "-z"),
    ] {
        s += &cm_pair("z", e, "write-bw", &z, &format!("{bw} -x 0 {flag}"));
    }
    let z_lat = "-d rxe0 -F -x 0 -n 100 -z";
    s += &cm_pair("z_lat", Ends::Rr, "send-lat", z_lat, z_lat);
    // --ipv6: no -x, so the auto-selection decides.
    let v6 = format!("{bw} --ipv6");
    s += &pairs("v6gid", &[Ends::Rr, Ends::Sr], "write-bw", &v6, &v6);
    s += &pairs("v4gid", &[Ends::Rr], "write-bw", bw, bw);
    // --ipv6-addr over ::1 and over dummy0's link-local address, bound.
    let v6addr = cmd(false, "write-bw", &format!("{bw} -x 0 --ipv6-addr"));
    s += &pair_to("v6addr_lo", &v6addr, &v6addr, "::1");
    let v6addr = cmd(false, "write-bw", &format!("{bwd} -x 0 --ipv6-addr"));
    let cli = format!("{v6addr} --bind_source_ip {LL}");
    s += &watch_then("v6addr_ll", &pair_to("v6addr_ll", &v6addr, &cli, LL));
    // --bind_source_ip: 127.0.0.2 is this host's too (all of 127/8 is lo).
    let src = format!("{bwd} -x 0");
    for (e, flag) in [
        (Ends::Rr, "--bind_source_ip=127.0.0.2"),
        (Ends::Sr, "--source_ip 127.0.0.2"),
        (Ends::Rs, "--source_ip 127.0.0.2"),
    ] {
        let line = pairs("src", &[e], "write-bw", &src, &format!("{src} {flag}"));
        s += &watch_then(&format!("src_{}", e.suffix()), &line);
    }
    // -R --bind_source_ip: the CM ids resolve from a second address on
    // dummy0 (added last: it adds a GID, the cases above see the fixed table).
    s += "ip addr add 169.254.7.2/16 dev dummy0; sleep 1\n";
    s += &format!(
        "PAIR_BEFORE_CLIENT='( for i in $(seq 400); do rdma res show cm_id 2>&1 | grep \"dst-addr {CM_ADDR}:$PORT\" \
         >> $RESULTS/src_cm.cm; sleep 0.05; done ) & '\n\
         pair src_cm '{r} write-bw {bwd} -x 0 -R -p $PORT' '{r} write-bw {bwd} -x 0 -R --bind_source_ip 169.254.7.2 -p $PORT {CM_ADDR}'\n\
         PAIR_BEFORE_CLIENT=\n"
    );
    // -g/-M: rxe sends a multicast packet through the IP stack, which loops a
    // copy back to this host only for a group joined at the IP level (an
    // ff01:: node-local group, perftest's default, never leaves): a socket
    // holds ff02::1301 on dummy0 while these run; -M names that group, in
    // perftest's byte form and as an IPv6 address.
    s += "python3 -c 'import socket,struct,time; s=socket.socket(socket.AF_INET6,socket.SOCK_DGRAM); \
          s.setsockopt(socket.IPPROTO_IPV6,socket.IPV6_JOIN_GROUP,socket.inet_pton(socket.AF_INET6,\"ff02::1301\")\
          +struct.pack(\"@I\",socket.if_nametoindex(\"dummy0\"))); print(\"joined\",flush=True); time.sleep(600)' \
          > $RESULTS/join.out 2>&1 & J=$!\n\
          for i in $(seq 100); do grep -q joined $RESULTS/join.out && break; sleep 0.1; done\n";
    let mg = "-M 255:2:0:0:0:0:0:0:0:0:0:0:0:0:19:1";
    let sbw_g = "send-bw -d rxe0 -F -g -s 64 -n 100";
    let ssbw_g = "ib_send_bw -d rxe0 -F -x 0 -g -s 64 -n 100";
    s += &format!(
        "pair mc_rr '{r} {sbw_g} {mg} -p $PORT' '{r} {sbw_g} -M ff02::1301 -p $PORT 127.0.0.1'\n"
    );
    s += &format!("pair mc_sr '{ssbw_g} {mg} -p $PORT' '{r} {sbw_g} {mg} -p $PORT 127.0.0.1'\n");
    s += &format!("pair mc_rs '{r} {sbw_g} {mg} -p $PORT' '{ssbw_g} {mg} -p $PORT 127.0.0.1'\n");
    // send-lat: both ends attach (to the same -M group, as perftest does).
    let slat_g = "send-lat -d rxe0 -F -g -s 64 -n 100";
    s += &format!(
        "pair mc_lat_rr '{r} {slat_g} {mg} -p $PORT' '{r} {slat_g} {mg} -p $PORT 127.0.0.1'\n"
    );
    s += &format!(
        "pair mc_lat_sr 'ib_send_lat -d rxe0 -F -x 0 -g -s 64 -n 100 {mg} -p $PORT' \
         '{r} {slat_g} {mg} -p $PORT 127.0.0.1'\n"
    );
    s += "kill $J\n";
    s += "PAIR_TIMEOUT=30\n";
    // Not an address of this host: refused at bind, at once (no retrying).
    s += &format!(
        "single src_bad '{r} write-bw {bw} -x 0 --bind_source_ip 169.254.9.9 --timeout 20 -p 19201 127.0.0.1'\n"
    );
    s += "exit 0\n";
    s
}

/// Runs `pair_line` with a watcher that records the established control
/// connections to the server's port (`ss`: local and peer address).
fn watch_then(name: &str, pair_line: &str) -> String {
    format!(
        "PAIR_BEFORE_CLIENT='( for i in $(seq 400); do ss -Htn state established \"( sport = :$PORT )\" \
         >> $RESULTS/{name}.ss 2>&1; sleep 0.05; done ) & '\n{pair_line}PAIR_BEFORE_CLIENT=\n"
    )
}

/// The pairs that run `-D 2` for their watcher (see the script).
const TIMED: [&str; 5] = ["v6addr_ll", "src_rr", "src_sr", "src_rs", "src_cm"];

static BATCH: OnceLock<vm::BatchResult> = OnceLock::new();

fn batch() -> Option<&'static vm::BatchResult> {
    vm::shared_batch(&BATCH, env!("CARGO_BIN_EXE_rdmaperf"), 900, script)
}

/// The pair passed with one bw row of 64 B x 200 on each rdmaperf side.
fn ok_pair(name: &str) -> Option<vm::Pair> {
    let b = batch()?;
    let reruns = b
        .file("retries")
        .unwrap_or("")
        .lines()
        .filter(|l| *l == name)
        .count();
    if reruns > 0 {
        println!("{name}: the stock client's connect was refused; {reruns} rerun(s)");
    }
    let p = b.ok_pair(name);
    if !name.contains("lat") {
        for (who, out) in [("server", &p.server.out), ("client", &p.client.out)] {
            let rows = vm::bw_result_rows(out);
            if TIMED.contains(&name) {
                assert!(
                    rows.len() == 1 && rows[0].0 == 64 && rows[0].1 > 0,
                    "{name} {who}: one row of 64 B, some iterations (-D 2):\n{out}"
                );
            } else {
                assert_eq!(
                    rows,
                    vec![(64, 200)],
                    "{name} {who}: one row of 64 B x 200:\n{out}"
                );
            }
        }
    }
    Some(p)
}

/// The GID lines of the address block (`GID: 254:128:...`).
fn gids(out: &str) -> Vec<&str> {
    out.lines()
        .filter_map(|l| l.trim().strip_prefix("GID: "))
        .collect()
}

#[test]
fn tos_with_rdma_cm() {
    let Some(p) = ok_pair("tos_rr") else { return };
    for out in [&p.server.out, &p.client.out] {
        assert!(
            out.contains("Data ex. method : rdma_cm \tTOS    : 96"),
            "the info block shows the ToS:\n{out}"
        );
    }
}

#[test]
fn tos_against_stock_server() {
    let Some(p) = ok_pair("tos_sr") else { return };
    assert!(p.client.out.contains("TOS    : 96"), "{}", p.client.out);
}

#[test]
fn tos_against_stock_client() {
    let Some(p) = ok_pair("tos_rs") else { return };
    assert!(p.server.out.contains("TOS    : 96"), "{}", p.server.out);
    assert!(p.client.out.contains("TOS    : 96"), "{}", p.client.out);
}

/// -z: the exchange over rdma_cm, the data QPs connected by the key messages.
fn assert_z(out: &str) {
    assert!(
        out.contains("rdma_cm QPs\t : OFF") && out.contains("Data ex. method : rdma_cm"),
        "-z: rdma_cm exchange, QPs by hand:\n{out}"
    );
}

#[test]
fn comm_rdma_cm_rdmaperf_both_ends() {
    let Some(p) = ok_pair("z_rr") else { return };
    assert_z(&p.server.out);
    assert_z(&p.client.out);
}

#[test]
fn comm_rdma_cm_against_stock_server() {
    let Some(p) = ok_pair("z_sr") else { return };
    assert_z(&p.server.out);
    assert_z(&p.client.out);
}

#[test]
fn comm_rdma_cm_against_stock_client() {
    let Some(p) = ok_pair("z_rs") else { return };
    assert_z(&p.server.out);
    assert_z(&p.client.out);
}

#[test]
fn comm_rdma_cm_latency() {
    let Some(p) = ok_pair("z_lat_rr") else { return };
    assert_z(&p.client.out);
    let row = p
        .client
        .out
        .lines()
        .find(|l| l.split_whitespace().next() == Some("2"))
        .unwrap_or_else(|| panic!("no latency row:\n{}", p.client.out));
    assert_eq!(row.split_whitespace().nth(1), Some("100"), "{row}");
}

/// dummy0's GIDs: 0 = fe80::ff:fe00:701 (IPv6 link-local), 1 = ::ffff:169.254.7.1.
const V6_GID: &str = "254:128:00:00:00:00:00:00:00:00:00:255:254:00:07:01";
const V4_GID: &str = "00:00:00:00:00:00:00:00:00:00:255:255:169:254:07:01";

#[test]
fn ipv6_prefers_the_ipv6_gid() {
    let Some(p) = ok_pair("v6gid_rr") else { return };
    for out in [&p.server.out, &p.client.out] {
        assert_eq!(
            gids(out),
            vec![V6_GID, V6_GID],
            "both ends on GID 0:\n{out}"
        );
    }
    // Without --ipv6 the same command picks the IPv4-mapped GID (the flag did it).
    let Some(p) = ok_pair("v4gid_rr") else { return };
    for out in [&p.server.out, &p.client.out] {
        assert_eq!(
            gids(out),
            vec![V4_GID, V4_GID],
            "both ends on GID 1:\n{out}"
        );
    }
}

#[test]
fn ipv6_against_stock_server() {
    let Some(p) = ok_pair("v6gid_sr") else { return };
    assert_eq!(
        gids(&p.client.out),
        vec![V6_GID, V6_GID],
        "{}",
        p.client.out
    );
}

/// The control connections `ss` saw on the server's port: (local, peer).
fn conns(name: &str) -> Vec<(String, String)> {
    let Some(b) = batch() else { return Vec::new() };
    let ss = b
        .file(&format!("{name}.ss"))
        .unwrap_or_else(|| panic!("{name}: no ss record"));
    ss.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4).then(|| (f[2].to_string(), f[3].to_string()))
        })
        .collect()
}

/// Where the pair `name` ran, its control connection came from `src`.
fn ran_from(name: &str, src: &str) {
    if ok_pair(name).is_some() {
        assert_source(name, src);
    }
}

fn assert_source(name: &str, src: &str) {
    let c = conns(name);
    assert!(!c.is_empty(), "{name}: ss saw no control connection");
    assert!(
        c.iter().all(|(_, peer)| peer.starts_with(src)),
        "{name}: every control connection comes from {src}: {c:?}"
    );
}

#[test]
fn ipv6_addr_over_loopback() {
    // The pair ran (one row each side) over a socket that only IPv6 reaches.
    ok_pair("v6addr_lo");
}

#[test]
fn ipv6_addr_link_local_bound() {
    ran_from("v6addr_ll", "[fe80::ff:fe00:701");
}

#[test]
fn bind_source_ip_rdmaperf_both_ends() {
    ran_from("src_rr", "127.0.0.2:");
}

#[test]
fn source_ip_45_spelling_against_stock_server() {
    ran_from("src_sr", "127.0.0.2:");
}

/// Debian's perftest 4.5 (4.5-0.20) lists `--source_ip` twice in its long
/// options, first as the raw Ethernet `-j`, so getopt never reaches the bind
/// flag: its client connects from the routing table's choice. The pair still
/// has to work against rdmaperf's server.
#[test]
fn stock_source_ip_against_rdmaperf_server() {
    if ok_pair("src_rs").is_none() {
        return;
    }
    let c = conns("src_rs");
    println!("src_rs: stock 4.5 --source_ip 127.0.0.2 connected as {c:?}");
    assert!(!c.is_empty(), "src_rs: ss saw no control connection");
}

#[test]
fn bind_source_ip_with_rdma_cm() {
    if ok_pair("src_cm").is_none() {
        return;
    }
    let b = batch().unwrap();
    let cm = b.file("src_cm.cm").unwrap_or("");
    assert!(
        cm.contains("src-addr 169.254.7.2:"),
        "the client's CM ids resolved from 169.254.7.2:\n{cm}"
    );
    assert!(
        !cm.lines()
            .any(|l| l.contains("src-addr 169.254.7.1:") && l.contains("dst-addr 169.254.7.1:")),
        "no CM id of the client from the default address:\n{cm}"
    );
}

#[test]
fn bind_source_ip_not_on_this_host() {
    let Some(b) = batch() else { return };
    // Names the flag and the address.
    b.single("src_bad")
        .assert_failed_with(&["--bind_source_ip", "bind to source 169.254.9.9"]);
}

/// The bw row's iterations on both sides (send-bw -g: UD, size the MTU's).
fn mcast_rows(p: &vm::Pair) {
    for (who, out) in [("server", &p.server.out), ("client", &p.client.out)] {
        let rows = vm::bw_result_rows(out);
        assert!(
            rows.len() == 1 && rows[0].1 == 100,
            "{} {who}: one row of 100 iterations:\n{out}",
            p.name
        );
    }
}

/// ff02::1301 as perftest prints a GID.
const GROUP: &str = "255:02:00:00:00:00:00:00:00:00:00:00:00:00:19:01";

fn mcast_pair(name: &str) -> Option<vm::Pair> {
    let b = batch()?;
    let p = b.ok_pair(name);
    mcast_rows(&p);
    Some(p)
}

#[test]
fn mcast_rdmaperf_both_ends() {
    let Some(p) = mcast_pair("mc_rr") else { return };
    for out in [&p.server.out, &p.client.out] {
        assert!(out.contains("Send BW Multicast Test"), "{out}");
        assert!(out.contains(" MultiCast runs on UD!\n"), "{out}");
        assert!(out.contains(" Connection type : UD"), "{out}");
    }
    // The server's key message names the group (its MGID line), the
    // client's remote line shows the same group and QPN 0xffffff.
    assert!(
        p.server.out.contains(&format!(" MGID: {GROUP}")),
        "{}",
        p.server.out
    );
    assert!(
        p.client.out.contains(&format!(" MGID: {GROUP}")) && p.client.out.contains("QPN 0xffffff"),
        "{}",
        p.client.out
    );
}

#[test]
fn mcast_against_stock_server() {
    let Some(p) = mcast_pair("mc_sr") else { return };
    assert!(
        p.client.out.contains(&format!(" MGID: {GROUP}")),
        "{}",
        p.client.out
    );
}

#[test]
fn mcast_against_stock_client() {
    let Some(p) = mcast_pair("mc_rs") else { return };
    assert!(
        p.client.out.contains(&format!(" MGID: {GROUP}")),
        "{}",
        p.client.out
    );
}

/// send-lat -g: the client's latency row counts the 100 round trips, and
/// both of its address lines are groups (each end receives on one).
fn mcast_lat(name: &str) {
    let Some(b) = batch() else { return };
    let p = b.ok_pair(name);
    let out = &p.client.out;
    assert!(out.contains("Send Latency Multicast Test"), "{out}");
    let row = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some("64"))
        .unwrap_or_else(|| panic!("{name}: no latency row:\n{out}"));
    assert_eq!(row.split_whitespace().nth(1), Some("100"), "{row}");
    assert!(out.contains("QPN 0xffffff"), "{out}");
}

#[test]
fn mcast_latency_rdmaperf_both_ends() {
    mcast_lat("mc_lat_rr");
}

#[test]
fn mcast_latency_against_stock_server() {
    mcast_lat("mc_lat_sr");
}
