//! The fast path's view change, model-checked over every interleaving (issue #49 item 2;
//! docs/plans/49-fast-path.md "Checked"): `n = 4` with one Byzantine replica, 3 views.
//! Each check explores a few million states (up to ~1.7 GB); they run one after another.

use byzfs_model::fast_view_change::FastViewChange;
use byzfs_model::report::Check;
use byzfs_model::rule::Rule;

const AGREEMENT: &str = "agreement: one batch completes at a slot";
const KEEP: &str = "new views keep completions";

fn violated(check: &Check) -> Vec<&'static str> {
    for (property, steps) in &check.violations {
        eprintln!("{property}:\n  {}", steps.join("\n  "));
    }
    check.violations.iter().map(|(p, _)| *p).collect()
}

/// ByzFS's rule keeps both properties over 3 views for any number of slots (one slot whose
/// undecided case the adversary makes null or free), whichever replica lies: a backup in
/// every view (3), or the primary of view 0, 1 or 2 (it equivocates PRE-PREPAREs, and
/// NEW-VIEWs); and over 2 views and 2 slots as they are, with a lying backup.
#[test]
fn the_walk_keeps_every_completion() {
    for byz in [3, 0, 1, 2] {
        let check = FastViewChange::any_slots(Rule::Walk, byz, 3).check();
        eprintln!(
            "walk, 3 views, any slots, liar {byz}: {} states",
            check.states
        );
        assert_eq!(violated(&check), Vec::<&str>::new(), "liar {byz}");
        assert!(check.completed_after_a_view_change, "liar {byz}: vacuous");
    }
    let check = FastViewChange::new(Rule::Walk, 3, 2, 2).check();
    eprintln!("walk, 2 views, 2 slots, liar 3: {} states", check.states);
    assert_eq!(violated(&check), Vec::<&str>::new());
    assert!(check.completed_after_a_view_change, "vacuous");
}

/// Zyzzyva's rule loses a completed batch: the checker finds the counterexample of
/// "Revisiting Fast Practical Byzantine Fault Tolerance" (a certificate of view 0 ranked
/// above a fast completion in view 1), in 14 steps.
#[test]
fn zyzzyvas_rule_loses_a_completion() {
    let check = FastViewChange::any_slots(Rule::Zyzzyva, 3, 3).check();
    assert_eq!(violated(&check), [AGREEMENT, KEEP]);
}

/// The rule as plan 49 first wrote it, walking past a view whose certificate no `f+1`
/// vouch for, loses a slow completion: its other witness is not among the VIEW-CHANGEs, and
/// an older batch `f+1` accepted is picked below it.
#[test]
fn walking_past_an_unvouched_certificate_loses_a_completion() {
    let check = FastViewChange::any_slots(Rule::WalkPastCertificates, 3, 3).check();
    assert_eq!(violated(&check), [AGREEMENT, KEEP]);
}
