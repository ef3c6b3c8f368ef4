//! Choosing the post method once, before the loop: `--post auto|post-send|wr-api|direct`.

use crate::cli::params::{Conn, Params, PostChoice, Verb};
use crate::mlx5::device::{select_for_device, DirectRequest};
use crate::mlx5::setup::SetupFailure;
use crate::post::wr_api::{send_ops_flags, wr_api_probe};
use crate::post::Op;
use crate::tool::common::fail::Fail;
use crate::verbs::{Context, QpType};
use std::sync::Arc;

/// The method that will run.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Method {
    PostSend,
    WrApi,
    /// WQEs written straight into the mlx5 SQ ring (`crate::mlx5`), QPs
    /// created through mlx5dv (`crate::tool::session::direct`).
    Direct,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::PostSend => "post-send",
            Method::WrApi => "wr-api",
            Method::Direct => "direct",
        }
    }
}

/// Labelled report lines (label, value).
pub type Lines = Vec<(String, String)>;

/// The method that ran, and why the better ones `--post auto` tried first
/// did not (empty when the first choice ran).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chosen {
    pub method: Method,
    /// (method passed over, why), best first.
    pub passed_over: Vec<(Method, String)>,
    /// How the method runs where that differs from its default (e.g. the
    /// doorbell under `MLX5_SHUT_UP_BF`).
    pub notes: Vec<String>,
}

impl Chosen {
    pub fn plain(method: Method) -> Self {
        Self {
            method,
            passed_over: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// The banner's value: `wr-api (direct unavailable: ibv_alloc_td: ENOSPC — …)`.
    pub fn banner(&self) -> String {
        let mut s = self.method.name().to_string();
        let parts = self.notes.iter().cloned().chain(
            self.passed_over
                .iter()
                .map(|(m, why)| format!("{} unavailable: {why}", m.name())),
        );
        for (i, part) in parts.enumerate() {
            s.push_str(if i == 0 { " (" } else { "; " });
            s.push_str(&part);
        }
        if !self.notes.is_empty() || !self.passed_over.is_empty() {
            s.push(')');
        }
        s
    }

    /// The report's lines of our own for the method: the banner line (text
    /// and JSON `Post_method`), and JSON-only keys naming the method that ran
    /// and each passed-over method's reason (`Direct_unavailable`, …).
    pub fn info_extras(&self) -> (Lines, Lines) {
        let text = vec![("Post method".to_string(), self.banner())];
        let mut json = Vec::new();
        for n in &self.notes {
            json.push(("Post_method_note".to_string(), n.clone()));
        }
        if !self.passed_over.is_empty() {
            json.push((
                "Post_method_ran".to_string(),
                self.method.name().to_string(),
            ));
            for (m, why) in &self.passed_over {
                let key = match m {
                    Method::Direct => "Direct_unavailable",
                    Method::WrApi => "Wr_api_unavailable",
                    Method::PostSend => "Post_send_unavailable",
                };
                json.push((key.to_string(), why.clone()));
            }
        }
        (text, json)
    }
}

/// After the direct set-up failed (`why`): `--post auto` falls back to the
/// WR API where the device accepts it, else `ibv_post_send`, keeping the
/// reasons; `--post direct` fails with the same reason.
pub fn after_direct_failure(
    choice: PostChoice,
    device: &str,
    why: &SetupFailure,
    wr_api_ok: impl FnOnce() -> Result<(), String>,
) -> Result<Chosen, Fail> {
    if choice != PostChoice::Auto {
        return Err(Fail::refused(format!(
            "--post direct: the direct path cannot be set up on {device}: {why}; use --post \
             wr-api or --post post-send (--post auto falls back by itself)"
        )));
    }
    let mut passed_over = vec![(Method::Direct, why.to_string())];
    let method = match wr_api_ok() {
        Ok(()) => Method::WrApi,
        Err(e) => {
            passed_over.push((Method::WrApi, e));
            Method::PostSend
        }
    };
    Ok(Chosen {
        method,
        passed_over,
        notes: Vec::new(),
    })
}

/// Whether this test runs the direct path: every tool and mode over RC/UC
/// (and UD for the SEND tools) — see [`unwired`] for what is left. The
/// latency tools post through the direct SQ (write-lat's ping-pong polls
/// memory; read/atomic-lat wait for their own completion); receives
/// (send-lat, send-bw's server, send-bw -b) go through the direct RQs or
/// the SRQ, completed by a direct poller of their own receive CQ
/// (`session::direct::open_recv`); `--threads` gives each worker a direct
/// poller of its own CQ; `-R` has the CM move the direct QPs to RTS.
pub fn direct_wired(p: &Params) -> bool {
    unwired(p).is_empty()
}

/// What in this test keeps it off the direct path (empty: it runs), each
/// naming the option and why. Only the transport is left: the CLI refuses
/// UD for a verb other than SEND already, and DC/XRC are not built (no
/// `-c DC`/`-c XRC` to ask for).
pub fn unwired(p: &Params) -> Vec<&'static str> {
    let mut v = Vec::new();
    if p.conn == Conn::Ud && p.tool.verb != Verb::Send {
        // Kept so the reason is never "wired" if the CLI ever lets it through.
        v.push("-c UD with a verb other than SEND (UD carries SENDs only)");
    }
    v
}

/// What is known about the device and tool when choosing.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    pub device: &'a str,
    /// `mlx5dv_is_supported(device)`.
    pub mlx5: bool,
    /// [`unwired`] for this test (empty: the direct path runs it).
    pub unwired: &'a [&'a str],
    pub tool: &'a str,
}

/// The decision, without a device: `wr_api_ok` is asked only when needed.
pub fn decide(
    choice: PostChoice,
    f: &Facts<'_>,
    wr_api_ok: impl FnOnce() -> Result<(), String>,
) -> Result<Method, Fail> {
    match choice {
        PostChoice::PostSend => Ok(Method::PostSend),
        PostChoice::WrApi => match wr_api_ok() {
            Ok(()) => Ok(Method::WrApi),
            Err(e) => Err(Fail::refused(format!(
                "--post wr-api: device {} does not accept the WR API for this test ({e}); use --post post-send",
                f.device
            ))),
        },
        PostChoice::Direct if !f.mlx5 => Err(Fail::refused(format!(
            "--post direct: device {} is not an mlx5 (ConnectX) device — mlx5dv_is_supported() is false and \
             mlx5dv_init_obj() returns EOPNOTSUPP for its queues; use --post wr-api or --post post-send",
            f.device
        ))),
        PostChoice::Direct if !f.unwired.is_empty() => Err(Fail::refused(format!(
            "--post direct: {} cannot run the direct path with {}; drop that option, or use \
             --post wr-api on {}",
            f.tool,
            f.unwired.join(", "),
            f.device
        ))),
        PostChoice::Direct => Ok(Method::Direct),
        PostChoice::Auto if f.mlx5 && f.unwired.is_empty() => Ok(Method::Direct),
        PostChoice::Auto => Ok(if wr_api_ok().is_ok() {
            Method::WrApi
        } else {
            Method::PostSend
        }),
    }
}

/// Resolve the user's choice against what the device can do. Asking for a
/// method the device can't run is an error, never a silent fallback.
pub fn resolve(
    ctx: &Arc<Context>,
    p: &Params,
    qp_type: QpType,
    ops: &[Op],
) -> Result<Method, Fail> {
    let flags = send_ops_flags(ops);
    // `Auto` only asks; whether `--post direct` may run is decided below
    // with the tool's facts too.
    // SAFETY: the device pointer comes from an open context and stays valid
    // while `ctx` lives; the call only reads the device's ops and name.
    let mlx5 =
        unsafe { select_for_device(DirectRequest::Auto, (*ctx.raw()).device) }.unwrap_or(false);
    decide_for(p.post, p, ctx.name(), mlx5, || {
        wr_api_probe(ctx, qp_type, flags).map_err(|e| e.to_string())
    })
}

/// [`decide`] for test `p` on `device` (`mlx5`: whether it is one), with
/// the facts drawn from `p` as [`resolve`] draws them.
pub fn decide_for(
    choice: PostChoice,
    p: &Params,
    device: &str,
    mlx5: bool,
    wr_api_ok: impl FnOnce() -> Result<(), String>,
) -> Result<Method, Fail> {
    let unwired = unwired(p);
    let facts = Facts {
        device,
        mlx5,
        unwired: &unwired,
        tool: p.tool.name(),
    };
    decide(choice, &facts, wr_api_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(mlx5: bool, wired: bool) -> Facts<'static> {
        Facts {
            device: if mlx5 { "mlx5_0" } else { "rxe0" },
            mlx5,
            unwired: if wired { &[] } else { &["-e (why)"] as &[&str] },
            tool: "write-bw",
        }
    }
    fn ok() -> Result<(), String> {
        Ok(())
    }
    /// The refusal `decide` gives for `choice` on `f`.
    fn refusal(choice: PostChoice, f: &Facts, probe: fn() -> Result<(), String>) -> String {
        decide(choice, f, probe).unwrap_err().msg
    }
    /// Fails naming the first of `words` that `e` lacks.
    fn assert_names(e: &str, words: &[&str]) {
        for want in words {
            assert!(e.contains(want), "{want:?} missing: {e}");
        }
    }
    fn no() -> Result<(), String> {
        Err("EOPNOTSUPP".into())
    }

    #[test]
    fn auto_picks_direct_on_mlx5_for_wired_tools_else_wr_api() {
        let d = |m, w, probe: fn() -> Result<(), String>| {
            decide(PostChoice::Auto, &facts(m, w), probe).map_err(|f| f.msg)
        };
        assert_eq!(d(true, true, no), Ok(Method::Direct));
        assert_eq!(d(true, false, ok), Ok(Method::WrApi));
        assert_eq!(d(false, true, ok), Ok(Method::WrApi));
        assert_eq!(d(false, true, no), Ok(Method::PostSend));
    }

    #[test]
    fn direct_on_rxe_names_device_cause_and_fixes() {
        let e = refusal(PostChoice::Direct, &facts(false, true), ok);
        assert_names(
            &e,
            &["--post direct", "rxe0", "EOPNOTSUPP", "--post wr-api"],
        );
    }

    #[test]
    fn direct_on_mlx5_runs_or_says_the_tool_is_not_wired() {
        let r = decide(PostChoice::Direct, &facts(true, true), no).map_err(|f| f.msg);
        assert_eq!(r, Ok(Method::Direct));
        let e = refusal(PostChoice::Direct, &facts(true, false), ok);
        assert_names(&e, &["write-bw", "-e (why)", "--post wr-api", "mlx5_0"]);
    }

    #[test]
    fn direct_is_wired_for_every_tool_without_the_unwired_options() {
        use crate::cli::args::PerfArgs;
        use crate::cli::params::{resolve, Tool};
        let base = || PerfArgs {
            post: "auto".into(), // clap's default
            ..PerfArgs::default()
        };
        let wired = |name: &str, a: PerfArgs| {
            let tool = Tool::ALL.iter().find(|t| t.0 == name).unwrap().2;
            direct_wired(&resolve(tool, &a).unwrap())
        };
        for t in Tool::ALL.map(|t| t.0) {
            assert!(wired(t, base()), "{t}");
        }
        let ud = PerfArgs {
            connection: Some("UD".into()),
            ..base()
        };
        assert!(
            wired("send-bw", ud),
            "UD SENDs carry the peer's address vector"
        );
        let duplex = PerfArgs {
            bidirectional: true,
            ..base()
        };
        assert!(
            wired("write-bw", duplex),
            "-b runs duplex's loops on direct queues"
        );
    }

    /// send-lat runs direct over RC, UC and UD, with and without -e and -R
    /// (auto picks it on mlx5); so do write-bw and send-bw with -b.
    #[test]
    fn send_lat_is_wired_for_direct_and_unwired_options_keep_it_off() {
        use crate::cli::args::PerfArgs;
        use crate::cli::params::{resolve, Tool};
        let args = |conn: &str, events: bool, rdma_cm: bool| PerfArgs {
            post: "auto".into(),
            connection: Some(conn.into()),
            events,
            rdma_cm,
            ..PerfArgs::default()
        };
        let params = |name: &str, a: PerfArgs| {
            let tool = Tool::ALL.iter().find(|t| t.0 == name).unwrap().2;
            resolve(tool, &a).unwrap()
        };
        let on_mlx5 =
            |p: &Params, choice| decide_for(choice, p, "mlx5_0", true, ok).map_err(|f| f.msg);
        // -R is RC only (librdmacm has no UC; rdmaperf's UD -R is send-bw's).
        let cases = [("RC", true), ("UC", false), ("UD", false)];
        for (conn, cm_too) in cases {
            for (events, cm) in [(false, false), (true, false), (false, cm_too)] {
                let p = params("send-lat", args(conn, events, cm));
                let case = format!("send-lat -c {conn} -e {events} -R {cm}");
                assert!(direct_wired(&p), "{case}");
                assert_eq!(on_mlx5(&p, PostChoice::Auto), Ok(Method::Direct), "{case}");
            }
        }
        for name in ["write-bw", "send-bw"] {
            let p = params(
                name,
                PerfArgs {
                    bidirectional: true,
                    ..args("RC", false, false)
                },
            );
            assert_eq!(
                on_mlx5(&p, PostChoice::Direct),
                Ok(Method::Direct),
                "{name} -b"
            );
        }
    }

    #[test]
    fn the_banner_says_what_ran_and_why_the_better_ones_did_not() {
        assert_eq!(Chosen::plain(Method::Direct).banner(), "direct");
        let c = Chosen {
            method: Method::PostSend,
            notes: Vec::new(),
            passed_over: vec![
                (Method::Direct, "ibv_alloc_td: ENOSPC — x".into()),
                (Method::WrApi, "EOPNOTSUPP".into()),
            ],
        };
        assert_eq!(
            c.banner(),
            "post-send (direct unavailable: ibv_alloc_td: ENOSPC — x; wr-api unavailable: EOPNOTSUPP)"
        );
        let (text, json) = c.info_extras();
        assert_eq!(text, vec![("Post method".to_string(), c.banner())]);
        let keys: Vec<&str> = json.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "Post_method_ran",
                "Direct_unavailable",
                "Wr_api_unavailable"
            ]
        );
    }

    #[test]
    fn the_info_block_names_the_method() {
        let names = [Method::PostSend, Method::WrApi, Method::Direct].map(Method::name);
        assert_eq!(names, ["post-send", "wr-api", "direct"]);
    }

    #[test]
    fn explicit_verbs_methods() {
        let r = decide(PostChoice::PostSend, &facts(true, true), no).map_err(|f| f.msg);
        assert_eq!(r, Ok(Method::PostSend));
        let e = refusal(PostChoice::WrApi, &facts(false, true), no);
        assert_names(&e, &["--post post-send", "rxe0"]);
    }

    /// Every tool × mode: on an mlx5 device `auto` picks direct (a mode
    /// with a reason would be refused naming it: none is left); on rxe the
    /// refusal names the device, never "not wired".
    #[test]
    fn every_tool_and_mode_gets_direct_on_mlx5_or_a_reason() {
        use crate::cli::args::PerfArgs;
        use crate::cli::params::{resolve, Tool};
        // (mode, flags, the option a refusal must name; None: wired)
        type Mode = (&'static str, fn(&mut PerfArgs), Option<&'static str>);
        let modes: [Mode; 13] = [
            ("plain", |_| {}, None),
            ("-c UC", |a| a.connection = Some("UC".into()), None),
            ("-c UD", |a| a.connection = Some("UD".into()), None),
            ("-D 2", |a| a.duration = Some(2), None),
            ("-a", |a| a.all = true, None),
            ("-q 2", |a| a.qps = Some(2), None),
            (
                "--threads 2",
                |a| {
                    a.threads = Some(2);
                    a.qps = Some(2)
                },
                None,
            ),
            ("-b", |a| a.bidirectional = true, None),
            ("-e", |a| a.events = true, None),
            ("-R", |a| a.rdma_cm = true, None),
            (
                "--mr_per_qp",
                |a| {
                    a.mr_per_qp = true;
                    a.qps = Some(2)
                },
                None,
            ),
            ("--use-srq", |a| a.use_srq = true, None),
            (
                "-g",
                |a| {
                    a.connection = Some("UD".into());
                    a.mcg = true
                },
                None,
            ),
        ];
        let mut ran = 0;
        let mut per_mode = [0usize; 13];
        for (tool_name, _, tool) in Tool::ALL {
            for (k, (mode, set, reason)) in modes.iter().enumerate() {
                let mut a = PerfArgs {
                    post: "auto".into(),
                    ..PerfArgs::default()
                };
                set(&mut a);
                // Combinations perftest's rules refuse are not tests.
                let Ok(p) = resolve(tool, &a) else { continue };
                ran += 1;
                per_mode[k] += 1;
                let u = unwired(&p);
                let on = |mlx5: bool| Facts {
                    device: if mlx5 { "mlx5_0" } else { "rxe0" },
                    mlx5,
                    unwired: &u,
                    tool: tool_name,
                };
                let case = format!("{tool_name} {mode}");
                let auto = decide(PostChoice::Auto, &on(true), ok).map_err(|f| f.msg);
                let direct = decide(PostChoice::Direct, &on(true), ok).map_err(|f| f.msg);
                match reason {
                    None => {
                        assert_eq!(auto, Ok(Method::Direct), "{case}");
                        assert_eq!(direct, Ok(Method::Direct), "{case}");
                    }
                    Some(why) => {
                        assert_eq!(auto, Ok(Method::WrApi), "{case}");
                        let e = direct.unwrap_err();
                        for want in [tool_name, why, "--post wr-api"] {
                            assert!(e.contains(want), "{case}: {want:?} missing: {e}");
                        }
                    }
                }
                let e = decide(PostChoice::Direct, &on(false), ok).unwrap_err().msg;
                assert!(
                    e.contains("rxe0") && e.contains("not an mlx5"),
                    "{case}: {e}"
                );
                assert!(
                    !e.contains("yet"),
                    "{case}: a device reason, not wiring: {e}"
                );
                assert_eq!(
                    decide(PostChoice::Auto, &on(false), ok).map_err(|f| f.msg),
                    Ok(Method::WrApi),
                    "{case}"
                );
            }
        }
        // Every mode resolved for some tool (none is skipped unseen).
        for (k, n) in per_mode.iter().enumerate() {
            assert!(*n > 0, "mode {} resolved for no tool", modes[k].0);
        }
        assert!(ran > 40, "only {ran} tool × mode combinations resolved");
    }
}
