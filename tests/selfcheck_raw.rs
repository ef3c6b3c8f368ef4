//! `selfcheck`'s raw packet cases on the queue model's Ethernet port: every
//! raw method (`direct`, `direct-mpw`, `direct-mpw-inline`) at every `-s`
//! around the inline, WQEBB and eMPW limits, and the eMPW session limits,
//! pass with the wire equal to `raw::frame`'s frames byte for byte; a lost
//! WQE fails its case with a clear line; without a rig every case is
//! SKIPPED with the reason and none counts as passed. The raw-eth-bw pairs
//! (`-b`, and `--server -v` forwarding back to a `-b` client), one QP a
//! side on two model hosts, pass: each side's frames on the wire are its
//! buffer's slots, the forwarder's the client's with the MACs swapped.

#[cfg(not(feature = "model"))]
#[test]
fn selfcheck_raw_needs_the_model_feature() {
    println!("SKIPPED: the selfcheck raw tests need `--features model`");
}

#[cfg(feature = "model")]
mod with_model {
    use rdmaperf::selfcheck::raw_cases::{raw_cases, raw_summary, raw_table, RawShape};
    use rdmaperf::selfcheck::raw_exec::{run_raw, RawRig};
    use rdmaperf::selfcheck::raw_model_rig::RawModelRig;
    use rdmaperf::selfcheck::Outcome;

    fn model() -> Result<Box<dyn RawRig>, String> {
        RawModelRig::new().map(|r| Box::new(r) as Box<dyn RawRig>)
    }

    #[test]
    fn every_raw_case_passes_on_the_model() {
        let r = run_raw(model, |_, _, _| {});
        let t = raw_table(&r);
        println!("{t}");
        assert_eq!(r.failures(), 0, "{t}");
        assert_eq!(r.passed(), raw_cases().len(), "{t}");
        for shape in [
            "-s 64",
            "-s 261",
            "-s 1518",
            "33 x -s 64 in 2 WQE(s)",
            "15 x -s 64 in 2",
            "-b pair, 200 x -s 128 each way",
            "-v pair, 200 x -s 128 forwarded",
        ] {
            assert!(t.lines().any(|l| l.contains(shape)), "{shape}:\n{t}");
        }
        let (line, ok) = raw_summary(&r);
        assert!(
            ok && line.contains(&format!("all {} cases ok", raw_cases().len())),
            "{line}"
        );
    }

    #[test]
    fn a_lost_wqe_fails_its_case_and_the_next_passes() {
        let at = raw_cases()
            .iter()
            .position(|c| c.to_string() == "raw direct-mpw -s 128")
            .unwrap();
        let r = run_raw(model, |i, _, rig| {
            if i == at {
                assert!(rig.inject_drop(1));
            }
        });
        let t = raw_table(&r);
        assert_eq!(r.failures(), 1, "{t}");
        match &r.cases[at].1 {
            Outcome::Failed(e) => {
                assert!(e.contains("frames left") || e.contains("differs"), "{e}")
            }
            o => panic!("the corrupted case did not fail: {o:?}\n{t}"),
        }
        assert!(t.contains(" FAILED raw direct-mpw -s 128: "), "{t}");
        assert_eq!(r.cases[at + 1].1, Outcome::Ok, "{t}");
        let (line, ok) = raw_summary(&r);
        assert!(
            !ok && line.contains("1 of") && line.contains("FAILED"),
            "{line}"
        );
    }

    #[test]
    fn the_pairs_run_on_their_own_and_name_what_they_are() {
        use rdmaperf::selfcheck::raw_cases::{PairKind, RawCase, RawMethod};
        use rdmaperf::selfcheck::raw_pair_model::run_pair;
        for kind in [PairKind::Duplex, PairKind::Forward] {
            assert_eq!(run_pair(kind), Ok(()), "{kind:?}");
            let c = RawCase {
                method: RawMethod::Direct,
                shape: RawShape::Pair(kind),
            };
            assert!(raw_cases().contains(&c), "{c}");
        }
        // A rig that runs no pair fails the case, saying so.
        struct NoPair(RawModelRig);
        impl RawRig for NoPair {
            fn buf(&mut self) -> &mut [u8] {
                self.0.buf()
            }
            fn post(
                &mut self,
                m: rdmaperf::selfcheck::raw_cases::RawMethod,
                p: &[rdmaperf::mlx5::raw_sq::RawPkt],
            ) -> Result<(), rdmaperf::post::PostError> {
                self.0.post(m, p)
            }
            fn pending(&mut self) -> Result<u64, String> {
                self.0.pending()
            }
            fn take_wire(&mut self) -> Vec<Vec<u8>> {
                self.0.take_wire()
            }
            fn wqes_run(&self) -> Option<u64> {
                self.0.wqes_run()
            }
        }
        let mut rig = NoPair(RawModelRig::new().unwrap());
        let c = RawCase {
            method: RawMethod::Direct,
            shape: RawShape::Pair(PairKind::Duplex),
        };
        let e = rdmaperf::selfcheck::raw_exec::run_raw_case(&mut rig, &c).unwrap_err();
        assert!(e.contains("runs no raw-eth-bw pair"), "{e}");
    }

    #[test]
    fn a_session_over_its_limit_is_caught() {
        // The session cases check the WQE count the model ran: 33 frames by
        // pointer in 2 WQEs pass; the same frames posted as 33 SENDs would not.
        let c = raw_cases()
            .into_iter()
            .find(|c| c.shape == RawShape::Session { n: 33, wqes: 2 })
            .unwrap();
        let mut rig = RawModelRig::new().unwrap();
        rdmaperf::selfcheck::raw_exec::run_raw_case(&mut rig, &c).unwrap();
        let direct = rdmaperf::selfcheck::raw_cases::RawCase {
            method: rdmaperf::selfcheck::raw_cases::RawMethod::Direct,
            ..c
        };
        let e = rdmaperf::selfcheck::raw_exec::run_raw_case(&mut rig, &direct).unwrap_err();
        assert!(e.contains("33 frames took 33 WQEs"), "{e}");
    }

    #[test]
    fn without_a_rig_every_case_is_skipped_never_passed() {
        let r = run_raw(
            || Err("mlx5_0 is not an mlx5 device".to_string()),
            |_, _, _| {},
        );
        assert_eq!(r.passed(), 0);
        assert_eq!(r.failures(), 0);
        assert!(r
            .cases
            .iter()
            .all(|(_, o)| matches!(o, Outcome::NotRun(w) if w.contains("not an mlx5"))));
        let t = raw_table(&r);
        assert!(
            t.contains("raw cases SKIPPED: mlx5_0 is not an mlx5 device"),
            "{t}"
        );
        let (line, _) = raw_summary(&r);
        assert!(
            line.contains("0 cases ok") && line.contains("SKIPPED"),
            "{line}"
        );
    }
}
