//! The raw Ethernet sender's post method (`--post`), chosen once before the
//! loop: perftest's forced `ibv_post_send`, the WR API, or the mlx5 direct
//! SQ one SEND per frame or in enhanced multi-packet WQEs. `auto` picks
//! from what the device says; the banner prints the reason in one line.

/// How the frames are posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawMethod {
    PostSend,
    WrApi,
    Direct,
    DirectMpw,
}

impl RawMethod {
    pub const ALL: [RawMethod; 4] = [
        RawMethod::PostSend,
        RawMethod::WrApi,
        RawMethod::Direct,
        RawMethod::DirectMpw,
    ];

    /// The `--post` word.
    pub fn name(self) -> &'static str {
        match self {
            RawMethod::PostSend => "post-send",
            RawMethod::WrApi => "wr-api",
            RawMethod::Direct => "direct",
            RawMethod::DirectMpw => "direct-mpw",
        }
    }

    /// Whether it goes through the mlx5 direct SQ.
    pub fn is_direct(self) -> bool {
        matches!(self, RawMethod::Direct | RawMethod::DirectMpw)
    }
}

/// `--post`'s value: one method, or `auto` (None).
pub fn parse(word: Option<&str>) -> Result<Option<RawMethod>, String> {
    match word {
        None | Some("auto") => Ok(None),
        Some(w) => RawMethod::ALL
            .into_iter()
            .find(|m| m.name() == w)
            .map(Some)
            .ok_or_else(|| {
                format!(
                    "--post {w}: not a raw post method: use post-send, wr-api, direct, \
                     direct-mpw or auto"
                )
            }),
    }
}

/// What the device says, read once after opening it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawDevice {
    /// `mlx5dv_is_supported`.
    pub mlx5: bool,
    /// `MLX5DV_CONTEXT_FLAGS_ENHANCED_MPW` in `mlx5dv_query_device`.
    pub enhanced_mpw: bool,
    /// The minimum inline header the SQ must carry (0 or 18).
    pub min_inline: usize,
    /// The WR API (`ibv_wr_*`) creates raw packet QPs here.
    pub wr_api: bool,
}

/// The method for `asked` (None: auto) on `dev`, and the banner's reason;
/// an impossible request is refused (exit 2) with the fix. Any `-q` takes
/// any method: the direct methods drive one raw SQ per QP, all on the one
/// CQ (`run::raw_qpn` tells their completions apart).
pub fn decide(asked: Option<RawMethod>, dev: &RawDevice) -> Result<(RawMethod, String), String> {
    let mpw_ok = dev.mlx5 && dev.enhanced_mpw && dev.min_inline == 0;
    let Some(m) = asked else {
        return Ok(if mpw_ok {
            (
                RawMethod::DirectMpw,
                "auto: direct-mpw (mlx5, enhanced MPW, no minimum inline)".into(),
            )
        } else if dev.mlx5 {
            let why = if dev.enhanced_mpw {
                format!("a {}-byte minimum inline header", dev.min_inline)
            } else {
                "no enhanced MPW".into()
            };
            (RawMethod::Direct, format!("auto: direct (mlx5, {why})"))
        } else {
            (
                RawMethod::PostSend,
                "auto: post-send (not an mlx5 device: no direct path)".into(),
            )
        });
    };
    if m.is_direct() && !dev.mlx5 {
        return Err(format!(
            "--post {}: the device is not an mlx5 (ConnectX) device: use --post post-send",
            m.name()
        ));
    }
    if m == RawMethod::DirectMpw && !mpw_ok {
        return Err(if dev.enhanced_mpw {
            format!(
                "--post direct-mpw: the device wants a {}-byte minimum inline header, which \
                 enhanced MPW cannot carry: use --post direct",
                dev.min_inline
            )
        } else {
            "--post direct-mpw: mlx5dv does not report enhanced MPW \
             (MLX5DV_CONTEXT_FLAGS_ENHANCED_MPW) on this device: use --post direct"
                .into()
        });
    }
    if m == RawMethod::WrApi && !dev.wr_api {
        return Err(
            "--post wr-api: the provider does not create raw packet QPs for the WR API \
             (ibv_create_qp_ex with send_ops_flags): use --post post-send"
                .into(),
        );
    }
    Ok((m, format!("{} (asked)", m.name())))
}

/// The devices both methods' tests decide for: a ConnectX-6 (enhanced MPW,
/// no minimum inline), a ConnectX-4 (18-byte minimum inline) and a non-mlx5 RNIC.
#[cfg(test)]
pub(super) mod test_devices {
    use super::RawDevice;

    pub(in crate::tool::setup) const CX6: RawDevice = RawDevice {
        mlx5: true,
        enhanced_mpw: true,
        min_inline: 0,
        wr_api: true,
    };
    pub(in crate::tool::setup) const CX4: RawDevice = RawDevice {
        mlx5: true,
        enhanced_mpw: false,
        min_inline: 18,
        wr_api: true,
    };
    pub(in crate::tool::setup) const OTHER: RawDevice = RawDevice {
        mlx5: false,
        enhanced_mpw: false,
        min_inline: 0,
        wr_api: false,
    };
}

#[cfg(test)]
mod tests {
    use super::test_devices::{CX4, CX6, OTHER};
    use super::*;

    fn auto(d: &RawDevice) -> (RawMethod, String) {
        decide(None, d).unwrap()
    }

    #[test]
    fn auto_decision_table() {
        assert_eq!(auto(&CX6).0, RawMethod::DirectMpw);
        assert!(auto(&CX6).1.contains("enhanced MPW"));
        assert_eq!(auto(&CX4).0, RawMethod::Direct);
        assert!(auto(&CX4).1.contains("no enhanced MPW"));
        let inl = RawDevice {
            min_inline: 18,
            ..CX6
        };
        assert_eq!(auto(&inl).0, RawMethod::Direct);
        assert!(auto(&inl).1.contains("18-byte minimum inline"));
        assert_eq!(auto(&OTHER).0, RawMethod::PostSend);
        assert!(auto(&OTHER).1.contains("not an mlx5"));
        for (m, r) in [&auto(&CX6), &auto(&CX4), &auto(&OTHER)].map(|x| x.clone()) {
            assert!(r.starts_with("auto: ") && !r.contains('\n'), "{m:?}: {r}");
        }
    }

    #[test]
    fn refusals_name_the_fix() {
        let refusals = [
            (
                RawMethod::Direct,
                &OTHER,
                ["not an mlx5", "--post post-send"],
            ),
            (
                RawMethod::DirectMpw,
                &CX4,
                ["ENHANCED_MPW", "--post direct"],
            ),
        ];
        for (m, dev, wants) in refusals {
            let e = decide(Some(m), dev).unwrap_err();
            for want in wants {
                assert!(e.contains(want), "{m:?}: {want:?} missing: {e}");
            }
        }
        let inl = RawDevice {
            min_inline: 18,
            ..CX6
        };
        let e = decide(Some(RawMethod::DirectMpw), &inl).unwrap_err();
        assert!(e.contains("18-byte minimum inline"), "{e}");
        for m in [RawMethod::Direct, RawMethod::DirectMpw] {
            assert_eq!(decide(Some(m), &CX6).unwrap().0, m, "any -q");
        }
        let e = decide(Some(RawMethod::WrApi), &OTHER).unwrap_err();
        assert!(e.contains("--post post-send"), "{e}");
        assert_eq!(
            decide(Some(RawMethod::PostSend), &OTHER).unwrap().0,
            RawMethod::PostSend
        );
    }

    #[test]
    fn post_words() {
        assert_eq!(parse(None), Ok(None));
        assert_eq!(parse(Some("auto")), Ok(None));
        for m in RawMethod::ALL {
            assert_eq!(parse(Some(m.name())), Ok(Some(m)));
        }
        let e = parse(Some("mpw")).unwrap_err();
        assert!(e.contains("direct-mpw"), "{e}");
    }
}
