//! The simulated world: building it from the plan, its event loop (one event at a time, in
//! time order), the network between nodes, and replicas busy executing (`slow-execution`).

use super::{
    describe, durability, fresh_replica, scenario, stream, substream, trace_line, Adversary, Arc,
    BTreeMap, BadClient, BadClientNode, Client, ClientId, ClientNode, Clock, Dest, Director,
    Duration, Ev, EventQueue, Fate, Forger, Input, Load, Mutation, Network, NodeIdx, Oracle, Phase,
    Phases, Purpose, ReplicaId, ReplicaNode, ReplicaProgress, Rng, Role, RunConfig, ServiceKind,
    Sim, SimDisk, SimRng, TestKeys, Time, Topology, Trace, VecDeque, Workload, BAD_CLIENT_ID_BASE,
    BUDGET, CLIENT_ID_BASE,
};

/// The simulated world: virtual time, the event queue, the network and its topology, the
/// nodes, and replicas busy executing.
pub(super) struct World {
    pub(super) now: Time,
    pub(super) queue: EventQueue<Ev>,
    pub(super) net: Network,
    pub(super) topo: Topology,
    pub(super) replicas: Vec<ReplicaNode>,
    pub(super) clients: Vec<ClientNode>,
    pub(super) bad: Vec<(BadClientNode, SimRng)>,
    pub(super) client_node: BTreeMap<ClientId, NodeIdx>,
    /// Events handled so far (bounded by `RunConfig::max_events`).
    pub(super) events: u64,
    /// Per replica instance: until when it is busy executing (`slow-execution`), and the
    /// input that reached it meanwhile, in arrival order.
    pub(super) busy_until: Vec<Time>,
    pub(super) deferred: Vec<VecDeque<Ev>>,
    /// While a replica's actions are drained: how long it has executed so far in its step,
    /// so how long after now what it sends next leaves.
    pub(super) out_delay_us: u64,
    /// Reads correct replicas' checkpoints as file trees (file-service runs).
    pub(super) fs_reader: crate::fs::tree::Reader,
}

impl Sim {
    pub(super) fn new(cfg: &RunConfig) -> Result<Sim, String> {
        let mut plan = scenario::plan(cfg.seed, cfg.family, cfg.replicas)?;
        plan.params.config.view_change_rule = cfg.view_change_rule;
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
            let fs_mutation = cfg.fs_mutation.filter(|_| role == Role::Correct);
            let store_disk = SimDisk::default();
            let service = super::new_service(&plan, fs_mutation, &store_disk);
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
                crash_after_proposal: None,
                cut_all_after_transfer: None,
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
                store_disk,
                lazy_turn: false,
                kept_all: false,
                disk_work: Default::default(),
            });
        }
        let r_count = replicas.len();
        let mut client_seeds = stream(seed, Purpose::ClientSeeds);
        // Half the clients keep one request in flight, the others two to four (docs/PROTOCOL.md
        // §1.6, "several requests in flight").
        let mut windows = stream(seed, Purpose::Windows);
        let mut clients = Vec::new();
        let mut client_node = BTreeMap::new();
        for (i, &c) in correct_ids.iter().enumerate() {
            client_node.insert(c, r_count + i);
            clients.push(ClientNode {
                id: c,
                client: Client::new(config.clone(), keys.client(c), client_seeds.gen()),
                workload: match plan.family.service() {
                    ServiceKind::Kv => Load::Kv(Workload::new(
                        plan.params.workload.clone(),
                        c,
                        substream(seed, Purpose::Workload, i as u64),
                    )),
                    ServiceKind::Fs | ServiceKind::FsDisk => Load::Fs(crate::fs::FsWorkload::new(
                        plan.params.workload.clone(),
                        c,
                        substream(seed, Purpose::Workload, i as u64),
                    )),
                },
                outstanding: BTreeMap::new(),
                window: match windows.gen_range(0..6u32) {
                    0..=2 => 1,
                    w => (w as usize).min(config.client_window as usize),
                },
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
                    client: BadClient::new(c, keys.client(c), victim, &config, &mut rng),
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
        oracle.slow_view.watch = plan.slow_watch();
        oracle.reply_cache.window = config.client_window;
        oracle.request_store.share = 2 * config.client_window as usize;
        if plan.family.service().is_fs() {
            oracle.fs = Some(crate::checker::FsOracle::new(crate::fs::ROOT_MODE));
        }
        let mut net = Network::new(
            nodes,
            plan.params.net.clone(),
            stream(seed, Purpose::Network),
        );
        if let Some(rate) = plan.link_rate {
            for a in 0..nodes {
                net.set_access_rate(a, rate);
            }
        }
        Ok(Sim {
            seed,
            config,
            mutation: cfg.mutation,
            fs_mutation: cfg.fs_mutation,
            world: World {
                now: start,
                queue: EventQueue::new(),
                net,
                topo,
                replicas,
                clients,
                bad,
                client_node,
                events: 0,
                busy_until: vec![Time::ZERO; r_count],
                deferred: (0..r_count).map(|_| VecDeque::new()).collect(),
                out_delay_us: 0,
                fs_reader: Default::default(),
            },
            director: Director {
                fault_rng: stream(seed, Purpose::FaultRuntime),
                twin_sides: Vec::new(),
                history: None,
                gen: 0,
            },
            phases: Phases {
                phase: Phase::Safety,
                converged: false,
                catchup_target: None,
                filler: false,
            },
            oracle,
            trace: Trace::new(cfg.trace),
            plan,
        })
    }

    pub(super) fn name(&self, node: NodeIdx) -> String {
        let n = self.config.n();
        if node < self.world.replicas.len() {
            let id = self.world.replicas[node].id;
            if node >= n {
                format!("r{id}'")
            } else {
                format!("r{id}")
            }
        } else if let Some((c, _)) = self.world.client_node.iter().find(|(_, &i)| i == node) {
            format!("c{c}")
        } else {
            format!("node{node}")
        }
    }

    pub(super) fn start(&mut self) {
        trace_line!(
            self.trace,
            self.world.now,
            "start seed={} scenario={} {}",
            self.seed,
            self.plan.family.name(),
            self.plan.summary()
        );
        for inst in 0..self.world.replicas.len() {
            if self.world.replicas[inst].up {
                self.after_replica_step(inst);
            }
        }
        for idx in 0..self.world.clients.len() {
            let t = self.world.clients[idx].workload.think_us(true);
            self.world.clients[idx].thinking = true;
            self.world.queue.push(Time(t), Ev::Think { idx });
        }
        for idx in 0..self.world.bad.len() {
            let p = self.world.bad[idx].0.period_us;
            self.world.queue.push(Time(p), Ev::BadTick { idx });
        }
        for (at, f) in self.plan.faults.clone() {
            self.world.queue.push(Time(at), Ev::Fault(f));
        }
        self.world
            .queue
            .push(Time(self.plan.params.safety_us), Ev::Liveness);
    }

    // ---- replicas ------------------------------------------------------------------------

    /// `inst`'s last step executed for `busy_us`: it takes no input until it is done (what
    /// reaches it meanwhile waits, in arrival order), and the driver reports the time to the
    /// core, as `byzfs-net`'s event loop does after a long step.
    pub(super) fn busy(&mut self, inst: usize, busy_us: u64) {
        let until = Time(self.world.now.as_micros() + busy_us);
        self.world.busy_until[inst] = self.world.busy_until[inst].max(until);
        if self.mutation != Some(Mutation::IgnoreBusyTime) {
            self.world.replicas[inst]
                .replica
                .busy_for(Duration::from_micros(busy_us));
        }
        self.world.queue.push(until, Ev::ReplicaFree { inst });
    }

    /// The primary of the highest view a correct replica that is up has reached.
    pub(super) fn current_primary(&self) -> ReplicaId {
        let v = self
            .world
            .replicas
            .iter()
            .filter(|r| r.up && r.role == Role::Correct)
            .map(|r| r.replica.view())
            .max()
            .unwrap_or(0);
        self.config.primary(v)
    }

    // ---- network ---------------------------------------------------------------------------

    pub(super) fn transmit(&mut self, from: NodeIdx, dest: Dest, bytes: &Arc<[u8]>) {
        if from >= self.world.replicas.len() {
            // A client's frame: what it sent is what may run in its name.
            self.oracle.client_sent(bytes);
        }
        let targets: Vec<NodeIdx> = match dest {
            Dest::Replica(r) => self
                .world
                .topo
                .replicas
                .get(r as usize)
                .cloned()
                .unwrap_or_default(),
            Dest::Client(c) => self
                .world
                .client_node
                .get(&c)
                .map(|&i| vec![i])
                .unwrap_or_default(),
        };
        for to in targets {
            let now_us = self.world.now.as_micros();
            let fate = self.world.net.send_at(now_us, from, to, bytes);
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
                self.trace.line(self.world.now, format_args!("{line}"));
            }
            for d in fate.deliveries() {
                let at = Time(self.world.now.as_micros() + self.world.out_delay_us + d.after_us);
                self.world.queue.push(
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

    pub(super) fn deliver(&mut self, from: NodeIdx, to: NodeIdx, bytes: Arc<[u8]>) {
        if self.trace.on() {
            let line = format!(
                "deliver {}->{} {}",
                self.name(from),
                self.name(to),
                describe(&bytes)
            );
            self.trace.line(self.world.now, format_args!("{line}"));
        }
        let r_count = self.world.replicas.len();
        if to < r_count {
            if !self.world.replicas[to].up {
                trace_line!(
                    self.trace,
                    self.world.now,
                    "drop at {} (down)",
                    self.name(to)
                );
                return;
            }
            if let Some(adv) = self.world.replicas[to].adversary.as_mut() {
                adv.strategy.on_receive(&bytes);
            }
            self.oracle.deliver(to, &bytes);
            self.step_replica(to, Input::Message(&bytes));
        } else if to < r_count + self.world.clients.len() {
            let idx = to - r_count;
            let local = Clock::default().local(self.world.now);
            self.world.clients[idx].client.handle_message(local, &bytes);
            self.after_client_step(idx);
        }
        // Faulty clients ignore replies.
    }

    // ---- clients ---------------------------------------------------------------------------

    pub(super) fn handle(&mut self, ev: Ev) {
        match self.busy_target(&ev) {
            Some(inst) => self.world.deferred[inst].push_back(ev),
            None => self.dispatch(ev),
        }
    }

    /// The replica instance `ev` is for, if that one is busy executing or still has input
    /// waiting (`slow-execution`): the event then waits its turn.
    pub(super) fn busy_target(&self, ev: &Ev) -> Option<usize> {
        let inst = match *ev {
            Ev::Deliver { to, .. } if to < self.world.replicas.len() => to,
            Ev::ReplicaTimer { inst, .. } => inst,
            _ => return None,
        };
        (self.world.busy_until[inst] > self.world.now || !self.world.deferred[inst].is_empty())
            .then_some(inst)
    }

    /// `inst` is done executing: it takes what reached it meanwhile, in arrival order, until
    /// a step keeps it busy again.
    pub(super) fn replica_free(&mut self, inst: usize) {
        while self.world.busy_until[inst] <= self.world.now && !self.oracle.sink.any() {
            let Some(ev) = self.world.deferred[inst].pop_front() else {
                break;
            };
            self.dispatch(ev);
        }
    }

    pub(super) fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver { from, to, bytes } => self.deliver(from, to, bytes),
            Ev::Emit { from, to, bytes } => {
                if self.world.replicas[from].up {
                    self.transmit(from, to, &bytes);
                }
            }
            Ev::ReplicaTimer { inst, gen } => {
                let node = &mut self.world.replicas[inst];
                if !node.up || gen != node.timer_gen {
                    return;
                }
                node.timer = None;
                let local = node.clock.local(self.world.now);
                if node.replica.poll_timeout().is_some_and(|d| d <= local) {
                    trace_line!(self.trace, self.world.now, "timer {}", self.name(inst));
                    self.step_replica(inst, Input::Timeout);
                } else {
                    self.arm_replica_timer(inst);
                }
            }
            Ev::ClientTimer { idx, gen } => {
                let node = &mut self.world.clients[idx];
                if gen != node.timer_gen {
                    return;
                }
                node.timer = None;
                let local = Clock::default().local(self.world.now);
                if node.client.poll_timeout().is_some_and(|d| d <= local) {
                    node.client.handle_timeout(local);
                    trace_line!(
                        self.trace,
                        self.world.now,
                        "timer c{}",
                        self.world.clients[idx].id
                    );
                }
                self.after_client_step(idx);
            }
            Ev::Think { idx } => self.think(idx),
            Ev::BadTick { idx } => self.bad_tick(idx),
            Ev::Fault(f) => self.fault(f),
            Ev::FollowUp(f) => self.follow_up(f),
            Ev::Reachability { id } => self.report_reachability(id),
            Ev::Liveness => self.start_liveness(),
            Ev::Deadline => self.deadline(),
            Ev::Director { gen } => {
                if gen == self.director.gen {
                    self.director_step();
                }
            }
            Ev::ReplicaFree { inst } => self.replica_free(inst),
            Ev::DiskWork { inst, life } => self.disk_work_ran(inst, life),
        }
    }

    pub(super) fn run(&mut self, max_events: u64) {
        self.start();
        while let Some((t, ev)) = self.world.queue.pop() {
            debug_assert!(t >= self.world.now, "time never goes backwards");
            self.world.now = t;
            self.world.events += 1;
            if self.world.events > max_events {
                self.oracle.sink.report(
                    BUDGET,
                    self.world.now,
                    format!("run exceeded {max_events} events (livelock or storm?)"),
                );
                break;
            }
            self.handle(ev);
            if self.oracle.sink.any() {
                break;
            }
            self.check_converged();
            if self.phases.phase == Phase::Done {
                break;
            }
        }
        if self.oracle.sink.any() {
            return;
        }
        self.oracle.finish(self.world.now);
        if self.phases.converged {
            let up: Vec<ReplicaProgress> = self
                .world
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
            let through = self.phases.catchup_target.unwrap_or(0);
            durability::check(
                &mut self.oracle.sink,
                self.world.now,
                match &self.oracle.fs {
                    Some(fs) => &fs.results,
                    None => &self.oracle.results,
                },
                &up,
                through,
            );
        }
    }
}
