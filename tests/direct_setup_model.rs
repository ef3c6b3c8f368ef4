//! `--post auto`'s fallback when the direct set-up fails, on the queue model:
//! each set-up step (thread domain, parent domain, QP create, init_obj,
//! layout; the CQ's init_obj and layout) is made to fail through the model's
//! stand-in for libmlx5 (`ModelSteps`), the real step sequence
//! (`mlx5::setup::set_up`) and the real layout checks run, and the tool's
//! decision (`tool::method::after_direct_failure`) and report lines
//! (`Chosen::info_extras` → the text info block and the JSON `test_info`)
//! are checked: auto lands on the next method with the reason in banner and
//! JSON, explicit `--post direct` fails with the same reason.

#[cfg(not(feature = "model"))]
#[test]
fn direct_setup_needs_the_model_feature() {
    println!("SKIPPED: the direct set-up tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use crate::common::model_env::{register_pair, signaled_wr};
    use rdmaperf::cli::args::PerfArgs;
    use rdmaperf::cli::params::{self, PostChoice, Tool};
    use rdmaperf::mlx5::env::Mlx5Env;
    use rdmaperf::mlx5::setup::{set_up, DirectQpAttr, SetupFailure, SetupStep};
    use rdmaperf::model::{Inject, Model, ModelConfig, ModelSteps, RecvSpec};
    use rdmaperf::post::{Completion, CompletionQueue, Op, SendQueue};
    use rdmaperf::report::{json, text};
    use rdmaperf::tool::session::info::params_info;
    use rdmaperf::tool::setup::method::{after_direct_failure, Chosen, Method};

    const QPS: usize = 4;
    const ATTR: DirectQpAttr = DirectQpAttr::rc(128, false);

    fn model() -> Model {
        Model::new(ModelConfig {
            qps: QPS as u32,
            ..ModelConfig::default()
        })
        .unwrap()
    }

    /// The set-up on a model with `inject`; the failure it stopped at.
    fn fail_with(inject: Inject) -> (SetupFailure, Vec<(usize, SetupStep)>) {
        let m = model();
        let mut steps = ModelSteps::new(&m, Some(inject));
        let f = match set_up(&mut steps, QPS, &ATTR, &Mlx5Env::default()) {
            Ok(_) => panic!("{inject:?}: set-up succeeded"),
            Err(f) => f,
        };
        (f, steps.trace)
    }

    /// The text banner and JSON test_info the tool prints for `chosen`.
    fn report(chosen: &Chosen) -> (String, json::Ordered) {
        let tool = Tool::ALL.iter().find(|t| t.0 == "write-bw").unwrap().2;
        let a = PerfArgs {
            post: "auto".into(),
            ..PerfArgs::default()
        };
        let p = params::resolve(tool, &a).unwrap();
        let (extra, json_extra) = chosen.info_extras();
        let info = rdmaperf::report::info::TestInfo {
            device: "mlx5_0".into(),
            extra,
            json_extra,
            ..params_info(&p)
        };
        (text::info_block(&info), json::test_info(&info))
    }

    /// Every injected step: where the set-up stopped, what auto ran, what
    /// the banner and JSON say, and what explicit --post direct says.
    #[test]
    fn each_failed_step_makes_auto_fall_back_with_the_reason() {
        let cases = [
            (
                SetupStep::ThreadDomain,
                libc::ENOSPC,
                2,
                "ibv_alloc_td: ENOSPC",
            ),
            (
                SetupStep::ThreadDomain,
                libc::EOPNOTSUPP,
                0,
                "no thread domain",
            ),
            (
                SetupStep::ParentDomain,
                libc::EINVAL,
                1,
                "ibv_alloc_parent_domain: EINVAL",
            ),
            (
                SetupStep::CreateQp,
                libc::ENOMEM,
                3,
                "mlx5dv_create_qp: ENOMEM",
            ),
            (
                SetupStep::InitObj,
                libc::EOPNOTSUPP,
                2,
                "mlx5dv_init_obj: EOPNOTSUPP",
            ),
            (SetupStep::Layout, 0, 1, "sq.stride = 0x80"),
            // The CQ (index QPS): after every QP.
            (SetupStep::InitObj, libc::EINVAL, QPS, "(the send CQ)"),
            (SetupStep::Layout, 0, QPS, "cqe_size = 0x100"),
            // The receive CQ (index QPS + 1): after the send CQ.
            (
                SetupStep::InitObj,
                libc::EINVAL,
                QPS + 1,
                "(the receive CQ)",
            ),
            (SetupStep::Layout, 0, QPS + 1, "cqe_size = 0x100"),
        ];
        for (step, errno, at, want) in cases {
            let (f, trace) = fail_with(Inject { step, errno, at });
            let ctx = format!("{step:?} at {at}: {f}");
            assert_eq!(f.step, step, "{ctx}");
            let why = f.to_string();
            assert!(why.contains(want), "{ctx}: {want:?} missing");
            if at < QPS {
                assert!(why.contains(&format!("QP {} of {QPS}", at + 1)), "{ctx}");
            }
            // Earlier QPs got every step; nothing ran after the failure.
            let last = *trace.last().unwrap();
            let failed_at = if step == SetupStep::Layout {
                SetupStep::InitObj // the check runs on what init_obj gave
            } else {
                step
            };
            assert_eq!(last, (at, failed_at), "{ctx}: {trace:?}");
            for q in 0..at.min(QPS) {
                let n = trace.iter().filter(|t| t.0 == q).count();
                assert_eq!(n, 4, "{ctx}: QP {q} did not get every step: {trace:?}");
            }

            // auto: the WR API, with the reason in banner and JSON.
            let chosen = after_direct_failure(PostChoice::Auto, "mlx5_0", &f, || Ok(()))
                .unwrap_or_else(|e| panic!("{ctx}: {}", e.msg));
            assert_eq!(chosen.method, Method::WrApi, "{ctx}");
            let (banner, info) = report(&chosen);
            let line = banner
                .lines()
                .find(|l| l.starts_with(" Post method"))
                .unwrap_or_else(|| panic!("{ctx}: no Post method line\n{banner}"));
            assert!(
                line.ends_with(&format!(": wr-api (direct unavailable: {why})")),
                "{ctx}: {line}"
            );
            assert_eq!(info.get("Post_method_ran").unwrap(), "wr-api", "{ctx}");
            assert_eq!(
                info.get("Direct_unavailable").unwrap(),
                why.as_str(),
                "{ctx}"
            );

            // --post direct: an error with the same reason.
            let e = after_direct_failure(PostChoice::Direct, "mlx5_0", &f, || Ok(()))
                .unwrap_err()
                .msg;
            assert!(
                e.contains(&why) && e.contains("--post wr-api"),
                "{ctx}: {e}"
            );
        }
    }

    /// The set-up on a model whose peers receive through `recv`.
    fn set_up_with(
        recv: RecvSpec,
        inject: Option<Inject>,
    ) -> Result<(), (SetupFailure, Vec<(usize, SetupStep)>)> {
        let m = Model::new(ModelConfig {
            qps: QPS as u32,
            recv: Some(recv),
            ..ModelConfig::default()
        })
        .unwrap();
        let mut steps = ModelSteps::new(&m, inject);
        match set_up(&mut steps, QPS, &ATTR, &Mlx5Env::default()) {
            Ok(_) => Ok(()),
            Err(f) => Err((f, steps.trace)),
        }
    }

    /// The receive side's layouts are refused by the set-up, before
    /// anything is connected, so auto falls back to the WR API: an RQ of
    /// 65536 slots (its 16-bit count would read full as empty) at the
    /// first QP, a bad SRQ after the CQs; good ones pass.
    #[test]
    fn receive_layouts_are_refused_before_connect() {
        let rq = |slots| RecvSpec {
            slots,
            ..RecvSpec::default()
        };
        let srq = RecvSpec {
            srq: true,
            slots: 64,
            stride: 32,
            ..RecvSpec::default()
        };
        assert_eq!(set_up_with(rq(1 << 15), None).map_err(|e| e.0), Ok(()));
        assert_eq!(set_up_with(srq, None).map_err(|e| e.0), Ok(()));
        let (f, trace) = set_up_with(rq(1 << 16), None).unwrap_err();
        let why = f.to_string();
        assert_eq!(f.step, SetupStep::Layout, "{why}");
        assert!(
            why.contains("rq.wqe_cnt = 0x10000") && why.contains("(QP 1 of 4)"),
            "{why}"
        );
        assert_eq!(trace.last(), Some(&(0, SetupStep::InitObj)), "{trace:?}");
        let chosen = after_direct_failure(PostChoice::Auto, "mlx5_0", &f, || Ok(())).unwrap();
        assert_eq!(chosen.method, Method::WrApi);
        let inject = Inject {
            step: SetupStep::Layout,
            errno: 0,
            at: QPS + 2,
        };
        let (f, _) = set_up_with(srq, Some(inject)).unwrap_err();
        let why = f.to_string();
        assert!(
            why.contains("srq.stride = 0x10") && why.contains("(the SRQ)"),
            "{why}"
        );
    }

    #[test]
    fn without_the_wr_api_auto_lands_on_post_send_with_both_reasons() {
        let (f, _) = fail_with(Inject {
            step: SetupStep::ThreadDomain,
            errno: libc::ENOSPC,
            at: 0,
        });
        let chosen = after_direct_failure(PostChoice::Auto, "mlx5_0", &f, || {
            Err("ibv_create_qp_ex: EOPNOTSUPP".into())
        })
        .unwrap();
        assert_eq!(chosen.method, Method::PostSend);
        let (banner, info) = report(&chosen);
        let want = format!(
            ": post-send (direct unavailable: {f}; wr-api unavailable: ibv_create_qp_ex: EOPNOTSUPP)"
        );
        assert!(banner.lines().any(|l| l.ends_with(&want)), "{banner}");
        assert_eq!(info.get("Post_method_ran").unwrap(), "post-send");
        assert_eq!(
            info.get("Wr_api_unavailable").unwrap(),
            "ibv_create_qp_ex: EOPNOTSUPP"
        );
    }

    #[test]
    fn without_a_failure_the_banner_is_just_the_method() {
        let (banner, info) = report(&Chosen::plain(Method::Direct));
        assert!(
            banner
                .lines()
                .any(|l| l.starts_with(" Post method") && l.ends_with(": direct")),
            "{banner}"
        );
        assert!(info.get("Direct_unavailable").is_none());
    }

    /// The same steps without an injected failure give queues that work:
    /// a WRITE on the last QP lands.
    #[test]
    fn a_clean_set_up_describes_queues_that_carry_a_write() {
        let m = model();
        let mut steps = ModelSteps::new(&m, None);
        let done =
            set_up(&mut steps, QPS, &ATTR, &Mlx5Env::default()).unwrap_or_else(|f| panic!("{f}"));
        assert_eq!(done.qps.len(), QPS);
        assert_eq!(done.cq.cqe_size, 64);
        let (mut src, mut dst) = (vec![0x5au8; 64], vec![0u8; 64]);
        // SAFETY: both buffers outlive the model (dropped after it).
        let (l, r) = unsafe { register_pair(&m, &mut src, &mut dst) };
        let (mut sqs, mut cq) = m.queues().unwrap();
        let (laddr, raddr) = (src.as_ptr() as u64, dst.as_ptr() as u64);
        let wr = signaled_wr(9, (laddr, l.lkey), (raddr, r.rkey), 64);
        sqs[QPS - 1].post(Op::Write, &[wr]).unwrap();
        assert_eq!(m.step(), 1);
        let mut wc = [Completion::default(); 2];
        assert_eq!(cq.poll(&mut wc).unwrap(), 1);
        assert_eq!((wc[0].wr_id, wc[0].qp_num), (9, m.qpn_of(QPS - 1)));
        assert_eq!(dst, src);
        drop((sqs, cq));
        drop(m);
    }

    /// More QPs than the device has: QP creation fails at the first one
    /// over, naming it.
    #[test]
    fn too_many_qps_fail_at_the_first_one_over() {
        let m = model();
        let mut steps = ModelSteps::new(&m, None);
        let f = match set_up(&mut steps, QPS + 1, &ATTR, &Mlx5Env::default()) {
            Ok(_) => panic!("set-up of {} QPs on a {QPS}-QP model succeeded", QPS + 1),
            Err(f) => f,
        };
        assert_eq!(f.step, SetupStep::CreateQp);
        assert!(
            f.to_string()
                .contains(&format!("QP {} of {}", QPS + 1, QPS + 1)),
            "{f}"
        );
    }
}
