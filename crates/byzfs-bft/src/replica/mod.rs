//! The PBFT replica state machine. API SKELETON — internals in progress.

use crate::action::{Action, PersistRecord};
use crate::config::Config;
use crate::crypto::{Digest, MacKey, ReplicaKeys};
use crate::ids::{ClientId, ReplicaId, Seq, View};
use crate::service::Service;
use crate::time::Time;

/// Counters kept by the core; the driver exports them as metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests executed (ordered, committed).
    pub requests_executed: u64,
    /// Read-only requests executed.
    pub read_only_executed: u64,
    /// Batches committed.
    pub batches_committed: u64,
    /// View changes started.
    pub view_changes: u64,
    /// Checkpoints that became stable.
    pub checkpoints_stable: u64,
    /// State transfers completed.
    pub state_transfers: u64,
}

/// A PBFT replica.
pub struct Replica<S: Service> {
    config: Config,
    keys: ReplicaKeys,
    service: S,
    stats: Stats,
}

impl<S: Service> Replica<S> {
    /// A fresh replica (empty log, view 0) over `service` in its initial state.
    pub fn new(config: Config, keys: ReplicaKeys, service: S, rng_seed: u64, now: Time) -> Self {
        let _ = (rng_seed, now);
        Replica { config, keys, service, stats: Stats::default() }
    }
    /// A replica restarted from its persisted promises; `service` must hold the state of its
    /// latest checkpoint.
    pub fn recover(
        config: Config,
        keys: ReplicaKeys,
        service: S,
        persisted: &[PersistRecord],
        rng_seed: u64,
        now: Time,
    ) -> Self {
        let _ = persisted;
        Self::new(config, keys, service, rng_seed, now)
    }
    /// Handles one received frame (from a replica or a client).
    pub fn handle_message(&mut self, now: Time, bytes: &[u8]) {
        let _ = (now, bytes);
    }
    /// Handles timer expiry (call when `now >= poll_timeout()`).
    pub fn handle_timeout(&mut self, now: Time) {
        let _ = now;
    }
    /// The earliest deadline at which `handle_timeout` must be called.
    pub fn poll_timeout(&self) -> Option<Time> {
        None
    }
    /// The next output, in order.
    pub fn poll_action(&mut self) -> Option<Action> {
        None
    }
    /// Installs a client's MAC keys (`to_client`: replica → client; `from_client`: client → replica).
    pub fn add_client(&mut self, client: ClientId, to_client: MacKey, from_client: MacKey) {
        self.keys.clients.insert(client, (to_client, from_client));
    }
    /// This replica's id.
    pub fn id(&self) -> ReplicaId {
        self.keys.me
    }
    /// Current view.
    pub fn view(&self) -> View {
        0
    }
    /// Whether the replica holds the NEW-VIEW of its current view (not in view-change limbo).
    pub fn has_new_view(&self) -> bool {
        true
    }
    /// Last committed-and-executed sequence number.
    pub fn last_executed(&self) -> Seq {
        0
    }
    /// Last tentatively executed sequence number (≥ `last_executed`).
    pub fn last_tentative(&self) -> Seq {
        0
    }
    /// Last stable checkpoint `h`.
    pub fn last_stable(&self) -> Seq {
        0
    }
    /// Whether the replica is fetching state.
    pub fn is_fetching(&self) -> bool {
        false
    }
    /// Digest of the live state (service and reply cache), as a checkpoint taken now would have.
    pub fn state_digest(&self) -> Digest {
        Digest::ZERO
    }
    /// The service.
    pub fn service(&self) -> &S {
        &self.service
    }
    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }
    /// Switches a deliberately broken rule on (test-only).
    #[cfg(feature = "mutations")]
    pub fn set_mutation(&mut self, m: Option<crate::mutation::Mutation>) {
        let _ = m;
    }
}
