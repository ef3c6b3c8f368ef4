//! The README's first command (`scripts/main.sh`) on a fresh machine: its pre-flight (main.sh,
//! setup.sh, rxe-vm.sh up to the VM's start) must ask for the main job's packages only.
//!
//! The package state is a stand-in: `dpkg-query` on `PATH` answers "installed" for a list of
//! names, `apt-get` logs its arguments and fails (nothing is ever installed), `id -u` can
//! answer a non-root uid. The VM cache is a fixture directory whose stamp carries the current
//! recipe sum. `RDMAPERF_PREFLIGHT=1` stops main.sh before the build and rxe-vm.sh where qemu
//! would start (`RDMAPERF_VM_DRY_RUN`).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rdmaperf-preflight-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn script(path: &Path, body: &str) {
    fs::write(path, format!("#!/bin/bash\n{body}\n")).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// The packages of one setup.sh scope, as setup.sh lists them.
fn scope(arg: &str) -> Vec<String> {
    let out = Command::new("bash")
        .arg(repo().join("scripts/setup.sh"))
        .args(["--list", arg])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "setup.sh --list {arg}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A machine: stand-ins on PATH, the installed packages, a ready VM cache.
struct Machine {
    dir: PathBuf,
}

impl Machine {
    fn new(tag: &str, installed: &[String], uid: Option<u32>) -> Machine {
        let dir = tmp(tag);
        let bin = dir.join("bin");
        fs::create_dir_all(&bin).unwrap();
        fs::write(dir.join("installed"), installed.join("\n") + "\n").unwrap();
        // dpkg-query -W -f='${db:Status-Status} ${Architecture}\n' NAME
        script(
            &bin.join("dpkg-query"),
            &format!(
                "name=${{@: -1}}; grep -qx \"$name\" {}/installed || exit 1\necho \"installed $(dpkg --print-architecture)\"",
                dir.display()
            ),
        );
        // `update` succeeds, `install` fails: the log shows what would have been installed.
        let apt = format!(
            "echo \"$*\" >> {}/apt.log\n[[ \" $* \" == *\" update \"* ]]",
            dir.display()
        );
        script(&bin.join("apt-get"), &apt);
        if let Some(u) = uid {
            script(
                &bin.join("id"),
                &format!("[ \"$1\" = -u ] && {{ echo {u}; exit 0; }}\nexec /usr/bin/id \"$@\""),
            );
        }
        Machine::vm_cache(&dir.join("vm"));
        Machine { dir }
    }

    /// A VM cache that setup.sh --check takes as ready (the files exist, the sum is current).
    fn vm_cache(vm: &Path) {
        fs::create_dir_all(vm.join("k")).unwrap();
        fs::write(vm.join("k/vmlinuz"), b"").unwrap();
        fs::write(vm.join("initrd.gz"), b"").unwrap();
        let sum = Command::new("bash")
            .arg(repo().join("scripts/setup.sh"))
            .arg("--recipe-sum")
            .output()
            .unwrap();
        let sum = String::from_utf8(sum.stdout).unwrap();
        let stamp = format!(
            "KVER=x\nKERNEL=k/vmlinuz\nINITRD=initrd.gz\nINIT_SUM={}\n",
            sum.trim()
        );
        fs::write(vm.join("ready"), stamp).unwrap();
    }

    fn main_sh(&self) -> Output {
        let path = format!(
            "{}:{}",
            self.dir.join("bin").display(),
            std::env::var("PATH").unwrap()
        );
        Command::new("bash")
            .arg(repo().join("scripts/main.sh"))
            .current_dir(repo())
            .env("PATH", path)
            .env("RDMAPERF_PREFLIGHT", "1")
            .env("RDMAPERF_VM_DIR", self.dir.join("vm"))
            .env_remove("RDMAPERF_NO_AARCH64")
            .output()
            .unwrap()
    }

    fn apt_calls(&self) -> String {
        fs::read_to_string(self.dir.join("apt.log")).unwrap_or_default()
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// This host has an RDMA device: main.sh then takes the hardware path, not
/// the VM's, and these cases say SKIPPED with that reason.
fn skipped_on_rdma_host() -> bool {
    let has = fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some());
    if has {
        println!("SKIPPED: this host has an RDMA device; main.sh's VM pre-flight is not taken");
    }
    has
}

/// main.sh's pre-flight on a stand-in machine with `installed` and `uid`:
/// the machine, whether main.sh succeeded, and its stderr. None (SKIPPED
/// printed) on a host with an RDMA device.
fn preflight(tag: &str, installed: &[String], uid: Option<u32>) -> Option<(Machine, bool, String)> {
    if skipped_on_rdma_host() {
        return None;
    }
    let m = Machine::new(tag, installed, uid);
    let out = m.main_sh();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    Some((m, out.status.success(), err))
}

#[test]
fn main_job_packages_are_enough_for_the_preflight() {
    let main = scope("--main");
    let Some((m, ok, err)) = preflight("main-only", &main, None) else {
        return;
    };
    assert!(
        ok,
        "main.sh pre-flight failed with the main job's packages only:\n{err}"
    );
    assert!(
        err.contains("dry run: the VM is ready to boot"),
        "rxe-vm.sh's checks did not all run:\n{err}"
    );
    assert_eq!(
        m.apt_calls(),
        "",
        "apt-get ran although everything the main job needs is installed"
    );
}

#[test]
fn main_job_scope_leaves_out_tests_and_cross_build() {
    let main = scope("--main");
    let all = scope("--check"); // the default scope: everything
    for p in [
        "gcc-aarch64-linux-gnu",
        "qemu-user",
        "libibverbs-dev:arm64",
        "valgrind",
        "openmpi-bin",
    ] {
        assert!(
            !main.iter().any(|m| m == p),
            "the main job's scope asks for {p}"
        );
        assert!(all.iter().any(|m| m == p), "the full scope lost {p}");
    }
    for p in [
        "libibverbs-dev",
        "qemu-system-x86",
        "perftest",
        "busybox-static",
    ] {
        assert!(
            main.iter().any(|m| m == p),
            "the main job's scope lacks {p}"
        );
    }
}

#[test]
fn fresh_machine_not_root_gets_one_sentence() {
    let Some((m, ok, err)) = preflight("bare-user", &[], Some(1000)) else {
        return;
    };
    assert!(!ok, "main.sh went on with nothing installed:\n{err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one sentence, got:\n{err}");
    let l = lines[0];
    assert!(l.starts_with("main.sh: error: "), "{l}");
    assert!(
        l.contains("sudo scripts/main.sh"),
        "the fix is not named: {l}"
    );
    assert!(
        l.contains("qemu-system-x86") && l.contains("libibverbs-dev"),
        "the missing packages are not named: {l}"
    );
    assert!(
        !l.contains("aarch64") && !l.contains("valgrind"),
        "names packages the main job does not need: {l}"
    );
    assert_eq!(m.apt_calls(), "", "apt-get ran for a non-root user");
}

#[test]
fn fresh_machine_as_root_installs_the_main_job_packages_only() {
    let Some((m, ok, err)) = preflight("bare-root", &[], Some(0)) else {
        return;
    };
    // The apt-get stand-in fails, so the job stops there, naming the failed step.
    assert!(!ok, "{err}");
    let calls = m.apt_calls();
    let install = calls.lines().find(|l| l.contains("install")).unwrap_or_else(|| {
        panic!("as root on a bare machine main.sh did not install anything:\n{err}\napt-get: {calls}")
    });
    let main = scope("--main");
    for word in install
        .split_whitespace()
        .filter(|w| !w.starts_with('-') && *w != "install")
    {
        assert!(
            main.iter().any(|p| p == word),
            "main.sh installs {word}, outside the main job's scope"
        );
    }
    assert!(
        err.contains("setup.sh --main failed") || err.contains("apt-get"),
        "{err}"
    );
}
