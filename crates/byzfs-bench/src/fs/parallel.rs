//! Several processes on one mount (issue #45's pattern): small files in four directories
//! that another mount wrote, stat and read by one process, then by four at once.
//!
//! Per target, untimed: `--dirs` directories of `--files` files of `--size` bytes each are
//! written through the mount, then the target is mounted again ([`Mounted::remount`]): a
//! new mount finds them, with nothing cached and no delegation held, as when another
//! machine wrote them. Then, for each count P of `--processes`, timed:
//! 1. **stat**: P workers (threads of this process, each its own caller to FUSE) split the
//!    directories between them and `stat` every file `--stats` times;
//! 2. **read**: the kernel's caches dropped (root only), the same workers read every file
//!    whole;
//! 3. **write**: each of P workers writes a file of its own (`--write-kib`, in a directory
//!    of the phase's) in
//!    `--write-block`-byte writes, then closes it: P files written at once through one
//!    mount (each file's writes are held back apart: `byzfs-fuse/src/gather.rs`).
//!
//! ByzFS and NO-REP are mounted with as many FUSE threads as the most workers
//! (`--mount-threads`), so their read-only operations go in lanes.
//! With `--cache-timeout 0` (this benchmark's default) neither the kernel nor ByzFS's mount
//! caches attributes or names, so every `stat` asks the target. What a table shows per P:
//! the seconds of each phase; the speed-up of P workers over one is the ratio of those
//! seconds, printed under the table.

use super::report::{run_targets_prepared, Metric};
use super::target::drop_caches;
use super::CommonArgs;
use anyhow::Context as _;
use std::fs;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `byzfs bench parallel`
#[derive(clap::Args, Debug)]
pub struct ParallelArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Worker counts to measure, in order (each splits the same directories).
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    processes: Vec<usize>,
    /// Directories.
    #[arg(long, default_value_t = 4)]
    dirs: usize,
    /// Files in each directory.
    #[arg(long, default_value_t = 400)]
    files: usize,
    /// Bytes in each file.
    #[arg(long, default_value_t = 2048)]
    size: usize,
    /// Times each file is `stat`ed in the stat phase.
    #[arg(long, default_value_t = 3)]
    stats: usize,
    /// KiB each worker writes to its own file in the write phase.
    #[arg(long, default_value_t = 2048)]
    write_kib: usize,
    /// Bytes per `write` in the write phase.
    #[arg(long, default_value_t = 4096)]
    write_block: usize,
}

/// The metric names of one worker count P: "stat P", "read P" and "write P".
struct Names {
    stat: &'static str,
    read: &'static str,
    write: &'static str,
}

fn metric_names(processes: &[usize]) -> Vec<Names> {
    processes
        .iter()
        .map(|p| {
            // A handful of names for the process's life (metrics are named by `&'static str`).
            let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
            Names {
                stat: leak(format!("stat {p}")),
                read: leak(format!("read {p}")),
                write: leak(format!("write {p}")),
            }
        })
        .collect()
}

pub fn run(mut args: ParallelArgs) -> anyhow::Result<()> {
    if args.common.cache_timeout.is_none() {
        args.common.cache_timeout = Some(0.0);
    }
    // Lanes: as many FUSE threads as the most workers.
    if args.common.mount_threads.is_none() {
        let most = args.processes.iter().copied().max().unwrap_or(1);
        args.common.mount_threads = Some(u16::try_from(most.clamp(1, 64)).unwrap_or(64));
    }
    let processes: Vec<usize> = args.processes.iter().map(|p| (*p).max(1)).collect();
    let names = metric_names(&processes);
    let metrics: Vec<Metric> = names
        .iter()
        .flat_map(|n| [n.stat, n.read, n.write].map(|name| Metric { name, unit: "s" }))
        .collect();
    let cache_dropped = drop_caches();
    if !cache_dropped {
        eprintln!(
            "warning: cannot write /proc/sys/vm/drop_caches (needs root): reads may be served from the page cache"
        );
    }
    let params = serde_json::json!({
        "dirs": args.dirs,
        "files": args.files,
        "size": args.size,
        "stats": args.stats,
        "write_kib": args.write_kib,
        "write_block": args.write_block,
        "processes": processes,
        "cache_timeout_s": args.common.cache_timeout,
        "cache_dropped": cache_dropped,
        "durability": format!("{:?}", args.common.durability).to_lowercase(),
        "runs": args.common.runs,
    });
    let (dirs, files, size, stats) = (args.dirs.max(1), args.files.max(1), args.size, args.stats);
    let content: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    let (write_bytes, block) = (args.write_kib * 1024, args.write_block.max(1));
    let chunk: Vec<u8> = (0..block).map(|i| (i % 253) as u8).collect();
    let results = run_targets_prepared(
        &args.common,
        "parallel",
        metrics,
        params,
        &mut |_, mounted, pb| {
            pb.set_message("writing");
            pb.set_length((dirs * files) as u64);
            for d in 0..dirs {
                let dir = mounted.dir.join(format!("d{d}"));
                fs::create_dir(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
                for f in 0..files {
                    let p = dir.join(format!("f{f}"));
                    fs::write(&p, &content).with_context(|| format!("writing {}", p.display()))?;
                    pb.inc(1);
                }
            }
            pb.set_message("remounting");
            mounted.remount()
        },
        &mut |_, dir, pb| {
            let mut out = Vec::new();
            for &p in &processes {
                pb.set_message(format!("stat ×{p}"));
                out.push(timed(p, dirs, dir, |path| {
                    for _ in 0..stats {
                        fs::symlink_metadata(path)
                            .with_context(|| format!("stat {}", path.display()))?;
                    }
                    Ok(())
                })?);
                if cache_dropped {
                    drop_caches();
                }
                pb.set_message(format!("read ×{p}"));
                out.push(timed(p, dirs, dir, |path| {
                    let mut buf = Vec::with_capacity(size);
                    fs::File::open(path)
                        .and_then(|mut f| f.read_to_end(&mut buf))
                        .with_context(|| format!("reading {}", path.display()))?;
                    anyhow::ensure!(
                        buf.len() == size,
                        "{} is {} bytes",
                        path.display(),
                        buf.len()
                    );
                    Ok(())
                })?);
                pb.set_message(format!("write ×{p}"));
                // Apart from the directories the other phases list.
                let wdir = dir.join(format!("w{p}"));
                fs::create_dir(&wdir).with_context(|| format!("mkdir {}", wdir.display()))?;
                out.push(timed_workers(p, |k| {
                    let path = wdir.join(format!("f{k}"));
                    let mut f = fs::File::create(&path)
                        .with_context(|| format!("creating {}", path.display()))?;
                    let mut left = write_bytes;
                    while left > 0 {
                        let n = left.min(block);
                        f.write_all(&chunk[..n])
                            .with_context(|| format!("writing {}", path.display()))?;
                        left -= n;
                    }
                    drop(f);
                    let len = fs::metadata(&path)?.len();
                    anyhow::ensure!(
                        len == write_bytes as u64,
                        "{} is {len} bytes",
                        path.display()
                    );
                    Ok(())
                })?);
            }
            Ok(out)
        },
    )?;
    println!(
        "{}",
        results.table_metrics_as_rows(&format!(
            "Several processes ({dirs} directories of {files} files of {size} B another mount \
             wrote; stat ×{stats}, then read; then each writes {} KiB in {block} B writes; \
             cache timeout {} s): seconds",
            args.write_kib,
            args.common.cache_timeout.unwrap_or(0.0)
        ))
    );
    // Speed-up of each worker count over the first, per target.
    // Writes: P workers write P times the bytes, so the speed-up is P × t1 / tP.
    if let (Some(one), Some(&p1)) = (names.first(), processes.first()) {
        for t in &results.targets {
            for (n, &p) in names.iter().zip(&processes).skip(1) {
                let up =
                    |a: &str, b: &str, scale: f64| match (results.value(t, a), results.value(t, b))
                    {
                        (Some(x), Some(y)) if y > 0.0 => format!("{:.2}", scale * x / y),
                        _ => "-".to_string(),
                    };
                println!(
                    "{t}: speed-up of {p} over {p1}: stat {}, read {}, write {}",
                    up(one.stat, n.stat, 1.0),
                    up(one.read, n.read, 1.0),
                    up(one.write, n.write, p as f64 / p1 as f64)
                );
            }
        }
    }
    results.write_outputs(&args.common, "Several processes on one mount")
}

/// Runs `each(k)` on `workers` threads at once (k = 0, 1, …); the wall time in seconds.
fn timed_workers(
    workers: usize,
    each: impl Fn(usize) -> anyhow::Result<()> + Sync,
) -> anyhow::Result<f64> {
    let start = Instant::now();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|k| {
                let each = &each;
                scope.spawn(move || each(k))
            })
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| anyhow::anyhow!("a worker panicked"))??;
        }
        Ok::<(), anyhow::Error>(())
    })?;
    Ok(start.elapsed().as_secs_f64())
}

/// Runs `each` on every file of the `dirs` directories under `root`, split among `workers`
/// threads (worker k takes directories k, k + workers, …); the wall time in seconds.
fn timed(
    workers: usize,
    dirs: usize,
    root: &Path,
    each: impl Fn(&Path) -> anyhow::Result<()> + Sync,
) -> anyhow::Result<f64> {
    timed_workers(workers, |k| {
        for d in (k..dirs).step_by(workers) {
            let dir = root.join(format!("d{d}"));
            let mut paths: Vec<PathBuf> = fs::read_dir(&dir)
                .with_context(|| format!("listing {}", dir.display()))?
                .map(|e| e.map(|e| e.path()))
                .collect::<Result<_, _>>()?;
            paths.sort();
            for p in &paths {
                each(p)?;
            }
        }
        Ok(())
    })
}
