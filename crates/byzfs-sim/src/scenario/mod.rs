//! Scenario families (docs/PROTOCOL.md §6.4) and the per-seed parameter sweep (§6.5). A run is a
//! pure function of `(seed, family, replicas override)`: [`plan`] draws the parameters from the
//! seed's `Params` stream (always in the same order, so `--replicas N` with the `n` a seed drew
//! anyway replays it exactly) and the faults from its `Faults` stream.
//!
//! The families, one plan function each, are in [`family`] (adding one touches that file and
//! `tests/scenarios.rs`); their building blocks in `faults.rs`.

use crate::byzantine::StrategyKind;
use crate::checker::Role;
use crate::fault::Fault;
use crate::kv::DEFAULT_CLOCK_TOLERANCE;
use crate::network::NetFaults;
use crate::rng::{self, stream, Ppm, Purpose};
use crate::workload::WorkloadParams;
use byzfs_bft::{ClientId, Config, ReplicaId, RequestId};
use rand::Rng;
use std::time::Duration;

pub mod family;
mod faults;

pub use family::{Family, Spec, FAMILIES, FS_FAMILIES, FS_TABLE, TABLE};

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
    /// In the liveness phase, clients stop at their quota even while a replica lags: it
    /// must catch up in a quiet cluster, with no new checkpoint to fetch (`left-behind`).
    pub quiet_catch_up: bool,
    /// The liveness phase ends only once every correct replica's last stable checkpoint
    /// covers every acknowledged write: with [`Params::quiet_catch_up`], only the primary's
    /// null batches after a quiet spell get it there (`idle-checkpoint`; `byzfs_bft`'s
    /// `replica/idle.rs`).
    pub stable_at_rest: bool,
    /// Whether the surviving replicas' drivers report a crashed replica unreachable and a
    /// restarted one reachable (`Replica::handle_reachability`), as a real driver's refused
    /// redial does (`unreachable-primary`).
    pub report_reachability: bool,
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
    /// Bytes per second every node's access link carries each way in the safety phase
    /// (`thin-links`; `None`: no limit).
    pub link_rate: Option<u64>,
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
    /// What the `slow-view` checker holds the run to: in the `slow-primary` family with the
    /// throughput watch on, the slow primary's views end within the grace, the patience, the
    /// periods the raised bar needs to pass `100/percent` of the primary's own best (its
    /// first view has no better history), four more periods and two timeouts (the view
    /// change itself).
    pub fn slow_watch(&self) -> Option<crate::checker::slow_view::Watch> {
        let c = &self.params.config;
        let m = &c.monitor;
        if self.family != Family::SlowPrimary || !m.enabled || m.raise_percent == 0 {
            return None;
        }
        let (primary, _) = self
            .byzantine
            .iter()
            .find(|(_, k)| *k == StrategyKind::SlowPrimary)?;
        let need =
            (100.0 / f64::from(m.percent)).ln() / (1.0 + f64::from(m.raise_percent) / 100.0).ln();
        let periods = need.ceil() as u64 + 4;
        let us = |d: Duration| d.as_micros() as u64;
        Some(crate::checker::slow_view::Watch {
            primary: *primary,
            n: c.n(),
            weak: c.weak(),
            bound_us: us(m.grace)
                + us(m.patience)
                + periods * us(m.period)
                + 2 * us(c.view_change_timeout),
        })
    }

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
            "n={} K={} W={} big={} relay={}/{} ro={} roq={} tent={} T={}ms status={}ms chunk={} clients={}+{}bad byz={:?} twin={:?}{slow}",
            c.n(),
            c.checkpoint_interval,
            c.batch_window,
            if c.big_request_threshold == usize::MAX { "inf".to_string() } else { c.big_request_threshold.to_string() },
            c.relay_big_requests,
            c.relay_fan_out(),
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

pub(crate) const MS: u64 = 1_000;
pub(crate) const S: u64 = 1_000_000;
/// Least state-transfer chunk in the file-service families, bytes.
const FS_CHUNK_MIN: usize = 1024;
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
    // Big bodies relayed by the primary (the default) in three seeds of four.
    let relay = r.gen_range(0..4) != 0;

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
    config.relay_big_requests = relay;
    // Idle checkpoints only where a family asks for them (`idle-checkpoint`): the other
    // families' seeds, the mutation seeds among them, were found without the null batches.
    config.idle_checkpoint = Duration::ZERO;
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
            big_put_max: 300,
            read_apart: false,
        },
        safety_us,
        liveness_bound_us: 120 * S,
        liveness_new_ops: 3,
        safety_ops_max: SAFETY_OPS_MAX,
        net: NetFaults::benign(),
        quiet_catch_up: false,
        stable_at_rest: false,
        report_reachability: false,
    })
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
        link_rate: None,
        params: params.clone(),
    };
    (family.spec().plan)(&mut r, &mut params, &mut plan, n, f);
    if family.service().is_fs() {
        // A file system's partitions hold kilobytes where the key-value store's hold bytes:
        // 48-byte chunks would make a fetch outlast any run. Chunked still, by 1 KiB.
        params.config.state_chunk_bytes = params.config.state_chunk_bytes.max(FS_CHUNK_MIN);
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
    fn fs_families_are_apart_from_all() {
        for f in FS_FAMILIES {
            assert_eq!(Family::from_name(f.name()), Some(f));
            assert!(f.service().is_fs());
            assert!(!FAMILIES.contains(&f));
            assert!(plan(7, f, None).is_ok());
        }
        assert!(FAMILIES
            .iter()
            .all(|f| f.service() == crate::service::ServiceKind::Kv));
        assert_eq!(Family::for_fs_seed(1), FS_FAMILIES[1]);
    }

    #[test]
    fn every_family_has_one_row() {
        let families: std::collections::BTreeSet<Family> = FAMILIES.into_iter().collect();
        let names: std::collections::BTreeSet<&str> = TABLE.iter().map(|s| s.name).collect();
        assert_eq!(families.len(), TABLE.len(), "a family listed twice");
        assert_eq!(names.len(), TABLE.len(), "a name used twice");
        for s in &TABLE {
            assert_eq!(s.family.spec().name, s.name);
        }
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
