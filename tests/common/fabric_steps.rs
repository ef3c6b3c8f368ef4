//! The fabric VM tests' check of a run's JSON steps against the pattern's plan.

use rdmaperf::fabric::pattern::{Pair, Plan};
use serde_json::Value;
use std::collections::BTreeSet;

/// Every step of the fabric JSON `v` holds exactly `plan`'s pairs for that step, each
/// measured: its `ok` an object, `values_ok(ok)` true and its message rate above 0.
/// `name` and the run's output `out` go in the messages.
pub fn check_steps(
    v: &Value,
    plan: &Plan,
    name: &str,
    out: &str,
    values_ok: impl Fn(&Value) -> bool,
) {
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), plan.steps(), "{name}: steps\n{out}");
    for (i, st) in steps.iter().enumerate() {
        let want: BTreeSet<Pair> = plan.pairs(i).into_iter().collect();
        let mut got = BTreeSet::new();
        for p in st["pairs"].as_array().unwrap() {
            let pair = Pair::new(
                p["client"].as_u64().unwrap() as usize,
                p["server"].as_u64().unwrap() as usize,
            );
            let ok = &p["ok"];
            assert!(
                ok.is_object(),
                "{name} step {}: {pair:?} failed: {p}\n{out}",
                i + 1
            );
            assert!(values_ok(ok), "{name}: {pair:?} value {p}");
            assert!(
                ok["msg_rate"].as_f64().unwrap_or(0.0) > 0.0,
                "{name}: {pair:?} msg_rate {p}"
            );
            got.insert(pair);
        }
        assert_eq!(got, want, "{name} step {}", i + 1);
    }
}
