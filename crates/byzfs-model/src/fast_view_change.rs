//! The fast path's view change as a [`stateright`] model (docs/plans/49-fast-path.md).
//!
//! `n = 4` replicas, one Byzantine (`byz`); the primary of view `v` is `v mod 4`. Every
//! replica but `byz` follows the protocol:
//!
//! * **PRE-PREPARE.** The primary of its view proposes a batch at a slot the view's
//!   NEW-VIEW left free (view 0: every slot); a correct primary proposes one batch per
//!   slot and view, a Byzantine one anything to anyone. A replica accepts one batch per
//!   slot and view and answers the client speculatively (it *signs* it).
//! * **Fast completion** of `(v, s, d)`: `3f+1` signatures (every correct replica, and the
//!   Byzantine one, which signs anything).
//! * **Commit certificate.** `2f+1` signatures of `(v, s, d)` reach a replica of view `v`
//!   that accepted nothing else there: it logs them as prepared. **Slow completion**: `f+1`
//!   correct replicas prepared it (the `f+1` committed replies a client needs come from
//!   replicas that saw `2f+1` COMMITs, `f+1` of them correct).
//! * **VIEW-CHANGE** to any higher view, reporting what the replica accepted and prepared
//!   ([`SlotReport`]); it then takes part in no lower view.
//! * **NEW-VIEW** of view `w`: `2f+1` or more VIEW-CHANGEs for `w` — three correct ones,
//!   two and the Byzantine replica's, or all four; the liar reports anything (a certificate only if one could have
//!   been made, when `certificates_are_proofs`) — decided by the [`Rule`]. A correct
//!   primary sends one NEW-VIEW per view, a Byzantine one several. A replica of a lower
//!   view takes it and accepts (and signs) what it picks.
//!
//! Properties: **agreement** (at most one batch completes at a slot) and **new views keep
//! completions** (a NEW-VIEW of a view above a completion picks its batch at its slot).

use crate::report::Check;
use crate::rule::{
    new_view, Decision, Digest, Report, Rule, SlotReport, View, DIGESTS, F, NULL, SLOTS_MAX,
};
use stateright::{Checker, Model, Property};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

/// Replicas.
const N: usize = 3 * F + 1;
/// Most views a model has.
pub const VIEWS_MAX: usize = 3;
/// Batches a primary may propose (the null batch comes only from a NEW-VIEW).
const REQUESTS: Digest = 2;

/// The model's configuration.
#[derive(Clone, Debug)]
pub struct FastViewChange {
    rule: Rule,
    /// The Byzantine replica.
    byz: usize,
    views: View,
    slots: usize,
    /// Certificates carry `2f+1` signatures (Zyzzyva's commit certificates): a liar reports
    /// only one that could have been made. Otherwise (PBFT with MACs) it reports any, and
    /// A2 is the defence.
    certificates_are_proofs: bool,
    /// A slot no view decides may be null or free whatever the other slots hold (the
    /// adversary's choice): the model of one slot then stands for any number of them
    /// ([`FastViewChange::any_slots`]).
    undecided_either: bool,
    /// NEW-VIEWs worked out, by what they depend on (`new_views_by_rule`).
    known: Arc<Mutex<HashMap<Known, BTreeSet<[Decision; SLOTS_MAX]>>>>,
}

/// What the NEW-VIEWs of a view depend on: the view, its VIEW-CHANGEs, and the signatures
/// made (when a liar's certificates must be ones they could make).
type Known = (View, Vec<Report>, Signatures);
/// Correct replicas that signed each `(view, slot, digest)`, as bits.
type Signatures = [[[u8; DIGESTS]; SLOTS_MAX]; VIEWS_MAX];

/// A correct replica.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Replica {
    pub view: View,
    /// It holds its view's NEW-VIEW (view 0 needs none).
    pub active: bool,
    /// Slots its view's NEW-VIEW left to the primary.
    pub free: [bool; SLOTS_MAX],
    /// The batch it accepted at each slot in its view.
    pub current: [Option<Digest>; SLOTS_MAX],
    /// What its VIEW-CHANGE would report.
    pub report: Report,
}

/// Everything the model tracks.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct State {
    /// The correct replicas, by id with `byz` left out.
    pub replicas: Vec<Replica>,
    /// VIEW-CHANGEs sent: view, correct replica (index into `replicas`), report.
    pub view_changes: BTreeSet<(View, usize, Report)>,
    /// NEW-VIEWs sent.
    pub new_views: BTreeSet<(View, [Decision; SLOTS_MAX])>,
    /// A correct primary's one proposal per view and slot.
    pub proposed: [[Option<Digest>; SLOTS_MAX]; VIEWS_MAX],
    /// Correct replicas that signed `(view, slot, digest)`, as bits of their index.
    pub signed: Signatures,
    /// Correct replicas that logged a certificate of `(view, slot, digest)`.
    pub certified: [[[u8; DIGESTS]; SLOTS_MAX]; VIEWS_MAX],
}

/// A step of the model.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub enum Action {
    /// The primary of `view` proposes `digest` at `slot` to correct replica `to`.
    Propose {
        view: View,
        slot: usize,
        digest: Digest,
        to: usize,
    },
    /// A commit certificate of `(view, slot, digest)` reaches correct replica `to`.
    Certify {
        view: View,
        slot: usize,
        digest: Digest,
        to: usize,
    },
    /// Correct replica `replica` moves to `view`.
    ViewChange { replica: usize, view: View },
    /// The primary of `view` sends a NEW-VIEW deciding `decision`.
    NewView {
        view: View,
        decision: [Decision; SLOTS_MAX],
    },
    /// Correct replica `replica` takes that NEW-VIEW.
    Install {
        replica: usize,
        view: View,
        decision: [Decision; SLOTS_MAX],
    },
}

impl FastViewChange {
    /// `rule` over `views` views and `slots` slots, replica `byz` Byzantine. Zyzzyva's rule
    /// is checked with certificates as proofs (its certificates are signed); ByzFS's with
    /// certificates a liar may forge.
    ///
    /// # Panics
    ///
    /// If `byz` is not a replica (0–3), `views` is above [`VIEWS_MAX`] or `slots` above
    /// [`SLOTS_MAX`]: a model's size is fixed by its arrays.
    pub fn new(rule: Rule, byz: usize, views: View, slots: usize) -> FastViewChange {
        assert!(byz < N && usize::from(views) <= VIEWS_MAX && slots <= SLOTS_MAX);
        FastViewChange {
            rule,
            byz,
            views,
            slots,
            certificates_are_proofs: rule == Rule::Zyzzyva,
            undecided_either: false,
            known: Arc::default(),
        }
    }

    /// One slot standing for any number: where no view decides it, a NEW-VIEW may put the
    /// null batch or leave it free, as other slots' certificates would make it (PBFT
    /// §3.4). Slots share nothing else here — the views, VIEW-CHANGEs and NEW-VIEWs they
    /// share only carry each slot's own reports — so every run with several slots projects
    /// on each slot to a run of this model, and the properties are per slot: what holds
    /// here over 3 views holds for any number of slots.
    pub fn any_slots(rule: Rule, byz: usize, views: View) -> FastViewChange {
        FastViewChange {
            undecided_either: true,
            ..FastViewChange::new(rule, byz, views, 1)
        }
    }

    /// Explores every reachable state, breadth first (the shortest counterexample first).
    pub fn check(self) -> Check {
        let checker = self.checker().threads(2).spawn_bfs().join();
        let violations = [AGREEMENT, KEEP].iter().filter_map(|&name| {
            checker.discovery(name).map(|path| {
                let steps: Vec<String> = path
                    .into_actions()
                    .iter()
                    .map(|a| format!("{a:?}"))
                    .collect();
                (name, steps)
            })
        });
        Check {
            states: checker.unique_state_count(),
            violations: violations.collect(),
            completed_after_a_view_change: checker.discovery(LATE_COMPLETION).is_some(),
        }
    }

    /// Whether view `v`'s primary is the Byzantine replica.
    fn byzantine_primary(&self, v: View) -> bool {
        usize::from(v) % N == self.byz
    }

    /// Every `(view, slot, batch)` a client may have completed by now: fast, on `3f+1`
    /// signatures (every correct replica's and the liar's); or slow, `f+1` correct replicas
    /// having logged its certificate. Both only grow, so a client may complete at the
    /// first state where one holds.
    pub fn completions(&self, s: &State) -> Vec<(View, usize, Digest)> {
        let mut out = Vec::new();
        for v in 0..self.views {
            for slot in 0..self.slots {
                for digest in 0..REQUESTS {
                    let (vi, d) = (usize::from(v), usize::from(digest));
                    let fast = s.signed[vi][slot][d].count_ones() as usize == N - 1;
                    let slow = s.certified[vi][slot][d].count_ones() as usize > F;
                    if fast || slow {
                        out.push((v, slot, digest));
                    }
                }
            }
        }
        out
    }

    /// Every NEW-VIEW the primary of `w` could send now: from three correct VIEW-CHANGEs,
    /// or two and any report of the Byzantine replica (tried slot by slot: one report per
    /// distinct outcome of the rule at each slot, then every combination).
    fn new_views(&self, state: &State, w: View, out: &mut BTreeSet<[Decision; SLOTS_MAX]>) {
        let mut decided = BTreeSet::new();
        self.new_views_by_rule(state, w, &mut decided);
        for d in decided {
            out.insert(d);
            // One slot: the rule leaves it free exactly where no view decides it and no
            // certificate is reported (`rule::new_view`); another slot's certificate would
            // make it null.
            if self.undecided_either && d[0] == Decision::Free {
                out.insert([Decision::Pick(NULL), Decision::Free]);
            }
        }
    }

    /// [`FastViewChange::new_views`], each slot's undecided case as the rule puts it;
    /// remembered by what it depends on (the VIEW-CHANGEs for `w`, and the signatures a
    /// liar's certificates need when they are proofs), which many states share.
    fn new_views_by_rule(&self, state: &State, w: View, out: &mut BTreeSet<[Decision; SLOTS_MAX]>) {
        let sent: Vec<Report> = state
            .view_changes
            .iter()
            .filter(|(v, _, _)| *v == w)
            .map(|(_, _, r)| *r)
            .collect();
        let signed = if self.certificates_are_proofs {
            state.signed
        } else {
            Default::default()
        };
        let key = (w, sent, signed);
        if let Some(known) = self.known.lock().ok().and_then(|k| k.get(&key).cloned()) {
            out.extend(known);
            return;
        }
        let mut found = BTreeSet::new();
        self.decide_new_views(state, w, &key.1, &mut found);
        if let Ok(mut k) = self.known.lock() {
            k.insert(key, found.clone());
        }
        out.extend(found);
    }

    /// [`FastViewChange::new_views_by_rule`] worked out from `sent`, the VIEW-CHANGEs for `w`.
    fn decide_new_views(
        &self,
        state: &State,
        w: View,
        sent: &[Report],
        out: &mut BTreeSet<[Decision; SLOTS_MAX]>,
    ) {
        if sent.len() > 2 * F {
            for set in subsets(sent, 2 * F + 1) {
                if let Some(d) = new_view(self.rule, &set, w, self.slots) {
                    out.insert(d);
                }
            }
        }
        // With the liar's: `2f` correct ones and the liar's (`2f+1`), or every correct one
        // and the liar's (`3f+1`, where a certificate no `f+1` vouch for cannot be a slow
        // completion and is walked past: `rule.rs`).
        for k in [2 * F, 3 * F] {
            if sent.len() >= k {
                self.with_lies(state, w, sent, k, out);
            }
        }
    }

    /// The NEW-VIEWs from `k` of the correct VIEW-CHANGEs `sent` and one of the liar.
    fn with_lies(
        &self,
        state: &State,
        w: View,
        sent: &[Report],
        k: usize,
        out: &mut BTreeSet<[Decision; SLOTS_MAX]>,
    ) {
        for pair in subsets(sent, k) {
            // Per slot, one liar's report for each distinct (decision, prepared) it leads
            // to: the NEW-VIEW depends on a slot's column and on which slots have a
            // certificate reported.
            let mut per_slot: Vec<Vec<SlotReport>> = Vec::new();
            for s in 0..self.slots {
                let column: Vec<SlotReport> = pair.iter().map(|m| m[s]).collect();
                let mut seen = BTreeSet::new();
                let mut reps = Vec::new();
                for lie in self.lies(state, s, w) {
                    let mut set = column.clone();
                    set.push(lie);
                    let key = (self.rule.slot(&set, w), lie.prepared.is_some());
                    if seen.insert(key) {
                        reps.push(lie);
                    }
                }
                per_slot.push(reps);
            }
            for lie in product(&per_slot) {
                let mut liar = [SlotReport::default(); SLOTS_MAX];
                liar[..self.slots].copy_from_slice(&lie);
                let mut set = pair.clone();
                set.push(liar);
                if let Some(d) = new_view(self.rule, &set, w, self.slots) {
                    out.insert(d);
                }
            }
        }
    }

    /// Every report the Byzantine replica may make of slot `s` in a VIEW-CHANGE for `w`:
    /// any views below `w` for any digests accepted, any certificate below `w` (one that
    /// `2f+1` signatures could have made, if certificates are proofs).
    fn lies(&self, state: &State, s: usize, w: View) -> Vec<SlotReport> {
        let views: Vec<Option<View>> = std::iter::once(None).chain((0..w).map(Some)).collect();
        let mut certificates = vec![None];
        for u in 0..w {
            for d in 0..DIGESTS as Digest {
                let signers = state.signed[usize::from(u)][s][usize::from(d)].count_ones();
                if !self.certificates_are_proofs || signers as usize + 1 > 2 * F {
                    certificates.push(Some((u, d)));
                }
            }
        }
        let mut out = Vec::new();
        for &a in &views {
            for &b in &views {
                for &c in &views {
                    for &prepared in &certificates {
                        out.push(SlotReport {
                            accepted: [a, b, c],
                            prepared,
                        });
                    }
                }
            }
        }
        out
    }
}

/// Every `k`-element subset of `items`, in order.
fn subsets<T: Clone>(items: &[T], k: usize) -> Vec<Vec<T>> {
    if k == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for (i, x) in items.iter().enumerate() {
        for mut rest in subsets(&items[i + 1..], k - 1) {
            rest.insert(0, x.clone());
            out.push(rest);
        }
    }
    out
}

/// Every choice of one element from each list.
fn product<T: Copy>(lists: &[Vec<T>]) -> Vec<Vec<T>> {
    lists.iter().fold(vec![Vec::new()], |acc, list| {
        acc.iter()
            .flat_map(|prefix| {
                list.iter().map(move |x| {
                    let mut p = prefix.clone();
                    p.push(*x);
                    p
                })
            })
            .collect()
    })
}

/// Bit of correct replica `i`.
fn bit(i: usize) -> u8 {
    1 << i
}

impl Model for FastViewChange {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let replica = Replica {
            view: 0,
            active: true,
            free: [true; SLOTS_MAX],
            current: [None; SLOTS_MAX],
            report: [SlotReport::default(); SLOTS_MAX],
        };
        vec![State {
            replicas: vec![replica; N - 1],
            view_changes: BTreeSet::new(),
            new_views: BTreeSet::new(),
            proposed: [[None; SLOTS_MAX]; VIEWS_MAX],
            signed: [[[0; DIGESTS]; SLOTS_MAX]; VIEWS_MAX],
            certified: [[[0; DIGESTS]; SLOTS_MAX]; VIEWS_MAX],
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (to, r) in state.replicas.iter().enumerate() {
            let v = r.view;
            for slot in 0..self.slots {
                if r.active && r.free[slot] && r.current[slot].is_none() {
                    for digest in 0..REQUESTS {
                        let allowed = self.byzantine_primary(v)
                            || state.proposed[usize::from(v)][slot].is_none_or(|p| p == digest);
                        if allowed {
                            actions.push(Action::Propose {
                                view: v,
                                slot,
                                digest,
                                to,
                            });
                        }
                    }
                }
                for digest in 0..DIGESTS as Digest {
                    let signers = state.signed[usize::from(v)][slot][usize::from(digest)];
                    let held = state.certified[usize::from(v)][slot][usize::from(digest)];
                    let fits = r.current[slot].is_none_or(|c| c == digest);
                    if r.active
                        && fits
                        && signers.count_ones() as usize + 1 > 2 * F
                        && held & bit(to) == 0
                    {
                        actions.push(Action::Certify {
                            view: v,
                            slot,
                            digest,
                            to,
                        });
                    }
                }
            }
            for w in v + 1..self.views {
                actions.push(Action::ViewChange {
                    replica: to,
                    view: w,
                });
            }
            for &(w, decision) in &state.new_views {
                if w > v || (w == v && !r.active) {
                    actions.push(Action::Install {
                        replica: to,
                        view: w,
                        decision,
                    });
                }
            }
        }
        for w in 1..self.views {
            let sent_one = state.new_views.iter().any(|(v, _)| *v == w);
            if sent_one && !self.byzantine_primary(w) {
                continue;
            }
            let mut decisions = BTreeSet::new();
            self.new_views(state, w, &mut decisions);
            for decision in decisions {
                if !state.new_views.contains(&(w, decision)) {
                    actions.push(Action::NewView { view: w, decision });
                }
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Propose {
                view,
                slot,
                digest,
                to,
            } => {
                if !self.byzantine_primary(view) {
                    s.proposed[usize::from(view)][slot] = Some(digest);
                }
                accept(&mut s, to, view, slot, digest);
            }
            Action::Certify {
                view,
                slot,
                digest,
                to,
            } => {
                accept(&mut s, to, view, slot, digest);
                s.replicas[to].report[slot].prepared = Some((view, digest));
                s.certified[usize::from(view)][slot][usize::from(digest)] |= bit(to);
            }
            Action::ViewChange { replica, view } => {
                let r = &mut s.replicas[replica];
                s.view_changes.insert((view, replica, r.report));
                r.view = view;
                r.active = false;
                r.free = [false; SLOTS_MAX];
                r.current = [None; SLOTS_MAX];
            }
            Action::NewView { view, decision } => {
                s.new_views.insert((view, decision));
            }
            Action::Install {
                replica,
                view,
                decision,
            } => {
                let r = &mut s.replicas[replica];
                r.view = view;
                r.active = true;
                r.current = [None; SLOTS_MAX];
                for (slot, d) in decision.iter().enumerate().take(self.slots) {
                    r.free[slot] = *d == Decision::Free;
                }
                for (slot, d) in decision.iter().enumerate().take(self.slots) {
                    if let Decision::Pick(digest) = *d {
                        accept(&mut s, replica, view, slot, digest);
                    }
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(AGREEMENT, |m: &Self, s: &State| {
                let done = m.completions(s);
                done.iter().all(|&(_, slot, d)| {
                    done.iter().all(|&(_, slot2, d2)| slot != slot2 || d == d2)
                })
            }),
            Property::always(KEEP, |m: &Self, s: &State| {
                let done = m.completions(s);
                s.new_views.iter().all(|(w, decision)| {
                    done.iter()
                        .all(|&(v, slot, d)| v >= *w || decision[slot] == Decision::Pick(d))
                })
            }),
            Property::sometimes(LATE_COMPLETION, |m: &Self, s: &State| {
                m.completions(s).iter().any(|&(v, ..)| v > 0)
            }),
        ]
    }
}

/// Correct replica `to` accepts `digest` at `slot` in `view` and signs it.
fn accept(s: &mut State, to: usize, view: View, slot: usize, digest: Digest) {
    let r = &mut s.replicas[to];
    r.current[slot] = Some(digest);
    let seen = &mut r.report[slot].accepted[usize::from(digest)];
    *seen = (*seen).max(Some(view));
    s.signed[usize::from(view)][slot][usize::from(digest)] |= bit(to);
}

/// The agreement property's name.
const AGREEMENT: &str = "agreement: one batch completes at a slot";
/// The second property's name.
const KEEP: &str = "new views keep completions";
/// A reachability check: the model is not vacuous.
const LATE_COMPLETION: &str = "a batch completes in a view after a view change";
