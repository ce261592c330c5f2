//! JSON output: one row per measured point, in the schema plus context fields.

use anyhow::Context as _;
use serde::Serialize;
use std::path::Path;

/// One measured point.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub bench: &'static str,
    /// `a/b`: argument and result sizes in KiB.
    pub op: String,
    pub mode: &'static str,
    pub system: &'static str,
    pub clients: usize,
    pub throughput_ops_s: f64,
    pub latency_us_p50: f64,
    pub latency_us_p99: f64,
    pub server_cpu_us_per_op: f64,
    // Context.
    pub latency_us_mean: f64,
    pub client_cpu_us_per_op: f64,
    /// Measured operations (all runs).
    pub ops: u64,
    /// Runs whose median this row is.
    pub runs: usize,
    /// Largest deviation of one run's median latency from the reported one (fraction).
    pub latency_spread: f64,
    /// Frames (messages) sent by all server processes per measured operation (replies,
    /// protocol messages); approximate, from status counters refreshed every 100 ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_frames_per_op: Option<f64>,
    /// ByzFS: mean requests per pre-prepare during the point (from the replicas' status,
    /// published every 100 ms, so approximate at the edges).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_size_mean: Option<f64>,
    /// ByzFS protocol switches (`None` for the unreplicated systems).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batching: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub srt: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tentative: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only_opt: Option<bool>,
    /// ByzFS replica durability: "disk" or "memory".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub durability: Option<String>,
    /// Kill-primary runs: when the primary was killed (s after the run started).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub killed_primary_at_s: Option<f64>,
    /// Seconds from the kill until a new view was installed at a live replica.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_view_after_s: Option<f64>,
    /// Seconds from the kill until throughput recovered (see `stats::recovery`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovered_after_s: Option<f64>,
    /// Kill-primary runs: the longest single operation of the run, s (a client's stall).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub longest_op_s: Option<f64>,
    /// Throughput before the kill (ops/s), the recovery baseline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_before_kill_ops_s: Option<f64>,
    /// Completions per 100 ms over the whole run (kill-primary runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline_ops_per_100ms: Option<Vec<u64>>,
}

/// A row's `mode`: read-only (`ro`) or read-write (`rw`) requests.
pub fn mode_name(read_only: bool) -> &'static str {
    if read_only {
        "ro"
    } else {
        "rw"
    }
}

impl Row {
    /// The row of point `p` measured for `system` (with the ByzFS `switches`, if any) on
    /// operation `name` with `clients` clients; one run, no frames or batch sizes (the
    /// caller fills in what it measured besides).
    pub fn of_point(
        bench: &'static str,
        system: &crate::procs::System,
        switches: Option<super::Switches>,
        (name, read_only): (&str, bool),
        clients: usize,
        p: &super::stats::Point,
    ) -> Row {
        Row {
            bench,
            op: name.to_string(),
            mode: mode_name(read_only),
            system: system.name(),
            clients,
            throughput_ops_s: p.throughput_ops_s,
            latency_us_p50: p.latency_us_p50,
            latency_us_p99: p.latency_us_p99,
            server_cpu_us_per_op: p.server_cpu_us_per_op,
            latency_us_mean: p.latency_us_mean,
            client_cpu_us_per_op: p.client_cpu_us_per_op,
            ops: p.ops,
            runs: 1,
            latency_spread: 0.0,
            batch_size_mean: None,
            server_frames_per_op: None,
            batching: switches.map(|w| w.batching),
            srt: switches.map(|w| w.srt),
            tentative: switches.map(|w| w.tentative),
            read_only_opt: switches.map(|w| w.read_only),
            durability: switches.map(|w| super::durability_name(w.disk)),
            killed_primary_at_s: None,
            new_view_after_s: None,
            recovered_after_s: None,
            longest_op_s: None,
            throughput_before_kill_ops_s: None,
            timeline_ops_per_100ms: None,
        }
    }
}

/// The file written by `--json`.
#[derive(Serialize)]
pub struct Report<'a, R = Row> {
    pub bench: &'static str,
    pub command: String,
    pub machine: Machine,
    pub rows: &'a [R],
}

/// Where it ran.
#[derive(Serialize)]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub mem_gib: f64,
    pub kernel: String,
    pub date_unix_s: u64,
}

impl Machine {
    pub fn here() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|s| s.trim_start_matches([' ', '\t', ':']).to_string())
            .unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_kib: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0.0);
        Machine {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model,
            mem_gib: (mem_kib / 1024.0 / 1024.0 * 10.0).round() / 10.0,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_string(),
            date_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "{} CPUs ({}), {} GiB, Linux {}",
            self.cpus, self.cpu_model, self.mem_gib, self.kernel
        )
    }
}

pub fn write<R: Serialize>(path: &Path, bench: &'static str, rows: &[R]) -> anyhow::Result<()> {
    let report = Report {
        bench,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        machine: Machine::here(),
        rows,
    };
    let text = serde_json::to_string_pretty(&report)?;
    std::fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))
}
