//! The phases after the safety phase: healing for the liveness phase, then waiting until
//! every correct client finished its quota and lagging replicas caught up, or the bound.

use super::{trace_line, ClientProgress, Ev, Lagging, Liveness, NetFaults, Phase, Role, Seq, Sim};

/// Which phase the run is in and how far the end of the liveness phase is.
pub(super) struct Phases {
    pub(super) phase: Phase,
    /// Every correct client finished its quota and lagging replicas caught up.
    pub(super) converged: bool,
    /// The sequence number lagging replicas must reach.
    pub(super) catchup_target: Option<Seq>,
    pub(super) filler: bool,
}

impl Sim {
    pub(super) fn start_liveness(&mut self) {
        let l = Liveness {
            start: self.world.now,
            bound_us: self.plan.params.liveness_bound_us,
        };
        self.phases.phase = Phase::Liveness(l);
        trace_line!(
            self.trace,
            self.world.now,
            "liveness phase: heal everything; bound {} s",
            l.bound_us / 1_000_000
        );
        self.world.net.set_faults(NetFaults::benign());
        self.world.net.heal_all();
        self.apply_twin_links();
        for inst in 0..self.world.replicas.len() {
            let twin_not_started = inst >= self.config.n()
                && !self.world.replicas[inst].up
                && self.world.replicas[inst].restarts == 0;
            if twin_not_started {
                continue;
            }
            self.world.replicas[inst].crash_at_next_send = false;
            self.world.replicas[inst].crash_after_prepare = None;
            self.world.replicas[inst].crash_after_proposal = None;
            self.world.replicas[inst].cut_all_after_transfer = None;
            if !self.world.replicas[inst].up {
                let with_state = self.world.replicas[inst].restart_with_state;
                self.restart(inst, with_state);
            }
        }
        let new_ops = self.plan.params.liveness_new_ops;
        for idx in 0..self.world.clients.len() {
            let c = &mut self.world.clients[idx];
            c.target = c.completed + c.outstanding.len() as u64 + new_ops;
            if c.outstanding.len() < c.window && !c.thinking {
                c.thinking = true;
                self.world.queue.push(self.world.now, Ev::Think { idx });
            }
        }
        self.world.queue.push(l.deadline(), Ev::Deadline);
    }

    pub(super) fn client_progress(&self) -> Vec<ClientProgress> {
        self.world
            .clients
            .iter()
            .map(|c| ClientProgress {
                client: c.id,
                completed: c.completed,
                target: c.target,
                outstanding: c.outstanding.iter().next().map(|(r, (t, _))| (*r, *t)),
                refused: c.refused,
            })
            .collect()
    }

    /// Honest-code replicas with a correct clock that are up and must catch up.
    pub(super) fn lagging(&self, target: Seq) -> Vec<Lagging> {
        self.world
            .replicas
            .iter()
            .enumerate()
            .filter(|(_, r)| r.up && matches!(r.role, Role::Correct | Role::Amnesiac))
            .filter(|(_, r)| !self.plan.clock_faulty.contains(&r.id))
            .filter(|(_, r)| {
                r.replica.last_stable() < target
                    && (self.plan.params.stable_at_rest || r.replica.last_executed() < target)
            })
            .map(|(inst, r)| Lagging {
                inst,
                last_executed: r.replica.last_executed(),
                last_stable: r.replica.last_stable(),
                target,
            })
            .collect()
    }

    /// The liveness phase converges in three stages: (1) every correct client completed its
    /// quota and every accepted write is agreed — the catch-up target is then the highest
    /// sequence number holding an accepted write; (2) while a correct replica lags behind the
    /// target, clients keep issuing operations (a replica left alone in a higher view, say,
    /// catches up through the next stable checkpoint) — unless the plan wants the cluster
    /// quiet (`Params::quiet_catch_up`: it must catch up on what is there); (3) clients stop, and the run ends
    /// once their last requests completed and are agreed.
    pub(super) fn check_converged(&mut self) {
        let Phase::Liveness(_) = self.phases.phase else {
            return;
        };
        let target = match self.phases.catchup_target {
            Some(t) => t,
            None => {
                if !Liveness::clients_done(&self.client_progress())
                    || self.oracle.outcomes().unplaced_writes() > 0
                {
                    return;
                }
                let t = self.oracle.outcomes().acked_write_max_seq();
                self.phases.catchup_target = Some(t);
                t
            }
        };
        if !self.lagging(target).is_empty() {
            if !self.phases.filler && !self.plan.params.quiet_catch_up {
                self.phases.filler = true;
                trace_line!(
                    self.trace,
                    self.world.now,
                    "catch-up: replicas lag behind seq {target}; clients keep going"
                );
                for idx in 0..self.world.clients.len() {
                    let c = &mut self.world.clients[idx];
                    if c.outstanding.len() < c.window && !c.thinking {
                        c.thinking = true;
                        self.world.queue.push(self.world.now, Ev::Think { idx });
                    }
                }
            }
            return;
        }
        self.phases.filler = false;
        if self.world.clients.iter().any(|c| !c.outstanding.is_empty())
            || self.oracle.outcomes().unplaced_writes() > 0
        {
            return;
        }
        trace_line!(
            self.trace,
            self.world.now,
            "converged: clients done, replicas through seq {target}"
        );
        self.phases.converged = true;
        self.phases.phase = Phase::Done;
    }

    pub(super) fn deadline(&mut self) {
        let Phase::Liveness(l) = self.phases.phase else {
            return;
        };
        let target = self
            .phases
            .catchup_target
            .unwrap_or_else(|| self.oracle.outcomes().acked_write_max_seq());
        let lagging = self.lagging(target);
        let clients = self.client_progress();
        l.report(&mut self.oracle.sink, self.world.now, &clients, &lagging);
        self.phases.phase = Phase::Done;
    }
}
