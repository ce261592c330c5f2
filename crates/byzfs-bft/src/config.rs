//! Protocol parameters (docs/PROTOCOL.md §8). The same values drive the simulator, local clusters
//! and real deployments.

use crate::ids::{ReplicaId, View};
use core::time::Duration;
use serde::{Deserialize, Serialize};

/// Largest cluster supported (library `Max_num_replicas`).
pub const MAX_REPLICAS: usize = 32;

/// Protocol parameters shared by every node of one cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// Faults tolerated; `n = 3f + 1`.
    pub f: u32,
    /// Configuration epoch carried in every message header; messages from another epoch are
    /// dropped, so nothing is accepted across reconfigurations.
    pub epoch: u32,
    /// Checkpoint interval `K`.
    pub checkpoint_interval: u64,
    /// Log window `L` (`H = h + L`); must exceed `K` (we require `L >= 2K`).
    pub log_window: u64,
    /// Batching window `W`: the primary runs at most `W` instances beyond the last executed one.
    pub batch_window: u64,
    /// Largest batch the primary builds, in bytes of inlined requests.
    pub batch_bytes_max: usize,
    /// Requests whose operation is larger than this are ordered by digest only, their bodies
    /// sent apart from the batches (separate request transmission). `usize::MAX` disables it.
    pub big_request_threshold: usize,
    /// Whether a client sends a big read-write request's body to the primary only, which
    /// relays it once to each backup (docs/PROTOCOL.md §1.10 "each body once"), instead of to
    /// every replica: the client's uplink carries it once, not `3f+1` times. Its first
    /// retransmission goes to every replica either way.
    pub relay_big_requests: bool,
    /// How many backups the primary sends a relayed body to; each backup that gets it passes
    /// it on to the backup this many places after it in the view's order (docs/PROTOCOL.md
    /// §1.10, "the relay's fan-out"), so the primary's link carries each body this many times,
    /// not `3f`. 0 (the default) means `2f`: the backups a prepare quorum needs get it from
    /// the primary itself and a faulty backup can delay only the other `f`; 1 makes a chain
    /// (one copy per link, but one faulty backup can delay every body behind it); `3f` or
    /// more sends it to every backup, as before.
    #[serde(default)]
    pub relay_fan_out: u32,
    /// Results at most this large are sent in full by every replica, not only the designated
    /// replier.
    pub full_reply_threshold: usize,
    /// Whether replicas execute prepared batches tentatively (reply before commit).
    pub tentative_execution: bool,
    /// Whether replicas answer read-only requests without ordering them.
    pub read_only_optimisation: bool,
    /// Whether a client sends a read-only request first to the `2f+1` replicas it needs
    /// (all but the primary, the busiest) and to the other `f` only if their replies are
    /// late (a hedge, after about twice its recent read latency); otherwise to all `3f+1`.
    /// Off by default: it saves replica CPU (8 % in Andrew) but waits for the slowest of
    /// three replies instead of the third of four (reads 10 % slower on an idle machine);
    /// docs/bench/HISTORY.md "reads sent to `2f+1` replicas first (`read_only_to_quorum`)".
    pub read_only_to_quorum: bool,
    /// Base view-change timeout `T` (doubles per consecutive failed view).
    pub view_change_timeout: Duration,
    /// Cap on the view-change timeout after back-off.
    pub view_change_timeout_max: Duration,
    /// How soon the view-change timer expires, at most, while the driver reports the
    /// primary unreachable ([`crate::Replica::handle_reachability`]: its port refuses
    /// connections, as when its process died) and a request waits; zero turns the report
    /// off. A crashed primary then costs this instead of `view_change_timeout`
    /// (docs/PROTOCOL.md §3.1, "An unreachable primary").
    #[serde(default = "unreachable_primary_timeout_default")]
    pub unreachable_primary_timeout: Duration,
    /// How long a primary waits with nothing to order, past the last checkpoint, before it
    /// proposes null batches up to the next one (docs/PROTOCOL.md §2.6, "Idle
    /// checkpoints"): an idle cluster's last batches then reach a stable checkpoint, so the
    /// log is truncated and a service that reclaims space at stable checkpoints does so.
    /// Zero turns it off.
    #[serde(default = "idle_checkpoint_default")]
    pub idle_checkpoint: Duration,
    /// Period of STATUS messages (retransmission / negative acknowledgement).
    pub status_interval: Duration,
    /// The rate, in kbit/s, of the slowest link between replicas, as the operator states it
    /// (0: not stated). It says how long the big bodies a replica sent still need to cross
    /// its link (docs/PROTOCOL.md §1.10, "A body on its way"; `replica/uplink.rs`): a peer's
    /// ask for a body is left unanswered while the copy sent may still be crossing, behind
    /// the bodies sent before it (taken at 3,500 kbit/s when not stated), and, only when
    /// stated, a primary proposes nothing while its bodies need more than half the
    /// view-change timeout, so its PRE-PREPAREs do not arrive stale. Stated too low, a
    /// primary waits for bodies already across; too high, PRE-PREPAREs may queue behind
    /// bodies past the service's clock tolerance on a busy slow link.
    #[serde(default)]
    pub link_rate_kbps: u64,
    /// Most requests a client may have outstanding at once, and the most results the reply
    /// cache keeps per client (docs/PROTOCOL.md §1.6, "several requests in flight"). 1 is
    /// PBFT's one request at a time.
    pub client_window: u64,
    /// Client's first retransmission timeout.
    pub client_retransmit: Duration,
    /// Client's retransmission timeout cap.
    pub client_retransmit_max: Duration,
    /// Largest message accepted from the network, in bytes.
    pub message_bytes_max: usize,
    /// Largest client operation accepted, in bytes.
    pub op_bytes_max: usize,
    /// Largest chunk of a partition in one STATE-PART message (a larger partition travels
    /// in several); at most `message_bytes_max / 2`.
    pub state_chunk_bytes: usize,
    /// The backups' watch on the primary's throughput (Aardvark; ARCHITECTURE.md
    /// "Defences under attack").
    #[serde(default)]
    pub monitor: MonitorConfig,
    /// How a NEW-VIEW decides each sequence number (docs/PROTOCOL.md §3.4, §4.7).
    #[serde(default)]
    pub view_change_rule: ViewChangeRule,
}

/// How a NEW-VIEW decides each sequence number from the VIEW-CHANGEs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ViewChangeRule {
    /// PBFT's (§3.4): prepared certificates, highest view first, over every VIEW-CHANGE
    /// the new primary holds.
    #[default]
    Pbft,
    /// The fast path's walk down the views (§4.7, `replica/walk.rs`) over exactly `2f+1`
    /// VIEW-CHANGEs: it keeps a completion that left no certificate (`3f+1` speculative
    /// answers). Sound in PBFT's normal case too, where the simulator runs it
    /// (`byzfs-sim --view-change-rule walk`) until the fast mode exists.
    Walk,
}

/// How backups judge the primary's throughput (Aardvark, docs/PROTOCOL.md §5.3 measure 4;
/// `replica/monitor.rs`). Every `period` a backup counts the work executed in the view (one
/// unit per request plus one per 4 KiB of its operation). It judges the primary only after
/// `grace` in the view, and only while the load demands more: a client's request has waited
/// at this backup at least `patience` with none of that client's requests running (clients
/// retransmit to every replica when the primary is slow; large requests not relayed reach
/// every replica at once). Then the period's work must reach `percent` % of the best period of the last
/// `views` views (this one included), raised by `raise_percent` % for each judged period of
/// the view, and at least `floor_per_s` units per second (the floor alone during the grace);
/// a backup that sees less starts a view change. The raise makes views end regularly under sustained demand, so a primary
/// that stays just above the bar cannot keep its view for ever.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MonitorConfig {
    /// Whether backups judge the primary's throughput at all.
    pub enabled: bool,
    /// Length of one measured period.
    pub period: Duration,
    /// Time after a view is installed before its primary is judged.
    pub grace: Duration,
    /// How long a client's request must wait at a backup before the load counts as
    /// demanding more than the primary gives.
    pub patience: Duration,
    /// Share of the recent best period the primary must reach, in percent (1..=100).
    pub percent: u32,
    /// Increase of the bar for each judged period of a view, in percent (0 for none).
    pub raise_percent: u32,
    /// Views whose best period sets the bar (at least 1: the current one).
    pub views: u32,
    /// Least work per second demanded of a primary whatever the history, also during the
    /// grace (Aardvark's heartbeat; 0 for none).
    pub floor_per_s: u64,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            enabled: true,
            period: Duration::from_millis(500),
            grace: Duration::from_secs(2),
            patience: Duration::from_millis(500),
            percent: 90,
            raise_percent: 1,
            views: 5,
            floor_per_s: 4,
        }
    }
}

impl MonitorConfig {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), String> {
        if self.period.is_zero() {
            return Err("monitor.period must be positive".into());
        }
        if self.percent == 0 || self.percent > 100 {
            return Err("monitor.percent must be in 1..=100".into());
        }
        if self.raise_percent > 100 {
            return Err("monitor.raise_percent must be in 0..=100".into());
        }
        if self.views == 0 || self.views > 1000 {
            return Err("monitor.views must be in 1..=1000".into());
        }
        Ok(())
    }
}

fn unreachable_primary_timeout_default() -> Duration {
    Duration::from_millis(500)
}

fn idle_checkpoint_default() -> Duration {
    Duration::from_secs(1)
}

/// The rate bodies are taken to cross at when [`Config::link_rate_kbps`] is not stated
/// (about 64 KiB per 150 ms STATUS interval).
pub const LINK_RATE_KBPS_UNSTATED: u64 = 3_500;

impl Config {
    /// Parameters of the BFT library (K = 128, L = 256, W = 1) for a cluster tolerating `f`
    /// faults, with our recommended thresholds.
    pub fn new(f: u32) -> Config {
        Config {
            f,
            epoch: 0,
            checkpoint_interval: 128,
            log_window: 256,
            batch_window: 1,
            batch_bytes_max: 64 * 1024,
            big_request_threshold: 1024,
            relay_big_requests: true,
            relay_fan_out: 0,
            full_reply_threshold: 256,
            tentative_execution: true,
            read_only_optimisation: true,
            read_only_to_quorum: false,
            view_change_timeout: Duration::from_millis(5000),
            view_change_timeout_max: Duration::from_secs(60),
            unreachable_primary_timeout: unreachable_primary_timeout_default(),
            idle_checkpoint: idle_checkpoint_default(),
            status_interval: Duration::from_millis(150),
            link_rate_kbps: 0,
            client_window: 16,
            client_retransmit: Duration::from_millis(150),
            client_retransmit_max: Duration::from_secs(5),
            message_bytes_max: 4 * 1024 * 1024,
            op_bytes_max: 1024 * 1024,
            state_chunk_bytes: 1024 * 1024,
            monitor: MonitorConfig::default(),
            view_change_rule: ViewChangeRule::Pbft,
        }
    }

    /// Number of replicas, `3f + 1`.
    pub fn n(&self) -> usize {
        3 * self.f as usize + 1
    }

    /// Whether the operator stated [`Config::link_rate_kbps`] (pacing on).
    pub fn link_rate_stated(&self) -> bool {
        self.link_rate_kbps != 0
    }

    /// [`Config::link_rate_kbps`] in bytes per second (3,500 kbit/s when not stated).
    pub fn link_bytes_per_s(&self) -> u64 {
        let kbps = if self.link_rate_stated() {
            self.link_rate_kbps
        } else {
            LINK_RATE_KBPS_UNSTATED
        };
        kbps.saturating_mul(1000) / 8
    }

    /// Quorum size `2f + 1`.
    pub fn quorum(&self) -> usize {
        2 * self.f as usize + 1
    }

    /// Weak certificate size `f + 1`.
    pub fn weak(&self) -> usize {
        self.f as usize + 1
    }

    /// The backups the primary sends a relayed body to ([`Config::relay_fan_out`], `0` read
    /// as `2f`), at least one and at most `3f`.
    pub fn relay_fan_out(&self) -> usize {
        let backups = self.n() - 1;
        match self.relay_fan_out {
            0 => 2 * self.f as usize,
            k => (k as usize).min(backups),
        }
    }

    /// The primary of view `v`.
    pub fn primary(&self, v: View) -> ReplicaId {
        (v % self.n() as u64) as ReplicaId
    }

    /// Checks the parameters' internal consistency.
    pub fn validate(&self) -> Result<(), String> {
        if self.f == 0 {
            return Err("f must be at least 1 (n = 3f+1 replicas)".into());
        }
        if self.n() > MAX_REPLICAS {
            return Err(format!(
                "n = {} exceeds the maximum of {MAX_REPLICAS} replicas",
                self.n()
            ));
        }
        if self.checkpoint_interval == 0 {
            return Err("checkpoint_interval must be positive".into());
        }
        if self.log_window < 2 * self.checkpoint_interval {
            return Err("log_window must be at least 2 × checkpoint_interval".into());
        }
        if self.batch_window == 0 || self.batch_window > self.log_window - self.checkpoint_interval
        {
            return Err("batch_window must be in 1..=log_window-checkpoint_interval".into());
        }
        if self.batch_bytes_max + 64 * 1024 > self.message_bytes_max {
            return Err("message_bytes_max must exceed batch_bytes_max by at least 64 KiB".into());
        }
        if self.op_bytes_max + 64 * 1024 > self.message_bytes_max {
            return Err("message_bytes_max must exceed op_bytes_max by at least 64 KiB".into());
        }
        if self.link_rate_kbps != 0 && !(8..=100_000_000).contains(&self.link_rate_kbps) {
            return Err(
                "link_rate_kbps must be 0 (not stated) or in 8..=100000000 (kbit/s)".into(),
            );
        }
        if self.client_window == 0 || self.client_window > 1024 {
            return Err("client_window must be in 1..=1024".into());
        }
        if self.state_chunk_bytes == 0 || self.state_chunk_bytes > self.message_bytes_max / 2 {
            return Err("state_chunk_bytes must be in 1..=message_bytes_max/2".into());
        }
        self.monitor.validate()
    }
}
