//! The replica's timers: an enum indexing a fixed table (docs/STYLE.md, quinn's `TimerTable`).

use crate::time::Time;

/// Every timer a replica runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimerKind {
    /// Periodic STATUS (retransmission, §1.3).
    Status = 0,
    /// View-change timer: a pending request not executed, or waiting for NEW-VIEW (§3.1).
    ViewChange = 1,
    /// State-transfer retry (rotate the replier).
    Fetch = 2,
    /// End of a period of the primary's throughput watch ([`super::monitor`]).
    Monitor = 3,
    /// The primary has ordered nothing for `idle_checkpoint` (`replica/idle.rs`).
    Idle = 4,
}

const ALL: [TimerKind; 5] = [
    TimerKind::Status,
    TimerKind::ViewChange,
    TimerKind::Fetch,
    TimerKind::Monitor,
    TimerKind::Idle,
];

/// Deadlines by kind.
#[derive(Clone, Debug, Default)]
pub(crate) struct Timers {
    at: [Option<Time>; 5],
}

impl Timers {
    pub fn set(&mut self, k: TimerKind, at: Time) {
        self.at[k as usize] = Some(at);
    }
    pub fn stop(&mut self, k: TimerKind) {
        self.at[k as usize] = None;
    }
    pub fn is_set(&self, k: TimerKind) -> bool {
        self.at[k as usize].is_some()
    }
    pub fn get(&self, k: TimerKind) -> Option<Time> {
        self.at[k as usize]
    }
    pub fn next(&self) -> Option<Time> {
        self.at.iter().flatten().min().copied()
    }
    /// Removes and returns the timers due at `now`, in a fixed order.
    pub fn expired(&mut self, now: Time) -> Vec<TimerKind> {
        let mut due = Vec::new();
        for k in ALL {
            if self.at[k as usize].is_some_and(|t| t <= now) {
                self.at[k as usize] = None;
                due.push(k);
            }
        }
        due
    }
}
