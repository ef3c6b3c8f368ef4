//! `rdmaperf --version`: each line a bug report needs is there and says something true
//! about this build and this host; `-V` stays one line.

use std::process::Command;

fn run(flag: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_rdmaperf"))
        .arg(flag)
        .output()
        .expect("run rdmaperf");
    assert!(out.status.success(), "{flag}: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The value of the line `key: value`.
fn field<'a>(text: &'a str, key: &str) -> &'a str {
    let prefix = format!("{key}: ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no '{key}:' line in\n{text}"))
}

fn git_head() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn long_version_names_commit_features_rdma_core_and_cpu() {
    let v = run("--version");
    assert!(
        v.starts_with(&format!("rdmaperf {}\n", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );

    // The commit the build script saw: this checkout's HEAD (build.rs reruns when it moves).
    let expect = git_head().unwrap_or_else(|| "unknown".to_string());
    assert_eq!(field(&v, "commit"), expect, "{v}");

    let mut features: Vec<&str> = Vec::new();
    for (name, on) in [
        ("heatmap", cfg!(feature = "heatmap")),
        ("model", cfg!(feature = "model")),
        ("mpi", cfg!(feature = "mpi")),
    ] {
        if on {
            features.push(name);
        }
    }
    let expect = if features.is_empty() {
        "none".to_string()
    } else {
        features.join(", ")
    };
    assert_eq!(field(&v, "features"), expect, "{v}");

    // rdma-core: pkg-config's libibverbs version at build time, "1.<abi>.<release>".
    let lib = env!("RDMAPERF_LIBIBVERBS_VERSION");
    let release = lib.splitn(3, '.').nth(2).expect(lib);
    assert_eq!(
        field(&v, "rdma-core built against"),
        format!("rdma-core {release} (libibverbs {lib})"),
        "{v}"
    );
    // The library the loader picked: an existing file whose name carries the release shown.
    let runs = field(&v, "rdma-core runs on");
    let (rel, file) = runs
        .strip_prefix("rdma-core ")
        .and_then(|r| r.split_once(" ("))
        .unwrap_or_else(|| panic!("{runs}"));
    let file = file.trim_end_matches(')');
    assert!(std::path::Path::new(file).is_file(), "{runs}");
    assert!(file.ends_with(&format!(".{rel}")), "{runs}");
    assert!(rel.split('.').all(|n| n.parse::<u32>().is_ok()), "{runs}");

    let cpu = field(&v, "cpu target");
    if cfg!(target_arch = "x86_64") {
        let v2 = cfg!(target_feature = "sse4.2");
        assert_eq!(cpu.starts_with("x86-64-v2 "), v2, "{cpu}");
        assert!(
            cpu.contains("this CPU has") || cpu.contains("this CPU lacks"),
            "{cpu}"
        );
    } else {
        assert!(cpu.starts_with(std::env::consts::ARCH), "{cpu}");
    }
}

#[test]
fn short_version_is_one_line() {
    assert_eq!(
        run("-V"),
        format!("rdmaperf {}\n", env!("CARGO_PKG_VERSION"))
    );
}
