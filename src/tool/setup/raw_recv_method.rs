//! The raw Ethernet server's receive path, chosen once from `--post` (the
//! sender's words, read for the receive side): `post-send` and `wr-api`
//! receive through libibverbs (`ibv_post_recv`, `ibv_poll_cq`), `direct`
//! and `direct-mpw` through the mlx5 direct RQ and CQ poller; `auto`
//! takes direct on an mlx5 device, libibverbs otherwise. Unlike the direct
//! SQ (one QP: it shares the QP's UAR), the direct RQ posts through the
//! RQ's doorbell record only, so with `-q` above 1 each QP has a direct RQ
//! and a CQ of its own. The banner prints the reason in one line.

use super::raw_method::{RawDevice, RawMethod};

/// How receives are posted and completions polled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawRecvMethod {
    /// `ibv_post_recv` and `ibv_poll_cq` (`VerbsRecv`, `VerbsCq`).
    Verbs,
    /// The mlx5 direct RQ and CQ poller (`DirectRq`, `DirectCq`).
    Direct,
}

impl RawRecvMethod {
    /// The banner's word.
    pub fn name(self) -> &'static str {
        match self {
            RawRecvMethod::Verbs => "verbs receive",
            RawRecvMethod::Direct => "direct RQ",
        }
    }
}

/// The receive path for `asked` (`--post`, None: auto) on `dev` (any
/// number of QPs), and the banner's reason; an impossible request is refused (exit 2)
/// with the fix.
pub fn decide_recv(
    asked: Option<RawMethod>,
    dev: &RawDevice,
) -> Result<(RawRecvMethod, String), String> {
    let Some(m) = asked else {
        return Ok(if dev.mlx5 {
            (RawRecvMethod::Direct, "auto: direct RQ (mlx5)".into())
        } else {
            (
                RawRecvMethod::Verbs,
                "auto: verbs receive (not an mlx5 device: no direct path)".into(),
            )
        });
    };
    if !m.is_direct() {
        return Ok((
            RawRecvMethod::Verbs,
            format!("verbs receive (--post {} asked)", m.name()),
        ));
    }
    if !dev.mlx5 {
        return Err(format!(
            "--post {} on the server: the device is not an mlx5 (ConnectX) device, so there \
             is no direct RQ: use --post post-send (verbs receive)",
            m.name()
        ));
    }
    Ok((
        RawRecvMethod::Direct,
        format!("direct RQ (--post {} asked)", m.name()),
    ))
}

#[cfg(test)]
mod tests {
    use super::super::raw_method::test_devices::{CX4, CX6, OTHER};
    use super::*;

    #[test]
    fn auto_picks_direct_where_the_sender_would() {
        for d in [CX6, CX4] {
            let (m, why) = decide_recv(None, &d).unwrap();
            assert_eq!(m, RawRecvMethod::Direct, "{why}");
            assert!(why.starts_with("auto: direct RQ"), "{why}");
        }
        let (m, why) = decide_recv(None, &OTHER).unwrap();
        assert_eq!(m, RawRecvMethod::Verbs);
        assert!(why.contains("not an mlx5"), "{why}");
        // Each QP has a direct RQ of its own.
        let (m, why) = decide_recv(None, &CX6).unwrap();
        assert_eq!(m, RawRecvMethod::Direct, "{why}");
    }

    #[test]
    fn post_words_pick_the_receive_path() {
        for (asked, want) in [
            (RawMethod::PostSend, RawRecvMethod::Verbs),
            (RawMethod::WrApi, RawRecvMethod::Verbs),
            (RawMethod::Direct, RawRecvMethod::Direct),
            (RawMethod::DirectMpw, RawRecvMethod::Direct),
        ] {
            let (m, why) = decide_recv(Some(asked), &CX4).unwrap();
            assert_eq!(m, want, "{asked:?}");
            assert!(why.contains(asked.name()), "{why}");
        }
        // The verbs path runs anywhere, with any -q.
        assert_eq!(
            decide_recv(Some(RawMethod::WrApi), &OTHER).unwrap().0,
            RawRecvMethod::Verbs
        );
    }

    #[test]
    fn direct_refusals_name_the_fix() {
        let e = decide_recv(Some(RawMethod::Direct), &OTHER).unwrap_err();
        assert!(
            e.contains("not an mlx5") && e.contains("--post post-send"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        let (m, _) = decide_recv(Some(RawMethod::DirectMpw), &CX6).unwrap();
        assert_eq!(m, RawRecvMethod::Direct, "whatever -q: a direct RQ per QP");
    }
}
