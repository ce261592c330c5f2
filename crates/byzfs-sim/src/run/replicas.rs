//! Stepping a replica instance: its input, the actions it drains (sends, durable records,
//! events, timers), its disk (synced and unsynced records), crashes and restarts.

use super::{
    fresh_replica, restart_with_state, substream, trace_line, Action, Arc, Ctx, Dest, Ev, Event,
    FollowUp, Frame, Input, Mutation, Outgoing, PersistRecord, Purpose, ReplicaId, Rng, Role,
    ServiceKind, Sim, StoreRecord, Tag, Time, Unsynced,
};

impl Sim {
    pub(super) fn step_replica(&mut self, inst: usize, input: Input<'_>) {
        let node = &mut self.world.replicas[inst];
        if !node.up {
            return;
        }
        let local = node.clock.local(self.world.now);
        match input {
            Input::Message(b) => node.replica.handle_message(local, b),
            Input::Timeout => node.replica.handle_timeout(local),
            Input::Reachability(peer, reachable) => {
                node.replica.handle_reachability(local, peer, reachable)
            }
        }
        self.after_replica_step(inst);
    }

    pub(super) fn after_replica_step(&mut self, inst: usize) {
        let busy_us = self.drain_replica(inst);
        if self.world.replicas[inst].up {
            if busy_us > 0 {
                self.busy(inst, busy_us);
            }
            self.oracle
                .step_end(self.world.now, inst, &self.world.replicas[inst].replica);
            self.arm_replica_timer(inst);
        }
    }

    /// Drains `inst`'s actions; returns how long its step kept it busy executing, µs (0
    /// outside `slow-execution`). The step executes where its `Executed` events are: what it
    /// sends after one leaves when that execution ends.
    pub(super) fn drain_replica(&mut self, inst: usize) -> u64 {
        let n = self.config.n() as ReplicaId;
        self.world.replicas[inst].lazy_turn = false;
        self.world.out_delay_us = 0;
        loop {
            let node = &mut self.world.replicas[inst];
            if !node.up {
                break;
            }
            let Some(action) = node.replica.poll_action() else {
                break;
            };
            match action {
                Action::Persist(rec) => {
                    trace_line!(
                        self.trace,
                        self.world.now,
                        "persist {} {rec:?}",
                        self.name(inst)
                    );
                    match rec {
                        // The disk driver appends these without a sync.
                        PersistRecord::Executed { .. } => {
                            self.world.replicas[inst]
                                .unsynced
                                .push(Unsynced::Persist(rec));
                        }
                        PersistRecord::Proposed { .. } | PersistRecord::Voted { .. } => {
                            self.oracle.proposed(inst, rec);
                            let node = &mut self.world.replicas[inst];
                            node.unsynced.push(Unsynced::Persist(rec));
                            node.lazy_turn = true;
                        }
                        // Views, abstentions and vote horizons go to redb: the log is
                        // not synced.
                        PersistRecord::View(_)
                        | PersistRecord::Abstain(_)
                        | PersistRecord::AbstainUpTo { .. }
                        | PersistRecord::VoteHorizon(_) => self.make_durable(inst, rec),
                        _ => {
                            self.world.replicas[inst].lazy_turn = false;
                            self.sync_log(inst);
                            self.make_durable(inst, rec);
                        }
                    }
                }
                Action::Sync => {
                    trace_line!(self.trace, self.world.now, "sync {}", self.name(inst));
                    self.sync_log(inst);
                }
                Action::Store(rec) => {
                    // Batches are synced log appends, except with a `Proposed` (the
                    // driver's turn is then unsynced); a stored checkpoint syncs the
                    // segment it leaves, and waits for its service's disk work
                    // (`disk_work.rs`).
                    let node = &mut self.world.replicas[inst];
                    if node.lazy_turn && matches!(rec, StoreRecord::Batch { .. }) {
                        node.unsynced.push(Unsynced::Store(rec));
                    } else {
                        self.sync_log(inst);
                        self.store_checkpoint(inst, rec);
                    }
                }
                Action::Event(ev) => {
                    trace_line!(
                        self.trace,
                        self.world.now,
                        "event {} {ev:?}",
                        self.name(inst)
                    );
                    if let (Some(slow), Event::Executed { requests, .. }) =
                        (self.plan.slow_execution, &ev)
                    {
                        // The step executes here: what it sends after this leaves later.
                        let cost: u64 = requests
                            .iter()
                            .map(|&(c, rid)| slow.cost_us(self.seed, c, rid))
                            .sum();
                        if cost > 0 {
                            self.world.out_delay_us += cost;
                            trace_line!(
                                self.trace,
                                self.world.now,
                                "busy {} executing for {cost}µs",
                                self.name(inst)
                            );
                        }
                    }
                    self.oracle.event(self.world.now, inst, &ev);
                    let id = self.world.replicas[inst].id;
                    let correct = self.oracle.is_correct(inst);
                    if correct && self.oracle.fs.is_some() {
                        self.fs_checkpoint(inst, &ev);
                    }
                    if let Event::StateTransferred { .. } = ev {
                        if let Some((after_us, down_us, amnesiac, _)) =
                            self.world.replicas[inst].cut_all_after_transfer.take()
                        {
                            self.world.queue.push(
                                Time(self.world.now.as_micros() + after_us),
                                Ev::FollowUp(FollowUp::CutAll { down_us, amnesiac }),
                            );
                        }
                    }
                    if let Some(d) = self.director.history.as_mut().filter(|_| correct) {
                        if d.observe(id, &ev) {
                            self.director.gen += 1;
                            let gen = self.director.gen;
                            self.world.queue.push(self.world.now, Ev::Director { gen });
                        }
                    }
                }
                Action::Send { to, bytes } => self.replica_out(inst, &[Dest::Replica(to)], bytes),
                Action::Broadcast { bytes } => {
                    let me = self.world.replicas[inst].id;
                    let dests: Vec<Dest> = (0..n).filter(|&j| j != me).map(Dest::Replica).collect();
                    self.replica_out(inst, &dests, bytes);
                }
                Action::SendClient { client, bytes } => {
                    self.replica_out(inst, &[Dest::Client(client)], bytes)
                }
            }
        }
        std::mem::take(&mut self.world.out_delay_us)
    }

    /// A correct replica's checkpoint became stable, or was installed: the tree checker reads
    /// it back from what the replica would send a fetcher.
    fn fs_checkpoint(&mut self, inst: usize, ev: &Event) {
        let (seq, how) = match *ev {
            Event::CheckpointStable { seq, .. } => (seq, "stable"),
            Event::StateTransferred { seq, .. } => (seq, "transferred"),
            _ => return,
        };
        let service = self.world.replicas[inst].replica.service();
        // A later step's checkpoint may already have replaced it: nothing to read then.
        if let Some(tree) = self.world.fs_reader.read(service, seq) {
            self.oracle
                .fs_checkpoint(self.world.now, inst, seq, tree, how);
        }
    }

    pub(super) fn replica_out(&mut self, inst: usize, dests: &[Dest], bytes: Arc<[u8]>) {
        if self.world.replicas[inst].crash_at_next_send {
            self.crash(inst, "before a send");
            return;
        }
        if self.world.replicas[inst].adversary.is_none() {
            self.oracle.send(self.world.now, inst, &bytes);
            self.oracle.emit(self.world.replicas[inst].id, &bytes);
            for &d in dests {
                self.transmit(inst, d, &bytes);
            }
            let node = &self.world.replicas[inst];
            let armed = node
                .crash_after_prepare
                .map(|(d, _)| (d, Tag::Prepare, "after a PREPARE"))
                .or(node
                    .crash_after_proposal
                    .map(|(d, _)| (d, Tag::PrePrepare, "after a PRE-PREPARE")));
            if let Some((down_us, tag, how)) = armed {
                let sent = Frame::parse(&bytes, usize::MAX).is_ok_and(|f| f.header.tag == tag);
                if sent {
                    self.crash(inst, how);
                    self.world.queue.push(
                        Time(self.world.now.as_micros() + down_us),
                        Ev::FollowUp(FollowUp::Restart {
                            inst,
                            with_state: true,
                        }),
                    );
                }
            }
            return;
        }
        let mut outs = Vec::new();
        {
            let node = &mut self.world.replicas[inst];
            let view = node.replica.view();
            // Checked just above: this replica has an adversary.
            let adv = node.adversary.as_mut().expect("adversary present");
            let mut ctx = Ctx {
                now: self.world.now,
                view,
                config: &self.config,
                forger: &adv.forger,
                rng: &mut adv.rng,
                replica: Some(&node.replica),
            };
            for &d in dests {
                outs.extend(
                    adv.strategy
                        .on_send(&mut ctx, Outgoing::now(d, bytes.clone())),
                );
            }
        }
        let id = self.world.replicas[inst].id;
        for o in outs {
            self.oracle.emit(id, &o.bytes);
            if o.delay_us > 0 {
                self.world.queue.push(
                    Time(self.world.now.as_micros() + o.delay_us),
                    Ev::Emit {
                        from: inst,
                        to: o.to,
                        bytes: o.bytes,
                    },
                );
            } else {
                self.transmit(inst, o.to, &o.bytes);
            }
        }
    }

    pub(super) fn arm_replica_timer(&mut self, inst: usize) {
        let now = self.world.now;
        let node = &mut self.world.replicas[inst];
        let want = node
            .replica
            .poll_timeout()
            .map(|d| node.clock.global(d).max(Time(now.as_micros() + 1)));
        if want == node.timer {
            return;
        }
        node.timer_gen += 1;
        node.timer = want;
        if let Some(t) = want {
            self.world.queue.push(
                t,
                Ev::ReplicaTimer {
                    inst,
                    gen: node.timer_gen,
                },
            );
        }
    }

    /// `rec` of `inst` is on its disk.
    pub(super) fn make_durable(&mut self, inst: usize, rec: PersistRecord) {
        self.oracle.persist(inst, rec);
        self.world.replicas[inst].disk.apply_persist(rec);
    }

    /// A synced log append by `inst`: every record appended before it is durable too.
    pub(super) fn sync_log(&mut self, inst: usize) {
        for u in std::mem::take(&mut self.world.replicas[inst].unsynced) {
            self.append(inst, u);
        }
    }

    /// An unsynced append of `inst` reaches its disk.
    pub(super) fn append(&mut self, inst: usize, u: Unsynced) {
        match u {
            Unsynced::Persist(rec) => self.make_durable(inst, rec),
            Unsynced::Store(rec) => self.world.replicas[inst].disk.apply_store(&rec),
        }
    }

    pub(super) fn crash(&mut self, inst: usize, how: &str) {
        // The unsynced log tail: a prefix of it reached the disk, the rest is lost.
        let node = &mut self.world.replicas[inst];
        let mut torn = substream(
            node.seed,
            Purpose::TornLogs,
            (inst as u64) << 16 | (node.restarts & 0xFFFF),
        );
        let kept = torn.gen_range(0..=node.unsynced.len());
        node.kept_all = kept == node.unsynced.len();
        let tail = std::mem::take(&mut node.unsynced);
        trace_line!(
            self.trace,
            self.world.now,
            "torn log {}: {kept} of {} unsynced records kept",
            self.name(inst),
            tail.len()
        );
        for u in tail.into_iter().take(kept) {
            self.append(inst, u);
        }
        let node = &mut self.world.replicas[inst];
        node.up = false;
        // Its process is gone: the store it opened writes nothing more (`fs/disk.rs`), nor
        // does its disk worker.
        node.store_disk.crash();
        node.disk_work.lose();
        node.crash_at_next_send = false;
        node.crash_after_prepare = None;
        node.crash_after_proposal = None;
        node.cut_all_after_transfer = None;
        node.timer = None;
        node.timer_gen += 1;
        // What waited for it to finish executing is lost with it.
        self.world.deferred[inst].clear();
        self.world.busy_until[inst] = Time::ZERO;
        trace_line!(
            self.trace,
            self.world.now,
            "crash {} ({how})",
            self.name(inst)
        );
        self.schedule_reachability(inst);
    }

    /// With `report_reachability`, the others' drivers notice 1 ms after a crash or restart
    /// of `inst` (a redial refused, or accepted) whether its replica id is up.
    fn schedule_reachability(&mut self, inst: usize) {
        if !self.plan.params.report_reachability {
            return;
        }
        let id = self.world.replicas[inst].id;
        let at = Time(self.world.now.as_micros() + 1_000);
        self.world.queue.push(at, Ev::Reachability { id });
    }

    /// Tells every other up replica whether some instance of replica `id` is up.
    pub(super) fn report_reachability(&mut self, id: ReplicaId) {
        let reachable = self.world.replicas.iter().any(|r| r.id == id && r.up);
        trace_line!(
            self.trace,
            self.world.now,
            "r{id} {}",
            if reachable {
                "reachable"
            } else {
                "unreachable"
            }
        );
        for inst in 0..self.world.replicas.len() {
            if self.world.replicas[inst].id != id {
                self.step_replica(inst, Input::Reachability(id, reachable));
            }
        }
    }

    pub(super) fn restart(&mut self, inst: usize, with_state: bool) {
        let now = self.world.now;
        let mutation = self.mutation;
        let node = &mut self.world.replicas[inst];
        node.restarts += 1;
        let seed = node
            .seed
            .wrapping_add(node.restarts.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let stepped = node.clock_at_restart.take().map(|offset_us| {
            let before = node.clock.local(now);
            node.clock.offset_us = offset_us;
            node.clock.local(now).as_micros() as i64 - before.as_micros() as i64
        });
        let local = node.clock.local(now);
        let fs_mutation = self.fs_mutation.filter(|_| node.role == Role::Correct);
        if self.plan.family.service() == ServiceKind::FsDisk {
            // The store's disk after the crash. A torn log means the power went: the store
            // loses its unsynced writes too. A crash that kept every append was a killed
            // process (the store keeps them all) or a power cut between syncs, by a draw.
            // With no checkpoint in the replica's log the store starts fresh, as
            // `byzfs replica` opens it; after an amnesia restart the disk is empty.
            let mut cut = substream(
                node.seed,
                Purpose::DiskCuts,
                (inst as u64) << 16 | (node.restarts & 0xFFFF),
            );
            if !with_state || node.disk.checkpoint.is_none() {
                node.store_disk.wipe();
            } else if !node.kept_all || cut.gen_bool(0.5) {
                node.store_disk.power_cut();
            }
        }
        let service = super::new_service(&self.plan, fs_mutation, &node.store_disk);
        if with_state {
            // Rebuilt from what it stored; everything volatile is gone. A crash that tore off
            // part of the log may have lost proposals: the disk vouches for them only if it
            // kept every append (as after a process crash; or if mutated to).
            let mut disk = node.disk.clone();
            disk.proposals_durable =
                node.kept_all || mutation == Some(Mutation::TrustProposalsAfterCrash);
            if mutation == Some(Mutation::ForgetVoteHorizon) {
                disk.records
                    .retain(|r| !matches!(r, PersistRecord::VoteHorizon(_)));
            }
            node.replica =
                restart_with_state(&self.config, &node.keys, service, &disk, seed, local);
        } else {
            // Amnesia: a fresh replica with an empty disk.
            node.replica = fresh_replica(&self.config, &node.keys, service, seed, local);
            node.disk = Default::default();
            node.role = Role::Amnesiac;
            self.oracle.set_role(inst, Role::Amnesiac);
        }
        if node.role == Role::Correct {
            node.replica.set_mutation(mutation);
        }
        node.up = true;
        node.crash_at_next_send = false;
        self.oracle.restart(inst, with_state);
        trace_line!(
            self.trace,
            self.world.now,
            "restart {} with_state={with_state}{}",
            self.name(inst),
            stepped.map_or(String::new(), |d| format!(" clock stepped {d:+}µs"))
        );
        self.after_replica_step(inst);
        self.schedule_reachability(inst);
    }
}
