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
//!    whole.
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
use std::io::Read as _;
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
}

/// The metric names: "stat P" and "read P" for each worker count P.
fn metric_names(processes: &[usize]) -> Vec<(&'static str, &'static str)> {
    processes
        .iter()
        .map(|p| {
            // A handful of names for the process's life (metrics are named by `&'static str`).
            let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
            (leak(format!("stat {p}")), leak(format!("read {p}")))
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
        .flat_map(|(s, r)| [Metric { name: s, unit: "s" }, Metric { name: r, unit: "s" }])
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
        "processes": processes,
        "cache_timeout_s": args.common.cache_timeout,
        "cache_dropped": cache_dropped,
        "durability": format!("{:?}", args.common.durability).to_lowercase(),
        "runs": args.common.runs,
    });
    let (dirs, files, size, stats) = (args.dirs.max(1), args.files.max(1), args.size, args.stats);
    let content: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
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
            }
            Ok(out)
        },
    )?;
    println!(
        "{}",
        results.table_metrics_as_rows(&format!(
            "Several processes ({dirs} directories of {files} files of {size} B another mount \
             wrote; stat ×{stats}, then read; cache timeout {} s): seconds",
            args.common.cache_timeout.unwrap_or(0.0)
        ))
    );
    // Speed-up of each worker count over the first, per target.
    if let Some(&(s1, r1)) = names.first() {
        for t in &results.targets {
            for (s, r) in names.iter().skip(1) {
                let up = |a: &str, b: &str| match (results.value(t, a), results.value(t, b)) {
                    (Some(x), Some(y)) if y > 0.0 => format!("{:.2}", x / y),
                    _ => "-".to_string(),
                };
                println!(
                    "{t}: speed-up of {} over {}: stat {}, read {}",
                    s.trim_start_matches("stat "),
                    s1.trim_start_matches("stat "),
                    up(s1, s),
                    up(r1, r)
                );
            }
        }
    }
    results.write_outputs(&args.common, "Several processes on one mount")
}

/// Runs `each` on every file of the `dirs` directories under `root`, split among `workers`
/// threads (worker k takes directories k, k + workers, …); the wall time in seconds.
fn timed(
    workers: usize,
    dirs: usize,
    root: &Path,
    each: impl Fn(&Path) -> anyhow::Result<()> + Sync,
) -> anyhow::Result<f64> {
    let start = Instant::now();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|k| {
                let each = &each;
                scope.spawn(move || -> anyhow::Result<()> {
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
