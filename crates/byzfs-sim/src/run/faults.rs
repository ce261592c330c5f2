//! The fault director: applying the plan's timed faults (partitions, crashes, power cuts,
//! twins, clock steps, ...) and their follow-ups, and the directed view-change history.

use super::{
    partition, rng, trace_line, vc_history, Ev, Fault, FollowUp, NodeIdx, Phase, ReplicaId, Rng,
    Role, Sim, SimRng, Target, Time, VcHistory, MS,
};

/// The fault director's state: its random stream for faults drawn while running, which side
/// of a twin each replica hears, and the directed view-change history, if the family has one.
pub(super) struct Director {
    pub(super) fault_rng: SimRng,
    pub(super) twin_sides: Vec<u8>,
    pub(super) history: Option<VcHistory>,
    /// Generation of the history's next step (a stale `Ev::Director` is ignored).
    pub(super) gen: u64,
}

impl Sim {
    /// Whether a fault that waits for `inst`'s next step may be armed on it: a correct
    /// replica that is up (the trace says why not otherwise).
    fn armable(&mut self, inst: usize) -> bool {
        let node = &self.world.replicas[inst];
        let ok = node.up && node.adversary.is_none() && node.role == Role::Correct;
        if !ok {
            trace_line!(
                self.trace,
                self.world.now,
                "fault skipped: r{inst} is down or not a crash victim"
            );
        }
        ok
    }

    pub(super) fn cut(&mut self, links: &[(NodeIdx, NodeIdx)]) {
        for &(a, b) in links {
            self.world.net.set_link(a, b, false);
        }
    }

    pub(super) fn apply_twin_links(&mut self) {
        let Some((t, _)) = self.plan.twin else { return };
        let n = self.config.n();
        let (a, b) = (t as usize, n);
        for (j, &side) in self.director.twin_sides.iter().enumerate() {
            if j == t as usize {
                continue;
            }
            let (to_a, to_b) = (side != 1, side != 0);
            self.world.net.set_link(a, j, to_a);
            self.world.net.set_link(j, a, to_a);
            self.world.net.set_link(b, j, to_b);
            self.world.net.set_link(j, b, to_b);
        }
    }

    pub(super) fn fault(&mut self, f: Fault) {
        if !matches!(self.phases.phase, Phase::Safety) {
            return;
        }
        trace_line!(self.trace, self.world.now, "fault {f:?}");
        let now = self.world.now.as_micros();
        match f {
            Fault::Crash {
                target,
                at_next_send,
                down_us,
                with_state,
            } => {
                let inst = match target {
                    Target::Replica(r) => r as usize,
                    Target::CurrentPrimary => self.current_primary() as usize,
                };
                let node = &mut self.world.replicas[inst];
                let allowed = node.up
                    && node.adversary.is_none()
                    && (node.role == Role::Correct || (node.role == Role::Amnesiac && !with_state));
                if !allowed {
                    trace_line!(
                        self.trace,
                        self.world.now,
                        "fault skipped: r{inst} is down or not a crash victim"
                    );
                    return;
                }
                node.restart_with_state = with_state;
                let mut restart_at = now + down_us;
                if at_next_send {
                    node.crash_at_next_send = true;
                    self.world.queue.push(
                        Time(now + 50 * MS),
                        Ev::FollowUp(FollowUp::CrashNow { inst }),
                    );
                    restart_at += 50 * MS;
                } else {
                    self.crash(inst, "now");
                }
                self.world.queue.push(
                    Time(restart_at),
                    Ev::FollowUp(FollowUp::Restart { inst, with_state }),
                );
            }
            Fault::Partition {
                shape,
                dur_us,
                flaps,
            } => {
                let primary = self.current_primary();
                let f = self.config.f as usize;
                let links = partition::cut(
                    shape,
                    &self.world.topo,
                    primary,
                    f,
                    &mut self.director.fault_rng,
                );
                trace_line!(
                    self.trace,
                    self.world.now,
                    "partition {} cuts {links:?}",
                    shape.name()
                );
                self.cut(&links);
                self.world.queue.push(
                    Time(now + dur_us),
                    Ev::FollowUp(FollowUp::Heal {
                        links,
                        flaps,
                        dur_us,
                    }),
                );
            }
            Fault::Isolate { replica, dur_us } => {
                let mut links = Vec::new();
                for &i in &self.world.topo.replicas[replica as usize] {
                    for j in 0..self.world.net.nodes() {
                        if i != j {
                            links.push((i, j));
                            links.push((j, i));
                        }
                    }
                }
                self.cut(&links);
                self.world.queue.push(
                    Time(now + dur_us),
                    Ev::FollowUp(FollowUp::Heal {
                        links,
                        flaps: 0,
                        dur_us,
                    }),
                );
            }
            Fault::CrashAfterPrepare { replica, down_us } => {
                let inst = replica as usize;
                if self.armable(inst) {
                    let ordered = self.world.now;
                    self.world.replicas[inst].crash_after_prepare = Some((down_us, ordered));
                    let lapse = FollowUp::CancelCrashAfterPrepare { inst, ordered };
                    self.world
                        .queue
                        .push(Time(now + 500 * MS), Ev::FollowUp(lapse));
                }
            }
            Fault::CrashAfterProposal { down_us } => {
                let inst = self.current_primary() as usize;
                if self.armable(inst) {
                    let ordered = self.world.now;
                    self.world.replicas[inst].crash_after_proposal = Some((down_us, ordered));
                    let lapse = FollowUp::CancelCrashAfterProposal { inst, ordered };
                    self.world
                        .queue
                        .push(Time(now + 500 * MS), Ev::FollowUp(lapse));
                }
            }
            Fault::CutAllAfterTransfer {
                replica,
                after_us,
                down_us,
                amnesiac,
            } => {
                let inst = replica as usize;
                if self.armable(inst) {
                    let ordered = self.world.now;
                    let amnesiac = amnesiac.map(|a| a as usize);
                    self.world.replicas[inst].cut_all_after_transfer =
                        Some((after_us, down_us, amnesiac, ordered));
                    let lapse = FollowUp::CancelCutAllAfterTransfer { inst, ordered };
                    self.world
                        .queue
                        .push(Time(now + 3_000 * MS), Ev::FollowUp(lapse));
                }
            }
            Fault::TwinLinks => {
                let n = self.config.n();
                self.director.twin_sides = (0..n)
                    .map(|_| self.director.fault_rng.gen_range(0..3u8))
                    .collect();
                trace_line!(
                    self.trace,
                    self.world.now,
                    "twin sides (0: first, 1: second, 2: both) {:?}",
                    self.director.twin_sides
                );
                self.apply_twin_links();
            }
            Fault::StartTwin => {
                let inst = self.config.n();
                if inst < self.world.replicas.len() && !self.world.replicas[inst].up {
                    self.world.replicas[inst].up = true;
                    self.after_replica_step(inst);
                }
            }
            Fault::SetNet(nf) => self.world.net.set_faults(nf),
            Fault::SlowLinks {
                links,
                extra_min_us,
                extra_max_us,
                dur_us,
            } => {
                let n = self.config.n() as ReplicaId;
                let mut slowed = Vec::new();
                for _ in 0..links {
                    let a = self.director.fault_rng.gen_range(0..n);
                    let b = (a + self.director.fault_rng.gen_range(1..n)) % n;
                    let extra = self
                        .director
                        .fault_rng
                        .gen_range(extra_min_us..=extra_max_us);
                    for &i in &self.world.topo.replicas[a as usize] {
                        for &j in &self.world.topo.replicas[b as usize] {
                            self.world.net.set_link_delay(i, j, extra);
                            slowed.push((i, j));
                        }
                    }
                }
                trace_line!(self.trace, self.world.now, "slow links {slowed:?}");
                self.world.queue.push(
                    Time(now + dur_us),
                    Ev::FollowUp(FollowUp::Unslow { links: slowed }),
                );
            }
            Fault::ClockAtRestart { replica, offset_us } => {
                if let Some(node) = self.world.replicas.get_mut(replica as usize) {
                    node.clock_at_restart = Some(offset_us);
                }
            }
            Fault::VcHistory(plan) => {
                let f = self.config.f as usize;
                let t = u64::try_from(self.config.view_change_timeout.as_micros()).unwrap_or(0);
                let k = self.config.checkpoint_interval;
                self.director.history = Some(VcHistory::new(plan, f, t, k));
                self.director_step();
            }
        }
    }

    /// Steps the `vc-history` director: applies its link changes, schedules its next step.
    pub(super) fn director_step(&mut self) {
        if !matches!(self.phases.phase, Phase::Safety) {
            return;
        }
        let n = self.config.n();
        let reps: Vec<vc_history::ReplicaState> = (0..n)
            .map(|inst| {
                let r = &self.world.replicas[inst];
                vc_history::ReplicaState {
                    live: r.up && self.oracle.is_correct(inst),
                    view: r.replica.view(),
                    has_new_view: r.replica.has_new_view(),
                    last_executed: r.replica.last_executed(),
                }
            })
            .collect();
        let Some(d) = self.director.history.as_mut() else {
            return;
        };
        let before = d.stage_name();
        let (cmds, next) = d.step(
            self.world.now.as_micros(),
            &reps,
            &self.world.topo,
            &mut self.director.fault_rng,
        );
        let after = d.stage_name();
        if before != after {
            trace_line!(
                self.trace,
                self.world.now,
                "vc-history: {before} -> {after}"
            );
        }
        for c in cmds {
            match c {
                vc_history::Cmd::Cut(links) => {
                    trace_line!(self.trace, self.world.now, "vc-history cuts {links:?}");
                    self.cut(&links);
                }
                vc_history::Cmd::Heal(links) => {
                    trace_line!(self.trace, self.world.now, "vc-history heals {links:?}");
                    for (a, b) in links {
                        self.world.net.set_link(a, b, true);
                    }
                }
            }
        }
        self.director.gen += 1;
        if let Some(at) = next {
            let gen = self.director.gen;
            self.world.queue.push(
                Time(at.max(self.world.now.as_micros())),
                Ev::Director { gen },
            );
        }
    }

    pub(super) fn follow_up(&mut self, f: FollowUp) {
        if !matches!(self.phases.phase, Phase::Safety) {
            return;
        }
        let now = self.world.now.as_micros();
        match f {
            FollowUp::CrashNow { inst } => {
                if self.world.replicas[inst].up && self.world.replicas[inst].crash_at_next_send {
                    self.crash(inst, "no send within 50 ms");
                }
            }
            FollowUp::CancelCrashAfterPrepare { inst, ordered } => {
                // A later order stays.
                self.world.replicas[inst]
                    .crash_after_prepare
                    .take_if(|(_, at)| *at == ordered);
            }
            FollowUp::CancelCrashAfterProposal { inst, ordered } => {
                // A later order stays.
                self.world.replicas[inst]
                    .crash_after_proposal
                    .take_if(|(_, at)| *at == ordered);
            }
            FollowUp::CancelCutAllAfterTransfer { inst, ordered } => {
                // A later order stays.
                self.world.replicas[inst]
                    .cut_all_after_transfer
                    .take_if(|(_, _, _, at)| *at == ordered);
            }
            FollowUp::CutAll { down_us, amnesiac } => {
                let waiting: Vec<String> = self
                    .world
                    .replicas
                    .iter()
                    .map(|r| {
                        format!(
                            "stable {} records waiting {}",
                            r.replica.last_stable(),
                            r.disk_work.held.len()
                        )
                    })
                    .collect();
                trace_line!(
                    self.trace,
                    self.world.now,
                    "power cut of every replica ({waiting:?})"
                );
                for inst in 0..self.world.replicas.len() {
                    let node = &mut self.world.replicas[inst];
                    let with_state = amnesiac != Some(inst);
                    let allowed = node.up
                        && node.adversary.is_none()
                        && (node.role == Role::Correct
                            || (node.role == Role::Amnesiac && !with_state));
                    if !allowed {
                        continue;
                    }
                    node.restart_with_state = with_state;
                    self.crash(inst, "power cut after a transfer");
                    let restart = now + down_us + self.director.fault_rng.gen_range(0..=5 * MS);
                    self.world.queue.push(
                        Time(restart),
                        Ev::FollowUp(FollowUp::Restart { inst, with_state }),
                    );
                }
            }
            FollowUp::Restart { inst, with_state } => {
                if !self.world.replicas[inst].up {
                    self.restart(inst, with_state);
                }
            }
            FollowUp::Heal {
                mut links,
                flaps,
                dur_us,
            } => {
                rng::shuffle(&mut self.director.fault_rng, &mut links);
                let window = (dur_us / 2).min(500 * MS);
                for &(from, to) in &links {
                    let at = now + self.director.fault_rng.gen_range(0..=window);
                    self.world
                        .queue
                        .push(Time(at), Ev::FollowUp(FollowUp::LinkUp { from, to }));
                }
                if flaps > 0 {
                    let at = now
                        + window
                        + self
                            .director
                            .fault_rng
                            .gen_range(100 * MS..=dur_us.max(100 * MS));
                    self.world.queue.push(
                        Time(at),
                        Ev::FollowUp(FollowUp::Recut {
                            links,
                            flaps: flaps - 1,
                            dur_us,
                        }),
                    );
                }
            }
            FollowUp::Recut {
                links,
                flaps,
                dur_us,
            } => {
                trace_line!(self.trace, self.world.now, "re-cut {links:?}");
                self.cut(&links);
                self.world.queue.push(
                    Time(now + dur_us),
                    Ev::FollowUp(FollowUp::Heal {
                        links,
                        flaps,
                        dur_us,
                    }),
                );
            }
            FollowUp::Unslow { links } => {
                for (a, b) in links {
                    self.world.net.set_link_delay(a, b, 0);
                }
            }
            FollowUp::LinkUp { from, to } => {
                trace_line!(
                    self.trace,
                    self.world.now,
                    "link-up {}->{}",
                    self.name(from),
                    self.name(to)
                );
                self.world.net.set_link(from, to, true);
            }
        }
    }

    // ---- phases ----------------------------------------------------------------------------
}
