//! The core's fast-path decision (`byzfs_bft::replica::walk::walk_seq`, what a NEW-VIEW
//! picks at one sequence number) is the model's (`byzfs_model::rule::Rule::slot`, which
//! `fast_view_change.rs` checks keeps every completion): the same pick on every set of
//! `2f+1` VIEW-CHANGE reports at `n = 4` over views 0..3, where the model explores, on every
//! set of `3f+1` over views 0..2, and on random sets of any reports over views 0..3; and
//! the broken versions the core keeps for mutation testing are the model's unsafe rules
//! (Zyzzyva's, the walk past unvouched certificates).
//!
//! Where no view decides, the model says "nothing" and its NEW-VIEW gives the slot the null
//! batch, or leaves it free for a new batch (the model checks both), if `2f+1` prepared
//! nothing there, else waits; the core gives the null batch then, and otherwise waits.

use byzfs_bft::batch::null_digest;
use byzfs_bft::message::{PrePreparedEntry, PreparedEntry, ViewChange};
use byzfs_bft::replica::walk::{walk_seq, BrokenWalk};
use byzfs_bft::Digest;
use byzfs_model::rule::{Rule, SlotReport, View, DIGESTS, F, NULL};

/// The core's digest of the model's `d`, in the same order (the model's (F) step and
/// Zyzzyva's take the first, or the highest, in order).
fn digest(d: u8) -> Digest {
    if d == NULL {
        return null_digest();
    }
    let mut b = [0u8; 32];
    b[31] = d;
    Digest(b)
}

/// The VIEW-CHANGE of replica `r` for view `w` whose report at sequence number 1 is `s`.
fn view_change(r: u32, w: View, s: &SlotReport) -> ViewChange {
    let digests = 0..DIGESTS as u8;
    ViewChange {
        view: u64::from(w),
        replica: r,
        last_stable: 0,
        checkpoints: vec![(0, Digest::default())],
        prepared: s
            .prepared
            .iter()
            .map(|&(view, d)| PreparedEntry {
                seq: 1,
                view: u64::from(view),
                digest: digest(d),
            })
            .collect(),
        pre_prepared: digests
            .filter_map(|d| {
                s.accepted[usize::from(d)].map(|view| PrePreparedEntry {
                    seq: 1,
                    view: u64::from(view),
                    digest: digest(d),
                })
            })
            .collect(),
    }
}

/// Every report over views `0..w` whose prepared entry's digest is accepted at its view or
/// later. That is every report that matters: a correct replica accepts what it logs a
/// certificate of (`fast_view_change.rs` `Certify`), and the core counts a prepared entry
/// as accepted (as PBFT's A2 does), so on a liar's report without it the core decides as
/// the model on the report with it, which the model's liar may send (`lies`).
fn reports(w: View) -> Vec<SlotReport> {
    let views: Vec<Option<View>> = std::iter::once(None).chain((0..w).map(Some)).collect();
    let mut out = Vec::new();
    for a in &views {
        for b in &views {
            for c in &views {
                let accepted = [*a, *b, *c];
                out.push(SlotReport {
                    accepted,
                    prepared: None,
                });
                for v in 0..w {
                    for d in 0..DIGESTS as u8 {
                        if accepted[usize::from(d)] >= Some(v) {
                            out.push(SlotReport {
                                accepted,
                                prepared: Some((v, d)),
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

/// Every report over views `0..w`, a liar's included (a certificate of a digest it does
/// not report accepted).
fn any_reports(w: View) -> Vec<SlotReport> {
    let views: Vec<Option<View>> = std::iter::once(None).chain((0..w).map(Some)).collect();
    let mut certificates = vec![None];
    for v in 0..w {
        certificates.extend((0..DIGESTS as u8).map(|d| Some((v, d))));
    }
    let mut out = Vec::new();
    for a in &views {
        for b in &views {
            for c in &views {
                for &prepared in &certificates {
                    out.push(SlotReport {
                        accepted: [*a, *b, *c],
                        prepared,
                    });
                }
            }
        }
    }
    out
}

/// The core's pick as the model states it: the model's digest, the null batch where `2f+1`
/// prepared nothing, or `None` for "wait".
fn expected(rule: Rule, set: &[SlotReport], w: View) -> Option<Digest> {
    match rule.slot(set, w) {
        Some(d) => Some(digest(d)),
        None if set.iter().filter(|m| m.prepared.is_none()).count() > 2 * F => Some(null_digest()),
        None => None,
    }
}

/// Both rules on `set` (indices into `all`, whose VIEW-CHANGEs are `vcs`).
fn agree(
    rule: Rule,
    broken: BrokenWalk,
    w: View,
    all: &[SlotReport],
    vcs: &[ViewChange],
    set: &[usize],
) {
    let reports: Vec<SlotReport> = set.iter().map(|&i| all[i]).collect();
    let refs: Vec<&ViewChange> = set.iter().map(|&i| &vcs[i]).collect();
    assert_eq!(
        walk_seq(&refs, 1, F, broken),
        expected(rule, &reports, w),
        "{rule:?} at view {w} disagrees on {reports:?}"
    );
}

/// The VIEW-CHANGEs of `all`.
fn view_changes(all: &[SlotReport], w: View) -> Vec<ViewChange> {
    all.iter()
        .enumerate()
        .map(|(i, s)| view_change(i as u32, w, s))
        .collect()
}

/// Runs both rules on every multiset of `size` (`2f+1` or `3f+1`) reports over views
/// `0..w`; returns how many.
fn compare(rule: Rule, broken: BrokenWalk, w: View, size: usize) -> usize {
    let all = reports(w);
    let vcs = view_changes(&all, w);
    let mut sets = 0;
    let mut set = vec![0; size];
    loop {
        agree(rule, broken, w, &all, &vcs, &set);
        sets += 1;
        // The next non-decreasing index list.
        let Some(p) = (0..size).rev().find(|&p| set[p] + 1 < all.len()) else {
            return sets;
        };
        set[p] += 1;
        for q in p + 1..size {
            set[q] = set[p];
        }
    }
}

/// Runs both rules on `count` random sets of `2f+1` to `3f+1` of any reports over views
/// `0..w` (a fixed stream: a failure reproduces).
fn compare_random(rule: Rule, broken: BrokenWalk, w: View, count: usize) {
    let all = any_reports(w);
    let vcs = view_changes(&all, w);
    // SplitMix64: enough to spread the draws, no dependency for a test.
    let mut x: u64 = 0x5eed;
    let mut next = |below: usize| {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % below as u64) as usize
    };
    for _ in 0..count {
        let size = 2 * F + 1 + next(F + 1);
        let set: Vec<usize> = (0..size).map(|_| next(all.len())).collect();
        agree(rule, broken, w, &all, &vcs, &set);
    }
}

#[test]
fn digests_keep_the_models_order() {
    assert!(digest(0) < digest(1) && digest(1) < digest(NULL));
}

#[test]
fn the_core_walk_is_the_models_on_every_set() {
    let sets = compare(Rule::Walk, BrokenWalk::default(), 3, 2 * F + 1);
    assert!(sets > 1_000_000, "{sets}");
    let sets = compare(Rule::Walk, BrokenWalk::default(), 2, 3 * F + 1);
    assert!(sets > 1_000_000, "{sets}");
    compare_random(Rule::Walk, BrokenWalk::default(), 3, 500_000);
}

#[test]
fn the_cores_broken_walks_are_the_models_unsafe_rules() {
    let zyzzyva = BrokenWalk {
        zyzzyva: true,
        ..BrokenWalk::default()
    };
    let past = BrokenWalk {
        past_certificates: true,
        ..BrokenWalk::default()
    };
    for w in [2, 3] {
        compare(Rule::Zyzzyva, zyzzyva, w, 2 * F + 1);
        compare(Rule::WalkPastCertificates, past, w, 2 * F + 1);
    }
    compare_random(Rule::Zyzzyva, zyzzyva, 3, 100_000);
    compare_random(Rule::WalkPastCertificates, past, 3, 100_000);
}
