//! The `vc-history` director (docs/PROTOCOL.md §3.4, §3.6 pitfall #1): a network adversary that
//! steers a run, through partitions only, into the view-change history where the new-view
//! rule must prefer the prepared certificate of the *highest* view:
//!
//! 1. **Trap** (view `v`, primary `P`, at a moment the next checkpoint is not close): with
//!    `X = primary(v+2)` and `Y = primary(v+1)`, nothing `X` sends reaches anyone, while `X`
//!    hears everyone; among the other backups each hears the PREPAREs of at most `2f-2` of the
//!    others (random), and `P` hears at most `2f-1` backups. The next PRE-PREPAREs then complete
//!    a prepared certificate at `X` only (own PREPARE plus `≥ 2f-1` others); everyone else sees
//!    fewer than `2f` PREPAREs.
//! 2. **Isolate** `X` (both ways, replicas only) shortly after. Execution stalls at that slot;
//!    as soon as a replica has left view `v` its links heal (a view-`v` message can no longer
//!    complete a certificate through it), and the others install `v+1` under `Y` without `X`:
//!    nobody reports the slot prepared, so the new view fills it with the null batch (or a
//!    fresh one), which commits.
//! 3. **Kick**: once a replica executed through the trapped slot, nothing `Y` sends arrives any
//!    more; the others time out into `v+2`, whose primary is `X`.
//! 4. **Rejoin**: heal `X`; it joins `v+2` (`f+1` VIEW-CHANGEs) and, as primary, decides with
//!    its own stale VIEW-CHANGE (prepared at `v`) in the set, next to `v+1` certificates of the
//!    null batch. Highest view first picks the null batch; "lowest view first" picks `X`'s
//!    batch and a second digest commits at a committed sequence number. Later heal `Y`.
//!
//! Every step waits for the state it needs (with a timeout that aborts the attempt, heals what
//! it cut and retries later); all delays come from the seed. Correct runs must stay safe and
//! live whatever the director does — it only cuts links and heals them.

use crate::network::NodeIdx;
use crate::partition::Topology;
use crate::rng::SimRng;
use byzfs_bft::{Event, ReplicaId, Seq, View};
use rand::Rng;
use std::collections::BTreeSet;

/// The director's knobs, drawn from the seed when the scenario is planned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VcHistoryPlan {
    /// Delay from the first trapped certificate at `X` to isolating `X`, µs.
    pub isolate_after_us: u64,
    /// Delay from "the trapped slot executed somewhere" to isolating `Y`, µs.
    pub kick_after_us: u64,
    /// Delay from "the others reached `v+2`" to healing `X`, in ppm of the base timeout `T`.
    pub rejoin_after_ppm: u32,
    /// Delay from healing `X` to healing `Y`, µs.
    pub heal_y_after_us: u64,
    /// Wait before re-arming after an aborted attempt, µs.
    pub retry_us: u64,
    /// Attempts at most.
    pub attempts: u32,
}

impl VcHistoryPlan {
    /// Draws the knobs.
    pub fn draw(r: &mut SimRng) -> VcHistoryPlan {
        VcHistoryPlan {
            isolate_after_us: r.gen_range(0..=5_000),
            kick_after_us: r.gen_range(0..=5_000),
            rejoin_after_ppm: r.gen_range(0..=500_000),
            heal_y_after_us: r.gen_range(20_000..=500_000),
            retry_us: r.gen_range(200_000..=1_000_000),
            attempts: r.gen_range(1..=3),
        }
    }
}

/// What the director reads about one replica id (its first instance).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaState {
    /// Up and held to the invariants.
    pub live: bool,
    /// Current view.
    pub view: View,
    /// Holds the new-view state of its view.
    pub has_new_view: bool,
    /// Last executed sequence number.
    pub last_executed: Seq,
}

/// A change of links the simulator applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cmd {
    /// Take these directed links down.
    Cut(Vec<(NodeIdx, NodeIdx)>),
    /// Bring these directed links up.
    Heal(Vec<(NodeIdx, NodeIdx)>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Stage {
    Arm,
    Trap { since: u64, first: Option<u64> },
    Isolated { since: u64 },
    V1 { since: u64, ready: Option<u64> },
    V2 { since: u64, ready: Option<u64> },
    Rejoin { at: u64 },
    Done,
}

/// Longest wait for any one step before the attempt is abandoned, µs.
const STEP_TIMEOUT_US: u64 = 5_000_000;
/// Longest wait for a trapped certificate, µs.
const TRAP_TIMEOUT_US: u64 = 500_000;
/// Polling period while waiting for a state, µs.
const POLL_US: u64 = 2_000;

/// The director of one run.
#[derive(Clone, Debug)]
pub struct VcHistory {
    plan: VcHistoryPlan,
    f: usize,
    timeout_us: u64,
    stage: Stage,
    v: View,
    p: ReplicaId,
    x: ReplicaId,
    y: ReplicaId,
    k: u64,
    /// The trap's cuts among replicas other than `X`: `(from node, to node, from id, to id)`.
    sparse: Vec<(NodeIdx, NodeIdx, ReplicaId, ReplicaId)>,
    trapped: BTreeSet<Seq>,
    shared: BTreeSet<Seq>,
    cut: BTreeSet<(NodeIdx, NodeIdx)>,
    y_cut: Vec<(NodeIdx, NodeIdx)>,
    tries: u32,
}

impl VcHistory {
    /// A director for a cluster with `f`, base view-change timeout `timeout_us` and
    /// checkpoint interval `k`.
    pub fn new(plan: VcHistoryPlan, f: usize, timeout_us: u64, k: u64) -> VcHistory {
        VcHistory {
            plan,
            f,
            timeout_us,
            stage: Stage::Arm,
            v: 0,
            p: 0,
            x: 0,
            y: 0,
            k,
            sparse: Vec::new(),
            trapped: BTreeSet::new(),
            shared: BTreeSet::new(),
            cut: BTreeSet::new(),
            y_cut: Vec::new(),
            tries: 0,
        }
    }

    /// Whether the director has finished (successfully or not).
    pub fn done(&self) -> bool {
        self.stage == Stage::Done
    }

    /// A one-word description of the current step, for traces.
    pub fn stage_name(&self) -> &'static str {
        match self.stage {
            Stage::Arm => "arm",
            Stage::Trap { .. } => "trap",
            Stage::Isolated { .. } => "isolated",
            Stage::V1 { .. } => "v+1",
            Stage::V2 { .. } => "v+2",
            Stage::Rejoin { .. } => "rejoin",
            Stage::Done => "done",
        }
    }

    /// Sees an event of replica `id` (a correct one). Returns true if the director should
    /// step now.
    pub fn observe(&mut self, id: ReplicaId, ev: &Event) -> bool {
        if let Stage::Isolated { .. } = self.stage {
            return matches!(ev, Event::ViewChangeStarted { .. });
        }
        let Stage::Trap { .. } = self.stage else {
            return false;
        };
        match *ev {
            Event::Prepared { view, seq, .. } if view == self.v => {
                if id == self.x {
                    self.trapped.insert(seq);
                    true
                } else {
                    // Prepared elsewhere too: not a trapped slot.
                    self.shared.insert(seq);
                    false
                }
            }
            _ => false,
        }
    }

    fn links_between(
        topo: &Topology,
        from: &[ReplicaId],
        to: &[ReplicaId],
    ) -> Vec<(NodeIdx, NodeIdx)> {
        let mut out = Vec::new();
        for &a in from {
            for &b in to {
                if a == b {
                    continue;
                }
                for &i in &topo.replicas[a as usize] {
                    for &j in &topo.replicas[b as usize] {
                        out.push((i, j));
                    }
                }
            }
        }
        out
    }

    /// Every directed replica link to or from `X`.
    fn x_links(&self, topo: &Topology, all: &[ReplicaId]) -> BTreeSet<(NodeIdx, NodeIdx)> {
        let mut l: BTreeSet<_> = Self::links_between(topo, &[self.x], all)
            .into_iter()
            .collect();
        l.extend(Self::links_between(topo, all, &[self.x]));
        l
    }

    /// Heals the trap's sparse links that touch a replica which has left view `v` (all of
    /// them if `all`), keeping `X` cut off.
    fn heal_sparse(&mut self, reps: &[ReplicaState], all: bool, cmds: &mut Vec<Cmd>) {
        let moved = |i: usize| reps.get(i).is_some_and(|r| r.view > self.v);
        let (heal, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.sparse)
            .into_iter()
            .partition(|&(_, _, ra, rb)| all || moved(ra as usize) || moved(rb as usize));
        self.sparse = keep;
        let links: Vec<_> = heal.into_iter().map(|(a, b, _, _)| (a, b)).collect();
        if !links.is_empty() {
            self.do_heal(&links, cmds);
        }
    }

    fn abort(&mut self, now: u64, cmds: &mut Vec<Cmd>) -> Option<u64> {
        self.sparse.clear();
        let links: Vec<_> = std::mem::take(&mut self.cut).into_iter().collect();
        if !links.is_empty() {
            cmds.push(Cmd::Heal(links));
        }
        self.tries += 1;
        if self.tries >= self.plan.attempts {
            self.stage = Stage::Done;
            return None;
        }
        self.stage = Stage::Arm;
        Some(now + self.plan.retry_us)
    }

    fn do_cut(&mut self, links: Vec<(NodeIdx, NodeIdx)>, cmds: &mut Vec<Cmd>) {
        self.cut.extend(links.iter().copied());
        cmds.push(Cmd::Cut(links));
    }

    fn do_heal(&mut self, links: &[(NodeIdx, NodeIdx)], cmds: &mut Vec<Cmd>) {
        for l in links {
            self.cut.remove(l);
        }
        cmds.push(Cmd::Heal(links.to_vec()));
    }

    /// One step at `now` (µs) given the replicas' states (indexed by replica id). Returns the
    /// link changes to apply and when to step next (`None`: only on an observed event, or
    /// never once done).
    pub fn step(
        &mut self,
        now: u64,
        reps: &[ReplicaState],
        topo: &Topology,
        rng: &mut SimRng,
    ) -> (Vec<Cmd>, Option<u64>) {
        let mut cmds = Vec::new();
        let n = reps.len() as ReplicaId;
        let primary = |v: View| (v % u64::from(n)) as ReplicaId;
        let all: Vec<ReplicaId> = (0..n).collect();
        let next = match self.stage.clone() {
            Stage::Done => None,
            Stage::Arm => {
                let v = reps[0].view;
                let settled = reps.iter().all(|r| r.live && r.view == v && r.has_new_view);
                // Leave room before the next checkpoint: it must not become stable above the
                // trapped slot before the second view change.
                let room = reps
                    .iter()
                    .all(|r| r.last_executed % self.k < self.k - self.k / 4);
                if !settled || !room {
                    Some(now + POLL_US)
                } else {
                    self.v = v;
                    self.p = primary(v);
                    self.y = primary(v + 1);
                    self.x = primary(v + 2);
                    self.trapped.clear();
                    self.shared.clear();
                    // Nothing X sends arrives.
                    let mut links = Self::links_between(topo, &[self.x], &all);
                    // Sparse hearing among the others: a backup hears at most 2f-2 other
                    // backups, the primary at most 2f-1.
                    let backups: Vec<ReplicaId> = all
                        .iter()
                        .copied()
                        .filter(|&r| r != self.p && r != self.x)
                        .collect();
                    self.sparse.clear();
                    for &b in all.iter().filter(|&&r| r != self.x) {
                        let mut peers: Vec<ReplicaId> =
                            backups.iter().copied().filter(|&r| r != b).collect();
                        crate::rng::shuffle(rng, &mut peers);
                        let cap = if b == self.p {
                            2 * self.f - 1
                        } else {
                            2 * self.f - 2
                        };
                        let hear = rng.gen_range(0..=cap.min(peers.len()));
                        for &a in &peers[hear..] {
                            for (i, j) in Self::links_between(topo, &[a], &[b]) {
                                self.sparse.push((i, j, a, b));
                                links.push((i, j));
                            }
                        }
                    }
                    self.do_cut(links, &mut cmds);
                    self.stage = Stage::Trap {
                        since: now,
                        first: None,
                    };
                    Some(now + TRAP_TIMEOUT_US)
                }
            }
            Stage::Trap { since, first } => {
                let moved = reps.iter().any(|r| r.view != self.v);
                let fresh = self.trapped.difference(&self.shared).next().is_some();
                match first {
                    _ if moved => self.abort(now, &mut cmds),
                    None if fresh => {
                        let at = now + self.plan.isolate_after_us;
                        self.stage = Stage::Trap {
                            since,
                            first: Some(at),
                        };
                        Some(at)
                    }
                    Some(at) if now >= at => {
                        // X hears nobody either (it would install v+1 and re-prepare).
                        let links = Self::links_between(topo, &all, &[self.x]);
                        self.do_cut(links, &mut cmds);
                        self.stage = Stage::Isolated { since: now };
                        Some(now + POLL_US)
                    }
                    Some(at) => Some(at),
                    None if now >= since + TRAP_TIMEOUT_US => self.abort(now, &mut cmds),
                    None => Some(since + TRAP_TIMEOUT_US),
                }
            }
            Stage::Isolated { since } => {
                let y = reps[self.y as usize];
                if y.view > self.v + 1 {
                    self.abort(now, &mut cmds)
                } else if y.view == self.v + 1 && y.has_new_view {
                    // Everyone but X talks again.
                    self.heal_sparse(reps, true, &mut cmds);
                    self.stage = Stage::V1 {
                        since: now,
                        ready: None,
                    };
                    Some(now + POLL_US)
                } else if now >= since + STEP_TIMEOUT_US {
                    self.abort(now, &mut cmds)
                } else {
                    self.heal_sparse(reps, false, &mut cmds);
                    Some(now + POLL_US)
                }
            }
            Stage::V1 { since, ready } => {
                let target = self.trapped.difference(&self.shared).last().copied();
                let executed = reps.iter().enumerate().any(|(i, r)| {
                    i as ReplicaId != self.x && target.is_some_and(|t| r.last_executed >= t)
                });
                let y = reps[self.y as usize];
                if y.view != self.v + 1 || target.is_none() {
                    self.abort(now, &mut cmds)
                } else {
                    match ready {
                        Some(at) if now >= at => {
                            // Y's messages stop arriving; Y still hears everyone, so it
                            // commits what is in flight and clients are not left waiting on
                            // its replies (with nothing pending, nobody would time out).
                            let rest: Vec<ReplicaId> =
                                all.iter().copied().filter(|&r| r != self.y).collect();
                            let links = Self::links_between(topo, &[self.y], &rest);
                            self.y_cut = links.clone();
                            self.do_cut(links, &mut cmds);
                            self.stage = Stage::V2 {
                                since: now,
                                ready: None,
                            };
                            Some(now + POLL_US)
                        }
                        Some(at) => Some(at),
                        None if executed => {
                            let at = now + self.plan.kick_after_us;
                            self.stage = Stage::V1 {
                                since,
                                ready: Some(at),
                            };
                            Some(at)
                        }
                        None if now >= since + STEP_TIMEOUT_US => self.abort(now, &mut cmds),
                        None => Some(now + POLL_US),
                    }
                }
            }
            Stage::V2 { since, ready } => {
                let moved = reps
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i as ReplicaId != self.x && *i as ReplicaId != self.y)
                    .filter(|(_, r)| r.view >= self.v + 2)
                    .count();
                match ready {
                    Some(at) if now >= at => {
                        // X rejoins; Y stays cut off.
                        let links: Vec<_> = self
                            .x_links(topo, &all)
                            .into_iter()
                            .filter(|l| self.cut.contains(l) && !self.y_cut.contains(l))
                            .collect();
                        self.do_heal(&links, &mut cmds);
                        let at = now + self.plan.heal_y_after_us;
                        self.stage = Stage::Rejoin { at };
                        Some(at)
                    }
                    Some(at) => Some(at),
                    None if moved >= 2 * self.f => {
                        let frac = u128::from(self.plan.rejoin_after_ppm);
                        let delay = u128::from(self.timeout_us) * frac / 1_000_000;
                        let at = now + u64::try_from(delay).unwrap_or(u64::MAX / 2);
                        self.stage = Stage::V2 {
                            since,
                            ready: Some(at),
                        };
                        Some(at)
                    }
                    None if now >= since + STEP_TIMEOUT_US => self.abort(now, &mut cmds),
                    None => Some(now + POLL_US),
                }
            }
            Stage::Rejoin { at } => {
                if now >= at {
                    let links: Vec<_> = std::mem::take(&mut self.cut).into_iter().collect();
                    if !links.is_empty() {
                        cmds.push(Cmd::Heal(links));
                    }
                    self.stage = Stage::Done;
                    None
                } else {
                    Some(at)
                }
            }
        };
        (cmds, next)
    }
}
