//! Scenario families (PROTOCOL.md §6.4) and the per-seed parameter sweep (§6.5). A run is a
//! pure function of `(seed, family, replicas override)`: [`plan`] draws the parameters from the
//! seed's `Params` stream (always in the same order, so `--replicas N` with the `n` a seed drew
//! anyway replays it exactly) and the faults from its `Faults` stream.
//!
//! **Adding a scenario:** add a variant to [`Family`] (and to [`FAMILIES`], at the end so
//! `all`'s seed → family mapping of existing families stays put), give it a name, write its
//! fault plan in [`plan`] (keeping Byzantine + twins + amnesiac + clock-faulty + simultaneously
//! crashed ≤ f, except the power-cut families, whose crashed replicas keep their disks), and
//! add a `#[test]`
//! in `tests/scenarios.rs`.

use crate::byzantine::StrategyKind;
use crate::checker::Role;
use crate::fault::{Fault, Target};
use crate::kv::DEFAULT_CLOCK_TOLERANCE;
use crate::network::NetFaults;
use crate::partition::Shape;
use crate::rng::{self, stream, Ppm, Purpose, SimRng};
use crate::vc_history::VcHistoryPlan;
use crate::workload::WorkloadParams;
use byzfs_bft::{ClientId, Config, ReplicaId, RequestId};
use rand::Rng;
use std::time::Duration;

/// A scenario family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// No faults.
    Normal,
    /// Loss, duplication, reordering, delay, replay, corruption.
    Net,
    /// Partitions of every shape, flapping, healed in random order.
    Partition,
    /// Crashes (≤ f, the primary included), restarts with and without state.
    Crash,
    /// Clock skew within the tolerance, and one replica beyond it.
    Clock,
    /// Equivocating primary.
    Equivocate,
    /// Primary holding PRE-PREPAREs just under the view-change timeout.
    SlowPrimary,
    /// Garbage frames to a subset of replicas.
    Garbage,
    /// Wrong replies to clients.
    LyingReplies,
    /// Lying VIEW-CHANGEs and NEW-VIEWs.
    VcLies,
    /// Two honest instances sharing one identity.
    Twins,
    /// Small-scope message mutations in random rounds.
    Byzzfuzz,
    /// Faulty clients.
    BadClients,
    /// A replica falls behind the stable checkpoint and must catch up.
    StateTransfer,
    /// Backups that PREPARE and COMMIT whatever they are shown at once, with slow links
    /// between correct replicas.
    EagerVoter,
    /// A directed view-change history: a certificate prepared at one replica only in view
    /// `v`, the null batch committed in its slot in `v+1`, and that replica leading `v+2`
    /// (see [`crate::vc_history`]).
    VcHistory,
    /// An equivocating primary (a backup sees both proposals in most slots, up to 20 ms
    /// apart) plus slow links, jitter, and isolated primaries (views rotate).
    EquivocateSlow,
    /// Every replica crashed at once (a power cut) and restarted from its disk, often while
    /// a view change is under way; torn unsynced log tails; in a quarter of the seeds one
    /// replica loses its disk in the first cut.
    TotalCrash,
    /// Power cuts of every correct replica while up to `f` Byzantine ones (any strategy)
    /// stay up: a crash-restart with the disk is not a fault, so safety must hold.
    ByzantinePowerCuts,
    /// Power cuts with skewed and drifting clocks; a replica may come back with its wall
    /// clock stepped (backwards too), as a rebooted machine reads a new one; sometimes one
    /// replica (counted against `f`) comes back far beyond the tolerance.
    ClockPowerCuts,
    /// Power cuts of every correct replica while a twin (two honest instances sharing one
    /// identity, counted against `f`) stays up, its links re-drawn as in `twins`.
    TwinPowerCuts,
    /// Power cuts with checkpoints every 4 batches and a log window of 8, while a replica
    /// cut off for seconds falls behind the stable checkpoint (state transfers across cuts);
    /// sometimes one replica loses its disk in the first cut.
    TransferPowerCuts,
    /// Power cuts of every replica while partitions of every shape (flapping too) come and go
    /// across them, over a noisy network; sometimes one replica loses its disk in the first
    /// cut.
    PartitionPowerCuts,
    /// Up to `f` Byzantine replicas (often a primary stretching the agreed clock to the edge
    /// of the tolerance, see [`crate::byzantine::time_warp`]) while the correct ones, with
    /// skewed and drifting clocks, are power-cut and come back with their clocks stepped.
    ByzantineClocks,
    /// A directed test of the abstention rule (ARCHITECTURE.md Deviations 23): a twinned
    /// replica (most often view 0's primary, so two instances propose different batches at one
    /// slot) while correct backups are power-cut just after sending a PREPARE, which tears
    /// the vote's unsynced record off about half the time, and come back soon, in the same view.
    VoteCuts,
    /// No faults, but some requests take long to execute (half to three view-change
    /// timeouts) at every replica, which takes no input meanwhile: no correct replica may
    /// start a view change (checker `stable-view`).
    SlowExecution,
}

/// Every family; `all` runs `FAMILIES[seed % len]`.
pub const FAMILIES: [Family; 26] = [
    Family::Normal,
    Family::Net,
    Family::Partition,
    Family::Crash,
    Family::Clock,
    Family::Equivocate,
    Family::SlowPrimary,
    Family::Garbage,
    Family::LyingReplies,
    Family::VcLies,
    Family::Twins,
    Family::Byzzfuzz,
    Family::BadClients,
    Family::StateTransfer,
    Family::EagerVoter,
    Family::VcHistory,
    Family::EquivocateSlow,
    Family::TotalCrash,
    Family::ByzantinePowerCuts,
    Family::ClockPowerCuts,
    Family::TwinPowerCuts,
    Family::TransferPowerCuts,
    Family::PartitionPowerCuts,
    Family::ByzantineClocks,
    Family::VoteCuts,
    Family::SlowExecution,
];

impl Family {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Family::Normal => "normal",
            Family::Net => "net",
            Family::Partition => "partition",
            Family::Crash => "crash",
            Family::Clock => "clock",
            Family::Equivocate => "equivocate",
            Family::SlowPrimary => "slow-primary",
            Family::Garbage => "garbage",
            Family::LyingReplies => "lying-replies",
            Family::VcLies => "vc-lies",
            Family::Twins => "twins",
            Family::Byzzfuzz => "byzzfuzz",
            Family::BadClients => "bad-clients",
            Family::StateTransfer => "state-transfer",
            Family::EagerVoter => "eager-voter",
            Family::VcHistory => "vc-history",
            Family::EquivocateSlow => "equivocate-slow",
            Family::TotalCrash => "total-crash",
            Family::ByzantinePowerCuts => "byzantine-power-cuts",
            Family::ClockPowerCuts => "clock-power-cuts",
            Family::TwinPowerCuts => "twin-power-cuts",
            Family::TransferPowerCuts => "transfer-power-cuts",
            Family::PartitionPowerCuts => "partition-power-cuts",
            Family::ByzantineClocks => "byzantine-clocks",
            Family::VoteCuts => "vote-cuts",
            Family::SlowExecution => "slow-execution",
        }
    }

    /// Parses a command-line name.
    pub fn from_name(s: &str) -> Option<Family> {
        FAMILIES.into_iter().find(|f| f.name() == s)
    }

    /// The family `all` runs for `seed`.
    pub fn for_seed(seed: u64) -> Family {
        FAMILIES[(seed % FAMILIES.len() as u64) as usize]
    }
}

/// The knobs of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// Protocol parameters (validated).
    pub config: Config,
    /// Correct clients.
    pub clients: usize,
    /// Workload.
    pub workload: WorkloadParams,
    /// Length of the safety phase (faults active), µs.
    pub safety_us: u64,
    /// Liveness bound after healing, µs.
    pub liveness_bound_us: u64,
    /// New operations each correct client must complete in the liveness phase.
    pub liveness_new_ops: u64,
    /// Cap on operations per client in the safety phase (bounds the work).
    pub safety_ops_max: u64,
    /// Network faults during the safety phase.
    pub net: NetFaults,
}

/// Everything a run does, decided up front.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Family.
    pub family: Family,
    /// Parameters.
    pub params: Params,
    /// Role of each replica id (twins: both instances share it).
    pub roles: Vec<Role>,
    /// Byzantine replicas and their strategies.
    pub byzantine: Vec<(ReplicaId, StrategyKind)>,
    /// Twinned replica and when its second instance starts, µs.
    pub twin: Option<(ReplicaId, u64)>,
    /// Clock offset of each replica, µs.
    pub clock_offsets_us: Vec<i64>,
    /// Clock rate error of each replica, ppm.
    pub clock_drift_ppm: Vec<i64>,
    /// Replicas whose clock is beyond the tolerance (they count toward `f` for liveness).
    pub clock_faulty: Vec<ReplicaId>,
    /// Faulty clients, and their period between misbehaviours, µs.
    pub bad_clients: Vec<u64>,
    /// Timed faults, µs from the start.
    pub faults: Vec<(u64, Fault)>,
    /// Requests that take long to execute (`slow-execution`).
    pub slow_execution: Option<SlowExecution>,
    /// How far from its clock a backup accepts the primary's timestamp (the KV service's
    /// `with_clock_tolerance`; [`DEFAULT_CLOCK_TOLERANCE`] but in `slow-execution`).
    pub clock_tolerance: Duration,
    /// No correct replica may start a view change (a family without faults that promises
    /// it; checker `stable-view`).
    pub stable_view: bool,
}

/// Execution costs (`slow-execution`): a request is expensive with probability `ppm`; it then
/// costs a time drawn from `min_us..=max_us` at every replica, each time one executes it. A
/// function of the seed and the request alone, so every replica pays the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowExecution {
    /// Share of expensive requests.
    pub ppm: Ppm,
    /// Least cost of an expensive request, µs.
    pub min_us: u64,
    /// Greatest cost of an expensive request, µs.
    pub max_us: u64,
}

impl SlowExecution {
    /// What executing request `(client, rid)` costs under `seed`, µs (0: nothing to speak of).
    pub fn cost_us(&self, seed: u64, client: ClientId, rid: RequestId) -> u64 {
        let mut r = rng::substream(
            seed ^ client.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            Purpose::SlowExecution,
            rid,
        );
        if rng::chance(&mut r, self.ppm) {
            r.gen_range(self.min_us..=self.max_us)
        } else {
            0
        }
    }
}

impl Plan {
    /// Replicas counted against `f`: Byzantine, twinned, amnesiac, clock-faulty.
    pub fn faulty(&self) -> usize {
        self.roles.iter().filter(|r| !r.is_correct()).count() + self.clock_faulty.len()
    }

    /// One-line summary for reports.
    pub fn summary(&self) -> String {
        let c = &self.params.config;
        let slow = self.slow_execution.map_or(String::new(), |s| {
            format!(
                " slow={}ppm×{}..{}ms tolerance={}s",
                s.ppm,
                s.min_us / MS,
                s.max_us / MS,
                self.clock_tolerance.as_secs()
            )
        });
        format!(
            "n={} K={} W={} big={} ro={} roq={} tent={} T={}ms status={}ms chunk={} clients={}+{}bad byz={:?} twin={:?}{slow}",
            c.n(),
            c.checkpoint_interval,
            c.batch_window,
            if c.big_request_threshold == usize::MAX { "inf".to_string() } else { c.big_request_threshold.to_string() },
            c.read_only_optimisation,
            c.read_only_to_quorum,
            c.tentative_execution,
            c.view_change_timeout.as_millis(),
            c.status_interval.as_millis(),
            c.state_chunk_bytes,
            self.params.clients,
            self.bad_clients.len(),
            self.byzantine,
            self.twin.map(|t| t.0),
        )
    }
}

const MS: u64 = 1_000;
const S: u64 = 1_000_000;
/// Operations per correct client in the safety phase (bounds the work of a run).
const SAFETY_OPS_MAX: u64 = 200;

fn sweep(seed: u64, replicas: Option<usize>) -> Result<Params, String> {
    let mut r = stream(seed, Purpose::Params);
    // Always draw in this order, whatever is overridden (replays must not shift the stream).
    let f_drawn: u32 = if r.gen_range(0..5) == 0 { 2 } else { 1 };
    let k = [4u64, 16, 128][r.gen_range(0..3)];
    let w = [1u64, 2, 4][r.gen_range(0..3)];
    let big = [0usize, 64, usize::MAX][r.gen_range(0..3)];
    let ro = r.gen_bool(0.5);
    let tentative = r.gen_bool(0.5);
    let t_ms = [100u64, 500][r.gen_range(0..2)];
    let status_ms = r.gen_range(50..=150);
    let retransmit_ms = r.gen_range(100..=150);
    let clients = r.gen_range(2..=4);
    let keys = r.gen_range(2..=5);
    let think_max_us = r.gen_range(0..=20) * MS;
    let safety_us = r.gen_range(8..=12) * S;
    // Drawn last, so the draws above keep their values for a seed. Small chunks split even
    // the simulator's small partitions: chunked state transfer under every fault family.
    let chunk = if r.gen_range(0..3) == 0 { 48 } else { 1 << 20 };
    let ro_quorum = r.gen_bool(0.5);

    let f = match replicas {
        None => f_drawn,
        Some(n) if n >= 4 && (n - 1) % 3 == 0 => ((n - 1) / 3) as u32,
        Some(n) => return Err(format!("--replicas {n}: n must be 3f+1 with f ≥ 1")),
    };
    let mut config = Config::new(f);
    config.checkpoint_interval = k;
    config.log_window = 2 * k;
    config.batch_window = w;
    config.big_request_threshold = big;
    config.read_only_optimisation = ro;
    config.tentative_execution = tentative;
    config.view_change_timeout = Duration::from_millis(t_ms);
    config.view_change_timeout_max = Duration::from_millis(16 * t_ms);
    config.status_interval = Duration::from_millis(status_ms);
    config.client_retransmit = Duration::from_millis(retransmit_ms);
    config.state_chunk_bytes = chunk;
    config.read_only_to_quorum = ro_quorum;
    config.validate()?;
    Ok(Params {
        config,
        clients,
        workload: WorkloadParams {
            keys,
            think_max_us,
            // A mean pause of 3 × safety / cap, taken after 30% of operations, spreads the
            // capped operations over about the whole phase.
            pause_max_us: 6 * safety_us / SAFETY_OPS_MAX,
            pause_ppm: 300_000,
            big_put_ppm: 200_000,
        },
        safety_us,
        liveness_bound_us: 120 * S,
        liveness_new_ops: 3,
        safety_ops_max: SAFETY_OPS_MAX,
        net: NetFaults::benign(),
    })
}

fn noisy_net(r: &mut SimRng) -> NetFaults {
    let mut maybe = |max: u32| {
        if r.gen_bool(0.5) {
            r.gen_range(0..=max)
        } else {
            0
        }
    };
    let drop_ppm = maybe(300_000);
    let dup_ppm = maybe(100_000);
    let replay_ppm = maybe(100_000);
    let corrupt_ppm = maybe(50_000);
    let tail_ppm = maybe(50_000);
    NetFaults {
        latency_min_us: r.gen_range(100..=2_000),
        jitter_us: r.gen_range(0..=5_000),
        tail_ppm,
        tail_max_us: r.gen_range(10..=300) * MS,
        drop_ppm,
        dup_ppm,
        replay_ppm,
        corrupt_ppm,
    }
}

fn light_net(r: &mut SimRng) -> NetFaults {
    NetFaults {
        drop_ppm: r.gen_range(0..=20_000),
        jitter_us: r.gen_range(0..=3_000),
        ..NetFaults::benign()
    }
}

fn partitions(
    r: &mut SimRng,
    p: &Params,
    episodes: usize,
    shapes: &[Shape],
    faults: &mut Vec<(u64, Fault)>,
) {
    let t = p.config.view_change_timeout.as_micros() as u64;
    let mut at = r.gen_range(100..=1_000) * MS;
    for _ in 0..episodes {
        if at + S > p.safety_us {
            break;
        }
        let shape = *rng::pick(r, shapes).unwrap_or(&Shape::MajorityMinority);
        let dur_us = r.gen_range(t / 2..=3 * t) + r.gen_range(0..=2 * S);
        let flaps = if r.gen_bool(0.3) {
            r.gen_range(1..=3)
        } else {
            0
        };
        faults.push((
            at,
            Fault::Partition {
                shape,
                dur_us,
                flaps,
            },
        ));
        at += (dur_us + 200 * MS) * (flaps as u64 + 1) + r.gen_range(0..=S);
    }
}

/// Episodes of slow links (random directed replica links, an extra 1–`max_ms` ms each) over
/// the safety phase.
fn slow_links(r: &mut SimRng, p: &Params, max_ms: u64, faults: &mut Vec<(u64, Fault)>) {
    let n = p.config.n();
    let mut at = r.gen_range(0..=500) * MS;
    while at + 200 * MS < p.safety_us {
        let dur_us = r.gen_range(200..=2_000) * MS;
        faults.push((
            at,
            Fault::SlowLinks {
                links: r.gen_range(1..=n * (n - 1) / 2),
                extra_min_us: MS,
                extra_max_us: r.gen_range(2..=max_ms) * MS,
                dur_us,
            },
        ));
        at += dur_us + r.gen_range(0..=S);
    }
}

/// Power cuts over the safety phase: every replica of `victims` crashes within 5 ms of the
/// others (some just before a send) and comes back from its disk after its own downtime
/// (50 ms–2 s). In half of the cuts the primary goes first (crashed, or cut off for
/// `T`–`4T`) and the rest follow `T/2`–`3T` later, so the cut often lands in a view change.
/// `amnesiac`, if any, loses its disk in the first cut (it counts against `f`).
fn power_cuts(
    r: &mut SimRng,
    params: &Params,
    victims: &[ReplicaId],
    amnesiac: Option<ReplicaId>,
    faults: &mut Vec<(u64, Fault)>,
) {
    let mut amnesiac = amnesiac;
    let t = params.config.view_change_timeout.as_micros() as u64;
    let mut at = r.gen_range(300 * MS..=2 * S);
    while at + S < params.safety_us {
        // Half the power cuts land in a view change: the primary goes first (crashed
        // or cut off), and the rest follow once the backups' timers may have fired.
        if r.gen_bool(0.5) {
            let lead = if r.gen_bool(0.5) {
                Fault::Crash {
                    target: Target::CurrentPrimary,
                    at_next_send: r.gen_bool(0.5),
                    down_us: r.gen_range(100 * MS..=3 * S),
                    with_state: true,
                }
            } else {
                Fault::Partition {
                    shape: Shape::IsolatePrimary,
                    dur_us: r.gen_range(t..=4 * t),
                    flaps: 0,
                }
            };
            faults.push((at, lead));
            at += r.gen_range(t / 2..=3 * t);
        }
        // Every replica within a few milliseconds, some mid-step before a send; each
        // comes back from its disk after its own downtime.
        let mut longest = 0;
        for &id in victims {
            let down_us = r.gen_range(50 * MS..=2 * S);
            longest = longest.max(down_us);
            faults.push((
                at + r.gen_range(0..=5 * MS),
                Fault::Crash {
                    target: Target::Replica(id),
                    at_next_send: r.gen_bool(0.3),
                    down_us,
                    with_state: amnesiac != Some(id),
                },
            ));
        }
        amnesiac = None;
        at += longest + 100 * MS + r.gen_range(500 * MS..=3 * S);
    }
}

/// Twins a drawn replica (view 0's primary with probability `p0`) from the start, its links
/// re-drawn at gaps drawn from `gap_us`; returns the correct replicas.
fn twin_with_links(
    r: &mut SimRng,
    plan: &mut Plan,
    params: &Params,
    p0: f64,
    gap_us: std::ops::RangeInclusive<u64>,
) -> Vec<ReplicaId> {
    let n = plan.roles.len();
    let id = byzantine(r, n, Some((0, p0)));
    plan.roles[id as usize] = Role::Twin;
    plan.twin = Some((id, 0));
    let mut at = 0;
    while at < params.safety_us {
        plan.faults.push((at, Fault::TwinLinks));
        at += r.gen_range(gap_us.clone());
    }
    (0..n as ReplicaId)
        .filter(|&i| plan.roles[i as usize].is_correct())
        .collect()
}

/// With probability `p`, one replica (drawn) that loses its disk in the first power cut:
/// its role becomes amnesiac (it counts against `f`).
fn maybe_amnesiac(r: &mut SimRng, plan: &mut Plan, p: f64) -> Option<ReplicaId> {
    if !r.gen_bool(p) {
        return None;
    }
    let victim = r.gen_range(0..plan.roles.len() as ReplicaId);
    plan.roles[victim as usize] = Role::Amnesiac;
    Some(victim)
}

/// Clock offsets within half the tolerance and rate errors within quartz tolerance (±500 ppm,
/// generous) for every replica.
fn skewed_clocks(r: &mut SimRng, plan: &mut Plan) {
    let delta = DEFAULT_CLOCK_TOLERANCE.as_micros() as i64;
    for o in plan.clock_offsets_us.iter_mut() {
        *o = r.gen_range(-delta / 2..=delta / 2);
    }
    for d in plan.clock_drift_ppm.iter_mut() {
        *d = r.gen_range(-500..=500);
    }
}

/// A rebooted machine reads a new wall clock: for each power-cut crash already planned, the
/// replica comes back with its clock stepped, within the tolerance for correct ones in 60 %
/// of the restarts (often behind the clock it had, which the agreed timestamps passed), and
/// 2–10 tolerances off, ahead or behind, at every restart of `faulty`.
fn clock_steps(r: &mut SimRng, plan: &mut Plan, faulty: Option<ReplicaId>) {
    let delta = DEFAULT_CLOCK_TOLERANCE.as_micros() as i64;
    let crashes: Vec<(u64, ReplicaId)> = plan
        .faults
        .iter()
        .filter_map(|(at, fault)| match fault {
            Fault::Crash {
                target: Target::Replica(id),
                ..
            } => Some((*at, *id)),
            _ => None,
        })
        .collect();
    for (at, replica) in crashes {
        let offset_us = if Some(replica) == faulty {
            let mag = r.gen_range(2..=10) * delta;
            if r.gen_bool(0.5) {
                mag
            } else {
                -mag
            }
        } else if r.gen_bool(0.6) {
            r.gen_range(-delta / 2..=delta / 2)
        } else {
            continue;
        };
        plan.faults
            .push((at, Fault::ClockAtRestart { replica, offset_us }));
    }
}

fn byzantine(r: &mut SimRng, n: usize, prefer: Option<(ReplicaId, f64)>) -> ReplicaId {
    match prefer {
        Some((id, p)) if r.gen_bool(p) => id,
        _ => r.gen_range(0..n as ReplicaId),
    }
}

/// Builds the plan for `seed` in `family`, with `n` fixed if `replicas` is given.
pub fn plan(seed: u64, family: Family, replicas: Option<usize>) -> Result<Plan, String> {
    let mut params = sweep(seed, replicas)?;
    let n = params.config.n();
    let f = params.config.f as usize;
    let mut r = stream(seed, Purpose::Faults);
    let mut plan = Plan {
        family,
        roles: vec![Role::Correct; n],
        byzantine: Vec::new(),
        twin: None,
        clock_offsets_us: vec![0; n],
        clock_drift_ppm: vec![0; n],
        clock_faulty: Vec::new(),
        bad_clients: Vec::new(),
        faults: Vec::new(),
        slow_execution: None,
        clock_tolerance: DEFAULT_CLOCK_TOLERANCE,
        stable_view: false,
        params: params.clone(),
    };
    let byz = |plan: &mut Plan, id: ReplicaId, kind: StrategyKind| {
        plan.roles[id as usize] = Role::Byzantine;
        plan.byzantine.push((id, kind));
    };
    match family {
        Family::Normal => {}
        Family::Net => params.net = noisy_net(&mut r),
        Family::Partition => {
            let episodes = r.gen_range(2..=6);
            partitions(&mut r, &params, episodes, &Shape::ALL, &mut plan.faults);
        }
        Family::Crash => {
            let mut chains = r.gen_range(1..=f);
            if r.gen_bool(0.25) {
                let victim = r.gen_range(0..n as ReplicaId);
                plan.roles[victim as usize] = Role::Amnesiac;
                let at = r.gen_range(S..params.safety_us / 2);
                let down_us = r.gen_range(100 * MS..=3 * S);
                let at_next_send = r.gen_bool(0.5);
                plan.faults.push((
                    at,
                    Fault::Crash {
                        target: Target::Replica(victim),
                        at_next_send,
                        down_us,
                        with_state: false,
                    },
                ));
                chains = chains.min(f - 1);
            }
            for _ in 0..chains {
                let fixed = r.gen_range(0..n as ReplicaId);
                let mut at = r.gen_range(200 * MS..=2 * S);
                while at + S < params.safety_us {
                    let target = if r.gen_bool(0.5) {
                        Target::CurrentPrimary
                    } else {
                        Target::Replica(fixed)
                    };
                    let down_us = r.gen_range(100 * MS..=3 * S);
                    let at_next_send = r.gen_bool(0.5);
                    plan.faults.push((
                        at,
                        Fault::Crash {
                            target,
                            at_next_send,
                            down_us,
                            with_state: true,
                        },
                    ));
                    at += down_us + 100 * MS + r.gen_range(200 * MS..=2 * S);
                }
            }
        }
        Family::Clock => {
            let delta = DEFAULT_CLOCK_TOLERANCE.as_micros() as i64;
            for o in plan.clock_offsets_us.iter_mut() {
                *o = r.gen_range(-delta / 2..=delta / 2);
            }
            if r.gen_bool(0.5) {
                let victim = r.gen_range(0..n as ReplicaId);
                let mag = r.gen_range(2..=10) * delta;
                plan.clock_offsets_us[victim as usize] = if r.gen_bool(0.5) { mag } else { -mag };
                plan.clock_faulty.push(victim);
            }
            params.net = light_net(&mut r);
            // Rate errors: within quartz tolerance for all (±500 ppm, generous); sometimes one
            // replica (counted faulty) runs 2–30 % fast or slow, firing its timers early or
            // late and proposing drifting timestamps.
            for d in plan.clock_drift_ppm.iter_mut() {
                *d = r.gen_range(-500..=500);
            }
            if r.gen_bool(0.5) {
                // The replica already skewed beyond tolerance, if any: at most one faulty clock
                // (the plan keeps all faults within f).
                let victim = match plan.clock_faulty.first() {
                    Some(&v) => v,
                    None => r.gen_range(0..n as ReplicaId),
                };
                let mag = r.gen_range(20_000..=300_000);
                plan.clock_drift_ppm[victim as usize] = if r.gen_bool(0.5) { mag } else { -mag };
                if plan.clock_faulty.is_empty() {
                    plan.clock_faulty.push(victim);
                }
            }
        }
        Family::Equivocate => {
            let id = byzantine(&mut r, n, Some((0, 0.7)));
            byz(&mut plan, id, StrategyKind::Equivocate);
        }
        Family::SlowPrimary => {
            let id = byzantine(&mut r, n, Some((0, 0.8)));
            byz(&mut plan, id, StrategyKind::SlowPrimary);
        }
        Family::Garbage => {
            let id = byzantine(&mut r, n, None);
            byz(&mut plan, id, StrategyKind::Garbage);
        }
        Family::LyingReplies => {
            let id = byzantine(&mut r, n, None);
            byz(&mut plan, id, StrategyKind::LyingReplies);
        }
        Family::VcLies => {
            let id = byzantine(&mut r, n, Some((1, 0.6)));
            byz(&mut plan, id, StrategyKind::VcLies);
            let episodes = r.gen_range(2..=4);
            partitions(
                &mut r,
                &params,
                episodes,
                &[Shape::IsolatePrimary, Shape::IsolatePrimaryFully],
                &mut plan.faults,
            );
        }
        Family::Twins => {
            let id = byzantine(&mut r, n, Some((0, 0.6)));
            plan.roles[id as usize] = Role::Twin;
            let start = if r.gen_bool(0.6) {
                0
            } else {
                r.gen_range(0..params.safety_us / 2)
            };
            plan.twin = Some((id, start));
            if start > 0 {
                plan.faults.push((start, Fault::StartTwin));
            }
            let mut at = 0;
            while at < params.safety_us {
                plan.faults.push((at, Fault::TwinLinks));
                at += r.gen_range(300 * MS..=2 * S);
            }
        }
        Family::Byzzfuzz => {
            let id = byzantine(&mut r, n, Some((0, 0.5)));
            byz(&mut plan, id, StrategyKind::ByzzFuzz);
            let d = r.gen_range(0..=3);
            partitions(&mut r, &params, d, &Shape::ALL, &mut plan.faults);
        }
        Family::BadClients => {
            for _ in 0..r.gen_range(1..=2) {
                plan.bad_clients.push(r.gen_range(10..=50) * MS);
            }
            params.net = light_net(&mut r);
        }
        Family::StateTransfer => {
            params.config.checkpoint_interval = 4;
            params.config.log_window = 8;
            params.config.batch_window = params.config.batch_window.min(4);
            params.workload.think_max_us = params.workload.think_max_us.min(5 * MS);
            let victim = r.gen_range(0..n as ReplicaId);
            let at = r.gen_range(500 * MS..=2 * S);
            let dur_us = r.gen_range(2 * S..=6 * S);
            match r.gen_range(0..3) {
                0 => plan.faults.push((
                    at,
                    Fault::Isolate {
                        replica: victim,
                        dur_us,
                    },
                )),
                1 => plan.faults.push((
                    at,
                    Fault::Crash {
                        target: Target::Replica(victim),
                        at_next_send: false,
                        down_us: dur_us,
                        with_state: true,
                    },
                )),
                _ => {
                    plan.roles[victim as usize] = Role::Amnesiac;
                    plan.faults.push((
                        at,
                        Fault::Crash {
                            target: Target::Replica(victim),
                            at_next_send: false,
                            down_us: dur_us,
                            with_state: false,
                        },
                    ));
                }
            }
        }
        Family::EagerVoter => {
            // Up to f eager backups (of view 0; later views rotate the primary onto them).
            let mut ids: Vec<ReplicaId> = (1..n as ReplicaId).collect();
            rng::shuffle(&mut r, &mut ids);
            let count = if r.gen_bool(0.8) {
                f
            } else {
                r.gen_range(1..=f)
            };
            for &id in &ids[..count] {
                byz(&mut plan, id, StrategyKind::EagerVoter);
            }
            if r.gen_bool(0.5) {
                params.net = light_net(&mut r);
            }
            slow_links(&mut r, &params, 30, &mut plan.faults);
        }
        Family::VcHistory => {
            // The trapped slot must stay above the stable checkpoint across two view changes:
            // mostly K = 128, sometimes 16 (a checkpoint may then overtake it).
            let k = if r.gen_bool(0.8) { 128 } else { 16 };
            params.config.checkpoint_interval = k;
            params.config.log_window = 2 * k;
            let start = r.gen_range(300 * MS..=params.safety_us / 3);
            plan.faults
                .push((start, Fault::VcHistory(VcHistoryPlan::draw(&mut r))));
        }
        Family::EquivocateSlow => {
            let id = byzantine(&mut r, n, Some((0, 0.8)));
            byz(&mut plan, id, StrategyKind::EquivocateBridge);
            params.net = NetFaults {
                jitter_us: r.gen_range(1_000..=10_000),
                ..NetFaults::benign()
            };
            slow_links(&mut r, &params, 20, &mut plan.faults);
            // Rotate the primary now and then, so the equivocator leads again.
            let episodes = r.gen_range(2..=6);
            partitions(
                &mut r,
                &params,
                episodes,
                &[Shape::IsolatePrimary],
                &mut plan.faults,
            );
        }
        Family::TotalCrash => {
            // Half the seeds add loss, duplication, corruption and replays: frames from
            // before a cut arrive after the restart.
            params.net = if r.gen_bool(0.5) {
                noisy_net(&mut r)
            } else {
                light_net(&mut r)
            };
            let all: Vec<ReplicaId> = (0..n as ReplicaId).collect();
            // Sometimes one replica's disk is lost in the first cut too.
            let amnesiac = maybe_amnesiac(&mut r, &mut plan, 0.25);
            power_cuts(&mut r, &params, &all, amnesiac, &mut plan.faults);
        }
        Family::ByzantinePowerCuts => {
            params.net = light_net(&mut r);
            let kinds = [
                StrategyKind::Equivocate,
                StrategyKind::EquivocateBridge,
                StrategyKind::SlowPrimary,
                StrategyKind::Garbage,
                StrategyKind::LyingReplies,
                StrategyKind::VcLies,
                StrategyKind::ByzzFuzz,
                StrategyKind::EagerVoter,
            ];
            for _ in 0..r.gen_range(1..=f) {
                let id = byzantine(&mut r, n, Some((0, 0.3)));
                let kind = *rng::pick(&mut r, &kinds).unwrap_or(&StrategyKind::Equivocate);
                if plan.roles[id as usize].is_correct() {
                    byz(&mut plan, id, kind);
                }
            }
            let correct: Vec<ReplicaId> = (0..n as ReplicaId)
                .filter(|&i| plan.roles[i as usize].is_correct())
                .collect();
            power_cuts(&mut r, &params, &correct, None, &mut plan.faults);
        }
        Family::ClockPowerCuts => {
            params.net = light_net(&mut r);
            skewed_clocks(&mut r, &mut plan);
            // Sometimes one replica's clock is faulty: it comes back from a cut 2–10×
            // beyond the tolerance, ahead or behind.
            let faulty = if r.gen_bool(0.4) {
                let v = r.gen_range(0..n as ReplicaId);
                plan.clock_faulty.push(v);
                Some(v)
            } else {
                None
            };
            let all: Vec<ReplicaId> = (0..n as ReplicaId).collect();
            power_cuts(&mut r, &params, &all, None, &mut plan.faults);
            clock_steps(&mut r, &mut plan, faulty);
        }
        Family::TransferPowerCuts => {
            params.config.checkpoint_interval = 4;
            params.config.log_window = 8;
            params.config.batch_window = params.config.batch_window.min(4);
            params.workload.think_max_us = params.workload.think_max_us.min(5 * MS);
            params.net = light_net(&mut r);
            // A replica falls behind, now and then, for long enough that the others'
            // stable checkpoint passes it.
            let mut at = r.gen_range(200 * MS..=S);
            while at + S < params.safety_us {
                let dur_us = r.gen_range(S..=4 * S);
                let replica = r.gen_range(0..n as ReplicaId);
                plan.faults.push((at, Fault::Isolate { replica, dur_us }));
                at += dur_us + r.gen_range(500 * MS..=3 * S);
            }
            let all: Vec<ReplicaId> = (0..n as ReplicaId).collect();
            let amnesiac = maybe_amnesiac(&mut r, &mut plan, 0.3);
            power_cuts(&mut r, &params, &all, amnesiac, &mut plan.faults);
        }
        Family::TwinPowerCuts => {
            params.net = light_net(&mut r);
            let correct = twin_with_links(&mut r, &mut plan, &params, 0.5, 300 * MS..=2 * S);
            power_cuts(&mut r, &params, &correct, None, &mut plan.faults);
        }
        Family::PartitionPowerCuts => {
            params.net = if r.gen_bool(0.5) {
                noisy_net(&mut r)
            } else {
                light_net(&mut r)
            };
            let episodes = r.gen_range(3..=8);
            partitions(&mut r, &params, episodes, &Shape::ALL, &mut plan.faults);
            let all: Vec<ReplicaId> = (0..n as ReplicaId).collect();
            let amnesiac = maybe_amnesiac(&mut r, &mut plan, 0.2);
            power_cuts(&mut r, &params, &all, amnesiac, &mut plan.faults);
        }
        Family::ByzantineClocks => {
            params.net = light_net(&mut r);
            skewed_clocks(&mut r, &mut plan);
            let kinds = [
                StrategyKind::TimeWarp,
                StrategyKind::TimeWarp,
                StrategyKind::TimeWarp,
                StrategyKind::Equivocate,
                StrategyKind::SlowPrimary,
                StrategyKind::VcLies,
                StrategyKind::ByzzFuzz,
                StrategyKind::EagerVoter,
            ];
            // With f ≥ 2, sometimes one of the faulty replicas is a clock instead: it comes
            // back from every cut far beyond the tolerance.
            let clock_faulty = f >= 2 && r.gen_bool(0.4);
            let byz_max = if clock_faulty { f - 1 } else { f };
            for _ in 0..r.gen_range(1..=byz_max) {
                let id = byzantine(&mut r, n, Some((0, 0.5)));
                let kind = *rng::pick(&mut r, &kinds).unwrap_or(&StrategyKind::TimeWarp);
                if plan.roles[id as usize].is_correct() {
                    byz(&mut plan, id, kind);
                }
            }
            let correct: Vec<ReplicaId> = (0..n as ReplicaId)
                .filter(|&i| plan.roles[i as usize].is_correct())
                .collect();
            let faulty = if clock_faulty {
                let v = correct[r.gen_range(0..correct.len())];
                plan.clock_faulty.push(v);
                Some(v)
            } else {
                None
            };
            power_cuts(&mut r, &params, &correct, None, &mut plan.faults);
            clock_steps(&mut r, &mut plan, faulty);
        }
        Family::VoteCuts => {
            params.net = light_net(&mut r);
            let correct = twin_with_links(&mut r, &mut plan, &params, 0.7, 50 * MS..=300 * MS);
            // Short downtimes, well under the view-change timeout, so that the replica
            // comes back in the view it voted in and the other twin's proposal can reach it.
            let t = params.config.view_change_timeout.as_micros() as u64;
            let mut at = r.gen_range(100 * MS..=500 * MS);
            while at < params.safety_us {
                let replica = correct[r.gen_range(0..correct.len())];
                let down_us = r.gen_range(5 * MS..=t / 2);
                plan.faults
                    .push((at, Fault::CrashAfterPrepare { replica, down_us }));
                at += r.gen_range(50 * MS..=300 * MS);
            }
        }
        Family::SlowExecution => {
            // No faults: a jittery network (no loss, which the STATUS retransmission repairs
            // only after a while), and 5–15 % of the requests cost T/2–3T to execute.
            params.net = NetFaults {
                jitter_us: r.gen_range(0..=3_000),
                ..NetFaults::benign()
            };
            let t = params.config.view_change_timeout.as_micros() as u64;
            plan.slow_execution = Some(SlowExecution {
                ppm: r.gen_range(50_000..=150_000),
                min_us: t / 2,
                max_us: 3 * t,
            });
            // Timestamps are checked against a clock tolerance far above any execution
            // time here. With the default (1 s), a step that executes for longer makes the
            // timestamps go stale, and the view changes whatever `busy_for` does: the
            // PRE-PREPARE a primary builds after executing in the same step carries the
            // step's `now`, and one that waits in a busy backup's inbox arrives old.
            plan.clock_tolerance = Duration::from_secs(30);
            plan.stable_view = true;
        }
    }
    params.config.validate()?;
    plan.params = params;
    plan.faults.sort_by_key(|(t, _)| *t);
    if plan.faulty() > f {
        return Err(format!(
            "plan exceeds the fault budget: {} faulty > f = {f}",
            plan.faulty()
        ));
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_all_cycles_through_families() {
        for f in FAMILIES {
            assert_eq!(Family::from_name(f.name()), Some(f));
        }
        assert_eq!(Family::for_seed(0), Family::Normal);
        assert_eq!(Family::for_seed(FAMILIES.len() as u64 + 1), Family::Net);
    }

    #[test]
    fn plans_respect_the_fault_budget_and_validate() {
        for seed in 0..300 {
            for fam in FAMILIES {
                let p = plan(seed, fam, None).expect("valid plan");
                assert!(p.faulty() <= p.params.config.f as usize);
                assert!(p.params.config.validate().is_ok());
            }
        }
    }

    #[test]
    fn fixing_n_to_the_drawn_value_replays_the_same_plan() {
        for seed in 0..50 {
            let free = plan(seed, Family::Crash, None).expect("plan");
            let fixed = plan(seed, Family::Crash, Some(free.params.config.n())).expect("plan");
            assert_eq!(free.params, fixed.params);
            assert_eq!(free.faults, fixed.faults);
        }
        assert!(plan(1, Family::Normal, Some(5)).is_err());
        assert_eq!(
            plan(1, Family::Normal, Some(7)).map(|p| p.params.config.n()),
            Ok(7)
        );
    }
}
