//! The test-buffer options: `--use_hugepages`, `--mmap`/`--mmap-offset`,
//! `--payload_file_path`, `--use-null-mr`, `--odp`, `--use-srq`, with
//! perftest master's rules (`perftest_parameters.c`) and its payload file
//! format (`create_payload` in `perftest_resources.c`).

use super::args::PerfArgs;
use super::kinds::{Conn, Kind, Tool, Verb};
use std::path::PathBuf;

/// Where the test buffer comes from and what is in it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemOpts {
    /// `--use_hugepages`: SysV huge-page segments.
    pub hugepages: bool,
    /// `--mmap FILE` with `--mmap-offset N`.
    pub mmap: Option<(PathBuf, u64)>,
    /// `--payload_file_path`: the pattern the buffers repeat.
    pub payload: Option<Vec<u8>>,
    /// `--use-null-mr`: the sends' local lkey is a null MR's.
    pub null_mr: bool,
    /// `--odp`: the MRs are On-Demand Paging (IBV_ACCESS_ON_DEMAND).
    pub odp: bool,
    /// `--use-srq`: the receiving side's QPs share one receive queue.
    pub srq: bool,
    /// `--disable_pcie_relaxed`: the MRs go without IBV_ACCESS_RELAXED_ORDERING
    /// (perftest's `disable_pcir`; by default they have it).
    pub no_relaxed_ordering: bool,
}

/// The options and their rules; `size` is the largest message of the run
/// (perftest keeps at most that many payload bytes).
pub fn mem_opts(tool: Tool, a: &PerfArgs, conn: Conn, size: u64) -> Result<MemOpts, String> {
    let verb = tool.verb;
    if a.mmap_offset.is_some() && a.mmap.is_none() {
        return Err("--mmap-offset is an offset into the --mmap file; add --mmap=FILE".into());
    }
    if a.use_hugepages && a.mmap.is_some() {
        return Err(
            "--use_hugepages and --mmap: the buffer is either huge pages or the mapped file \
             (perftest: \"Can't use multiple memory types\"); give one of them"
                .into(),
        );
    }
    if a.mmap.is_some() && a.mr_per_qp {
        return Err(
            "--mmap with --mr_per_qp would map the same bytes of the file for every QP's MR; \
             drop --mr_per_qp"
                .into(),
        );
    }
    if a.use_null_mr && !matches!(verb, Verb::Write | Verb::Read) {
        return Err(
            "--use-null-mr: perftest supports a null memory region with write/read verbs only; \
             use write-bw, read-bw or read-lat"
                .into(),
        );
    }
    if a.use_null_mr && verb == Verb::Write && tool.kind == Kind::Lat {
        return Err(
            "--use-null-mr: write-lat's ping-pong waits for the byte the peer writes, which a \
             null MR never sends; use write-bw, read-bw or read-lat"
                .into(),
        );
    }
    if a.use_null_mr && a.check_landing {
        return Err(
            "--use-null-mr with --check-landing: a null MR sends no data to check; drop one".into(),
        );
    }
    if a.odp && conn == Conn::Uc {
        return Err(
            "--odp: ODP is not available on UC transport (as in perftest); use -c RC".into(),
        );
    }
    if a.use_srq && verb != Verb::Send {
        return Err(
            "--use-srq: Using SRQ only available in SEND tests (as in perftest); use send-bw or \
             send-lat"
                .into(),
        );
    }
    let payload = payload(tool, a, size)?;
    Ok(MemOpts {
        hugepages: a.use_hugepages,
        mmap: a.mmap.clone().map(|f| (f, a.mmap_offset.unwrap_or(0))),
        payload,
        null_mr: a.use_null_mr,
        odp: a.odp,
        srq: a.use_srq,
        no_relaxed_ordering: a.disable_pcie_relaxed,
    })
}

/// `--payload_file_path`'s pattern (at most `size` bytes of it).
fn payload(tool: Tool, a: &PerfArgs, size: u64) -> Result<Option<Vec<u8>>, String> {
    let verb = tool.verb;
    Ok(match &a.payload_file_path {
        None => None,
        Some(path) => {
            if tool.kind == Kind::Lat && verb == Verb::Write {
                return Err(
                    "--payload_file_path: write-lat's buffers must start zeroed (its ping-pong \
                     watches the last byte; perftest ignores the payload there); drop it"
                        .into(),
                );
            }
            if a.check_landing {
                return Err(
                    "--payload_file_path with --check-landing: the landing check looks for \
                     rdmaperf's own pattern; drop one"
                        .into(),
                );
            }
            let text = std::fs::read_to_string(path).map_err(|e| {
                format!(
                    "--payload_file_path {}: cannot read it: {e}",
                    path.display()
                )
            })?;
            Some(
                parse_payload(&text, size)
                    .map_err(|e| format!("--payload_file_path {}: {e}", path.display()))?,
            )
        }
    })
}

/// perftest's payload file: DWORDs `0xaabbccdd` separated by commas (and
/// newlines), each stored little-endian (`0x11223344` → 44 33 22 11); at most
/// `max` bytes are kept. Unlike perftest, blanks around a word are allowed
/// (perftest rejects a trailing newline after a single word).
pub fn parse_payload(text: &str, max: u64) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for (n, w) in text
        .split([',', '\n'])
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .enumerate()
    {
        if out.len() as u64 >= max {
            break;
        }
        let hex = w
            .strip_prefix("0x")
            .or_else(|| w.strip_prefix("0X"))
            .filter(|h| h.len() == 8 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| {
                format!(
                    "DWORD {n} ('{w}') is not of the form 0xaaaaaaaa (8 hex digits); the file \
                     holds comma-separated DWORDs"
                )
            })?;
        let v = u32::from_str_radix(hex, 16).expect("8 hex digits");
        for b in v.to_le_bytes() {
            if (out.len() as u64) < max {
                out.push(b);
            }
        }
    }
    if out.is_empty() {
        return Err("the file holds no DWORDs; write e.g. 0xaaaaaaaa,0xbbbbbbbb".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::kinds::Tool;

    fn tool(name: &str) -> Tool {
        Tool::ALL.iter().find(|t| t.0 == name).unwrap().2
    }

    #[test]
    fn payload_is_little_endian_dwords_cut_at_the_size() {
        assert_eq!(
            parse_payload("0x11223344,0xaabbccdd\n", 64).unwrap(),
            vec![0x44, 0x33, 0x22, 0x11, 0xdd, 0xcc, 0xbb, 0xaa]
        );
        assert_eq!(
            parse_payload("0x11223344, 0xAABBCCDD", 6).unwrap(),
            vec![0x44, 0x33, 0x22, 0x11, 0xdd, 0xcc]
        );
        assert_eq!(parse_payload("0x01020304", 2).unwrap(), vec![4, 3]);
        let e = parse_payload("0x1234", 64).unwrap_err();
        assert!(e.contains("DWORD 0") && e.contains("0xaaaaaaaa"), "{e}");
        let e = parse_payload("0x11223344,0xzz223344", 64).unwrap_err();
        assert!(e.contains("DWORD 1"), "{e}");
        assert!(parse_payload(" \n", 64).unwrap_err().contains("no DWORDs"));
    }

    #[test]
    fn srq_rules_follow_perftest() {
        use crate::cli::params::resolve;
        let srq = |f: &dyn Fn(&mut PerfArgs)| {
            let mut a = PerfArgs {
                use_srq: true,
                post: "auto".into(),
                ..Default::default()
            };
            f(&mut a);
            a
        };
        let e = resolve(
            tool("send-bw"),
            &srq(&|a| {
                a.qps = Some(4);
                a.rx_depth = Some(2)
            }),
        )
        .unwrap_err();
        assert!(e.contains("raise -r to 4"), "{e}");
        let e = resolve(tool("send-bw"), &srq(&|a| a.post = "direct".into())).unwrap_err();
        assert!(e.contains("--post wr-api"), "{e}");
        let e = resolve(tool("send-lat"), &srq(&|a| a.rdma_cm = true)).unwrap_err();
        assert!(e.contains("drop -R"), "{e}");
        let p = resolve(tool("send-bw"), &srq(&|a| a.qps = Some(2))).unwrap();
        assert!(p.mem.srq);
        assert!(
            crate::tool::session::info::params_info(&p).use_srq,
            "the banner says ON"
        );
    }

    #[test]
    fn rules_name_the_fix() {
        let a = |f: &dyn Fn(&mut PerfArgs)| {
            let mut a = PerfArgs::default();
            f(&mut a);
            a
        };
        let chk = |t: &str, a: PerfArgs, conn: Conn, want: &str| {
            let e = mem_opts(tool(t), &a, conn, 64).unwrap_err();
            assert!(e.contains(want), "{t}: {e}");
        };
        chk(
            "write-bw",
            a(&|a| a.mmap_offset = Some(4096)),
            Conn::Rc,
            "add --mmap=FILE",
        );
        chk(
            "write-bw",
            a(&|a| {
                a.use_hugepages = true;
                a.mmap = Some("/x".into())
            }),
            Conn::Rc,
            "give one of them",
        );
        chk(
            "write-bw",
            a(&|a| {
                a.mr_per_qp = true;
                a.mmap = Some("/x".into())
            }),
            Conn::Rc,
            "drop --mr_per_qp",
        );
        chk(
            "send-bw",
            a(&|a| a.use_null_mr = true),
            Conn::Rc,
            "write/read verbs only",
        );
        chk(
            "write-lat",
            a(&|a| a.use_null_mr = true),
            Conn::Rc,
            "never sends",
        );
        chk(
            "write-bw",
            a(&|a| a.odp = true),
            Conn::Uc,
            "not available on UC",
        );
        chk("write-bw", a(&|a| a.use_srq = true), Conn::Rc, "SEND tests");
        chk(
            "write-lat",
            a(&|a| a.payload_file_path = Some("/x".into())),
            Conn::Rc,
            "start zeroed",
        );
        chk(
            "send-bw",
            a(&|a| a.payload_file_path = Some("/nonexistent/p".into())),
            Conn::Rc,
            "cannot read it",
        );
        let ok = mem_opts(
            tool("read-lat"),
            &a(&|a| {
                a.use_null_mr = true;
                a.use_hugepages = true;
                a.odp = true;
            }),
            Conn::Rc,
            64,
        )
        .unwrap();
        assert!(ok.null_mr && ok.hugepages && ok.odp);
        let ok = mem_opts(tool("send-lat"), &a(&|a| a.use_srq = true), Conn::Ud, 64).unwrap();
        assert!(ok.srq);
    }
}
