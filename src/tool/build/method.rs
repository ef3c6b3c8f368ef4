//! Choosing the post method once, before the loop: `--post auto|post-send|wr-api|direct`.

use crate::cli::params::{Conn, Kind, Params, PostChoice, Verb};
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
        return Err(Fail::new(format!(
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

/// Whether this tool runs the direct path today: the unidirectional RC/UC
/// write/read/atomic/send bandwidth tools (`rdma_bw`, `send_bw`'s client),
/// UD send-bw, and send-lat over RC/UC/UD (both sides post SENDs through the
/// direct SQ; their receives stay on libmlx5's separate receive CQ).
/// Others get `wr-api` from `auto` and a clear error from `--post direct`
/// until they are wired.
pub fn direct_wired(p: &Params) -> bool {
    let tool = match p.tool.kind {
        Kind::Bw => {
            matches!(
                p.tool.verb,
                Verb::Write | Verb::Read | Verb::Atomic | Verb::Send
            ) && !p.duplex
        }
        Kind::Lat => p.tool.verb == Verb::Send,
    };
    tool
        // UD: SENDs only (the address vector from the peer's AH).
        && (matches!(p.conn, Conn::Rc | Conn::Uc) || p.tool.verb == Verb::Send)
        // -e sleeps on the verbs CQ's completion channel; the direct poller has none.
        && !p.use_event
        // The direct SQ is given one buffer (the shared MR) to post from.
        && !p.mr_per_qp
        // -R connects the verbs QPs through the CM.
        && !p.rdma_cm
        // -g attaches a verbs QP to the group.
        && p.mcast.is_none()
        // The direct QPs are made through mlx5dv without an SRQ.
        && !p.mem.srq
}

/// What is known about the device and tool when choosing.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    pub device: &'a str,
    /// `mlx5dv_is_supported(device)`.
    pub mlx5: bool,
    /// [`direct_wired`] for this test.
    pub direct_wired: bool,
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
            Err(e) => Err(Fail::new(format!(
                "--post wr-api: device {} does not accept the WR API for this test ({e}); use --post post-send",
                f.device
            ))),
        },
        PostChoice::Direct if !f.mlx5 => Err(Fail::new(format!(
            "--post direct: device {} is not an mlx5 (ConnectX) device — mlx5dv_is_supported() is false and \
             mlx5dv_init_obj() returns EOPNOTSUPP for its queues; use --post wr-api or --post post-send",
            f.device
        ))),
        PostChoice::Direct if !f.direct_wired => Err(Fail::new(format!(
            "--post direct: {} does not run the direct path yet with these options (only write-bw, \
             read-bw, atomic-bw over RC/UC and send-bw over RC/UC/UD, without -b, and send-lat; \
             none with -e, -R or --mr_per_qp); use --post wr-api on {}",
            f.tool, f.device
        ))),
        PostChoice::Direct => Ok(Method::Direct),
        PostChoice::Auto if f.mlx5 && f.direct_wired => Ok(Method::Direct),
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
    let facts = Facts {
        device: ctx.name(),
        mlx5,
        direct_wired: direct_wired(p),
        tool: p.tool.name(),
    };
    decide(p.post, &facts, || {
        wr_api_probe(ctx, qp_type, flags).map_err(|e| e.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(mlx5: bool, wired: bool) -> Facts<'static> {
        Facts {
            device: if mlx5 { "mlx5_0" } else { "rxe0" },
            mlx5,
            direct_wired: wired,
            tool: "write-bw",
        }
    }
    fn ok() -> Result<(), String> {
        Ok(())
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
        let e = decide(PostChoice::Direct, &facts(false, true), ok)
            .unwrap_err()
            .msg;
        for want in ["--post direct", "rxe0", "EOPNOTSUPP", "--post wr-api"] {
            assert!(e.contains(want), "{want:?} missing: {e}");
        }
    }

    #[test]
    fn direct_on_mlx5_runs_or_says_the_tool_is_not_wired() {
        let r = decide(PostChoice::Direct, &facts(true, true), no).map_err(|f| f.msg);
        assert_eq!(r, Ok(Method::Direct));
        let e = decide(PostChoice::Direct, &facts(true, false), ok)
            .unwrap_err()
            .msg;
        assert!(e.contains("write-bw") && e.contains("--post wr-api"), "{e}");
    }

    #[test]
    fn direct_is_wired_for_the_unidirectional_rc_uc_bw_tools_only() {
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
        for t in ["write-bw", "read-bw", "atomic-bw", "send-bw"] {
            assert!(wired(t, base()), "{t}");
        }
        for t in ["write-lat", "read-lat", "atomic-lat"] {
            assert!(!wired(t, base()), "{t}");
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
        assert!(!wired("write-bw", duplex));
    }

    /// send-lat runs direct over RC, UC and UD (auto picks it on mlx5);
    /// -e, -R keep it on the verbs methods, and the other latency tools
    /// are not wired: auto gives them the WR API, `--post direct` an error.
    #[test]
    fn send_lat_is_wired_for_direct_and_auto_picks_it_only_there() {
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
        let auto = |p: &Params| {
            let f = Facts {
                device: "mlx5_0",
                mlx5: true,
                direct_wired: direct_wired(p),
                tool: p.tool.name(),
            };
            decide(PostChoice::Auto, &f, ok).map_err(|f| f.msg)
        };
        for conn in ["RC", "UC", "UD"] {
            let p = params("send-lat", args(conn, false, false));
            assert!(direct_wired(&p), "send-lat -c {conn}");
            assert_eq!(auto(&p), Ok(Method::Direct), "send-lat -c {conn}");
        }
        for (events, cm) in [(true, false), (false, true)] {
            let p = params("send-lat", args("RC", events, cm));
            assert!(!direct_wired(&p), "-e {events} -R {cm}");
            assert_eq!(auto(&p), Ok(Method::WrApi), "-e {events} -R {cm}");
        }
        let p = params("write-lat", args("RC", false, false));
        assert_eq!(auto(&p), Ok(Method::WrApi));
        let f = Facts {
            device: "mlx5_0",
            mlx5: true,
            direct_wired: direct_wired(&p),
            tool: p.tool.name(),
        };
        let e = decide(PostChoice::Direct, &f, ok).unwrap_err().msg;
        assert!(
            e.contains("write-lat") && e.contains("--post wr-api"),
            "{e}"
        );
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
        let e = decide(PostChoice::WrApi, &facts(false, true), no)
            .unwrap_err()
            .msg;
        assert!(e.contains("--post post-send") && e.contains("rxe0"), "{e}");
    }
}
