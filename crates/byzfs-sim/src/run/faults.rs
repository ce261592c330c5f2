//! The fault director: applying the plan's timed faults (partitions, crashes, power cuts,
//! twins, clock steps, ...) and their follow-ups, and the directed view-change history.

use super::*;

impl Sim {
    pub(super) fn cut(&mut self, links: &[(NodeIdx, NodeIdx)]) {
        for &(a, b) in links {
            self.net.set_link(a, b, false);
        }
    }

    pub(super) fn apply_twin_links(&mut self) {
        let Some((t, _)) = self.plan.twin else { return };
        let n = self.config.n();
        let (a, b) = (t as usize, n);
        for (j, &side) in self.twin_sides.iter().enumerate() {
            if j == t as usize {
                continue;
            }
            let (to_a, to_b) = (side != 1, side != 0);
            self.net.set_link(a, j, to_a);
            self.net.set_link(j, a, to_a);
            self.net.set_link(b, j, to_b);
            self.net.set_link(j, b, to_b);
        }
    }

    pub(super) fn fault(&mut self, f: Fault) {
        if !matches!(self.phase, Phase::Safety) {
            return;
        }
        trace_line!(self.trace, self.now, "fault {f:?}");
        let now = self.now.as_micros();
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
                let node = &mut self.replicas[inst];
                let allowed = node.up
                    && node.adversary.is_none()
                    && (node.role == Role::Correct || (node.role == Role::Amnesiac && !with_state));
                if !allowed {
                    trace_line!(
                        self.trace,
                        self.now,
                        "fault skipped: r{inst} is down or not a crash victim"
                    );
                    return;
                }
                node.restart_with_state = with_state;
                let mut restart_at = now + down_us;
                if at_next_send {
                    node.crash_at_next_send = true;
                    self.queue.push(
                        Time(now + 50 * MS),
                        Ev::FollowUp(FollowUp::CrashNow { inst }),
                    );
                    restart_at += 50 * MS;
                } else {
                    self.crash(inst, "now");
                }
                self.queue.push(
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
                let links = partition::cut(shape, &self.topo, primary, f, &mut self.fault_rng);
                trace_line!(
                    self.trace,
                    self.now,
                    "partition {} cuts {links:?}",
                    shape.name()
                );
                self.cut(&links);
                self.queue.push(
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
                for &i in &self.topo.replicas[replica as usize] {
                    for j in 0..self.net.nodes() {
                        if i != j {
                            links.push((i, j));
                            links.push((j, i));
                        }
                    }
                }
                self.cut(&links);
                self.queue.push(
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
                let node = &mut self.replicas[inst];
                if !node.up || node.adversary.is_some() || node.role != Role::Correct {
                    trace_line!(
                        self.trace,
                        self.now,
                        "fault skipped: r{inst} is down or not a crash victim"
                    );
                    return;
                }
                let ordered = self.now;
                node.crash_after_prepare = Some((down_us, ordered));
                self.queue.push(
                    Time(now + 500 * MS),
                    Ev::FollowUp(FollowUp::CancelCrashAfterPrepare { inst, ordered }),
                );
            }
            Fault::TwinLinks => {
                let n = self.config.n();
                self.twin_sides = (0..n).map(|_| self.fault_rng.gen_range(0..3u8)).collect();
                trace_line!(
                    self.trace,
                    self.now,
                    "twin sides (0: first, 1: second, 2: both) {:?}",
                    self.twin_sides
                );
                self.apply_twin_links();
            }
            Fault::StartTwin => {
                let inst = self.config.n();
                if inst < self.replicas.len() && !self.replicas[inst].up {
                    self.replicas[inst].up = true;
                    self.after_replica_step(inst);
                }
            }
            Fault::SetNet(nf) => self.net.set_faults(nf),
            Fault::SlowLinks {
                links,
                extra_min_us,
                extra_max_us,
                dur_us,
            } => {
                let n = self.config.n() as ReplicaId;
                let mut slowed = Vec::new();
                for _ in 0..links {
                    let a = self.fault_rng.gen_range(0..n);
                    let b = (a + self.fault_rng.gen_range(1..n)) % n;
                    let extra = self.fault_rng.gen_range(extra_min_us..=extra_max_us);
                    for &i in &self.topo.replicas[a as usize] {
                        for &j in &self.topo.replicas[b as usize] {
                            self.net.set_link_delay(i, j, extra);
                            slowed.push((i, j));
                        }
                    }
                }
                trace_line!(self.trace, self.now, "slow links {slowed:?}");
                self.queue.push(
                    Time(now + dur_us),
                    Ev::FollowUp(FollowUp::Unslow { links: slowed }),
                );
            }
            Fault::ClockAtRestart { replica, offset_us } => {
                if let Some(node) = self.replicas.get_mut(replica as usize) {
                    node.clock_at_restart = Some(offset_us);
                }
            }
            Fault::VcHistory(plan) => {
                let f = self.config.f as usize;
                let t = u64::try_from(self.config.view_change_timeout.as_micros()).unwrap_or(0);
                let k = self.config.checkpoint_interval;
                self.director = Some(VcHistory::new(plan, f, t, k));
                self.director_step();
            }
        }
    }

    /// Steps the `vc-history` director: applies its link changes, schedules its next step.
    pub(super) fn director_step(&mut self) {
        if !matches!(self.phase, Phase::Safety) {
            return;
        }
        let n = self.config.n();
        let reps: Vec<vc_history::ReplicaState> = (0..n)
            .map(|inst| {
                let r = &self.replicas[inst];
                vc_history::ReplicaState {
                    live: r.up && self.oracle.is_correct(inst),
                    view: r.replica.view(),
                    has_new_view: r.replica.has_new_view(),
                    last_executed: r.replica.last_executed(),
                }
            })
            .collect();
        let Some(d) = self.director.as_mut() else {
            return;
        };
        let before = d.stage_name();
        let (cmds, next) = d.step(self.now.as_micros(), &reps, &self.topo, &mut self.fault_rng);
        let after = d.stage_name();
        if before != after {
            trace_line!(self.trace, self.now, "vc-history: {before} -> {after}");
        }
        for c in cmds {
            match c {
                vc_history::Cmd::Cut(links) => {
                    trace_line!(self.trace, self.now, "vc-history cuts {links:?}");
                    self.cut(&links);
                }
                vc_history::Cmd::Heal(links) => {
                    trace_line!(self.trace, self.now, "vc-history heals {links:?}");
                    for (a, b) in links {
                        self.net.set_link(a, b, true);
                    }
                }
            }
        }
        self.director_gen += 1;
        if let Some(at) = next {
            let gen = self.director_gen;
            self.queue
                .push(Time(at.max(self.now.as_micros())), Ev::Director { gen });
        }
    }

    pub(super) fn follow_up(&mut self, f: FollowUp) {
        if !matches!(self.phase, Phase::Safety) {
            return;
        }
        let now = self.now.as_micros();
        match f {
            FollowUp::CrashNow { inst } => {
                if self.replicas[inst].up && self.replicas[inst].crash_at_next_send {
                    self.crash(inst, "no send within 50 ms");
                }
            }
            FollowUp::CancelCrashAfterPrepare { inst, ordered } => {
                let node = &mut self.replicas[inst];
                if node
                    .crash_after_prepare
                    .is_some_and(|(_, at)| at == ordered)
                {
                    node.crash_after_prepare = None;
                }
            }
            FollowUp::Restart { inst, with_state } => {
                if !self.replicas[inst].up {
                    self.restart(inst, with_state);
                }
            }
            FollowUp::Heal {
                mut links,
                flaps,
                dur_us,
            } => {
                rng::shuffle(&mut self.fault_rng, &mut links);
                let window = (dur_us / 2).min(500 * MS);
                for &(from, to) in &links {
                    let at = now + self.fault_rng.gen_range(0..=window);
                    self.queue
                        .push(Time(at), Ev::FollowUp(FollowUp::LinkUp { from, to }));
                }
                if flaps > 0 {
                    let at =
                        now + window + self.fault_rng.gen_range(100 * MS..=dur_us.max(100 * MS));
                    self.queue.push(
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
                trace_line!(self.trace, self.now, "re-cut {links:?}");
                self.cut(&links);
                self.queue.push(
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
                    self.net.set_link_delay(a, b, 0);
                }
            }
            FollowUp::LinkUp { from, to } => {
                trace_line!(
                    self.trace,
                    self.now,
                    "link-up {}->{}",
                    self.name(from),
                    self.name(to)
                );
                self.net.set_link(from, to, true);
            }
        }
    }

    // ---- phases ----------------------------------------------------------------------------
}
