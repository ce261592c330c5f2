//! Export through the `metrics` facade, labelled by replica. Without an installed recorder
//! (tests, embedded use) every call is a no-op; `byzfs replica --metrics ADDR` installs the
//! Prometheus exporter.
//!
//! Counters mirror the core's [`byzfs_bft::replica::Stats`] and the runtime's counters (set
//! to their absolute values each metrics interval); `byzfs_batch_size` records the number of
//! requests of every executed batch. Two latency histograms (seconds):
//! `byzfs_request_latency_seconds`, from a client request's arrival at this replica to the
//! first reply this replica sends that client (agreement and execution included, as seen by
//! one replica), and `byzfs_turn_seconds`, the time one event-loop turn spends in the core
//! and its actions (the replica's service time; long turns delay every input behind them).
//! A third, `byzfs_disk_work_seconds`, times the service's disk work on the disk worker
//! (`disk_worker.rs`), which the event loop does not wait for.

use crate::status::NodeStatus;
use byzfs_bft::ReplicaId;

/// Name of the batch-size histogram (the binary configures its buckets).
pub const BATCH_SIZE: &str = "byzfs_batch_size";
/// Name of the request latency histogram (seconds).
pub const REQUEST_LATENCY: &str = "byzfs_request_latency_seconds";
/// Name of the event-loop turn duration histogram (seconds).
pub const TURN_DURATION: &str = "byzfs_turn_seconds";
/// Name of the histogram of the service's disk work (seconds), run on the disk worker away
/// from the event loop: a stable checkpoint's sync of the store, compaction's removals.
pub const DISK_WORK_DURATION: &str = "byzfs_disk_work_seconds";

pub(super) struct Metrics {
    replica: String,
    batch_size: metrics::Histogram,
    request_latency: metrics::Histogram,
    turn: metrics::Histogram,
    disk_work: metrics::Histogram,
}

impl Metrics {
    pub fn new(replica: ReplicaId) -> Metrics {
        let replica = replica.to_string();
        let batch_size = metrics::histogram!(BATCH_SIZE, "replica" => replica.clone());
        let request_latency = metrics::histogram!(REQUEST_LATENCY, "replica" => replica.clone());
        let turn = metrics::histogram!(TURN_DURATION, "replica" => replica.clone());
        let disk_work = metrics::histogram!(DISK_WORK_DURATION, "replica" => replica.clone());
        Metrics {
            replica,
            batch_size,
            request_latency,
            turn,
            disk_work,
        }
    }

    pub fn request_answered(&self, latency: core::time::Duration) {
        self.request_latency.record(latency.as_secs_f64());
    }

    pub fn turn(&self, busy: core::time::Duration) {
        self.turn.record(busy.as_secs_f64());
    }

    pub fn disk_work(&self, took: core::time::Duration) {
        self.disk_work.record(took.as_secs_f64());
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
        counter(
            "byzfs_read_only_on_tentative_total",
            c.read_only_on_tentative,
        );
        counter("byzfs_read_only_queued_total", c.read_only_queued);
        counter("byzfs_batches_committed_total", c.batches_committed);
        counter("byzfs_batches_caught_up_total", c.batches_caught_up);
        counter("byzfs_pre_prepares_sent_total", c.pre_prepares_sent);
        counter("byzfs_idle_checkpoints_total", c.idle_checkpoints);
        counter("byzfs_prepares_sent_total", c.prepares_sent);
        counter("byzfs_prepares_withheld_total", c.prepares_withheld);
        counter("byzfs_vote_horizons_total", c.vote_horizons);
        counter("byzfs_batched_requests_total", c.batched_requests);
        counter("byzfs_view_changes_total", c.view_changes);
        counter("byzfs_views_installed_total", c.views_installed);
        counter("byzfs_checkpoints_stable_total", c.checkpoints_stable);
        counter("byzfs_state_transfers_total", c.state_transfers);
        counter("byzfs_state_chunks_fetched_total", c.state_chunks_fetched);
        counter("byzfs_state_parts_fetched_total", c.state_parts_fetched);
        counter("byzfs_rollbacks_total", c.rollbacks);
        counter("byzfs_busy_steps_total", c.busy_steps);
        counter("byzfs_monitor_complaints_total", c.monitor_complaints);
        counter("byzfs_bodies_relayed_total", c.bodies_relayed);
        counter("byzfs_bodies_passed_on_total", c.bodies_passed_on);
        let n = &s.net;
        counter("byzfs_frames_in_total", n.frames_in);
        counter("byzfs_frames_out_total", n.frames_out);
        counter("byzfs_bytes_in_total", n.bytes_in);
        counter("byzfs_bytes_out_total", n.bytes_out);
        counter("byzfs_connections_accepted_total", n.connections_accepted);
        counter(
            "byzfs_local_connections_accepted_total",
            n.local_connections_accepted,
        );
        let d = &s.disk;
        counter("byzfs_log_bytes_total", d.log_bytes);
        counter("byzfs_log_frames_total", d.log_frames);
        counter("byzfs_log_syncs_total", d.log_syncs);
        counter("byzfs_db_commits_total", d.db_commits);
        for (name, v) in &s.service {
            // `byzfs_service_total{counter="store_syncs"}`: the names are the service's.
            metrics::counter!(
                "byzfs_service_total",
                "replica" => r.clone(),
                "counter" => name.clone()
            )
            .absolute(*v);
        }
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
