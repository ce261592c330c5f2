//! INV-REPLY-CACHE (docs/PROTOCOL.md §1.6): a correct replica keeps at most
//! `Config::client_window` results per client, whatever a faulty client sends — the bound
//! that makes several requests in flight safe to offer.

use super::{Observe, Sink};
use byzfs_bft::{ClientId, Time};
use std::collections::BTreeSet;

/// Checker name.
pub const NAME: &str = "reply-cache";

/// The reply-cache bound checker.
#[derive(Clone, Debug, Default)]
pub struct ReplyCacheBound {
    /// `Config::client_window`.
    pub window: u64,
    clients: BTreeSet<ClientId>,
    reported: BTreeSet<(usize, ClientId)>,
}

impl ReplyCacheBound {
    /// A client (correct or faulty) sent a request.
    pub fn on_issue(&mut self, client: ClientId) {
        self.clients.insert(client);
    }

    /// After a step of correct replica `inst`.
    pub fn on_step_end(&mut self, sink: &mut Sink, now: Time, inst: usize, r: &dyn Observe) {
        for &c in &self.clients {
            let kept = r.cached_results(c) as u64;
            if kept > self.window && self.reported.insert((inst, c)) {
                sink.report(
                    NAME,
                    now,
                    format!(
                        "replica {inst} keeps {kept} results for c{c}, more than the window of {}",
                        self.window
                    ),
                );
            }
        }
    }
}
