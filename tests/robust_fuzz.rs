//! Fuzzes every control-protocol decoder (fuzz/engine.rs, fuzz/README.md).
//!
//! By default a fixed, seeded number of inputs (deterministic, a few seconds);
//! `RDMAPERF_FUZZ_SECS=60` runs for a minute instead (scripts/test.sh does),
//! `RDMAPERF_FUZZ_SEED=N` picks the sequence, `RDMAPERF_FUZZ_EXECS=N` the count,
//! `RDMAPERF_FUZZ_REPLAY=FILE` checks one saved input.

#[path = "../fuzz/engine.rs"]
mod engine;

use engine::{Budget, Rng};
use std::path::Path;
use std::time::Duration;

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a whole number")),
    )
}

fn seeds() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/captures");
    let mut s = engine::capture_seeds(&dir);
    assert!(
        s.len() > 200,
        "expected the perftest captures in {} to give >200 messages, got {}",
        dir.display(),
        s.len()
    );
    s.extend(engine::encoder_seeds());
    s
}

#[test]
fn ctrl_decoders_survive_fuzzing() {
    if let Ok(path) = std::env::var("RDMAPERF_FUZZ_REPLAY") {
        let b = std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
        engine::check_caught(&b, &mut Vec::new()).unwrap_or_else(|e| panic!("{path}: {e}"));
        return;
    }
    let budget = match env_u64("RDMAPERF_FUZZ_SECS") {
        Some(s) => Budget::Time(Duration::from_secs(s)),
        None => Budget::Execs(env_u64("RDMAPERF_FUZZ_EXECS").unwrap_or(20_000)),
    };
    let seed = env_u64("RDMAPERF_FUZZ_SEED").unwrap_or(0x5eed_c7a1);
    match engine::run(&seeds(), seed, budget) {
        Ok(s) if std::env::var_os("RDMAPERF_FUZZ_SHOW").is_some() => {
            println!("{}", s.classes.join("\n"))
        }
        Ok(s) => println!(
            "fuzz: {} execs from {} seeds (seed {seed}), corpus {}, {} distinct outcomes",
            s.execs, s.seeds, s.corpus, s.outcomes
        ),
        Err(f) => {
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-findings");
            let _ = std::fs::create_dir_all(&dir);
            let file = dir.join(format!("seed-{seed}.bin"));
            let _ = std::fs::write(&file, &f.input);
            panic!(
                "decoder contract broken: {}\ninput ({} bytes): {}\nsaved to {}; replay with \
                 RDMAPERF_FUZZ_REPLAY={} cargo test --test robust_fuzz",
                f.what,
                f.input.len(),
                rdmaperf::ctrl::wire::show_bytes(&f.input),
                file.display(),
                file.display()
            );
        }
    }
}

/// The engine must reach the decoders' success paths and their deep error
/// branches, not just bounce off the length checks.
#[test]
fn fuzzing_reaches_every_decoder_outcome_class() {
    let s = engine::run(&seeds(), 7, Budget::Execs(5_000)).expect("no contract broken");
    let want = [
        "version: ok",
        "version: version the peer runs perftest version",
        "version: version the peer's version message is not a number",
        "sysdata: ok",
        "sysdata: cache_line peer's cache_line is",
        "mtu: ok",
        "mtu: MTU expected an MTU enum",
        "key: ok",
        "key: key message field lid",
        "key: key message field vaddr",
        "key: key message field gid[]",
        "key: key message field srqn",
        "key: key message expected ':'",
        "key: key message expected trailing ':'",
        "key: key message expected NUL terminator",
        "bw report iters: ok",
        "bw report msgRate_p2: ok",
    ];
    for w in want {
        assert!(
            s.classes.iter().any(|c| c.starts_with(w)),
            "fuzzing never reached {w:?}; reached:\n{}",
            s.classes.join("\n")
        );
    }
    assert!(s.corpus > s.seeds, "no mutated input was new: {s:?}");
}

#[test]
fn the_checker_accepts_hex_case_and_catches_panics() {
    // A right-sized key with an uppercase field still decodes; its re-encoding
    // is the lowercase form, so the checker must accept it...
    let mut seen = Vec::new();
    let mut key = engine::encoder_seeds()
        .into_iter()
        .find(|s| s.len() == rdmaperf::ctrl::wire::KEY_LEN_GID)
        .expect("a GID key seed");
    key[0] = b'F';
    engine::check_caught(&key, &mut seen).expect("uppercase hex is valid");
    assert!(seen.iter().any(|o| o == "key: ok"), "{seen:?}");
    // ...and a panic must become a finding, not abort the run.
    let e = engine::caught(|| panic!("boom")).unwrap_err();
    assert!(e.contains("panicked: boom"), "{e}");
    let mut rng = Rng::new(1);
    let mut b = b"6.06".to_vec();
    for _ in 0..1000 {
        engine::mutate(&mut rng, &mut b, b"0000:0001");
        assert!(b.len() <= 300, "inputs stay small: {}", b.len());
    }
}
