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
use crate::fs::disk::SimDisk;
use crate::kv::{KvResult, KvService};
use crate::network::{Fate, NetFaults, NetStats, Network, NodeIdx};
use crate::node::{
    restart_with_state, Adversary, BadClientNode, ClientNode, Load, ReplicaNode, Unsynced,
};
use crate::partition::{self, Topology};
use crate::queue::EventQueue;
use crate::rng::{self, stream, substream, Purpose, SimRng};
use crate::scenario::{self, Family, Plan};
use crate::service::{ServiceKind, SimService};
use crate::trace::{describe, Trace};
use crate::trace_line;
use crate::vc_history::{self, VcHistory};
use crate::workload::Workload;
use byzfs_bft::message::Tag;
use byzfs_bft::mutation::Mutation;
use byzfs_bft::wire::Frame;
use byzfs_bft::ViewChangeRule;
use byzfs_bft::{
    Action, Client, ClientAction, ClientId, Config, Event, PersistRecord, Replica, ReplicaId, Seq,
    StoreRecord, TestKeys, Time, View,
};
use byzfs_fs::mutation::StoreMutation;
use core::time::Duration;
use rand::Rng;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

mod clients;
mod disk_work;
mod faults;
mod phases;
mod replicas;
mod report;
mod world;

use faults::Director;
use phases::Phases;

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
    /// A broken store rule switched on in every correct replica's file service (`fs-`
    /// families).
    pub fs_mutation: Option<StoreMutation>,
    /// Record a trace.
    pub trace: bool,
    /// Event budget.
    pub max_events: u64,
    /// How NEW-VIEWs decide (`--view-change-rule`): PBFT's, or the fast path's walk,
    /// which the families run in PBFT's normal case until the fast mode exists (#49).
    pub view_change_rule: ViewChangeRule,
}

impl RunConfig {
    /// Defaults for `seed` in `family`.
    pub fn new(seed: u64, family: Family) -> RunConfig {
        RunConfig {
            seed,
            family,
            replicas: None,
            mutation: None,
            fs_mutation: None,
            trace: false,
            max_events: EVENTS_MAX,
            view_change_rule: ViewChangeRule::Pbft,
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
    /// File-service runs: checkpoint trees compared with the model, and compared with other
    /// replicas' only.
    pub fs_trees: (u64, u64),
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
    /// How its NEW-VIEWs decided.
    pub view_change_rule: ViewChangeRule,
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
        self.replay_with(mutation.map(Mutation::name))
    }

    /// The command that replays this run with the mutation named `mutation`.
    pub fn replay_with(&self, mutation: Option<&str>) -> String {
        let mut m = mutation
            .map(|m| format!(" --mutation {m}"))
            .unwrap_or_default();
        if self.view_change_rule == ViewChangeRule::Walk {
            m.push_str(" --view-change-rule walk");
        }
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
    /// The survivors' drivers notice whether replica `id` is up (`report_reachability`).
    Reachability {
        id: ReplicaId,
    },
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
    /// The oldest disk work of `inst` ran, if it is still in the same life
    /// (`disk_work.rs`).
    DiskWork {
        inst: usize,
        life: u64,
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
    /// The driver's report on a peer (`Replica::handle_reachability`).
    Reachability(ReplicaId, bool),
}

/// One run: the plan, the simulated world, the fault director, the phase, and the
/// checkers and trace that watch it.
struct Sim {
    seed: u64,
    plan: Plan,
    config: Config,
    mutation: Option<Mutation>,
    fs_mutation: Option<StoreMutation>,
    world: world::World,
    director: faults::Director,
    phases: phases::Phases,
    oracle: Oracle,
    trace: Trace,
}

/// Short human form of an encoded request of the file service (`fs`) or the key-value one.
fn describe_request(fs: bool, op: &[u8]) -> String {
    if fs {
        crate::fs::describe_op(op)
    } else {
        describe_op(op)
    }
}

/// A fresh service of the kind `plan` replicates, with `fs_mutation` in its store; a disk
/// store opens what `disk` holds.
fn new_service(plan: &Plan, fs_mutation: Option<StoreMutation>, disk: &SimDisk) -> SimService {
    match plan.family.service() {
        ServiceKind::Kv => SimService::Kv(KvService::with_clock_tolerance(plan.clock_tolerance)),
        ServiceKind::Fs => {
            let mut s = crate::fs::service(plan.clock_tolerance);
            s.store_mut().set_mutation(fs_mutation);
            SimService::Fs(Box::new(s))
        }
        // The simulated disk holds exactly what the store wrote: a failure to open it is a
        // bug, as a failed restore is (`node::restart_with_state`).
        ServiceKind::FsDisk => {
            match crate::fs::disk_service(plan.clock_tolerance, disk, fs_mutation) {
                Ok(s) => SimService::FsDisk(Box::new(s)),
                Err(e) => panic!("{e}"),
            }
        }
    }
}

fn fresh_replica(
    config: &Config,
    node_keys: &byzfs_bft::ReplicaKeys,
    service: SimService,
    seed: u64,
    now: Time,
) -> Replica<SimService> {
    let mut r = Replica::new(config.clone(), node_keys.clone(), service, seed, now);
    // Every simulated replica has a disk (`ReplicaNode::disk`) for restarts with state.
    r.set_store_state(true);
    r
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
        trace_line!(sim.trace, sim.world.now, "PANIC {msg}");
        sim.oracle.sink.report(PANIC, sim.world.now, msg);
    }
    Ok(sim.report())
}
