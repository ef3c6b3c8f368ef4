//! The BlueFlame copy, checked in the instructions the release binaries carry
//! (`src/mlx5/mmio.rs` `bf_copy64`): on x86-64 every 64-byte chunk leaves as
//! four 16-byte stores at +0, +0x10, +0x20, +0x30 of one register; on aarch64
//! as one `st4 {vA.2d-vD.2d}` (rdma-core's `vst4q_u64`). Neither binary may
//! hold the scalar form (eight 8-byte stores covering 64 bytes) or a split
//! vector form in the code that rings doorbells, and each direct hot loop
//! (write-lat, send-lat, read/atomic-lat, the bw loop, selfcheck's post) must
//! carry the vector copy inlined.
//!
//! The binaries: `target/release/rdmaperf` and
//! `target/aarch64-unknown-linux-gnu/release/rdmaperf` (or
//! `RDMAPERF_DISASM_X86` / `RDMAPERF_DISASM_ARM`), disassembled with
//! `objdump` / `aarch64-linux-gnu-objdump`. `scripts/aarch64.sh` builds both
//! and runs this test with `RDMAPERF_REQUIRE_DISASM=1`, which turns a missing
//! binary or objdump into a failure; without it such a case is SKIPPED.

use std::path::PathBuf;
use std::process::Command;

/// One function of the disassembly: its demangled name and its instructions
/// (mnemonic and operands, tab-separated as objdump prints them).
struct Func {
    name: String,
    insns: Vec<String>,
}

#[derive(Clone, Copy, PartialEq)]
enum Arch {
    X86,
    Arm,
}

impl Arch {
    fn objdump(self) -> &'static str {
        match self {
            Arch::X86 => "objdump",
            Arch::Arm => "aarch64-linux-gnu-objdump",
        }
    }
    fn binary(self) -> PathBuf {
        let (var, rel) = match self {
            Arch::X86 => ("RDMAPERF_DISASM_X86", "target/release/rdmaperf"),
            Arch::Arm => (
                "RDMAPERF_DISASM_ARM",
                "target/aarch64-unknown-linux-gnu/release/rdmaperf",
            ),
        };
        std::env::var_os(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel))
    }
    /// The write-combining barrier that brackets every doorbell.
    fn is_wc_barrier(self, insn: &str) -> bool {
        match self {
            Arch::X86 => insn == "sfence",
            Arch::Arm => insn.starts_with("dsb\tst"),
        }
    }
}

fn skip_or_fail(why: String) -> Option<Vec<Func>> {
    if std::env::var_os("RDMAPERF_REQUIRE_DISASM").is_some() {
        panic!("{why}");
    }
    println!("SKIPPED: {why}");
    None
}

/// The binary's functions, or `None` (SKIPPED) when it or objdump is missing.
fn disassemble(arch: Arch) -> Option<Vec<Func>> {
    let bin = arch.binary();
    if !bin.exists() {
        return skip_or_fail(format!(
            "{} is not built (scripts/aarch64.sh builds both release binaries)",
            bin.display()
        ));
    }
    let out = Command::new(arch.objdump())
        .args(["-d", "--no-show-raw-insn", "-C"])
        .arg(&bin)
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => panic!(
            "{} failed on {}: {}",
            arch.objdump(),
            bin.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            return skip_or_fail(format!(
                "{} not runnable ({e}): apt-get install binutils binutils-aarch64-linux-gnu",
                arch.objdump()
            ))
        }
    };
    Some(parse(&String::from_utf8_lossy(&out.stdout)))
}

fn parse(text: &str) -> Vec<Func> {
    let mut funcs: Vec<Func> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_suffix(">:").and_then(|l| l.split_once(" <")) {
            funcs.push(Func {
                name: name.1.to_string(),
                insns: Vec::new(),
            });
        } else if let (Some(f), Some((_, insn))) = (funcs.last_mut(), line.split_once(":\t")) {
            // Drop objdump's trailing "# addr <sym>" / "// b.any" notes.
            let insn = insn.split("  #").next().unwrap_or(insn);
            let insn = insn.split("  //").next().unwrap_or(insn).trim();
            // x86 objdump pads the mnemonic with spaces, aarch64's with a tab:
            // one tab between mnemonic and operands for both.
            let insn = match insn.split_once(char::is_whitespace) {
                Some((mn, ops)) => format!("{mn}\t{}", ops.trim_start()),
                None => insn.to_string(),
            };
            f.insns.push(insn);
        }
    }
    funcs
}

/// A store's destination as (base, offset), for the stores this test reads:
/// x86 `mnemonic %src,OFF(BASE)`, aarch64 `mnemonic src[, src2], [BASE, #OFF]`.
fn store_dest(arch: Arch, insn: &str) -> Option<(String, i64)> {
    let (mn, ops) = insn.split_once('\t')?;
    match arch {
        Arch::X86 => {
            let (src, dst) = ops.split_once(',')?;
            if !src.starts_with('%') || !dst.ends_with(')') || mn.starts_with("cmp") {
                return None;
            }
            let (off, base) = dst.split_once('(')?;
            let off = match off {
                "" => 0,
                o => i64::from_str_radix(o.trim_start_matches("0x"), 16).ok()?,
            };
            Some((base.trim_end_matches(')').to_string(), off))
        }
        Arch::Arm => {
            let addr = ops.split_once('[')?.1;
            if addr.contains(']') && !addr.ends_with(']') {
                return None; // pre/post-indexed: not a plain store
            }
            let addr = addr.trim_end_matches(']');
            let (base, off) = match addr.split_once(", #") {
                Some((b, o)) => (b, o.parse().ok()?),
                None => (addr, 0),
            };
            Some((base.to_string(), off))
        }
    }
}

fn is_stack(base: &str) -> bool {
    base.contains("%rsp") || base.contains("%rbp") || base.starts_with("sp") || base == "x29"
}

/// aarch64: `stp qN, qN, …`, one register stored twice: a fill (the
/// compiler zeroing 32 bytes, e.g. a stack array whose address it keeps in
/// x8), never a copy of a WQE, whose two halves come from two loads.
fn is_fill(insn: &str) -> bool {
    let ops = insn.split('\t').nth(1).unwrap_or("");
    let mut regs = ops.split(", ");
    matches!((regs.next(), regs.next()), (Some(a), Some(b)) if a.starts_with('q') && a == b)
}

/// x86: a 16-byte vector store; its (base, offset).
fn vec_store_x86(insn: &str) -> Option<(String, i64)> {
    const MN: [&str; 10] = [
        "movaps", "movapd", "movdqa", "movups", "movupd", "movdqu", "vmovaps", "vmovdqa",
        "vmovups", "vmovdqu",
    ];
    let mn = insn.split('\t').next()?;
    let ops = insn.split('\t').nth(1)?;
    (MN.contains(&mn) && ops.starts_with("%xmm"))
        .then(|| store_dest(Arch::X86, insn))
        .flatten()
}

/// Whether `load` fills from offset 0 of non-stack memory the register
/// `store` writes out (x86: `movaps (%src),%xmmN` then `movaps %xmmN,…`).
fn copies_from_zero(load: &str, store: &str) -> bool {
    let reg = |s: &str| s.split('\t').nth(1).map(str::to_string);
    let (Some(l), Some(st)) = (reg(load), reg(store)) else {
        return false;
    };
    let Some((src, dst_reg)) = l.rsplit_once(',') else {
        return false;
    };
    src.starts_with('(')
        && !is_stack(src)
        && dst_reg.starts_with("%xmm")
        && st.split(',').next() == Some(dst_reg)
}

/// The offsets of the 8-byte general-register stores (`stp` counts as two)
/// to `base`, in the `window` instructions from `at`.
fn scalar_offsets(arch: Arch, f: &Func, at: usize, base: &str, window: usize) -> Vec<i64> {
    let mut offs = Vec::new();
    for insn in f.insns.iter().skip(at).take(window) {
        let Some((b, off)) = store_dest(arch, insn) else {
            continue;
        };
        if b != base {
            continue;
        }
        let ops = insn.split('\t').nth(1).unwrap_or("");
        match arch {
            Arch::X86 if insn.starts_with("mov\t%r") || insn.starts_with("movq\t%r") => {
                offs.push(off)
            }
            Arch::Arm if insn.starts_with("str\tx") => offs.push(off),
            Arch::Arm if insn.starts_with("stp\tx") && ops.starts_with('x') => {
                offs.extend([off, off + 8])
            }
            _ => {}
        }
    }
    offs
}

/// What the disassembly of one function shows about BlueFlame copies.
#[derive(Default)]
struct Found {
    vector_chunks: usize,
    faults: Vec<String>,
}

fn inspect(arch: Arch, f: &Func) -> Found {
    let mut found = Found::default();
    let barriers = f.insns.iter().filter(|i| arch.is_wc_barrier(i)).count();
    if barriers == 0 {
        return found;
    }
    for (i, insn) in f.insns.iter().enumerate() {
        match arch {
            Arch::Arm if insn.starts_with("st4\t") => {
                if insn.starts_with("st4\t{v") && insn.contains(".2d-v") && insn.contains(".2d}") {
                    found.vector_chunks += 1;
                } else {
                    found.faults.push(format!("st4 of another shape: {insn}"));
                }
            }
            Arch::Arm if insn.starts_with("stp\tq") || insn.starts_with("st1\t{v") => {
                if let Some((b, 0)) = store_dest(arch, insn) {
                    if !is_stack(&b) && !is_fill(insn) && near_barrier(arch, f, i) {
                        found.faults.push(format!("a split vector store: {insn}"));
                    }
                }
            }
            Arch::X86 => {
                // A copy, not a WQE segment store (those build the register
                // with pinsrq/pshufb): the store's register was just loaded
                // from offset 0 of other memory.
                if let Some((b, 0)) = vec_store_x86(insn) {
                    if is_stack(&b) || i == 0 || !copies_from_zero(&f.insns[i - 1], insn) {
                        continue;
                    }
                    let offs: Vec<i64> = f.insns[i..(i + 8).min(f.insns.len())]
                        .iter()
                        .filter_map(|s| vec_store_x86(s))
                        .filter(|(bb, _)| *bb == b)
                        .map(|(_, o)| o)
                        .collect();
                    if offs.starts_with(&[0, 0x10, 0x20, 0x30]) {
                        found.vector_chunks += 1;
                    } else if near_barrier(arch, f, i) {
                        found.faults.push(format!(
                            "16-byte stores to {b} at {offs:x?}, not one 64-byte chunk"
                        ));
                    }
                }
            }
            _ => {}
        }
        // The scalar form: eight 8-byte stores over 64 bytes right after the
        // barrier (the WQE itself is written with such stores, before it).
        if let Some((b, 0)) = store_dest(arch, insn) {
            if is_stack(&b) || !near_barrier(arch, f, i) {
                continue;
            }
            let mut offs = scalar_offsets(arch, f, i, &b, 16);
            offs.sort_unstable();
            offs.dedup();
            if (0..8).all(|k| offs.contains(&(k * 8))) {
                found
                    .faults
                    .push(format!("eight 8-byte stores cover 64 bytes at {b}: {insn}"));
            }
        }
    }
    found
}

/// Whether instruction `i` lies within 24 instructions after a WC barrier
/// (the BlueFlame copy sits right after `mmio_wc_start`).
fn near_barrier(arch: Arch, f: &Func, i: usize) -> bool {
    f.insns[i.saturating_sub(24)..i]
        .iter()
        .any(|s| arch.is_wc_barrier(s))
}

/// The direct hot paths that must carry the vector copy inlined.
const HOT: [&str; 4] = [
    "rdmaperf::run::lat::write_lat",
    "rdmaperf::run::lat::send_lat",
    "rdmaperf::run::bw::BwLoop",
    "DirectRig as rdmaperf::selfcheck::exec::Rig>::post",
];

fn check(arch: Arch) {
    let Some(funcs) = disassemble(arch) else {
        return;
    };
    let mut faults = Vec::new();
    let mut total = 0;
    let mut hot_with = vec![0usize; HOT.len()];
    for f in &funcs {
        let found = inspect(arch, f);
        total += found.vector_chunks;
        for (h, n) in HOT.iter().zip(hot_with.iter_mut()) {
            if f.name.contains(h) {
                *n += found.vector_chunks;
            }
        }
        faults.extend(found.faults.into_iter().map(|x| format!("{}: {x}", f.name)));
    }
    println!(
        "{} vector BlueFlame chunks in {} functions",
        total,
        funcs.len()
    );
    assert!(
        faults.is_empty(),
        "BlueFlame copy faults:\n{}",
        faults.join("\n")
    );
    for (h, n) in HOT.iter().zip(&hot_with) {
        assert!(*n > 0, "{h}: no vector BlueFlame copy inlined");
    }
}

#[test]
fn x86_64_bf_copy_is_four_16_byte_stores() {
    check(Arch::X86);
}

#[test]
fn aarch64_bf_copy_is_one_st4() {
    check(Arch::Arm);
}

/// The checker itself: a scalar copy and a split one are caught, the
/// intended forms pass.
#[test]
fn checker_tells_the_forms_apart() {
    let f = |insns: &[&str]| Func {
        name: "t".into(),
        insns: insns.iter().map(|s| s.to_string()).collect(),
    };
    let good_x86 = f(&[
        "sfence",
        "movaps\t(%rsi,%rcx,1),%xmm0",
        "movaps\t%xmm0,(%rax,%rdx,1)",
        "movaps\t%xmm0,0x10(%rax,%rdx,1)",
        "movaps\t%xmm0,0x20(%rax,%rdx,1)",
        "movdqa\t%xmm0,0x30(%rax,%rdx,1)",
        "sfence",
    ]);
    let r = inspect(Arch::X86, &good_x86);
    assert_eq!((r.vector_chunks, r.faults.len()), (1, 0));
    let mut scalar: Vec<String> = vec!["sfence".into()];
    scalar.extend((0..8).map(|k| format!("mov\t%rcx,0x{:x}(%rax)", k * 8)));
    let scalar = Func {
        name: "s".into(),
        insns: scalar,
    };
    let r = inspect(Arch::X86, &scalar);
    assert_eq!(r.vector_chunks, 0);
    assert!(!r.faults.is_empty());
    let split = f(&[
        "sfence",
        "movaps\t(%rsi),%xmm0",
        "movaps\t%xmm0,(%rax)",
        "movaps\t0x10(%rsi),%xmm1",
        "movaps\t%xmm1,0x10(%rax)",
    ]);
    assert!(!inspect(Arch::X86, &split).faults.is_empty());
    let good_arm = f(&[
        "dsb\tst",
        "ld4\t{v0.2d-v3.2d}, [x9]",
        "st4\t{v0.2d-v3.2d}, [x8]",
    ]);
    let r = inspect(Arch::Arm, &good_arm);
    assert_eq!((r.vector_chunks, r.faults.len()), (1, 0));
    let scalar_arm = f(&[
        "dsb\tst",
        "stp\tx1, x2, [x8]",
        "stp\tx3, x4, [x8, #16]",
        "stp\tx5, x6, [x8, #32]",
        "stp\tx7, x9, [x8, #48]",
    ]);
    assert!(!inspect(Arch::Arm, &scalar_arm).faults.is_empty());
    let split_arm = f(&["dsb\tst", "stp\tq0, q1, [x8]", "stp\tq2, q3, [x8, #32]"]);
    assert!(!inspect(Arch::Arm, &split_arm).faults.is_empty());
    // A zero fill near a barrier (a stack array through x8, seen in
    // raw_lat::run_direct once the one-packet raw post was inlined) is no copy.
    let fill_arm = f(&["dsb\tst", "movi\tv0.2d, #0x0", "stp\tq0, q0, [x8]"]);
    assert!(inspect(Arch::Arm, &fill_arm).faults.is_empty());
}
