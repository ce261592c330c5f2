//! Liveness (docs/PROTOCOL.md §6.6, checked in the liveness phase only): after the faults heal —
//! except for at most `f` Byzantine replicas, which keep misbehaving — every correct client's
//! outstanding request and a few new ones must complete within a stated bound of virtual time,
//! and lagging replicas must catch up.

use super::Sink;
use byzfs_bft::{ClientId, RequestId, Seq, Time};

/// Checker name.
pub const NAME: &str = "liveness";

/// A correct client's progress in the liveness phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientProgress {
    /// Client.
    pub client: ClientId,
    /// Operations completed so far (whole run).
    pub completed: u64,
    /// Operations that must be completed by the deadline.
    pub target: u64,
    /// The outstanding request and when it was invoked.
    pub outstanding: Option<(RequestId, Time)>,
    /// Invocations the client refused (`ClientError`).
    pub refused: u64,
}

/// A replica that has not caught up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lagging {
    /// Instance.
    pub inst: usize,
    /// Its last executed sequence number.
    pub last_executed: Seq,
    /// Its last stable checkpoint.
    pub last_stable: Seq,
    /// Where it should be.
    pub target: Seq,
}

/// The liveness phase's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Liveness {
    /// When the faults healed.
    pub start: Time,
    /// The bound, µs.
    pub bound_us: u64,
}

impl Liveness {
    /// The deadline.
    pub fn deadline(&self) -> Time {
        Time(self.start.as_micros() + self.bound_us)
    }

    /// Whether every client reached its target.
    pub fn clients_done(clients: &[ClientProgress]) -> bool {
        clients.iter().all(|c| c.completed >= c.target)
    }

    /// Reports what did not finish by the deadline (nothing if everything did).
    pub fn report(
        &self,
        sink: &mut Sink,
        now: Time,
        clients: &[ClientProgress],
        lagging: &[Lagging],
    ) {
        let bound = format!(
            "within the {} s bound after healing at t={} µs",
            self.bound_us / 1_000_000,
            self.start.as_micros()
        );
        for c in clients.iter().filter(|c| c.completed < c.target) {
            let out = match c.outstanding {
                Some((rid, t)) => format!("rid {rid} outstanding since t={} µs", t.as_micros()),
                None => "nothing outstanding".into(),
            };
            sink.report(
                NAME,
                now,
                format!(
                    "c{} completed {} of {} operations {bound} ({out}; {} invocations refused)",
                    c.client, c.completed, c.target, c.refused
                ),
            );
        }
        for l in lagging {
            sink.report(
                NAME,
                now,
                format!(
                    "r{} executed through seq {} (stable checkpoint {}), not covering seq {} {bound}",
                    l.inst, l.last_executed, l.last_stable, l.target
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_stuck_clients_and_replicas_with_the_bound() {
        let l = Liveness {
            start: Time(10_000_000),
            bound_us: 120_000_000,
        };
        assert_eq!(l.deadline(), Time(130_000_000));
        let ok = ClientProgress {
            client: 1,
            completed: 5,
            target: 5,
            outstanding: None,
            refused: 0,
        };
        let stuck = ClientProgress {
            client: 2,
            completed: 3,
            target: 5,
            outstanding: Some((4, Time(9))),
            refused: 0,
        };
        assert!(Liveness::clients_done(&[ok]));
        assert!(!Liveness::clients_done(&[ok, stuck]));
        let mut s = Sink::new(1, "t");
        l.report(&mut s, l.deadline(), &[ok], &[]);
        assert!(!s.any());
        l.report(
            &mut s,
            l.deadline(),
            &[ok, stuck],
            &[Lagging {
                inst: 3,
                last_executed: 1,
                last_stable: 0,
                target: 9,
            }],
        );
        assert_eq!(s.violations().len(), 2);
        assert!(s.violations()[0].message.contains("120 s bound"));
    }
}
