//! libmlx5's environment and the direct path, on the queue model: each
//! variable's effect asserted from the model's record of doorbell and
//! BlueFlame stores (`MLX5_SHUT_UP_BF`, `MLX5_POST_SEND_PREFER_BF`), the
//! refusal under `MLX5_QP_SIGNATURE` (auto falls back, direct fails, both
//! naming the variable), and 128-byte CQEs (`MLX5_CQE_SIZE=128`) polled
//! over several laps of the CQ next to 64-byte ones.

#[cfg(not(feature = "model"))]
#[test]
fn direct_env_needs_the_model_feature() {
    println!("SKIPPED: the direct environment tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use crate::common::model_env::doorbell_kinds;
    use rdmaperf::cli::params::PostChoice;
    use rdmaperf::mlx5::env::Mlx5Env;
    use rdmaperf::mlx5::setup::{set_up, DirectQpAttr, QpKind, SetupStep};
    use rdmaperf::mlx5::{DirectCq, DirectSq};
    use rdmaperf::model::{Access, Model, ModelConfig, ModelMmio, ModelSteps};
    use rdmaperf::post::{Completion, CompletionQueue, Op, SendQueue, WrDesc};
    use rdmaperf::tool::setup::method::{after_direct_failure, Chosen, Method};

    type Vars = &'static [(&'static str, &'static str)];

    /// A model QP whose SQ follows `e`'s doorbell policy, with a source and
    /// a destination buffer registered (the buffers outlive the model).
    struct Rig {
        src: Box<[u8]>,
        dst: Box<[u8]>,
        model: Model,
        sq: Option<DirectSq<ModelMmio>>,
        cq: Option<DirectCq>,
        lkey: u32,
        rkey: u32,
    }

    impl Rig {
        fn new(e: &Mlx5Env, cfg: ModelConfig) -> Rig {
            let mut src: Box<[u8]> = (0..4096u32).map(|i| (i * 7 + 1) as u8).collect();
            let mut dst: Box<[u8]> = vec![0u8; 4096].into();
            let model = Model::new(cfg).unwrap();
            let (mut sq, cq) = model.pair().unwrap();
            sq.set_bf_policy(e.bf_policy());
            // SAFETY: both buffers outlive the model (Rig drops the model first).
            let (l, r) = unsafe {
                (
                    model.register(src.as_mut_ptr(), src.len(), Access::ALL),
                    model.register(dst.as_mut_ptr(), dst.len(), Access::ALL),
                )
            };
            // SAFETY: src outlives the SQ.
            unsafe { sq.allow_inline_source(src.as_ptr(), src.len()) }.unwrap();
            Rig {
                src,
                dst,
                model,
                sq: Some(sq),
                cq: Some(cq),
                lkey: l.lkey,
                rkey: r.rkey,
            }
        }

        fn wr(&self, wr_id: u64, off: usize, len: u32, inline: bool) -> WrDesc {
            WrDesc {
                wr_id,
                laddr: self.src.as_ptr() as u64 + off as u64,
                lkey: self.lkey,
                len,
                raddr: self.dst.as_ptr() as u64 + off as u64,
                rkey: self.rkey,
                signaled: true,
                inline,
                ..WrDesc::default()
            }
        }

        /// Posts `wrs` as one call, lets the NIC run, polls every completion.
        /// Returns the doorbell stores of that call: (BlueFlame chunks, 8-byte doorbells).
        fn post(&mut self, wrs: &[WrDesc]) -> (usize, usize) {
            self.model.clear_history();
            self.sq.as_mut().unwrap().post(Op::Write, wrs).unwrap();
            let h = self.model.history();
            assert_eq!(self.model.step(), wrs.len());
            let mut wc = [Completion::default(); 64];
            let n = self.cq.as_mut().unwrap().poll(&mut wc).unwrap();
            assert_eq!(n, wrs.len());
            for (c, w) in wc[..n].iter().zip(wrs) {
                assert_eq!((c.wr_id, c.status.0), (w.wr_id, 0), "{c:?}");
            }
            let (db, bf) = doorbell_kinds(&h);
            (bf, db)
        }
    }

    impl Drop for Rig {
        fn drop(&mut self) {
            self.sq.take();
            self.cq.take();
            assert_eq!(self.model.violations(), Vec::<String>::new());
        }
    }

    /// (env, single plain WRITE, single inline WRITE, list of 4): whether
    /// each rang with BlueFlame (true) or an 8-byte doorbell (false).
    #[test]
    fn each_variable_changes_the_doorbell_as_libmlx5() {
        let cases: [(Vars, [bool; 3]); 6] = [
            (&[], [true, true, false]),
            (&[("MLX5_SHUT_UP_BF", "1")], [false, false, false]),
            (&[("MLX5_SHUT_UP_BF", "0")], [true, true, false]),
            (&[("MLX5_POST_SEND_PREFER_BF", "0")], [false, true, false]),
            (&[("MLX5_POST_SEND_PREFER_BF", "1")], [true, true, false]),
            (
                &[("MLX5_SHUT_UP_BF", "1"), ("MLX5_POST_SEND_PREFER_BF", "0")],
                [false, false, false],
            ),
        ];
        for (vars, want) in cases {
            let e = Mlx5Env::from_pairs(vars);
            let mut rig = Rig::new(&e, ModelConfig::default());
            let shots = [
                vec![rig.wr(1, 0, 256, false)],
                vec![rig.wr(2, 512, 32, true)],
                (0..4)
                    .map(|i| rig.wr(10 + i, 1024 + 64 * i as usize, 64, false))
                    .collect(),
            ];
            for (k, wrs) in shots.iter().enumerate() {
                let (bf, db) = rig.post(wrs);
                let got = match (bf, db) {
                    (0, 1) => false,
                    (n, 0) if n > 0 => true,
                    other => panic!("{vars:?} shot {k}: {other:?} (BF chunks, doorbells)"),
                };
                assert_eq!(got, want[k], "{vars:?} shot {k}: BlueFlame {got}");
            }
            // The data landed whichever way the doorbell rang.
            for (off, len) in [(0, 256), (512, 32), (1024, 256)] {
                assert_eq!(rig.dst[off..off + len], rig.src[off..off + len], "{vars:?}");
            }
            // The banner note says so when the doorbell differs from the default.
            let mut c = Chosen::plain(Method::Direct);
            c.notes.extend(e.doorbell_note());
            let banner = c.banner();
            match (want[0], want[1]) {
                (true, true) => assert_eq!(banner, "direct", "{vars:?}"),
                (false, false) => assert!(banner.contains("MLX5_SHUT_UP_BF=1"), "{banner}"),
                _ => assert!(banner.contains("MLX5_POST_SEND_PREFER_BF=0"), "{banner}"),
            }
        }
    }

    #[test]
    fn qp_signature_refuses_direct_and_auto_falls_back_naming_it() {
        let e = Mlx5Env::from_pairs(&[("MLX5_QP_SIGNATURE", "1")]);
        let m = Model::new(ModelConfig::default()).unwrap();
        let mut steps = ModelSteps::new(&m, None);
        let attr = DirectQpAttr {
            kind: QpKind::Rc,
            max_send_wr: 64,
            max_recv_wr: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
            atomics: false,
        };
        let f = match set_up(&mut steps, 1, &attr, &e) {
            Ok(_) => panic!("set-up ran under MLX5_QP_SIGNATURE"),
            Err(f) => f,
        };
        assert_eq!(f.step, SetupStep::Environment);
        assert!(
            steps.trace.is_empty(),
            "no QP may be created: {:?}",
            steps.trace
        );
        let auto = after_direct_failure(PostChoice::Auto, "mlx5_0", &f, || Ok(())).unwrap();
        assert_eq!(auto.method, Method::WrApi);
        assert!(
            auto.banner().contains("MLX5_QP_SIGNATURE"),
            "{}",
            auto.banner()
        );
        let e = after_direct_failure(PostChoice::Direct, "mlx5_0", &f, || Ok(()))
            .unwrap_err()
            .msg;
        assert!(
            e.contains("MLX5_QP_SIGNATURE") && e.contains("unset"),
            "{e}"
        );
    }

    /// 64- and 128-byte CQEs: enough signaled WRITEs for three laps of an
    /// 8-entry CQ, every completion with its wr_id, none invented from the
    /// first half of a 128-byte entry.
    #[test]
    fn cqes_of_both_sizes_are_polled_over_several_laps() {
        for cqe_size in [64, 128] {
            let cfg = ModelConfig {
                cqe_cnt: 8,
                cqe_size,
                ..ModelConfig::default()
            };
            let mut rig = Rig::new(&Mlx5Env::default(), cfg);
            assert_eq!(rig.cq.as_ref().unwrap().cqe_size(), cqe_size);
            for i in 0..24u64 {
                let off = (i as usize % 16) * 64;
                let wrs = [rig.wr(100 + i, off, 64, false)];
                rig.post(&wrs);
            }
            assert_eq!(rig.dst[..1024], rig.src[..1024], "cqe_size {cqe_size}");
            assert_eq!(rig.model.stats().cqes, 24);
            assert_eq!(rig.cq.as_ref().unwrap().ci(), 24);
            assert_eq!(rig.model.cq_ci_record(), 24);
        }
    }
}
