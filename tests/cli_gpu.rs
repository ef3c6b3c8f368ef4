//! perftest master's CUDA flags through rdmaperf's CLI path (flag table,
//! clap, parameter rules): what they resolve to and every refusal's reason.
//! Nothing here loads libcuda (that happens at buffer set-up).

use rdmaperf::cli::params::{self, Params};
use rdmaperf::cli::{self, Parsed};
use rdmaperf::gpu::GpuSelect;

mod common;
use common::cli::{client_argv, SCATTER_OFF_NOTICE};

fn resolve(cmdline: &str) -> Result<Params, String> {
    match cli::parse(client_argv(cmdline)) {
        Parsed::Tool(tool, a) => params::resolve(tool, &a),
        Parsed::Print { text, .. } => Err(text),
        Parsed::Clap(e) => Err(format!("clap: {e}")),
        Parsed::Other(o) => panic!("{cmdline}: {o:?}"),
    }
}

#[test]
fn use_cuda_selects_the_gpu_and_forces_inline_zero() {
    let p = resolve("send-lat --use_cuda=1").unwrap();
    let g = p.gpu.unwrap();
    assert_eq!(g.select, GpuSelect::Index(1));
    assert!(!g.dmabuf && !g.pcie_mapping);
    assert_eq!(p.inline_size, 0);
    assert!(
        p.notices.iter().any(|n| n.contains("inline size set to 0")),
        "{:?}",
        p.notices
    );
    // Host memory keeps perftest's default inline.
    assert_eq!(resolve("send-lat").unwrap().inline_size, 236);
    assert!(resolve("send-lat").unwrap().gpu.is_none());
    let p = resolve("write-bw --use_cuda=0").unwrap();
    assert!(
        p.notices.iter().all(|n| !n.contains("inline")),
        "bw: inline is 0 already"
    );
}

#[test]
fn dmabuf_may_come_before_use_cuda() {
    for cmd in [
        "send-bw --use_cuda_dmabuf --use_cuda 0",
        "send-bw --use_cuda=0 --use_cuda_dmabuf",
    ] {
        let g = resolve(cmd).unwrap().gpu.unwrap();
        assert!(g.dmabuf, "{cmd}");
    }
    let g =
        resolve("read-bw --use_cuda_bus_id=0000:1b:00.0 --use_cuda_dmabuf --use_cuda_pcie_mapping")
            .unwrap()
            .gpu
            .unwrap();
    assert_eq!(g.select, GpuSelect::BusId("0000:1b:00.0".into()));
    assert!(g.dmabuf && g.pcie_mapping);
    assert!(resolve("read-lat --use_cuda=0 --cuda_mem_type=0").is_ok());
    assert!(resolve("send-lat --use_cuda=0").is_ok());
}

#[test]
fn refusals_name_the_flag_and_the_reason() {
    let cases: &[(&str, &str)] = &[
        (
            "write-bw --use_cuda auto",
            "\"auto\" is not a CUDA device ordinal: give one like 0 or 1",
        ),
        (
            "write-bw --use_cuda_dmabuf",
            "--use_cuda_dmabuf needs --use_cuda=<idx> or --use_cuda_bus_id",
        ),
        (
            "write-bw --cuda_mem_type=0",
            "--cuda_mem_type needs --use_cuda",
        ),
        (
            "write-bw --use_cuda=0 --use_cuda_pcie_mapping",
            "--use_cuda_pcie_mapping needs --use_cuda_dmabuf",
        ),
        (
            "write-bw --use_cuda=0 --cuda_mem_type=1",
            "(managed) needs --odp",
        ),
        (
            "write-bw --use_cuda=0 --cuda_mem_type=4",
            "(malloc) needs --odp",
        ),
        (
            "write-bw --use_cuda=0 --cuda_mem_type=2",
            "perftest rejects host-allocated",
        ),
        ("write-bw --use_cuda=0 --cuda_mem_type=7", "the types are 0"),
        (
            "write-lat --use_cuda=0",
            "polls the buffer's last byte with the CPU",
        ),
        (
            "send-bw --use_cuda=0 -I 64 -s 64",
            "-I: a message no larger than the inline size is copied out",
        ),
        (
            "send-bw --use_cuda=0 -I 32 -s 16",
            "-I: a message no larger than the inline size is copied out",
        ),
        (
            "write-bw --use_cuda=0 -I 64 -a",
            "give a size (-s, not -a) above it",
        ),
        (
            "write-bw --use_cuda=0 --use_hugepages",
            "Can't use multiple memory types",
        ),
        ("write-bw --use_cuda=0 --odp", "ODP pages host memory"),
        ("write-bw --use_cuda=0 --use_data_direct", "DATA_DIRECT"),
        ("write-bw --use_rocm=0", "runtime rdmaperf does not load"),
        (
            "write-bw --use_cuda=0 --gpu_touch=once",
            "launches no GPU kernels",
        ),
    ];
    for (cmd, want) in cases {
        let e = resolve(cmd)
            .err()
            .unwrap_or_else(|| panic!("{cmd}: accepted"));
        assert!(e.contains(want), "{cmd}: {e}");
        assert!(!e.contains("unexpected argument"), "{cmd}: {e}");
    }
    // An explicit -I 0 is fine (nothing is inlined).
    assert!(resolve("send-bw --use_cuda=0 -I 0").is_ok());
}

/// perftest master refuses -I on device memory only where a message would
/// be inlined (size <= inline size); above that it keeps the -I value.
#[test]
fn explicit_inline_below_the_size_is_kept() {
    let p = resolve("send-bw --use_cuda=0 -I 64 -s 65").unwrap();
    assert_eq!(p.inline_size, 64);
    assert!(
        p.notices
            .iter()
            .all(|n| !n.contains("inline size set to 0")),
        "{:?}",
        p.notices
    );
    // Without -I the default inline size is forced to 0, as before.
    assert_eq!(
        resolve("send-bw --use_cuda=0 -s 65").unwrap().inline_size,
        0
    );
}

/// perftest keeps both flags and looks the GPU up by its bus id.
#[test]
fn use_cuda_bus_id_wins_over_use_cuda() {
    let p = resolve("write-bw --use_cuda=1 --use_cuda_bus_id=0000:1b:00.0").unwrap();
    assert_eq!(
        p.gpu.unwrap().select,
        GpuSelect::BusId("0000:1b:00.0".into())
    );
    assert!(
        p.notices
            .iter()
            .any(|n| n.contains("--use_cuda=1 is ignored (as in perftest)")),
        "{:?}",
        p.notices
    );
}

/// perftest master's force_dependecies: device memory, SEND, size <= 64 or -a.
#[test]
fn scatter_to_cqe_goes_off_for_small_gpu_sends_only() {
    let line = SCATTER_OFF_NOTICE;
    for (cmd, off) in [
        ("send-bw --use_cuda=0 -s 64", true),
        ("send-bw --use_cuda=0 -s 2", true),
        ("send-lat --use_cuda=0 -s 32", true),
        ("send-bw --use_cuda=0 -a", true),
        ("send-bw --use_cuda=0 -s 65", false),
        ("send-bw --use_cuda=0", false),
        ("write-bw --use_cuda=0 -s 32", false),
        ("read-bw --use_cuda=0 -s 32", false),
        ("send-bw -s 32", false),
    ] {
        let p = resolve(cmd).unwrap();
        let got = p.gpu.as_ref().is_some_and(|g| g.no_scatter_to_cqe);
        assert_eq!(got, off, "{cmd}");
        assert_eq!(
            p.notices.iter().any(|n| n == line),
            off,
            "{cmd}: {:?}",
            p.notices
        );
    }
    // perftest prints it before the inline notice (force_dependecies runs first).
    let p = resolve("send-lat --use_cuda=0 -s 32").unwrap();
    assert_eq!(p.notices.len(), 2, "{:?}", p.notices);
    assert_eq!(p.notices[0], line);
}
