//! `byzfs bench store`: the file service's store alone (issue #46 item 3), against ext4
//! through the FUSE passthrough (`bindfs`), operation by operation.
//!
//! Three phases of `--files` operations each: create a file, write 4 KiB to each, remove
//! each. The **store** target runs the real `FileService` over the log store a replica uses
//! (`fs-state/` in a directory on the same disk), in this process, through the `Service`
//! byte interface, with a stable checkpoint every `--checkpoint-interval` operations as a
//! replica takes them (checkpoint, discard, `persist`, `recorded`): no agreement, no
//! network, no FUSE, so what it costs is the store's and the file service's. The
//! **passthrough** target does the same with `std::fs` calls in a `bindfs` mount of a
//! directory on that disk (no `fsync`, as a mount that is not asked to sync).
//!
//! Per phase and target: operations per second, bytes written per operation (`/proc/PID/io`
//! `write_bytes` of this process and bindfs: page-cache pages dirtied, what write-back then
//! sends to the disk), syncs per operation (the store's own count; the passthrough issues
//! none), and CPU microseconds per operation (this process and bindfs). The store's own
//! counters (bytes appended, frames, syncs, compactions) are printed too.

use super::diskio;
use super::target;
use anyhow::{bail, Context};
use byzfs_bft::service::run_in_line;
use byzfs_bft::Service;
use byzfs_fs::store::LogStore;
use byzfs_fs::{decode_result, Credentials, FileHandle, FileService, FsConfig, Op, Reply, Request};
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `byzfs bench store`.
#[derive(Args, Debug, Clone)]
pub struct StoreArgs {
    /// Operations per phase (files created, written, removed).
    #[arg(long, default_value_t = 2000)]
    pub files: u64,
    /// Stable checkpoints of the store target every this many operations (a replica's `K`).
    #[arg(long, default_value_t = 128)]
    pub checkpoint_interval: u64,
    /// Where to make the store and the passthrough's backing directory (default: a fresh
    /// directory under the system's temporary one; use one on the disk to measure).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Also write the rows as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// One phase's measurement on one target.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StoreRow {
    /// `store` or `passthrough`.
    pub target: &'static str,
    /// `create`, `write 4 KiB` or `remove`.
    pub phase: &'static str,
    /// Operations.
    pub ops: u64,
    /// Wall time, seconds.
    pub secs: f64,
    /// Bytes the processes wrote (page cache dirtied), per operation.
    pub bytes_per_op: f64,
    /// Bytes the disk holding the directory wrote during the phase and a `syncfs` after it
    /// (journal and metadata write-back included; anything else on that disk too), per
    /// operation; `None` where the disk's counters cannot be read.
    pub disk_bytes_per_op: Option<f64>,
    /// Syncs per operation.
    pub syncs_per_op: f64,
    /// CPU microseconds per operation (this process and the target's server).
    pub cpu_us_per_op: f64,
}

impl StoreRow {
    fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.secs.max(1e-9)
    }
}

const PHASES: [&str; 3] = ["create", "write 4 KiB", "remove"];
const BLOCK: usize = 4096;

/// Bytes written so far by the block device holding `dir` (`/sys/dev/block/M:m/stat`, the
/// seventh field: sectors of 512 bytes).
fn device_written(dir: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt as _;
    let dev = std::fs::metadata(dir).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let stat = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/stat")).ok()?;
    let sectors: u64 = stat.split_whitespace().nth(6)?.parse().ok()?;
    Some(sectors * 512)
}

/// Writes back every dirty page of the file system holding `dir` (`syncfs`).
fn sync_fs(dir: &Path) {
    use std::os::fd::AsRawFd as _;
    if let Ok(d) = std::fs::File::open(dir) {
        // SAFETY: a plain system call on an open descriptor.
        unsafe { libc::syncfs(d.as_raw_fd()) };
    }
}

/// What a phase cost: wall time, bytes written, syncs and CPU, measured around `f`; the
/// disk's bytes up to a `syncfs` of `dir` after it (not timed).
fn measure(
    target: &'static str,
    phase: &'static str,
    (ops, dir): (u64, &Path),
    pids: &[i32],
    syncs: impl Fn() -> u64,
    f: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<StoreRow> {
    sync_fs(dir);
    let (w0, s0, c0, d0) = (
        diskio::written(pids),
        syncs(),
        crate::cpu::own_time() + crate::cpu::process_time(pids),
        device_written(dir),
    );
    let t = Instant::now();
    f()?;
    let secs = t.elapsed().as_secs_f64();
    let cpu = (crate::cpu::own_time() + crate::cpu::process_time(pids)).saturating_sub(c0);
    sync_fs(dir);
    let disk = device_written(dir)
        .zip(d0)
        .map(|(a, b)| a.saturating_sub(b) as f64 / ops.max(1) as f64);
    let per = |x: f64| x / ops.max(1) as f64;
    Ok(StoreRow {
        target,
        phase,
        ops,
        secs,
        bytes_per_op: per(diskio::written(pids).saturating_sub(w0) as f64),
        disk_bytes_per_op: disk,
        syncs_per_op: per(syncs().saturating_sub(s0) as f64),
        cpu_us_per_op: per(cpu.as_secs_f64() * 1e6),
    })
}

/// The file service over a log store in `dir`, driven as a replica drives it.
struct StoreTarget {
    svc: FileService<LogStore>,
    seq: u64,
    k: u64,
    clock_us: u64,
}

impl StoreTarget {
    fn open(dir: &Path, k: u64) -> anyhow::Result<Self> {
        let cfg = FsConfig::trusted();
        let store = LogStore::open_persistent(dir.join("fs-state"), cfg.partitions, true)
            .context("opening the log store")?;
        let svc = FileService::with_store(store, cfg).context("initialising the store")?;
        Ok(StoreTarget {
            svc,
            seq: 0,
            k: k.max(1),
            clock_us: 1_700_000_000_000_000,
        })
    }

    /// Runs `op` as one agreed operation; a stable checkpoint every `k`.
    fn run(&mut self, op: Op) -> anyhow::Result<Reply> {
        let bytes = Request::new(Credentials::root(), op).encode();
        self.clock_us += 1_000;
        let out = self.svc.execute(1, &bytes, &self.clock_us.to_le_bytes());
        self.seq += 1;
        if self.seq.is_multiple_of(self.k) {
            let seq = self.seq;
            self.svc.checkpoint(seq);
            self.svc.discard_checkpoints_below(seq);
            // A replica runs these works on its disk worker; here, in line.
            let work = self.svc.persist(seq).map_err(anyhow::Error::msg)?;
            run_in_line(&mut self.svc, work).map_err(anyhow::Error::msg)?;
            let work = self.svc.recorded(seq).map_err(anyhow::Error::msg)?;
            run_in_line(&mut self.svc, work).map_err(anyhow::Error::msg)?;
        }
        if let Some(e) = self.svc.failure() {
            bail!("the store failed: {e}");
        }
        decode_result(&out)
            .context("a result that does not decode")?
            .map_err(|e| anyhow::anyhow!("the file service answered {e:?}"))
    }

    fn syncs(&self) -> u64 {
        self.svc.store().counters().syncs
    }
}

fn run_store(dir: &Path, args: &StoreArgs) -> anyhow::Result<Vec<StoreRow>> {
    let st = std::cell::RefCell::new(StoreTarget::open(dir, args.checkpoint_interval)?);
    let n = args.files;
    let syncs = || st.borrow().syncs();
    let mut handles: Vec<FileHandle> = Vec::new();
    let mut rows = Vec::new();
    rows.push(measure("store", PHASES[0], (n, dir), &[], syncs, || {
        for i in 0..n {
            let r = st.borrow_mut().run(Op::Create {
                dir: FileHandle::ROOT,
                name: format!("f{i}").into_bytes(),
                mode: 0o644,
                exclusive: true,
            })?;
            let attr = r.entry().context("create answered no entry")?;
            handles.push(attr.fh);
        }
        Ok(())
    })?);
    let data = vec![7u8; BLOCK];
    rows.push(measure("store", PHASES[1], (n, dir), &[], syncs, || {
        for &fh in &handles {
            st.borrow_mut().run(Op::Write {
                fh,
                offset: 0,
                data: data.clone(),
            })?;
        }
        Ok(())
    })?);
    rows.push(measure("store", PHASES[2], (n, dir), &[], syncs, || {
        for i in 0..n {
            st.borrow_mut().run(Op::Remove {
                dir: FileHandle::ROOT,
                name: format!("f{i}").into_bytes(),
            })?;
        }
        Ok(())
    })?);
    let c = st.borrow().svc.store().counters();
    println!(
        "store counters: {} bytes appended in {} frames, {} syncs, {} compactions \
         ({} segments removed, {} bytes copied)",
        c.bytes_written, c.frames, c.syncs, c.compactions, c.segments_removed, c.bytes_copied
    );
    Ok(rows)
}

fn run_passthrough(work: &Path, n: u64) -> anyhow::Result<Vec<StoreRow>> {
    let m = target::start_passthrough(work)?;
    let pids = m.servers.clone();
    let none = || 0;
    let path = |i: u64| m.dir.join(format!("f{i}"));
    let mut rows = Vec::new();
    rows.push(measure(
        "passthrough",
        PHASES[0],
        (n, work),
        &pids,
        none,
        || {
            for i in 0..n {
                std::fs::File::create(path(i))?;
            }
            Ok(())
        },
    )?);
    let data = vec![7u8; BLOCK];
    rows.push(measure(
        "passthrough",
        PHASES[1],
        (n, work),
        &pids,
        none,
        || {
            for i in 0..n {
                use std::io::Write as _;
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(path(i))?
                    .write_all(&data)?;
            }
            Ok(())
        },
    )?);
    rows.push(measure(
        "passthrough",
        PHASES[2],
        (n, work),
        &pids,
        none,
        || {
            for i in 0..n {
                std::fs::remove_file(path(i))?;
            }
            Ok(())
        },
    )?);
    Ok(rows)
}

/// The table: one row per phase, the two targets side by side, and their ratios.
fn table(rows: &[StoreRow]) -> String {
    let mut s = String::from(
        "| phase | store ops/s | passthrough ops/s | store B/op | passthrough B/op | \
         store disk B/op | passthrough disk B/op | disk ratio | store syncs/op | \
         store CPU µs/op | passthrough CPU µs/op |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for phase in PHASES {
        let get = |t: &str| rows.iter().find(|r| r.target == t && r.phase == phase);
        let (Some(a), Some(b)) = (get("store"), get("passthrough")) else {
            continue;
        };
        let disk = |r: &StoreRow| {
            r.disk_bytes_per_op
                .map_or("—".into(), |d| format!("{d:.0}"))
        };
        let ratio = match (a.disk_bytes_per_op, b.disk_bytes_per_op) {
            (Some(x), Some(y)) if y > 0.0 => format!("{:.2} ×", x / y),
            _ => "—".into(),
        };
        s.push_str(&format!(
            "| {phase} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {} | {ratio} | {:.3} | {:.1} | {:.1} |\n",
            a.ops_per_sec(),
            b.ops_per_sec(),
            a.bytes_per_op,
            b.bytes_per_op,
            disk(a),
            disk(b),
            a.syncs_per_op,
            a.cpu_us_per_op,
            b.cpu_us_per_op,
        ));
    }
    s
}

/// Runs `byzfs bench store`.
pub fn run(args: StoreArgs) -> anyhow::Result<()> {
    let base = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            tempfile::tempdir_in(d)
        }
        None => tempfile::tempdir(),
    }
    .context("making a working directory")?;
    let store_dir = base.path().join("store");
    std::fs::create_dir(&store_dir)?;
    let mut rows = run_store(&store_dir, &args)?;
    match run_passthrough(&base.path().join("passthrough"), args.files) {
        Ok(r) => rows.extend(r),
        Err(e) => eprintln!("passthrough skipped: {e:#}"),
    }
    println!(
        "\nThe store alone ({} operations a phase, a stable checkpoint every {}; {}):\n\n{}",
        args.files,
        args.checkpoint_interval,
        base.path().display(),
        table(&rows)
    );
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_vec_pretty(&rows)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_target_runs_every_phase_and_counts_its_syncs() {
        let dir = tempfile::tempdir().unwrap();
        let args = StoreArgs {
            files: 300,
            checkpoint_interval: 128,
            dir: None,
            json: None,
        };
        let rows = run_store(dir.path(), &args).unwrap();
        let phases: Vec<_> = rows.iter().map(|r| (r.target, r.phase, r.ops)).collect();
        assert_eq!(
            phases,
            vec![
                ("store", "create", 300),
                ("store", "write 4 KiB", 300),
                ("store", "remove", 300)
            ]
        );
        // 900 operations: stable checkpoints at 128, 256, …, 896, each one persist (a
        // sync of the segment written) and at most one more after the record.
        let syncs: f64 = rows.iter().map(|r| r.syncs_per_op * r.ops as f64).sum();
        assert!((7.0..=14.0).contains(&syncs.round()), "{syncs} syncs");
    }
}
