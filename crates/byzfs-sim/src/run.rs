//! One seed → one [`RunReport`]: build the world from the plan, run the safety phase (faults
//! active, checkers online after every step), then the liveness phase (network healed, crashed
//! replicas restarted with their durable state, Byzantine replicas and faulty clients still
//! misbehaving) until every correct client finished its quota and lagging replicas caught up,
//! or the bound expires. Work is bounded by [`RunConfig::max_events`].

use crate::byzantine::bad_client::BadClient;
use crate::byzantine::forge::Forger;
use crate::byzantine::{Ctx, Dest, Outgoing};
use crate::checker::durability::{self, ReplicaProgress};
use crate::checker::liveness::{ClientProgress, Lagging, Liveness};
use crate::checker::{describe_op, Oracle, Role, Violation};
use crate::clock::Clock;
use crate::fault::{Fault, FollowUp, Target};
use crate::kv::{KvResult, KvService};
use crate::network::{Fate, NetFaults, NetStats, Network, NodeIdx};
use crate::node::{
    restart_with_state, Adversary, BadClientNode, ClientNode, ReplicaNode, Unsynced,
};
use crate::partition::{self, Topology};
use crate::queue::EventQueue;
use crate::rng::{self, stream, substream, Purpose, SimRng};
use crate::scenario::{self, Family, Plan};
use crate::trace::{describe, Trace};
use crate::trace_line;
use crate::vc_history::{self, VcHistory};
use crate::workload::Workload;
use byzfs_bft::message::Tag;
use byzfs_bft::mutation::Mutation;
use byzfs_bft::wire::Frame;
use byzfs_bft::{
    Action, Client, ClientAction, ClientId, Config, Event, PersistRecord, Replica, ReplicaId, Seq,
    StoreRecord, TestKeys, Time, View,
};
use core::time::Duration;
use rand::Rng;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Default bound on events per run.
pub const EVENTS_MAX: u64 = 1_000_000;
/// Checker name for a run that exhausted its event budget.
pub const BUDGET: &str = "budget";
/// First id of correct clients.
pub const CLIENT_ID_BASE: ClientId = 100;
/// First id of faulty clients.
pub const BAD_CLIENT_ID_BASE: ClientId = 900;
const MS: u64 = 1_000;

/// What to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunConfig {
    /// The seed.
    pub seed: u64,
    /// The scenario family.
    pub family: Family,
    /// Fix `n` instead of drawing it.
    pub replicas: Option<usize>,
    /// A broken rule switched on in every correct replica.
    pub mutation: Option<Mutation>,
    /// Record a trace.
    pub trace: bool,
    /// Event budget.
    pub max_events: u64,
}

impl RunConfig {
    /// Defaults for `seed` in `family`.
    pub fn new(seed: u64, family: Family) -> RunConfig {
        RunConfig {
            seed,
            family,
            replicas: None,
            mutation: None,
            trace: false,
            max_events: EVENTS_MAX,
        }
    }
}

/// Counters of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Events processed.
    pub events: u64,
    /// Virtual time at the end, µs.
    pub virtual_us: u64,
    /// Operations correct clients completed.
    pub ops_completed: u64,
    /// Invocations refused.
    pub ops_refused: u64,
    /// Highest agreed sequence number.
    pub agreed_seq: Seq,
    /// Highest view a correct replica reached.
    pub view_max: View,
    /// Results checked by the oracle.
    pub results_checked: u64,
    /// Read-only answers of correct replicas checked against their committed prefix, and of
    /// those, answered while a batch had executed tentatively.
    pub read_only_checked: (u64, u64),
    /// Network counters.
    pub net: NetStats,
}

/// The outcome of one run.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// Seed.
    pub seed: u64,
    /// Family.
    pub family: Family,
    /// Replicas.
    pub n: usize,
    /// Parameter summary.
    pub summary: String,
    /// Violations (empty: passed).
    pub violations: Vec<Violation>,
    /// Counters.
    pub stats: RunStats,
    /// Whether the liveness phase completed in time.
    pub converged: bool,
    /// The trace (empty unless requested).
    pub trace: String,
}

impl RunReport {
    /// The command that replays this run.
    pub fn replay_command(&self, mutation: Option<Mutation>) -> String {
        let m = mutation
            .map(|m| format!(" --mutation {}", m.name()))
            .unwrap_or_default();
        format!(
            "byzfs-sim --seeds {}..{} --scenario {} --replicas {}{m}",
            self.seed,
            self.seed + 1,
            self.family.name(),
            self.n
        )
    }
}

enum Ev {
    Deliver {
        from: NodeIdx,
        to: NodeIdx,
        bytes: Arc<[u8]>,
    },
    Emit {
        from: NodeIdx,
        to: Dest,
        bytes: Arc<[u8]>,
    },
    ReplicaTimer {
        inst: usize,
        gen: u64,
    },
    ClientTimer {
        idx: usize,
        gen: u64,
    },
    Think {
        idx: usize,
    },
    BadTick {
        idx: usize,
    },
    Fault(Fault),
    FollowUp(FollowUp),
    Liveness,
    Deadline,
    Director {
        gen: u64,
    },
    /// A replica busy executing (`slow-execution`) may be free now: it takes its deferred
    /// input.
    ReplicaFree {
        inst: usize,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Safety,
    Liveness(Liveness),
    Done,
}

enum Input<'a> {
    Message(&'a [u8]),
    Timeout,
}

struct Sim {
    seed: u64,
    plan: Plan,
    config: Config,
    mutation: Option<Mutation>,
    now: Time,
    queue: EventQueue<Ev>,
    net: Network,
    topo: Topology,
    replicas: Vec<ReplicaNode>,
    clients: Vec<ClientNode>,
    bad: Vec<(BadClientNode, SimRng)>,
    client_node: BTreeMap<ClientId, NodeIdx>,
    oracle: Oracle,
    trace: Trace,
    fault_rng: SimRng,
    twin_sides: Vec<u8>,
    phase: Phase,
    converged: bool,
    catchup_target: Option<Seq>,
    filler: bool,
    events: u64,
    director: Option<VcHistory>,
    director_gen: u64,
    /// Per replica instance: until when it is busy executing (`slow-execution`), and the
    /// input that reached it meanwhile, in arrival order.
    busy_until: Vec<Time>,
    deferred: Vec<VecDeque<Ev>>,
    /// While a replica's actions are drained: how long it has executed so far in its step,
    /// so how long after now what it sends next leaves.
    out_delay_us: u64,
}

fn fresh_replica(
    config: &Config,
    node_keys: &byzfs_bft::ReplicaKeys,
    service: KvService,
    seed: u64,
    now: Time,
) -> Replica<KvService> {
    let mut r = Replica::new(config.clone(), node_keys.clone(), service, seed, now);
    // Every simulated replica has a disk (`ReplicaNode::disk`) for restarts with state.
    r.set_store_state(true);
    r
}

impl Sim {
    fn new(cfg: &RunConfig) -> Result<Sim, String> {
        let plan = scenario::plan(cfg.seed, cfg.family, cfg.replicas)?;
        let config = plan.params.config.clone();
        let n = config.n();
        let seed = cfg.seed;
        let keys = TestKeys::new(seed, n);
        let correct_ids: Vec<ClientId> = (0..plan.params.clients as u64)
            .map(|i| CLIENT_ID_BASE + i)
            .collect();
        let bad_ids: Vec<ClientId> = (0..plan.bad_clients.len() as u64)
            .map(|i| BAD_CLIENT_ID_BASE + i)
            .collect();
        let all_ids: Vec<ClientId> = correct_ids.iter().chain(&bad_ids).copied().collect();
        let mut seeds = stream(seed, Purpose::ReplicaSeeds);
        let start = Time::ZERO;

        let mut ids: Vec<ReplicaId> = (0..n as ReplicaId).collect();
        if let Some((t, _)) = plan.twin {
            ids.push(t);
        }
        let mut replicas = Vec::new();
        let mut roles = Vec::new();
        for (inst, &id) in ids.iter().enumerate() {
            let node_keys = keys.replica(id, all_ids.iter().copied());
            let rseed: u64 = seeds.gen();
            let clock = Clock::drifting(
                plan.clock_offsets_us[id as usize],
                plan.clock_drift_ppm[id as usize],
            );
            let role = if inst >= n {
                Role::Twin
            } else {
                plan.roles[id as usize]
            };
            let service = KvService::with_clock_tolerance(plan.clock_tolerance);
            let mut replica =
                fresh_replica(&config, &node_keys, service, rseed, clock.local(start));
            if role == Role::Correct {
                replica.set_mutation(cfg.mutation);
            }
            let adversary = plan
                .byzantine
                .iter()
                .find(|(b, _)| *b == id && inst < n)
                .map(|&(_, kind)| {
                    let mut arng = substream(seed, Purpose::Byzantine, id as u64);
                    Adversary {
                        strategy: kind.build(id, &config, &mut arng),
                        forger: Forger::new(node_keys.clone(), config.message_bytes_max),
                        rng: arng,
                    }
                });
            let up = !(inst >= n && plan.twin.is_some_and(|(_, s)| s > 0));
            roles.push(role);
            replicas.push(ReplicaNode {
                id,
                role,
                replica,
                up,
                crash_at_next_send: false,
                crash_after_prepare: None,
                restart_with_state: true,
                clock,
                clock_at_restart: None,
                timer: None,
                timer_gen: 0,
                adversary,
                keys: node_keys,
                restarts: 0,
                seed: rseed,
                disk: Default::default(),
                unsynced: Vec::new(),
                lazy_turn: false,
                kept_all: false,
            });
        }
        let r_count = replicas.len();
        let mut client_seeds = stream(seed, Purpose::ClientSeeds);
        let mut clients = Vec::new();
        let mut client_node = BTreeMap::new();
        for (i, &c) in correct_ids.iter().enumerate() {
            client_node.insert(c, r_count + i);
            clients.push(ClientNode {
                id: c,
                client: Client::new(config.clone(), keys.client(c), client_seeds.gen()),
                workload: Workload::new(
                    plan.params.workload.clone(),
                    c,
                    substream(seed, Purpose::Workload, i as u64),
                ),
                outstanding: None,
                completed: 0,
                invoked: 0,
                refused: 0,
                target: 0,
                timer: None,
                timer_gen: 0,
                thinking: false,
            });
        }
        let mut bad = Vec::new();
        for (j, (&c, &period_us)) in bad_ids.iter().zip(&plan.bad_clients).enumerate() {
            client_node.insert(c, r_count + clients.len() + j);
            let mut rng = substream(seed, Purpose::BadClients, j as u64);
            let victim = correct_ids.first().copied().unwrap_or(CLIENT_ID_BASE);
            bad.push((
                BadClientNode {
                    client: BadClient::new(c, keys.client(c), victim, config.epoch, n, &mut rng),
                    period_us,
                },
                rng,
            ));
        }
        let nodes = r_count + clients.len() + bad.len();
        let mut topo = Topology {
            replicas: vec![Vec::new(); n],
            clients: (r_count..nodes).collect(),
        };
        for (inst, &id) in ids.iter().enumerate() {
            topo.replicas[id as usize].push(inst);
        }
        let mut oracle = Oracle::new(
            seed,
            cfg.family.name(),
            roles,
            config.message_bytes_max,
            config.read_only_optimisation,
        );
        oracle.stable_view.expected = plan.stable_view;
        let net = Network::new(
            nodes,
            plan.params.net.clone(),
            stream(seed, Purpose::Network),
        );
        Ok(Sim {
            seed,
            config,
            mutation: cfg.mutation,
            now: start,
            queue: EventQueue::new(),
            net,
            topo,
            replicas,
            clients,
            bad,
            client_node,
            oracle,
            trace: Trace::new(cfg.trace),
            fault_rng: stream(seed, Purpose::FaultRuntime),
            twin_sides: Vec::new(),
            phase: Phase::Safety,
            converged: false,
            catchup_target: None,
            filler: false,
            events: 0,
            director: None,
            director_gen: 0,
            busy_until: vec![Time::ZERO; r_count],
            deferred: (0..r_count).map(|_| VecDeque::new()).collect(),
            out_delay_us: 0,
            plan,
        })
    }

    fn name(&self, node: NodeIdx) -> String {
        let n = self.config.n();
        if node < self.replicas.len() {
            let id = self.replicas[node].id;
            if node >= n {
                format!("r{id}'")
            } else {
                format!("r{id}")
            }
        } else if let Some((c, _)) = self.client_node.iter().find(|(_, &i)| i == node) {
            format!("c{c}")
        } else {
            format!("node{node}")
        }
    }

    fn start(&mut self) {
        trace_line!(
            self.trace,
            self.now,
            "start seed={} scenario={} {}",
            self.seed,
            self.plan.family.name(),
            self.plan.summary()
        );
        for inst in 0..self.replicas.len() {
            if self.replicas[inst].up {
                self.after_replica_step(inst);
            }
        }
        for idx in 0..self.clients.len() {
            let t = self.clients[idx].workload.think_us(true);
            self.clients[idx].thinking = true;
            self.queue.push(Time(t), Ev::Think { idx });
        }
        for idx in 0..self.bad.len() {
            let p = self.bad[idx].0.period_us;
            self.queue.push(Time(p), Ev::BadTick { idx });
        }
        for (at, f) in self.plan.faults.clone() {
            self.queue.push(Time(at), Ev::Fault(f));
        }
        self.queue
            .push(Time(self.plan.params.safety_us), Ev::Liveness);
    }

    // ---- replicas ------------------------------------------------------------------------

    fn step_replica(&mut self, inst: usize, input: Input<'_>) {
        let node = &mut self.replicas[inst];
        if !node.up {
            return;
        }
        let local = node.clock.local(self.now);
        match input {
            Input::Message(b) => node.replica.handle_message(local, b),
            Input::Timeout => node.replica.handle_timeout(local),
        }
        self.after_replica_step(inst);
    }

    fn after_replica_step(&mut self, inst: usize) {
        let busy_us = self.drain_replica(inst);
        if self.replicas[inst].up {
            if busy_us > 0 {
                self.busy(inst, busy_us);
            }
            self.oracle
                .step_end(self.now, inst, &self.replicas[inst].replica);
            self.arm_replica_timer(inst);
        }
    }

    /// `inst`'s last step executed for `busy_us`: it takes no input until it is done (what
    /// reaches it meanwhile waits, in arrival order), and the driver reports the time to the
    /// core, as `byzfs-net`'s event loop does after a long step.
    fn busy(&mut self, inst: usize, busy_us: u64) {
        let until = Time(self.now.as_micros() + busy_us);
        self.busy_until[inst] = self.busy_until[inst].max(until);
        if self.mutation != Some(Mutation::IgnoreBusyTime) {
            self.replicas[inst]
                .replica
                .busy_for(Duration::from_micros(busy_us));
        }
        self.queue.push(until, Ev::ReplicaFree { inst });
    }

    /// Drains `inst`'s actions; returns how long its step kept it busy executing, µs (0
    /// outside `slow-execution`). The step executes where its `Executed` events are: what it
    /// sends after one leaves when that execution ends.
    fn drain_replica(&mut self, inst: usize) -> u64 {
        let n = self.config.n() as ReplicaId;
        self.replicas[inst].lazy_turn = false;
        self.out_delay_us = 0;
        loop {
            let node = &mut self.replicas[inst];
            if !node.up {
                break;
            }
            let Some(action) = node.replica.poll_action() else {
                break;
            };
            match action {
                Action::Persist(rec) => {
                    trace_line!(self.trace, self.now, "persist {} {rec:?}", self.name(inst));
                    match rec {
                        // The disk driver appends these without a sync.
                        PersistRecord::Executed { .. } => {
                            self.replicas[inst].unsynced.push(Unsynced::Persist(rec));
                        }
                        PersistRecord::Proposed { .. } | PersistRecord::Voted { .. } => {
                            self.oracle.proposed(inst, rec);
                            let node = &mut self.replicas[inst];
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
                            self.replicas[inst].lazy_turn = false;
                            self.sync_log(inst);
                            self.make_durable(inst, rec);
                        }
                    }
                }
                Action::Sync => {
                    trace_line!(self.trace, self.now, "sync {}", self.name(inst));
                    self.sync_log(inst);
                }
                Action::Store(rec) => {
                    // Batches are synced log appends, except with a `Proposed` (the
                    // driver's turn is then unsynced); a stored checkpoint syncs the
                    // segment it leaves.
                    let node = &mut self.replicas[inst];
                    if node.lazy_turn && matches!(rec, StoreRecord::Batch { .. }) {
                        node.unsynced.push(Unsynced::Store(rec));
                    } else {
                        self.sync_log(inst);
                        self.replicas[inst].disk.apply_store(&rec);
                    }
                }
                Action::Event(ev) => {
                    trace_line!(self.trace, self.now, "event {} {ev:?}", self.name(inst));
                    if let (Some(slow), Event::Executed { requests, .. }) =
                        (self.plan.slow_execution, &ev)
                    {
                        // The step executes here: what it sends after this leaves later.
                        let cost: u64 = requests
                            .iter()
                            .map(|&(c, rid)| slow.cost_us(self.seed, c, rid))
                            .sum();
                        if cost > 0 {
                            self.out_delay_us += cost;
                            trace_line!(
                                self.trace,
                                self.now,
                                "busy {} executing for {cost}µs",
                                self.name(inst)
                            );
                        }
                    }
                    self.oracle.event(self.now, inst, &ev);
                    let id = self.replicas[inst].id;
                    let correct = self.oracle.is_correct(inst);
                    if let Some(d) = self.director.as_mut().filter(|_| correct) {
                        if d.observe(id, &ev) {
                            self.director_gen += 1;
                            let gen = self.director_gen;
                            self.queue.push(self.now, Ev::Director { gen });
                        }
                    }
                }
                Action::Send { to, bytes } => self.replica_out(inst, &[Dest::Replica(to)], bytes),
                Action::Broadcast { bytes } => {
                    let me = self.replicas[inst].id;
                    let dests: Vec<Dest> = (0..n).filter(|&j| j != me).map(Dest::Replica).collect();
                    self.replica_out(inst, &dests, bytes);
                }
                Action::SendClient { client, bytes } => {
                    self.replica_out(inst, &[Dest::Client(client)], bytes)
                }
            }
        }
        std::mem::take(&mut self.out_delay_us)
    }

    fn replica_out(&mut self, inst: usize, dests: &[Dest], bytes: Arc<[u8]>) {
        if self.replicas[inst].crash_at_next_send {
            self.crash(inst, "before a send");
            return;
        }
        if self.replicas[inst].adversary.is_none() {
            self.oracle.send(self.now, inst, &bytes);
            for &d in dests {
                self.transmit(inst, d, &bytes);
            }
            if let Some((down_us, _)) = self.replicas[inst].crash_after_prepare {
                let prepare =
                    Frame::parse(&bytes, usize::MAX).is_ok_and(|f| f.header.tag == Tag::Prepare);
                if prepare {
                    self.crash(inst, "after a PREPARE");
                    self.queue.push(
                        Time(self.now.as_micros() + down_us),
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
            let node = &mut self.replicas[inst];
            let view = node.replica.view();
            // Checked just above: this replica has an adversary.
            let adv = node.adversary.as_mut().expect("adversary present");
            let mut ctx = Ctx {
                now: self.now,
                view,
                config: &self.config,
                forger: &adv.forger,
                rng: &mut adv.rng,
            };
            for &d in dests {
                outs.extend(
                    adv.strategy
                        .on_send(&mut ctx, Outgoing::now(d, bytes.clone())),
                );
            }
        }
        for o in outs {
            if o.delay_us > 0 {
                self.queue.push(
                    Time(self.now.as_micros() + o.delay_us),
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

    fn arm_replica_timer(&mut self, inst: usize) {
        let now = self.now;
        let node = &mut self.replicas[inst];
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
            self.queue.push(
                t,
                Ev::ReplicaTimer {
                    inst,
                    gen: node.timer_gen,
                },
            );
        }
    }

    /// `rec` of `inst` is on its disk.
    fn make_durable(&mut self, inst: usize, rec: PersistRecord) {
        self.oracle.persist(inst, rec);
        self.replicas[inst].disk.apply_persist(rec);
    }

    /// A synced log append by `inst`: every record appended before it is durable too.
    fn sync_log(&mut self, inst: usize) {
        for u in std::mem::take(&mut self.replicas[inst].unsynced) {
            self.append(inst, u);
        }
    }

    /// An unsynced append of `inst` reaches its disk.
    fn append(&mut self, inst: usize, u: Unsynced) {
        match u {
            Unsynced::Persist(rec) => self.make_durable(inst, rec),
            Unsynced::Store(rec) => self.replicas[inst].disk.apply_store(&rec),
        }
    }

    fn crash(&mut self, inst: usize, how: &str) {
        // The unsynced log tail: a prefix of it reached the disk, the rest is lost.
        let node = &mut self.replicas[inst];
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
            self.now,
            "torn log {}: {kept} of {} unsynced records kept",
            self.name(inst),
            tail.len()
        );
        for u in tail.into_iter().take(kept) {
            self.append(inst, u);
        }
        let node = &mut self.replicas[inst];
        node.up = false;
        node.crash_at_next_send = false;
        node.crash_after_prepare = None;
        node.timer = None;
        node.timer_gen += 1;
        // What waited for it to finish executing is lost with it.
        self.deferred[inst].clear();
        self.busy_until[inst] = Time::ZERO;
        trace_line!(self.trace, self.now, "crash {} ({how})", self.name(inst));
    }

    fn restart(&mut self, inst: usize, with_state: bool) {
        let now = self.now;
        let mutation = self.mutation;
        let node = &mut self.replicas[inst];
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
        let service = KvService::with_clock_tolerance(self.plan.clock_tolerance);
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
            self.now,
            "restart {} with_state={with_state}{}",
            self.name(inst),
            stepped.map_or(String::new(), |d| format!(" clock stepped {d:+}µs"))
        );
        self.after_replica_step(inst);
    }

    /// The primary of the highest view a correct replica that is up has reached.
    fn current_primary(&self) -> ReplicaId {
        let v = self
            .replicas
            .iter()
            .filter(|r| r.up && r.role == Role::Correct)
            .map(|r| r.replica.view())
            .max()
            .unwrap_or(0);
        self.config.primary(v)
    }

    // ---- network ---------------------------------------------------------------------------

    fn transmit(&mut self, from: NodeIdx, dest: Dest, bytes: &Arc<[u8]>) {
        let targets: Vec<NodeIdx> = match dest {
            Dest::Replica(r) => self
                .topo
                .replicas
                .get(r as usize)
                .cloned()
                .unwrap_or_default(),
            Dest::Client(c) => self
                .client_node
                .get(&c)
                .map(|&i| vec![i])
                .unwrap_or_default(),
        };
        for to in targets {
            let fate = self.net.send(from, to, bytes);
            if self.trace.on() {
                let what = match &fate {
                    Fate::LinkDown => "link-down".to_string(),
                    Fate::Lost(d) => format!("lost{}", if d.is_empty() { "" } else { " +replay" }),
                    Fate::Delivered(d) => d
                        .iter()
                        .map(|x| {
                            format!(
                                "+{}µs{:?}{}",
                                x.after_us,
                                x.kind,
                                if x.corrupted { "!corrupt" } else { "" }
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(","),
                };
                let line = format!(
                    "send {}->{} {} {what}",
                    self.name(from),
                    self.name(to),
                    describe(bytes)
                );
                self.trace.line(self.now, format_args!("{line}"));
            }
            for d in fate.deliveries() {
                let at = Time(self.now.as_micros() + self.out_delay_us + d.after_us);
                self.queue.push(
                    at,
                    Ev::Deliver {
                        from,
                        to,
                        bytes: d.bytes.clone(),
                    },
                );
            }
        }
    }

    fn deliver(&mut self, from: NodeIdx, to: NodeIdx, bytes: Arc<[u8]>) {
        if self.trace.on() {
            let line = format!(
                "deliver {}->{} {}",
                self.name(from),
                self.name(to),
                describe(&bytes)
            );
            self.trace.line(self.now, format_args!("{line}"));
        }
        let r_count = self.replicas.len();
        if to < r_count {
            if !self.replicas[to].up {
                trace_line!(self.trace, self.now, "drop at {} (down)", self.name(to));
                return;
            }
            if let Some(adv) = self.replicas[to].adversary.as_mut() {
                adv.strategy.on_receive(&bytes);
            }
            self.step_replica(to, Input::Message(&bytes));
        } else if to < r_count + self.clients.len() {
            let idx = to - r_count;
            let local = Clock::default().local(self.now);
            self.clients[idx].client.handle_message(local, &bytes);
            self.after_client_step(idx);
        }
        // Faulty clients ignore replies.
    }

    // ---- clients ---------------------------------------------------------------------------

    fn after_client_step(&mut self, idx: usize) {
        let node_idx = self.replicas.len() + idx;
        let n = self.config.n() as ReplicaId;
        while let Some(a) = self.clients[idx].client.poll_action() {
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
            }
        }
        let now = self.now;
        let node = &mut self.clients[idx];
        let want = node
            .client
            .poll_timeout()
            .map(|d| Clock::default().global(d).max(Time(now.as_micros() + 1)));
        if want != node.timer {
            node.timer_gen += 1;
            node.timer = want;
            if let Some(t) = want {
                self.queue.push(
                    t,
                    Ev::ClientTimer {
                        idx,
                        gen: node.timer_gen,
                    },
                );
            }
        }
    }

    fn client_completed(&mut self, idx: usize, rid: u64, result: Vec<u8>) {
        let id = self.clients[idx].id;
        if self.trace.on() {
            let r = KvResult::decode(&result)
                .map(|r| format!("{r:?}"))
                .unwrap_or_else(|| "<undecodable>".into());
            trace_line!(self.trace, self.now, "complete c{id} rid={rid} {r}");
        }
        self.oracle.complete(self.now, id, rid, &result);
        let node = &mut self.clients[idx];
        if node.outstanding.as_ref().is_some_and(|(r, _, _)| *r == rid) {
            if let Some((_, _, op)) = node.outstanding.take() {
                if let Some(res) = KvResult::decode(&result) {
                    node.workload.observe(&op, &res);
                }
            }
            node.completed += 1;
            if !node.thinking {
                node.thinking = true;
                let t = node.workload.think_us(matches!(self.phase, Phase::Safety));
                self.queue
                    .push(Time(self.now.as_micros() + t), Ev::Think { idx });
            }
        }
    }

    fn think(&mut self, idx: usize) {
        let now = self.now;
        let phase = self.phase;
        let filler = self.filler;
        let cap = self.plan.params.safety_ops_max;
        let node = &mut self.clients[idx];
        node.thinking = false;
        if node.outstanding.is_some() {
            return;
        }
        match phase {
            Phase::Safety if node.invoked >= cap => return,
            Phase::Liveness(_) if node.completed >= node.target && !filler => return,
            Phase::Done => return,
            _ => {}
        }
        let (op, ro) = node.workload.next_op();
        let bytes = op.encode();
        match node
            .client
            .invoke(Clock::default().local(now), bytes.clone(), ro)
        {
            Ok(rid) => {
                node.invoked += 1;
                let id = node.id;
                node.outstanding = Some((rid, now, op));
                trace_line!(
                    self.trace,
                    now,
                    "invoke c{id} rid={rid} {} ro={ro}",
                    describe_op(&bytes)
                );
                self.oracle.issue(now, id, rid, &bytes, true);
            }
            Err(e) => {
                node.refused += 1;
                node.thinking = true;
                let id = node.id;
                let t = 50 * MS + node.workload.think_us(false);
                self.queue
                    .push(Time(now.as_micros() + t), Ev::Think { idx });
                trace_line!(self.trace, now, "invoke c{id} refused: {e}");
            }
        }
        self.after_client_step(idx);
    }

    fn bad_tick(&mut self, idx: usize) {
        // Faulty clients are faults, healed with the rest when the liveness phase starts
        // ("faults healed, ≤ f Byzantine replicas remain"). Against a client that keeps sending
        // partially valid MACs, MAC-only PBFT cannot promise progress (the "Big MAC" attack,
        // PROTOCOL.md §1.14/§5.3); signed client requests (Aardvark) are the fix.
        if matches!(self.phase, Phase::Liveness(_)) {
            trace_line!(
                self.trace,
                self.now,
                "bad client {idx} stops (faults healed)"
            );
            return;
        }
        let primary = self.current_primary();
        let node_idx = self.replicas.len() + self.clients.len() + idx;
        let n = self.config.n() as ReplicaId;
        let (node, rng) = &mut self.bad[idx];
        let id = node.client.id;
        let period = node.period_us;
        let sends = node.client.tick(rng, primary);
        for s in sends {
            trace_line!(
                self.trace,
                self.now,
                "bad c{id} {} rid={} to={:?}",
                s.what,
                s.issued.as_ref().map_or(0, |i| i.0),
                s.to
            );
            if let Some((rid, op)) = &s.issued {
                self.oracle.issue(self.now, id, *rid, op, false);
            }
            for r in s.to {
                if r < n {
                    self.transmit(node_idx, Dest::Replica(r), &s.bytes);
                }
            }
        }
        self.queue
            .push(Time(self.now.as_micros() + period), Ev::BadTick { idx });
    }

    // ---- faults ----------------------------------------------------------------------------

    fn cut(&mut self, links: &[(NodeIdx, NodeIdx)]) {
        for &(a, b) in links {
            self.net.set_link(a, b, false);
        }
    }

    fn apply_twin_links(&mut self) {
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

    fn fault(&mut self, f: Fault) {
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
    fn director_step(&mut self) {
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

    fn follow_up(&mut self, f: FollowUp) {
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

    fn start_liveness(&mut self) {
        let l = Liveness {
            start: self.now,
            bound_us: self.plan.params.liveness_bound_us,
        };
        self.phase = Phase::Liveness(l);
        trace_line!(
            self.trace,
            self.now,
            "liveness phase: heal everything; bound {} s",
            l.bound_us / 1_000_000
        );
        self.net.set_faults(NetFaults::benign());
        self.net.heal_all();
        self.apply_twin_links();
        for inst in 0..self.replicas.len() {
            let twin_not_started = inst >= self.config.n()
                && !self.replicas[inst].up
                && self.replicas[inst].restarts == 0;
            if twin_not_started {
                continue;
            }
            self.replicas[inst].crash_at_next_send = false;
            self.replicas[inst].crash_after_prepare = None;
            if !self.replicas[inst].up {
                let with_state = self.replicas[inst].restart_with_state;
                self.restart(inst, with_state);
            }
        }
        let new_ops = self.plan.params.liveness_new_ops;
        for idx in 0..self.clients.len() {
            let c = &mut self.clients[idx];
            c.target = c.completed + u64::from(c.outstanding.is_some()) + new_ops;
            if c.outstanding.is_none() && !c.thinking {
                c.thinking = true;
                self.queue.push(self.now, Ev::Think { idx });
            }
        }
        self.queue.push(l.deadline(), Ev::Deadline);
    }

    fn client_progress(&self) -> Vec<ClientProgress> {
        self.clients
            .iter()
            .map(|c| ClientProgress {
                client: c.id,
                completed: c.completed,
                target: c.target,
                outstanding: c.outstanding.as_ref().map(|(r, t, _)| (*r, *t)),
                refused: c.refused,
            })
            .collect()
    }

    /// Honest-code replicas with a correct clock that are up and must catch up.
    fn lagging(&self, target: Seq) -> Vec<Lagging> {
        self.replicas
            .iter()
            .enumerate()
            .filter(|(_, r)| r.up && matches!(r.role, Role::Correct | Role::Amnesiac))
            .filter(|(_, r)| !self.plan.clock_faulty.contains(&r.id))
            .filter(|(_, r)| r.replica.last_executed() < target && r.replica.last_stable() < target)
            .map(|(inst, r)| Lagging {
                inst,
                last_executed: r.replica.last_executed(),
                target,
            })
            .collect()
    }

    /// The liveness phase converges in three stages: (1) every correct client completed its
    /// quota and every accepted write is agreed — the catch-up target is then the highest
    /// sequence number holding an accepted write; (2) while a correct replica lags behind the
    /// target, clients keep issuing operations (a replica left alone in a higher view, say,
    /// catches up only through the next stable checkpoint); (3) clients stop, and the run ends
    /// once their last requests completed and are agreed.
    fn check_converged(&mut self) {
        let Phase::Liveness(_) = self.phase else {
            return;
        };
        let target = match self.catchup_target {
            Some(t) => t,
            None => {
                if !Liveness::clients_done(&self.client_progress())
                    || self.oracle.results.unplaced_writes() > 0
                {
                    return;
                }
                let t = self.oracle.results.acked_write_max_seq();
                self.catchup_target = Some(t);
                t
            }
        };
        if !self.lagging(target).is_empty() {
            if !self.filler {
                self.filler = true;
                trace_line!(
                    self.trace,
                    self.now,
                    "catch-up: replicas lag behind seq {target}; clients keep going"
                );
                for idx in 0..self.clients.len() {
                    let c = &mut self.clients[idx];
                    if c.outstanding.is_none() && !c.thinking {
                        c.thinking = true;
                        self.queue.push(self.now, Ev::Think { idx });
                    }
                }
            }
            return;
        }
        self.filler = false;
        if self.clients.iter().any(|c| c.outstanding.is_some())
            || self.oracle.results.unplaced_writes() > 0
        {
            return;
        }
        trace_line!(
            self.trace,
            self.now,
            "converged: clients done, replicas through seq {target}"
        );
        self.converged = true;
        self.phase = Phase::Done;
    }

    fn deadline(&mut self) {
        let Phase::Liveness(l) = self.phase else {
            return;
        };
        let target = self
            .catchup_target
            .unwrap_or_else(|| self.oracle.results.acked_write_max_seq());
        let lagging = self.lagging(target);
        let clients = self.client_progress();
        l.report(&mut self.oracle.sink, self.now, &clients, &lagging);
        self.phase = Phase::Done;
    }

    fn handle(&mut self, ev: Ev) {
        match self.busy_target(&ev) {
            Some(inst) => self.deferred[inst].push_back(ev),
            None => self.dispatch(ev),
        }
    }

    /// The replica instance `ev` is for, if that one is busy executing or still has input
    /// waiting (`slow-execution`): the event then waits its turn.
    fn busy_target(&self, ev: &Ev) -> Option<usize> {
        let inst = match *ev {
            Ev::Deliver { to, .. } if to < self.replicas.len() => to,
            Ev::ReplicaTimer { inst, .. } => inst,
            _ => return None,
        };
        (self.busy_until[inst] > self.now || !self.deferred[inst].is_empty()).then_some(inst)
    }

    /// `inst` is done executing: it takes what reached it meanwhile, in arrival order, until
    /// a step keeps it busy again.
    fn replica_free(&mut self, inst: usize) {
        while self.busy_until[inst] <= self.now && !self.oracle.sink.any() {
            let Some(ev) = self.deferred[inst].pop_front() else {
                break;
            };
            self.dispatch(ev);
        }
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver { from, to, bytes } => self.deliver(from, to, bytes),
            Ev::Emit { from, to, bytes } => {
                if self.replicas[from].up {
                    self.transmit(from, to, &bytes);
                }
            }
            Ev::ReplicaTimer { inst, gen } => {
                let node = &mut self.replicas[inst];
                if !node.up || gen != node.timer_gen {
                    return;
                }
                node.timer = None;
                let local = node.clock.local(self.now);
                if node.replica.poll_timeout().is_some_and(|d| d <= local) {
                    trace_line!(self.trace, self.now, "timer {}", self.name(inst));
                    self.step_replica(inst, Input::Timeout);
                } else {
                    self.arm_replica_timer(inst);
                }
            }
            Ev::ClientTimer { idx, gen } => {
                let node = &mut self.clients[idx];
                if gen != node.timer_gen {
                    return;
                }
                node.timer = None;
                let local = Clock::default().local(self.now);
                if node.client.poll_timeout().is_some_and(|d| d <= local) {
                    node.client.handle_timeout(local);
                    trace_line!(self.trace, self.now, "timer c{}", self.clients[idx].id);
                }
                self.after_client_step(idx);
            }
            Ev::Think { idx } => self.think(idx),
            Ev::BadTick { idx } => self.bad_tick(idx),
            Ev::Fault(f) => self.fault(f),
            Ev::FollowUp(f) => self.follow_up(f),
            Ev::Liveness => self.start_liveness(),
            Ev::Deadline => self.deadline(),
            Ev::Director { gen } => {
                if gen == self.director_gen {
                    self.director_step();
                }
            }
            Ev::ReplicaFree { inst } => self.replica_free(inst),
        }
    }

    fn run(&mut self, max_events: u64) {
        self.start();
        while let Some((t, ev)) = self.queue.pop() {
            debug_assert!(t >= self.now, "time never goes backwards");
            self.now = t;
            self.events += 1;
            if self.events > max_events {
                self.oracle.sink.report(
                    BUDGET,
                    self.now,
                    format!("run exceeded {max_events} events (livelock or storm?)"),
                );
                break;
            }
            self.handle(ev);
            if self.oracle.sink.any() {
                break;
            }
            self.check_converged();
            if self.phase == Phase::Done {
                break;
            }
        }
        if self.oracle.sink.any() {
            return;
        }
        self.oracle.finish(self.now);
        if self.converged {
            let up: Vec<ReplicaProgress> = self
                .replicas
                .iter()
                .enumerate()
                .filter(|(_, r)| r.up && r.role == Role::Correct)
                .filter(|(_, r)| !self.plan.clock_faulty.contains(&r.id))
                .map(|(inst, r)| ReplicaProgress {
                    inst,
                    last_executed: r.replica.last_executed(),
                    last_stable: r.replica.last_stable(),
                })
                .collect();
            let through = self.catchup_target.unwrap_or(0);
            durability::check(
                &mut self.oracle.sink,
                self.now,
                &self.oracle.results,
                &up,
                through,
            );
        }
    }

    fn report(self) -> RunReport {
        let stats = RunStats {
            events: self.events,
            virtual_us: self.now.as_micros(),
            ops_completed: self.clients.iter().map(|c| c.completed).sum(),
            ops_refused: self.clients.iter().map(|c| c.refused).sum(),
            agreed_seq: self.oracle.agreement.history.max_seq(),
            view_max: self
                .replicas
                .iter()
                .filter(|r| r.role == Role::Correct)
                .map(|r| r.replica.view())
                .max()
                .unwrap_or(0),
            results_checked: self.oracle.results.checked,
            read_only_checked: (
                self.oracle.read_only.checked,
                self.oracle.read_only.checked_on_tentative,
            ),
            net: self.net.stats().clone(),
        };
        RunReport {
            seed: self.seed,
            family: self.plan.family,
            n: self.config.n(),
            summary: self.plan.summary(),
            violations: self.oracle.sink.into_violations(),
            stats,
            converged: self.converged,
            trace: self.trace.into_text(),
        }
    }
}

/// Checker name for a panic inside the run (a broken assertion in the replica, client, service
/// or simulator).
pub const PANIC: &str = "panic";

thread_local! {
    static LAST_PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Replaces the process's panic hook with one that records the message and location for
/// [`run`] to report instead of printing it (for the CLI; tests keep the default hook). With
/// `BYZFS_SIM_BACKTRACE=1` the report includes the backtrace.
pub fn capture_panics() {
    let backtrace = std::env::var_os("BYZFS_SIM_BACKTRACE").is_some_and(|v| v != "0");
    std::panic::set_hook(Box::new(move |info| {
        let mut msg = info.to_string().replace('\n', " ");
        if backtrace {
            msg.push_str(&format!("\n{}", std::backtrace::Backtrace::force_capture()));
        }
        LAST_PANIC.with(|p| *p.borrow_mut() = Some(msg));
    }));
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(m) = LAST_PANIC.with(|p| p.borrow_mut().take()) {
        return m;
    }
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// Runs one seed. A panic anywhere in the run becomes a [`PANIC`] violation; the report keeps
/// the trace up to that point.
pub fn run(cfg: &RunConfig) -> Result<RunReport, String> {
    let mut sim = Sim::new(cfg)?;
    let outcome =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sim.run(cfg.max_events)));
    if let Err(payload) = outcome {
        let msg = panic_message(payload.as_ref());
        trace_line!(sim.trace, sim.now, "PANIC {msg}");
        sim.oracle.sink.report(PANIC, sim.now, msg);
    }
    Ok(sim.report())
}
