//! `rdmaperf compare`: the interleaved schedule (A B C A B C …, so drift hits
//! every method alike) and the side-by-side summary, kept free of I/O.

use serde::Serialize;

/// One repetition of one method.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sample {
    pub method: &'static str,
    pub rep: u32,
    pub mpps: f64,
    pub bw: f64,
    /// CPU time per post call and per WR, ns (0 when not measured).
    pub ns_per_call: f64,
    pub ns_per_wr: f64,
    /// send-bw: the receiver's CPU time per message, ns (0 otherwise).
    pub recv_ns_per_msg: f64,
}

/// A method that could not run, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Unsupported {
    pub method: &'static str,
    pub reason: String,
}

/// Per-method medians.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub method: &'static str,
    pub reps: usize,
    pub mpps: f64,
    pub bw: f64,
    pub ns_per_call: f64,
    pub ns_per_wr: f64,
    pub recv_ns_per_msg: f64,
    /// Message rate relative to post-send: the ratio of the medians (None
    /// when post-send did not run).
    pub ratio_to_post_send: Option<f64>,
    /// The spread of that ratio over the repetitions.
    #[serde(flatten)]
    pub spread: RatioSpread,
}

/// The spread of a method's message-rate ratio to post-send over the
/// repetitions: the lowest and the highest of each repetition's own ratio
/// (this method's rate over post-send's in the same repetition); both None
/// without post-send. The JSON row keeps them as `ratio_min`, `ratio_max`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct RatioSpread {
    #[serde(rename = "ratio_min")]
    pub min: Option<f64>,
    #[serde(rename = "ratio_max")]
    pub max: Option<f64>,
}

/// Interleaved order: every method once per repetition.
pub fn schedule(methods: &[&'static str], reps: u32) -> Vec<(u32, &'static str)> {
    (0..reps)
        .flat_map(|r| methods.iter().map(move |m| (r, *m)))
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Medians per method, in the order the methods first appear.
pub fn summarize(samples: &[Sample]) -> Vec<Row> {
    let mut order: Vec<&'static str> = Vec::new();
    for s in samples {
        if !order.contains(&s.method) {
            order.push(s.method);
        }
    }
    let of = |m: &str, f: fn(&Sample) -> f64| {
        median(samples.iter().filter(|s| s.method == m).map(f).collect())
    };
    let base = order
        .contains(&"post-send")
        .then(|| of("post-send", |s| s.mpps));
    order
        .into_iter()
        .map(|m| {
            let mpps = of(m, |s| s.mpps);
            Row {
                method: m,
                reps: samples.iter().filter(|s| s.method == m).count(),
                mpps,
                bw: of(m, |s| s.bw),
                ns_per_call: of(m, |s| s.ns_per_call),
                ns_per_wr: of(m, |s| s.ns_per_wr),
                recv_ns_per_msg: of(m, |s| s.recv_ns_per_msg),
                ratio_to_post_send: base.filter(|b| *b > 0.0).map(|b| mpps / b),
                spread: ratio_spread(samples, m),
            }
        })
        .collect()
}

/// The lowest and highest per-repetition ratio of `m`'s message rate to
/// post-send's (repetitions where either is missing or post-send's is 0
/// are left out).
fn ratio_spread(samples: &[Sample], m: &str) -> RatioSpread {
    let rate = |method: &str, rep: u32| {
        samples
            .iter()
            .find(|s| s.method == method && s.rep == rep)
            .map(|s| s.mpps)
    };
    let ratios = samples.iter().filter(|s| s.method == m).filter_map(|s| {
        let b = rate("post-send", s.rep).filter(|b| *b > 0.0)?;
        Some(s.mpps / b)
    });
    ratios.fold(RatioSpread::default(), |s, r| RatioSpread {
        min: Some(s.min.map_or(r, |l| l.min(r))),
        max: Some(s.max.map_or(r, |h| h.max(r))),
    })
}

/// The side-by-side table; a SEND test's (any receive cost measured) has
/// the receiver's column too.
pub fn table(rows: &[Row], unsupported: &[Unsupported], bw_unit: &str) -> String {
    let recv = rows.iter().any(|r| r.recv_ns_per_msg > 0.0);
    let mut o = String::new();
    o.push_str(&format!(
        " {:<10} {:>5} {:>14} {:>16} {:>14} {:>12}{} {:>12} {:>13}\n",
        "method",
        "reps",
        "MsgRate[Mpps]",
        format!("BW[{bw_unit}]"),
        "ns/post call",
        "ns/WR",
        if recv {
            format!(" {:>12}", "recv ns/msg")
        } else {
            String::new()
        },
        "vs post-send",
        "spread"
    ));
    for r in rows {
        let ratio = r
            .ratio_to_post_send
            .map(|x| format!("{x:.2}x"))
            .unwrap_or_else(|| "-".into());
        let spread = match (r.spread.min, r.spread.max) {
            (Some(lo), Some(hi)) => format!("{lo:.2}-{hi:.2}"),
            _ => "-".into(),
        };
        let rc = if recv {
            format!(" {:>12.1}", r.recv_ns_per_msg)
        } else {
            String::new()
        };
        o.push_str(&format!(
            " {:<10} {:>5} {:>14.6} {:>16.2} {:>14.1} {:>12.1}{rc} {:>12} {:>13}\n",
            r.method, r.reps, r.mpps, r.bw, r.ns_per_call, r.ns_per_wr, ratio, spread
        ));
    }
    for u in unsupported {
        o.push_str(&format!(" {:<10} not run: {}\n", u.method, u.reason));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(method: &'static str, rep: u32, mpps: f64) -> Sample {
        Sample {
            method,
            rep,
            mpps,
            bw: mpps * 64.0,
            ns_per_call: 100.0 / mpps,
            ns_per_wr: 100.0 / mpps,
            recv_ns_per_msg: 0.0,
        }
    }

    #[test]
    fn interleaved_schedule() {
        assert_eq!(
            schedule(&["wr-api", "post-send"], 2),
            vec![
                (0, "wr-api"),
                (0, "post-send"),
                (1, "wr-api"),
                (1, "post-send")
            ]
        );
    }

    /// Three repetitions of wr-api against post-send: medians 3.0 and 1.0,
    /// per-repetition ratios 2.0, 4.0 and 1/3.
    fn three_reps() -> Vec<Sample> {
        vec![
            s("wr-api", 0, 2.0),
            s("post-send", 0, 1.0),
            s("wr-api", 1, 4.0),
            s("post-send", 1, 1.0),
            s("wr-api", 2, 3.0),
            s("post-send", 2, 9.0),
        ]
    }

    #[test]
    fn medians_and_ratio() {
        let v = three_reps();
        let rows = summarize(&v);
        assert_eq!(rows[0].method, "wr-api");
        assert_eq!(rows[0].mpps, 3.0);
        assert_eq!(rows[1].mpps, 1.0);
        assert_eq!(rows[0].ratio_to_post_send, Some(3.0));
        assert_eq!(rows[1].ratio_to_post_send, Some(1.0));
        let t = table(
            &rows,
            &[Unsupported {
                method: "direct",
                reason: "rxe0 is not mlx5".into(),
            }],
            "MiB/sec",
        );
        assert!(t.contains("3.00x"), "{t}");
        assert!(t.contains("direct     not run: rxe0 is not mlx5"), "{t}");
    }

    /// send-bw: the receiver's column appears, with each method's median.
    #[test]
    fn the_receive_cost_column_for_send_tests() {
        let with = |m, rep, mpps, recv| Sample {
            recv_ns_per_msg: recv,
            ..s(m, rep, mpps)
        };
        let rows = summarize(&[
            with("direct", 0, 4.0, 30.0),
            with("post-send", 0, 2.0, 90.0),
            with("direct", 1, 4.0, 50.0),
            with("post-send", 1, 2.0, 70.0),
        ]);
        assert_eq!(rows[0].recv_ns_per_msg, 40.0);
        assert_eq!(rows[1].recv_ns_per_msg, 80.0);
        let t = table(&rows, &[], "MiB/sec");
        assert!(t.lines().next().unwrap().contains("recv ns/msg"), "{t}");
        assert!(
            t.contains("        40.0 ") && t.contains("        80.0 "),
            "{t}"
        );
        let plain = table(&summarize(&[s("wr-api", 0, 2.0)]), &[], "MiB/sec");
        assert!(!plain.contains("recv ns/msg"), "{plain}");
    }

    /// The spread: each repetition's ratio against post-send in the same
    /// repetition, lowest and highest; a repetition without post-send (a
    /// stopped run) is left out; post-send's own is exactly 1.
    #[test]
    fn the_ratio_spread_is_per_repetition() {
        let mut v = three_reps();
        v.push(s("wr-api", 3, 100.0));
        let rows = summarize(&v);
        assert_eq!(rows[0].spread.min, Some(3.0 / 9.0));
        assert_eq!(rows[0].spread.max, Some(4.0));
        assert_eq!(
            (rows[1].spread.min, rows[1].spread.max),
            (Some(1.0), Some(1.0))
        );
        let t = table(&rows, &[], "MiB/sec");
        assert!(t.lines().next().unwrap().ends_with("spread"), "{t}");
        assert!(
            t.contains(" 0.33-4.00\n") && t.contains(" 1.00-1.00\n"),
            "{t}"
        );
        // A zero post-send rate gives no ratio for that repetition.
        let z = summarize(&[s("wr-api", 0, 2.0), s("post-send", 0, 0.0)]);
        assert_eq!((z[0].spread.min, z[0].spread.max), (None, None));
    }

    /// The JSON row (`--out_json_file`'s summary) names the spread
    /// `ratio_min` and `ratio_max`, beside `ratio_to_post_send`.
    #[test]
    fn the_json_row_keeps_the_ratio_keys() {
        let rows = summarize(&three_reps());
        let j = serde_json::to_value(&rows[0]).unwrap();
        assert_eq!(j["ratio_to_post_send"].as_f64(), Some(3.0), "{j}");
        assert_eq!(j["ratio_min"].as_f64(), Some(3.0 / 9.0), "{j}");
        assert_eq!(j["ratio_max"].as_f64(), Some(4.0), "{j}");
        assert!(j.get("spread").is_none(), "{j}");
        let none = serde_json::to_value(&summarize(&[s("wr-api", 0, 2.0)])[0]).unwrap();
        assert!(
            none["ratio_min"].is_null() && none["ratio_max"].is_null(),
            "{none}"
        );
    }

    #[test]
    fn no_post_send_means_no_ratio() {
        let rows = summarize(&[s("wr-api", 0, 2.0)]);
        assert_eq!(rows[0].ratio_to_post_send, None);
        assert_eq!((rows[0].spread.min, rows[0].spread.max), (None, None));
        assert!(
            table(&rows, &[], "Gb/sec").contains(" - ")
                && table(&rows, &[], "Gb/sec").contains(" -\n")
        );
    }
}
