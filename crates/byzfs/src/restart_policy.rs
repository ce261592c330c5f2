//! When `byzfs up` restarts a replica process that exited, and when it gives up on it
//! (README "When a replica dies").
//!
//! The delay doubles from `initial` to `max` with each exit. A run that lasted
//! `healthy_after` forgets the history: the delay drops back to `initial` and earlier exits
//! no longer count. A replica that exited `give_up_after` times within `window` (and since
//! its last healthy run) is crashing, not dying now and then: `up` stops restarting it and
//! says why.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The back-off's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Delay before the first restart (and after a run of `healthy_after`).
    pub initial: Duration,
    /// The delay doubles up to this.
    pub max: Duration,
    /// A run at least this long resets the delay and the exits counted.
    pub healthy_after: Duration,
    /// This many exits within `window` and `up` gives up.
    pub give_up_after: usize,
    pub window: Duration,
}

impl Default for RestartPolicy {
    /// 0.5 s doubling to 30 s, reset after 30 s of running; 5 exits within 60 s give up
    /// (the quickest such loop takes 0.5 + 1 + 2 + 4 = 7.5 s).
    fn default() -> Self {
        RestartPolicy {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(30),
            healthy_after: Duration::from_secs(30),
            give_up_after: 5,
            window: Duration::from_secs(60),
        }
    }
}

/// What to do about a replica that exited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Start it again after this delay.
    RestartIn(Duration),
    /// It exited `exits` times within the policy's window: leave it down.
    GiveUp { exits: usize },
}

/// One replica's restart history.
#[derive(Debug)]
pub struct Backoff {
    policy: RestartPolicy,
    /// The delay before the next restart.
    next: Duration,
    /// When it exited, within the window.
    exits: VecDeque<Instant>,
}

impl Backoff {
    pub fn new(policy: RestartPolicy) -> Backoff {
        Backoff {
            policy,
            next: policy.initial,
            exits: VecDeque::new(),
        }
    }

    pub fn policy(&self) -> RestartPolicy {
        self.policy
    }

    /// The replica started at `started` exited at `now`.
    pub fn on_exit(&mut self, started: Instant, now: Instant) -> Decision {
        let p = self.policy;
        if now.saturating_duration_since(started) >= p.healthy_after {
            self.next = p.initial;
            self.exits.clear();
        }
        self.exits.push_back(now);
        while self
            .exits
            .front()
            .is_some_and(|&t| now.saturating_duration_since(t) > p.window)
        {
            self.exits.pop_front();
        }
        if self.exits.len() >= p.give_up_after {
            return Decision::GiveUp {
                exits: self.exits.len(),
            };
        }
        let delay = self.next;
        self.next = (self.next * 2).min(p.max);
        Decision::RestartIn(delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// The decisions for exits after runs of `runs[i]` each, restarted as decided.
    fn decisions(policy: RestartPolicy, runs: &[Duration]) -> Vec<Decision> {
        let mut b = Backoff::new(policy);
        let mut now = Instant::now();
        let mut out = Vec::new();
        for &run in runs {
            let started = now;
            now += run;
            let d = b.on_exit(started, now);
            if let Decision::RestartIn(delay) = d {
                now += delay;
            }
            out.push(d);
        }
        out
    }

    #[test]
    fn the_delay_doubles_up_to_the_maximum() {
        let p = RestartPolicy {
            give_up_after: 100,
            ..RestartPolicy::default()
        };
        // Runs of 20 s: not healthy, and at most 3 exits fit in the minute.
        let got = decisions(p, &[Duration::from_secs(20); 9]);
        let want: Vec<Decision> = [
            500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000,
        ]
        .into_iter()
        .map(|ms| Decision::RestartIn(MS * ms))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_long_run_resets_the_delay() {
        let s = Duration::from_secs;
        let got = decisions(RestartPolicy::default(), &[s(1), s(1), s(1), s(31), s(1)]);
        assert_eq!(
            got,
            [500, 1_000, 2_000, 500, 1_000].map(|ms| Decision::RestartIn(MS * ms))
        );
    }

    #[test]
    fn five_quick_exits_within_a_minute_give_up() {
        let got = decisions(RestartPolicy::default(), &[MS * 100; 6]);
        assert_eq!(
            got,
            [
                Decision::RestartIn(MS * 500),
                Decision::RestartIn(MS * 1_000),
                Decision::RestartIn(MS * 2_000),
                Decision::RestartIn(MS * 4_000),
                Decision::GiveUp { exits: 5 },
                Decision::GiveUp { exits: 6 },
            ]
        );
    }

    #[test]
    fn exits_spread_wider_than_the_window_never_give_up() {
        // A run of 25 s, then its delay: at most 3 exits fall within any 60 s.
        let got = decisions(RestartPolicy::default(), &[Duration::from_secs(25); 12]);
        assert!(
            got.iter().all(|d| matches!(d, Decision::RestartIn(_))),
            "{got:?}"
        );
    }
}
