//! Export through the `metrics` facade, labelled by replica. Without an installed recorder
//! (tests, embedded use) every call is a no-op; `byzfs replica --metrics ADDR` installs the
//! Prometheus exporter.
//!
//! Counters mirror the core's [`byzfs_bft::replica::Stats`] and the runtime's counters (set
//! to their absolute values each metrics interval); `byzfs_batch_size` records the number of
//! requests of every executed batch.

use crate::status::NodeStatus;
use byzfs_bft::ReplicaId;

/// Name of the batch-size histogram (the binary configures its buckets).
pub const BATCH_SIZE: &str = "byzfs_batch_size";

pub(super) struct Metrics {
    replica: String,
    batch_size: metrics::Histogram,
}

impl Metrics {
    pub fn new(replica: ReplicaId) -> Metrics {
        let replica = replica.to_string();
        let batch_size = metrics::histogram!(BATCH_SIZE, "replica" => replica.clone());
        Metrics {
            replica,
            batch_size,
        }
    }

    pub fn batch_executed(&self, requests: usize) {
        self.batch_size.record(requests as f64);
    }

    pub fn publish(&self, s: &NodeStatus) {
        let r = self.replica.clone();
        let counter = |name: &'static str, v: u64| {
            metrics::counter!(name, "replica" => r.clone()).absolute(v);
        };
        let c = &s.core;
        counter("byzfs_requests_executed_total", c.requests_executed);
        counter("byzfs_read_only_executed_total", c.read_only_executed);
        counter("byzfs_batches_committed_total", c.batches_committed);
        counter("byzfs_pre_prepares_sent_total", c.pre_prepares_sent);
        counter("byzfs_batched_requests_total", c.batched_requests);
        counter("byzfs_view_changes_total", c.view_changes);
        counter("byzfs_views_installed_total", c.views_installed);
        counter("byzfs_checkpoints_stable_total", c.checkpoints_stable);
        counter("byzfs_state_transfers_total", c.state_transfers);
        counter("byzfs_rollbacks_total", c.rollbacks);
        let n = &s.net;
        counter("byzfs_frames_in_total", n.frames_in);
        counter("byzfs_frames_out_total", n.frames_out);
        counter("byzfs_bytes_in_total", n.bytes_in);
        counter("byzfs_bytes_out_total", n.bytes_out);
        counter("byzfs_connections_accepted_total", n.connections_accepted);
        for (layer, drops) in [("core", &c.dropped), ("net", &n.dropped)] {
            for (reason, v) in drops {
                metrics::counter!(
                    "byzfs_dropped_total",
                    "replica" => r.clone(),
                    "layer" => layer,
                    "reason" => reason.clone()
                )
                .absolute(*v);
            }
        }
        let gauge = |name: &'static str, v: f64| {
            metrics::gauge!(name, "replica" => r.clone()).set(v);
        };
        gauge("byzfs_view", s.view as f64);
        gauge("byzfs_primary", f64::from(s.primary));
        gauge("byzfs_last_executed", s.last_executed as f64);
        gauge("byzfs_last_stable", s.last_stable as f64);
        gauge("byzfs_peers_connected", f64::from(s.peers_connected));
        gauge("byzfs_clients_connected", f64::from(s.clients_connected));
    }
}
