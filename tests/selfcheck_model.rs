//! `selfcheck`'s direct method on the queue model: every case of RC and UD
//! (the model has no UC: listed n/a with the reason) passes, with 64- and
//! 128-byte CQEs; a corrupted case (the model told to lose a WQE) fails with
//! a clear line, the summary says FAILED (non-zero exit), and the cases
//! after it still pass (the QP was recovered).

#[cfg(not(feature = "model"))]
#[test]
fn selfcheck_model_needs_the_model_feature() {
    println!("SKIPPED: the selfcheck model tests need `--features model`");
}

#[cfg(feature = "model")]
mod with_model {
    use rdmaperf::mlx5::env::BfPolicy;
    use rdmaperf::selfcheck::cases::{self, Shape, Tr};
    use rdmaperf::selfcheck::exec::Rig;
    use rdmaperf::selfcheck::model_rig::ModelRig;
    use rdmaperf::selfcheck::{run_method, summary, table, MethodRun, Outcome};

    fn direct(cqe: u32, corrupt: Option<usize>) -> MethodRun {
        run_method(
            "direct",
            |tr| ModelRig::new(tr, cqe, BfPolicy::default()).map(|r| Box::new(r) as Box<dyn Rig>),
            |i, _, rig| {
                if Some(i) == corrupt {
                    assert!(rig.inject_drop(1));
                }
            },
        )
    }

    #[test]
    fn every_direct_case_passes_on_the_model() {
        for cqe in [64, 128] {
            let r = direct(cqe, None);
            let t = table(std::slice::from_ref(&r));
            assert_eq!(r.failures(), 0, "cqe {cqe}:\n{t}");
            let ok = r.cases.iter().filter(|(_, o)| *o == Outcome::Ok).count();
            let want = cases::cases(Tr::Rc, 220).len() + cases::cases(Tr::Ud, 188).len();
            assert_eq!(ok, want, "cqe {cqe}:\n{t}");
            assert!(r.cases.iter().any(|(c, _)| c.shape == Shape::BadRkey));
            // The receive side: SENDs on both sides of scatter-to-CQE's
            // limit (32 B in 64-byte CQEs, 64 B in 128-byte ones), and the
            // SEND that waits out RNR until its receive is posted.
            for shape in cases::RECV_SIZES
                .map(Shape::RecvSize)
                .into_iter()
                .chain([Shape::LateRecv])
            {
                assert!(
                    r.cases
                        .iter()
                        .any(|(c, o)| c.shape == shape && *o == Outcome::Ok),
                    "cqe {cqe}: {shape} did not pass:\n{t}"
                );
            }
            for (c, o) in &r.cases {
                if c.tr == Tr::Uc {
                    assert!(
                        matches!(o, Outcome::NotRun(w) if w.contains("no UC")),
                        "{o:?}"
                    );
                }
            }
            assert!(t.contains("UC cases n/a: the queue model has no UC"), "{t}");
            let (line, all_ok) = summary(&[r]);
            assert!(
                all_ok && line.contains(&format!("all {want} cases ok")),
                "{line}"
            );
        }
    }

    #[test]
    fn a_lost_wqe_fails_its_case_with_a_clear_line_and_the_rest_pass() {
        let all = cases::cases(Tr::Rc, 220);
        let at = all
            .iter()
            .position(|c| c.to_string() == "RC write list 16")
            .unwrap();
        let r = direct(64, Some(at));
        let t = table(std::slice::from_ref(&r));
        assert_eq!(r.failures(), 1, "{t}");
        match &r.cases[at].1 {
            Outcome::Failed(e) => assert!(e.contains("peer buffer differs"), "{e}"),
            o => panic!("the corrupted case did not fail: {o:?}\n{t}"),
        }
        assert!(
            t.lines()
                .any(|l| l.starts_with(" FAILED direct / RC write list 16: WR ")),
            "{t}"
        );
        assert!(matches!(r.cases[at + 1].1, Outcome::Ok), "{t}");
        let (line, ok) = summary(&[r]);
        assert!(
            !ok && line.contains("1 of") && line.contains("FAILED"),
            "{line}"
        );
    }
}
