//! The serving VM (`scripts/rxe-vm.sh --serve`), in which `scripts/test.sh` runs every VM
//! test file's batches: a batch served after another must start from what a fresh boot
//! gives it, whatever the batch before left behind. The first batch leaves a file in /tmp, a
//! running process, a veth pair with an rxe on it, a network namespace, a second address on
//! dummy0, huge pages, and rxe0 deleted; the second finds none of it and rxe0 back as booted.
//! Nor may it start with a signal ignored that a boot leaves at its default (a served batch
//! once started with SIGINT ignored, so a stock perftest stopped with SIGINT spun on).
//! Both must have been served (not booted), or the test proves nothing: it uses the serving
//! VM of `scripts/test.sh` when one is up, and starts its own otherwise.

mod common;
use common::vm;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const DIRTY: &str = r#"
KD=$(ls -d "${RDMAPERF_VM_DIR:-$RDMAPERF_REPO/.vm}"/kernel-* 2>/dev/null | head -1)
modprobe -d "$KD" veth > $RESULTS/mod.txt 2>&1
echo left > /tmp/served-leftover
sleep 600 &
echo $! > $RESULTS/sleeper.pid
ip link add sv0 type veth peer name sv1 && ip link set sv0 up && ip link set sv1 up
rdma link add rxes type rxe netdev sv0
ip netns add servens
ip addr add 169.254.7.9/16 dev dummy0
echo 4 > /proc/sys/vm/nr_hugepages
rdma link delete rxe0
ls /sys/class/infiniband > $RESULTS/ib.txt
ls /sys/class/net > $RESULTS/net.txt
ip netns list > $RESULTS/netns.txt
ip -4 -o addr show dev dummy0 > $RESULTS/addr.txt
cat /proc/sys/vm/nr_hugepages > $RESULTS/huge.txt
"#;

const CHECK: &str = r#"
grep SigIgn /proc/self/status > $RESULTS/sigign.txt
ls /tmp/served-leftover > $RESULTS/leftover.txt 2>&1
ps -eo args > $RESULTS/ps.txt
ls /sys/class/infiniband > $RESULTS/ib.txt
ls /sys/class/net > $RESULTS/net.txt
ip netns list > $RESULTS/netns.txt
ip -4 -o addr show dev dummy0 > $RESULTS/addr.txt
cat /proc/sys/vm/nr_hugepages > $RESULTS/huge.txt
P=/sys/class/infiniband/rxe0/ports/1
cat $P/state $P/gids/0 $P/gids/1 > $RESULTS/rxe0.txt
single write '"$RDMAPERF_BIN" write-bw -d rxe0 -x 0 -n 50 --loopback'
"#;

/// A serving VM of this test's own, stopped (and waited for) when dropped.
struct OwnServer {
    dir: PathBuf,
    child: Child,
}

impl OwnServer {
    fn start() -> Self {
        let dir = std::env::temp_dir().join(format!("rdmaperf-serve-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the serving VM's dir");
        let log = std::fs::File::create(dir.join("console.log")).expect("console.log");
        let child = Command::new("bash")
            .arg(vm::repo().join("scripts/rxe-vm.sh"))
            .arg("--serve")
            .arg(&dir)
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start scripts/rxe-vm.sh --serve");
        let server = Self { dir, child };
        let t0 = Instant::now();
        while !server.dir.join(".vm/ready").exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(600),
                "the serving VM was not up after 600 s:\n{}",
                std::fs::read_to_string(server.dir.join("console.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        server
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join(".vm/stop"), "");
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(60) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn serving_vm_up(dir: &str) -> bool {
    Command::new("bash")
        .arg(vm::repo().join("scripts/vm-job.sh"))
        .arg("--alive")
        .env("RDMAPERF_VM_SERVE", dir)
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn a_served_batch_starts_from_the_boot_state() {
    if let Err(why) = vm::available() {
        println!("SKIPPED: {why}");
        return;
    }
    let shared = std::env::var("RDMAPERF_VM_SERVE")
        .ok()
        .filter(|d| serving_vm_up(d));
    let own = shared.is_none().then(OwnServer::start);
    let dir = shared.unwrap_or_else(|| own.as_ref().unwrap().dir.display().to_string());
    let batch = || vm::Batch::rdmaperf().env("RDMAPERF_VM_SERVE", &dir);

    let dirty = batch().run(DIRTY);
    let clean = batch().run(CHECK);
    for (name, r) in [("first", &dirty), ("second", &clean)] {
        assert_eq!(r.status, 0, "{name} batch:\n{}", r.console);
        assert!(
            r.console.contains("served by the VM") && r.boot_s == Some(0.0),
            "the {name} batch was not served (it booted), so this test checks nothing:\n{}",
            r.console
        );
    }
    // The first batch really left each thing behind.
    let [ib, net, netns, addr, huge] =
        dirty.shown_files(["ib.txt", "net.txt", "netns.txt", "addr.txt", "huge.txt"]);
    assert!(ib.contains("rxes") && !ib.contains("rxe0"), "{ib}");
    assert!(net.contains("sv0") && net.contains("sv1"), "{net}");
    assert!(netns.contains("servens"), "{netns}");
    assert!(addr.contains("169.254.7.9/16"), "{addr}");
    assert_eq!(huge.trim(), "4");

    // The second found none of it.
    let [leftover, ps, ib, net, netns, addr, huge, rxe0] = clean.shown_files([
        "leftover.txt",
        "ps.txt",
        "ib.txt",
        "net.txt",
        "netns.txt",
        "addr.txt",
        "huge.txt",
        "rxe0.txt",
    ]);
    assert!(leftover.contains("No such file"), "{leftover}");
    assert!(!ps.contains("sleep 600"), "{ps}");
    assert_eq!(ib.split_whitespace().collect::<Vec<_>>(), ["rxe0"]);
    assert_eq!(net.split_whitespace().collect::<Vec<_>>(), ["dummy0", "lo"]);
    assert_eq!(netns.trim(), "");
    assert!(
        addr.contains("169.254.7.1/16") && !addr.contains("169.254.7.9"),
        "{addr}"
    );
    assert_eq!(huge.trim(), "0");
    assert_eq!(
        rxe0.split_whitespace().collect::<Vec<_>>(),
        [
            "4:",
            "ACTIVE",
            "fe80:0000:0000:0000:0000:00ff:fe00:0701",
            "0000:0000:0000:0000:0000:ffff:a9fe:0701"
        ]
    );
    // Signal dispositions as at boot: a batch run as a background job of a non-interactive
    // shell would start with SIGINT and SIGQUIT ignored, inherited by every process in it.
    let sigign = clean.shown_files(["sigign.txt"])[0];
    let mask = u64::from_str_radix(sigign.trim().trim_start_matches("SigIgn:").trim(), 16)
        .unwrap_or_else(|e| panic!("SigIgn in {sigign:?}: {e}"));
    assert_eq!(
        mask & 0b110,
        0,
        "SIGINT or SIGQUIT ignored in a served batch: {sigign}"
    );
    let w = clean.single("write");
    assert_eq!(w.rc, Some(0), "write-bw on the restored rxe0:\n{}", w.out);
}
