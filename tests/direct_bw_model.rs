//! The same bw loop the verbs path uses (`run::bw::BwLoop`), run over the mlx5
//! direct path (`DirectSq`/`DirectCq`) against the software queue model with
//! its NIC thread: WRITE, READ and atomics with post lists and cq_mod, data
//! checked where it landed.

#[cfg(not(feature = "model"))]
#[test]
fn direct_bw_needs_the_model_feature() {
    println!("SKIPPED: the direct-path bw tests need `--features model`");
}

#[cfg(feature = "model")]
mod with_model {
    use rdmaperf::model::{Access, Model, ModelConfig};
    use rdmaperf::post::{Completion, Op, WrDesc};
    use rdmaperf::run::bw::{BwConfig, BwLoop, QpCount, QpTarget};

    const BUF: usize = 1 << 16;

    fn run(
        op: Op,
        size: u32,
        iters: u64,
        post_list: u32,
        cq_mod: u32,
        positions: u64,
    ) -> (Box<[u8]>, Box<[u8]>, Model) {
        let mut model = Model::new(ModelConfig {
            wqe_cnt: 64,
            cqe_cnt: 32,
            ..ModelConfig::default()
        })
        .unwrap();
        let (sq, mut cq) = model.pair().unwrap();
        let mut local: Box<[u8]> = (0..BUF).map(|i| (i * 13 + 5) as u8).collect();
        let mut remote: Box<[u8]> = (0..BUF).map(|i| (i * 3 + 1) as u8).collect();
        if matches!(op, Op::FetchAdd | Op::CmpSwap) {
            remote.iter_mut().for_each(|b| *b = 0);
        }
        // SAFETY: both buffers outlive the model's use of them: the model is
        // stopped (below) before they are returned and read.
        let (lk, rk) = unsafe {
            (
                model.register(local.as_mut_ptr(), BUF, Access::ALL),
                model.register(remote.as_mut_ptr(), BUF, Access::ALL),
            )
        };
        model.start();
        let cfg = BwConfig {
            op,
            size,
            iters,
            post_list,
            tx_depth: 32,
            cq_mod,
            inline: false,
            positions,
            step: 64.max(size as u64),
            // Generous: under valgrind (scripts/sanitize.sh) the model's NIC thread
            // runs far slower.
            stall_ticks: 300_000_000_000,
            cost: false,
        };
        let mut sqs = [sq];
        let out = BwLoop {
            cfg,
            sqs: &mut sqs,
            cq: &mut cq,
            targets: &[QpTarget {
                laddr: local.as_ptr() as u64,
                lkey: lk.lkey,
                raddr: remote.as_ptr() as u64,
                rkey: rk.rkey,
            }],
            counts: &mut [QpCount::default()],
            list: &mut vec![WrDesc::default(); post_list as usize],
            wcs: &mut [Completion::default(); 16],
            tposted: &mut [],
            tcompleted: &mut [],
            deadlines: None,
            periods: None,
            now: rdmaperf::clock::now,
        }
        .run();
        model.stop();
        assert_eq!(out.error, None, "{out:?}");
        assert_eq!((out.posted, out.completed), (iters, iters));
        assert_eq!(model.violations(), Vec::<String>::new());
        drop(sqs);
        (local, remote, model)
    }

    #[test]
    fn write_bw_with_address_cycling_lands_every_slot() {
        let (local, remote, _m) = run(Op::Write, 64, 1000, 1, 10, 64);
        for k in 0..64 {
            assert_eq!(
                &remote[k * 64..k * 64 + 64],
                &local[k * 64..k * 64 + 64],
                "slot {k}"
            );
        }
        // Past the 64 slots nothing was written.
        assert_eq!(remote[64 * 64], ((64 * 64) * 3 + 1) as u8);
    }

    #[test]
    fn write_bw_post_lists_of_8_with_cq_mod_4() {
        let (local, remote, _m) = run(Op::Write, 256, 800, 8, 4, 1);
        assert_eq!(&remote[..256], &local[..256]);
    }

    #[test]
    fn read_bw_brings_remote_data_home() {
        let (local, remote, _m) = run(Op::Read, 4096, 200, 1, 1, 1);
        assert_eq!(&local[..4096], &remote[..4096]);
    }

    #[test]
    fn atomic_bw_fetch_add_counts_every_message() {
        // Every fetch-add adds 1 at the same remote address (no cycling).
        let (_l, remote, _m) = run(Op::FetchAdd, 8, 500, 1, 10, 1);
        let v = u64::from_be_bytes(remote[..8].try_into().unwrap());
        let v_le = u64::from_le_bytes(remote[..8].try_into().unwrap());
        assert!(
            v == 500 || v_le == 500,
            "remote counter {v:#x}/{v_le:#x}, want 500"
        );
    }
}
