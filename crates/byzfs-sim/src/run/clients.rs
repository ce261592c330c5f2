//! The clients: correct ones invoking their workload and checked by the oracle, and faulty
//! ones misbehaving on their own clock.

use super::{trace_line, ClientAction, Clock, Dest, Ev, KvResult, Phase, ReplicaId, Sim, Time, MS};
use byzfs_bft::client::Access;

impl Sim {
    pub(super) fn after_client_step(&mut self, idx: usize) {
        let node_idx = self.world.replicas.len() + idx;
        let n = self.config.n() as ReplicaId;
        while let Some(a) = self.world.clients[idx].client.poll_action() {
            match a {
                ClientAction::Send { to, bytes } => {
                    self.transmit(node_idx, Dest::Replica(to), &bytes)
                }
                ClientAction::Broadcast { bytes } => {
                    for r in 0..n {
                        self.transmit(node_idx, Dest::Replica(r), &bytes);
                    }
                }
                ClientAction::Completed { rid, result } => self.client_completed(idx, rid, result),
                ClientAction::Reissued { issued, rid } => self.client_reissued(idx, issued, rid),
            }
        }
        let now = self.world.now;
        let node = &mut self.world.clients[idx];
        let want = node
            .client
            .poll_timeout()
            .map(|d| Clock::default().global(d).max(Time(now.as_micros() + 1)));
        if want != node.timer {
            node.timer_gen += 1;
            node.timer = want;
            if let Some(t) = want {
                self.world.queue.push(
                    t,
                    Ev::ClientTimer {
                        idx,
                        gen: node.timer_gen,
                    },
                );
            }
        }
    }

    pub(super) fn client_completed(&mut self, idx: usize, rid: u64, result: Vec<u8>) {
        let id = self.world.clients[idx].id;
        if self.trace.on() {
            let r = if self.oracle.fs.is_some() {
                crate::fs::describe_result(&result)
            } else {
                KvResult::decode(&result)
                    .map(|r| format!("{r:?}"))
                    .unwrap_or_else(|| "<undecodable>".into())
            };
            trace_line!(self.trace, self.world.now, "complete c{id} rid={rid} {r}");
        }
        self.oracle.complete(self.world.now, id, rid, &result);
        let node = &mut self.world.clients[idx];
        if let Some((_, op)) = node.outstanding.remove(&rid) {
            node.workload.observe(&op, &result);
            node.completed += 1;
            if !node.thinking {
                node.thinking = true;
                let t = node
                    .workload
                    .think_us(matches!(self.phases.phase, Phase::Safety));
                self.world
                    .queue
                    .push(Time(self.world.now.as_micros() + t), Ev::Think { idx });
            }
        }
    }

    /// A read fell back to an ordered request under a new id: the checkers learn that the
    /// client issued it (it completes under the old one).
    fn client_reissued(&mut self, idx: usize, issued: u64, rid: u64) {
        let node = &self.world.clients[idx];
        let id = node.id;
        if let Some((_, op)) = node.outstanding.get(&issued) {
            let bytes = op.clone();
            trace_line!(
                self.trace,
                self.world.now,
                "reissue c{id} rid={issued} as rid={rid}"
            );
            self.oracle.issue(self.world.now, id, rid, &bytes, true);
        }
    }

    pub(super) fn think(&mut self, idx: usize) {
        let now = self.world.now;
        let phase = self.phases.phase;
        let filler = self.phases.filler;
        let cap = self.plan.params.safety_ops_max;
        let fs = self.oracle.fs.is_some();
        let read_apart = self.plan.params.workload.read_apart;
        let node = &mut self.world.clients[idx];
        node.thinking = false;
        if node.outstanding.len() >= node.window {
            return;
        }
        match phase {
            Phase::Safety if node.invoked >= cap => return,
            Phase::Liveness(_) if node.completed >= node.target && !filler => return,
            Phase::Done => return,
            _ => {}
        }
        let (bytes, ro) = node.workload.next_op();
        let access = match (ro, read_apart) {
            (false, _) => Access::Ordered,
            (true, false) => Access::Read,
            (true, true) => Access::ReadApart,
        };
        match node
            .client
            .invoke(Clock::default().local(now), bytes.clone(), access)
        {
            Ok(rid) => {
                node.invoked += 1;
                let id = node.id;
                node.outstanding.insert(rid, (now, bytes.clone()));
                if node.outstanding.len() < node.window {
                    // Room for more: the next one follows after its own think time.
                    node.thinking = true;
                    let t = node.workload.think_us(matches!(phase, Phase::Safety));
                    self.world
                        .queue
                        .push(Time(now.as_micros() + t), Ev::Think { idx });
                }
                trace_line!(
                    self.trace,
                    now,
                    "invoke c{id} rid={rid} {} ro={ro}",
                    super::describe_request(fs, &bytes)
                );
                self.oracle.issue(now, id, rid, &bytes, true);
            }
            Err(e) => {
                node.refused += 1;
                node.thinking = true;
                let id = node.id;
                let t = 50 * MS + node.workload.think_us(false);
                self.world
                    .queue
                    .push(Time(now.as_micros() + t), Ev::Think { idx });
                trace_line!(self.trace, now, "invoke c{id} refused: {e}");
            }
        }
        self.after_client_step(idx);
    }

    pub(super) fn bad_tick(&mut self, idx: usize) {
        // Faulty clients are faults, healed with the rest when the liveness phase starts
        // ("faults healed, ≤ f Byzantine replicas remain"). Against a client that keeps sending
        // partially valid MACs, MAC-only PBFT cannot promise progress (the "Big MAC" attack,
        // docs/PROTOCOL.md §1.14/§5.3); signed client requests (Aardvark) are the fix.
        if matches!(self.phases.phase, Phase::Liveness(_)) {
            trace_line!(
                self.trace,
                self.world.now,
                "bad client {idx} stops (faults healed)"
            );
            return;
        }
        let primary = self.current_primary();
        let node_idx = self.world.replicas.len() + self.world.clients.len() + idx;
        let n = self.config.n() as ReplicaId;
        let (node, rng) = &mut self.world.bad[idx];
        let id = node.client.id;
        let period = node.period_us;
        let sends = node.client.tick(rng, primary);
        for s in sends {
            trace_line!(
                self.trace,
                self.world.now,
                "bad c{id} {} rid={} to={:?}",
                s.what,
                s.issued.as_ref().map_or(0, |i| i.0),
                s.to
            );
            if let Some((rid, op)) = &s.issued {
                self.oracle.issue(self.world.now, id, *rid, op, false);
            }
            for r in s.to {
                if r < n {
                    self.transmit(node_idx, Dest::Replica(r), &s.bytes);
                }
            }
        }
        self.world.queue.push(
            Time(self.world.now.as_micros() + period),
            Ev::BadTick { idx },
        );
    }

    // ---- faults ----------------------------------------------------------------------------
}
