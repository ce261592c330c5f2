//! The building blocks of the families' fault plans ([`super::family`]): network faults,
//! partitions, slow links, power cuts, twins, amnesia, clocks and the choice of a Byzantine
//! replica. Each draws from the `Faults` stream it is given, in a fixed order.

use super::{Params, Plan, MS, S};
use crate::checker::Role;
use crate::fault::{Fault, Target};
use crate::kv::DEFAULT_CLOCK_TOLERANCE;
use crate::network::NetFaults;
use crate::partition::Shape;
use crate::rng::{self, SimRng};
use byzfs_bft::ReplicaId;
use rand::Rng;

pub(super) fn noisy_net(r: &mut SimRng) -> NetFaults {
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

pub(super) fn light_net(r: &mut SimRng) -> NetFaults {
    NetFaults {
        drop_ppm: r.gen_range(0..=20_000),
        jitter_us: r.gen_range(0..=3_000),
        ..NetFaults::benign()
    }
}

pub(super) fn partitions(
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
pub(super) fn slow_links(r: &mut SimRng, p: &Params, max_ms: u64, faults: &mut Vec<(u64, Fault)>) {
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
pub(super) fn power_cuts(
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
pub(super) fn twin_with_links(
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
pub(super) fn maybe_amnesiac(r: &mut SimRng, plan: &mut Plan, p: f64) -> Option<ReplicaId> {
    if !r.gen_bool(p) {
        return None;
    }
    let victim = r.gen_range(0..plan.roles.len() as ReplicaId);
    plan.roles[victim as usize] = Role::Amnesiac;
    Some(victim)
}

/// Clock offsets within half the tolerance and rate errors within quartz tolerance (±500 ppm,
/// generous) for every replica.
pub(super) fn skewed_clocks(r: &mut SimRng, plan: &mut Plan) {
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
pub(super) fn clock_steps(r: &mut SimRng, plan: &mut Plan, faulty: Option<ReplicaId>) {
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

pub(super) fn byzantine(r: &mut SimRng, n: usize, prefer: Option<(ReplicaId, f64)>) -> ReplicaId {
    match prefer {
        Some((id, p)) if r.gen_bool(p) => id,
        _ => r.gen_range(0..n as ReplicaId),
    }
}
