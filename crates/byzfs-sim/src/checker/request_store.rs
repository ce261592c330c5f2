//! A faulty client cannot fill a correct replica's request store (issue #29): a replica
//! takes no request of a client that already has two `Config::client_window`s of requests
//! stored that cannot run yet (`byzfs_bft::replica` `request_store`;
//! `Replica::stored_requests`), whatever the client sends — such as requests that follow one
//! never sent, which never run and so are never forgotten.
//!
//! Judged where the replica takes a request: a step whose input is a client's request that
//! it did not drop must not leave that client above its share with more than before. (The
//! count can also grow without a new request — a view change's rollback of tentative
//! execution makes requests unrun again, bodies a logged batch named count once the log is
//! cleared (bad-clients 274, 78) — which is not the store taking anything.) Without the
//! share (mutation `no-client-quota`), a faulty client's piles (four windows at once) are
//! all taken.

use super::{Observe, Sink};
use byzfs_bft::{ClientId, Time};
use std::collections::{BTreeMap, BTreeSet};

/// Checker name.
pub const NAME: &str = "request-store";

/// The per-client request-store share checker.
#[derive(Clone, Debug, Default)]
pub struct RequestStoreBound {
    /// Requests that cannot run yet a client may have stored (two windows).
    pub share: usize,
    clients: BTreeSet<ClientId>,
    /// The count after each correct instance's last step, per client.
    counts: BTreeMap<(usize, ClientId), usize>,
    /// The client whose request the current step of an instance takes, until dropped.
    taking: BTreeMap<usize, ClientId>,
    reported: BTreeSet<(usize, ClientId)>,
}

impl RequestStoreBound {
    /// A client (correct or faulty) sent a request.
    pub fn on_issue(&mut self, client: ClientId) {
        self.clients.insert(client);
    }

    /// Correct `inst` is about to take a request of `client`.
    pub fn on_request(&mut self, inst: usize, client: ClientId) {
        self.taking.insert(inst, client);
    }

    /// `inst` dropped its input.
    pub fn on_dropped(&mut self, inst: usize) {
        self.taking.remove(&inst);
    }

    /// After a step of correct replica `inst`.
    pub fn on_step_end(&mut self, sink: &mut Sink, now: Time, inst: usize, r: &dyn Observe) {
        let taking = self.taking.remove(&inst);
        for &c in &self.clients {
            let kept = r.stored_requests(c);
            let before = self.counts.insert((inst, c), kept).unwrap_or(0);
            let took = taking == Some(c) && kept > before;
            if took && kept > self.share && self.reported.insert((inst, c)) {
                sink.report(
                    NAME,
                    now,
                    format!(
                        "replica {inst} took a request of c{c}, which now has {kept} stored that \
                         cannot run yet, more than its share of {}",
                        self.share
                    ),
                );
            }
        }
    }

    /// `inst` restarted.
    pub fn on_restart(&mut self, inst: usize) {
        self.taking.remove(&inst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::Stub;

    #[test]
    fn taking_a_request_beyond_the_share_is_caught_growth_alone_is_not() {
        let mut q = RequestStoreBound {
            share: 2,
            ..Default::default()
        };
        let mut s = Sink::new(1, "t");
        q.on_issue(7);
        let at = |n| Stub {
            stored: n,
            ..Stub::default()
        };
        q.on_step_end(&mut s, Time(0), 0, &at(2));
        // Growth without taking a request (a rollback): not the store's doing.
        q.on_step_end(&mut s, Time(0), 0, &at(3));
        // A request taken and dropped: nothing stored.
        q.on_request(0, 7);
        q.on_dropped(0);
        q.on_step_end(&mut s, Time(0), 0, &at(3));
        assert!(!s.any());
        q.on_request(0, 7);
        q.on_step_end(&mut s, Time(0), 0, &at(4));
        assert_eq!(
            s.violations()[0].message,
            "replica 0 took a request of c7, which now has 4 stored that cannot run yet, more \
             than its share of 2"
        );
    }
}
