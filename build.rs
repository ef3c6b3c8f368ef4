//! Finds rdma-core with pkg-config and generates the raw FFI layer (`src/sys.rs`)
//! with bindgen over `vendor/wrapper.h`. Static-inline control-path helpers are
//! wrapped into real symbols by bindgen's `wrap_static_fns` and compiled with `cc`.

use std::env;
use std::path::PathBuf;

const DEBIAN_HINT: &str = "install rdma-core's development files and libclang: \
    `apt-get install libibverbs-dev librdmacm-dev ibverbs-providers libclang-dev clang pkg-config` \
    (or run scripts/setup.sh)";

fn probe(lib: &str) -> pkg_config::Library {
    match pkg_config::Config::new().probe(lib) {
        Ok(l) => l,
        Err(e) => {
            panic!("\n\nrdmaperf: pkg-config could not find `{lib}`: {e}\nfix: {DEBIAN_HINT}\n\n")
        }
    }
}

/// Optional verbs the headers may lack (rdma-core 28's do): each becomes a `cfg` when
/// bindgen saw its declaration, so the code that needs it compiles only where it exists.
/// (What the host's library exports is a run-time question: `verbs::rdma_core`.)
fn header_cfgs(bindings: &str) {
    // (cfg, what bindgen emits for it): struct ibv_gid_entry and _ibv_query_gid_ex, rdma-core 32.
    const OPTIONAL: &[(&str, &str)] = &[("rdmaperf_gid_ex", "pub struct ibv_gid_entry")];
    for (cfg, decl) in OPTIONAL {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        if bindings.contains(decl) {
            println!("cargo:rustc-cfg={cfg}");
        }
    }
}

/// The text of `name` as the C compiler finds it: in pkg-config's include paths, then in
/// /usr/include (pkg-config leaves system directories out). Empty when not found.
fn header_text(include_paths: &[PathBuf], name: &str) -> String {
    let system = [PathBuf::from("/usr/include")];
    include_paths
        .iter()
        .chain(system.iter())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .and_then(|p| {
            println!("cargo:rerun-if-changed={}", p.display());
            std::fs::read_to_string(p).ok()
        })
        .unwrap_or_default()
}

/// The commit this build is from, for `rdmaperf --version`: `git rev-parse` at build
/// time, "unknown" outside a git checkout (a source tarball) or without git.
fn git_commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(commit) = git(&["rev-parse", "--short=12", "HEAD"]) else {
        return "unknown".to_string();
    };
    // Rebuild when HEAD moves: HEAD itself (a checkout) and the ref it names (a commit).
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo:rerun-if-changed={head}");
    }
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(p) = git(&["rev-parse", "--git-path", &r]).filter(|p| PathBuf::from(p).exists())
        {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    commit
}

fn main() {
    println!("cargo:rerun-if-changed=vendor/wrapper.h");
    println!("cargo:rerun-if-changed=build.rs");
    // A new vendor/*.c file must rerun the script, not only edits of known ones.
    println!("cargo:rerun-if-changed=vendor");
    let verbs = probe("libibverbs");
    let _mlx5 = probe("libmlx5");
    let _cm = probe("librdmacm");

    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let wrap_path = out.join("static_wrappers");
    let mut builder = bindgen::Builder::default()
        .header("vendor/wrapper.h")
        .clang_args(
            verbs
                .include_paths
                .iter()
                .map(|p| format!("-I{}", p.display())),
        )
        // The hot-path inlines (ibv_post_send, ibv_poll_cq, ibv_wr_*) are also wrapped
        // here for completeness, but the hot path calls the provider's function
        // pointers directly (see post/).
        .wrap_static_fns(true)
        .wrap_static_fns_path(&wrap_path)
        .allowlist_function("ibv_.*|_ibv_.*|__ibv_.*|___ibv_.*|mlx5dv_.*|rdma_.*")
        .allowlist_type("ibv_.*|mlx5dv_.*|mlx5_cqe64|mlx5_err_cqe|rdma_.*")
        .allowlist_var("IBV_.*|MLX5.*|RDMA_.*")
        // bindgen cannot lay out the packed+aligned(4) WQE control segment; the
        // direct path defines its own PRM segments (src/mlx5/), so keep these opaque.
        .opaque_type("mlx5_wqe_.*")
        .blocklist_function("mlx5dv_x86_.*")
        .derive_default(true)
        .derive_debug(true)
        .prepend_enum_name(false)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .layout_tests(true)
        .generate_comments(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    if env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64") {
        builder = builder.clang_arg("-msse3");
    }
    let bindings = match builder.generate() {
        Ok(b) => b,
        Err(e) => panic!(
            "\n\nrdmaperf: bindgen failed over vendor/wrapper.h: {e}\n\
             (libclang missing, or rdma-core headers missing)\nfix: {DEBIAN_HINT}\n\n"
        ),
    };
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");
    header_cfgs(&bindings.to_string());
    println!(
        "cargo:rustc-env=RDMAPERF_LIBIBVERBS_VERSION={}",
        verbs.version
    );
    println!("cargo:rustc-env=RDMAPERF_GIT_COMMIT={}", git_commit());

    // Compile the generated wrappers of static-inline functions.
    let mut cc = cc::Build::new();
    cc.file(wrap_path.with_extension("c"))
        .include(env::var("CARGO_MANIFEST_DIR").unwrap())
        .includes(&verbs.include_paths)
        .warnings(false)
        .opt_level(2);
    if env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64") {
        cc.flag("-msse3");
    }
    cc.compile("rdmaperf_static_wrappers");
    // Our own C glue (test oracles and benchmark references) lives in vendor/*.c.
    let mut glue: Vec<PathBuf> = std::fs::read_dir("vendor")
        .expect("vendor/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    glue.sort();
    for f in &glue {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    // The headers they share (vendor/c_ref_ring.h): an edit must rebuild them too.
    for e in std::fs::read_dir("vendor").expect("vendor/").flatten() {
        if e.path().extension().is_some_and(|x| x == "h") {
            println!("cargo:rerun-if-changed={}", e.path().display());
        }
    }
    if !glue.is_empty() {
        let mut g = cc::Build::new();
        g.files(&glue)
            .includes(&verbs.include_paths)
            .opt_level(2)
            .warnings(true);
        // mlx5dv.h of rdma-core 37 and later names the control segment's bytes 9-10
        // dci_stream_channel_id; older ones call them rsvd[2] (the oracle's layout table).
        if header_text(&verbs.include_paths, "infiniband/mlx5dv.h")
            .contains("dci_stream_channel_id")
        {
            g.define("RDMAPERF_CTRL_DCI_STREAM", None);
        }
        if env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64") {
            g.flag("-msse3");
        }
        g.compile("rdmaperf_glue");
    }
    println!("cargo:rustc-link-lib=ibverbs");
    println!("cargo:rustc-link-lib=mlx5");
    println!("cargo:rustc-link-lib=rdmacm");
}
