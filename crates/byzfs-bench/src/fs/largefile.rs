//! Large files (Plutus Table 5, after the Sprite LFS large-file benchmark): 40 MB files
//! written and read sequentially and at random.
//!
//! Per target, in this order, over `--files` files of `--size-mib` MiB in `--block-kib` KiB
//! requests:
//! 1. sequential write: create each file and write it front to back, then `fsync` it;
//! 2. sequential read: read each file front to back;
//! 3. random read: read every block once, in a seeded random order;
//! 4. random write: overwrite every block once, in another random order, then `fsync`.
//!
//! Writes are timed up to and including `fsync` (data on the target's stable storage, as far
//! as the target promises), so write-back caching does not hide them. Before each timed
//! phase the kernel's caches are dropped (`sync; echo 3 > /proc/sys/vm/drop_caches`, root
//! only): this empties the page cache of the FUSE mounts and of their backing files, so reads
//! go to the target (Plutus restarted its client daemon for the same reason). Caches inside
//! ByzFS servers are not dropped. Where dropping is not permitted, reads may be served from
//! memory; `cache_dropped` in the JSON rows says which.

use super::report::{run_targets, Metric};
use super::target::drop_caches;
use super::CommonArgs;
use anyhow::Context as _;
use std::fs;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::FileExt as _;
use std::path::Path;
use std::time::Instant;

/// `byzfs bench largefile`
#[derive(clap::Args, Debug)]
pub struct LargefileArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Size of each file in MiB (the seed: 40 MB).
    #[arg(long, default_value_t = 40)]
    size_mib: u64,
    /// Number of files.
    #[arg(long, default_value_t = 1)]
    files: u32,
    /// Request size in KiB.
    #[arg(long, default_value_t = 8)]
    block_kib: u64,
    /// Do not drop the kernel's caches before each phase.
    #[arg(long)]
    no_drop_caches: bool,
}

pub fn run(args: LargefileArgs) -> anyhow::Result<()> {
    let block = (args.block_kib.max(1) * 1024) as usize;
    let size = args.size_mib.max(1) * 1024 * 1024;
    let blocks = size.div_ceil(block as u64);
    let cache_dropped = !args.no_drop_caches && drop_caches();
    if !args.no_drop_caches && !cache_dropped {
        eprintln!(
            "warning: cannot write /proc/sys/vm/drop_caches (needs root): reads may be served from the page cache"
        );
    }
    // The seed's column order: read seq, read rand, write seq, write rand.
    let metrics = vec![
        Metric {
            name: "read seq",
            unit: "s",
        },
        Metric {
            name: "read rand",
            unit: "s",
        },
        Metric {
            name: "write seq",
            unit: "s",
        },
        Metric {
            name: "write rand",
            unit: "s",
        },
    ];
    let params = serde_json::json!({
        "size_bytes": size,
        "files": args.files,
        "block_bytes": block,
        "cache_dropped": cache_dropped,
        "durability": format!("{:?}", args.common.durability).to_lowercase(),
        "runs": args.common.runs,
    });
    // Incompressible contents, the same for every target. The random writes write other
    // bytes than the sequential ones: rewriting a block with what it holds already is no
    // change at all for the replicas' store (it skips equal values), which made plain
    // targets' random writes look cheaper than any real overwrite (docs/BENCHMARKS.md
    // "Encrypted mounts").
    let mut rng = SplitMix(0x5eed);
    let mut incompressible = || {
        let mut b = vec![0u8; block];
        for chunk in b.chunks_mut(8) {
            chunk.copy_from_slice(&rng.next().to_le_bytes()[..chunk.len()]);
        }
        b
    };
    let data = incompressible();
    let other = incompressible();
    let cold = || {
        if cache_dropped {
            drop_caches();
        }
    };
    let nfiles = args.files.max(1);
    let results = run_targets(
        &args.common,
        "largefile",
        metrics,
        params,
        &mut |_, dir, pb| {
            let paths: Vec<_> = (0..nfiles)
                .map(|i| dir.join(format!("large-{i}")))
                .collect();
            let total = blocks * u64::from(nfiles);
            let phase = |name: &'static str| {
                pb.set_message(name);
                pb.set_length(total);
                pb.set_position(0);
            };

            phase("write seq");
            cold();
            let t = Instant::now();
            for p in &paths {
                let mut f =
                    fs::File::create(p).with_context(|| format!("creating {}", p.display()))?;
                for b in 0..blocks {
                    let n = block_len(b, block, size);
                    f.write_all(&data[..n])?;
                    pb.inc(1);
                }
                f.sync_all()?;
            }
            let write_seq = t.elapsed().as_secs_f64();

            phase("read seq");
            cold();
            let t = Instant::now();
            let mut buf = vec![0u8; block];
            for p in &paths {
                let mut f = fs::File::open(p)?;
                let mut got = 0u64;
                loop {
                    let n = f.read(&mut buf)?;
                    if n == 0 {
                        break;
                    }
                    got += n as u64;
                    pb.set_position(pb.position().max(got / block as u64));
                }
                anyhow::ensure!(
                    got == size,
                    "{}: read {got} bytes, expected {size}",
                    p.display()
                );
            }
            let read_seq = t.elapsed().as_secs_f64();

            phase("read rand");
            cold();
            let order = shuffled(blocks, 1);
            let t = Instant::now();
            for p in &paths {
                let f = fs::File::open(p)?;
                for &b in &order {
                    let n = block_len(b, block, size);
                    f.read_exact_at(&mut buf[..n], b * block as u64)?;
                    pb.inc(1);
                }
            }
            let read_rand = t.elapsed().as_secs_f64();

            phase("write rand");
            cold();
            let order = shuffled(blocks, 2);
            let t = Instant::now();
            for p in &paths {
                let f = fs::OpenOptions::new().write(true).open(p)?;
                for &b in &order {
                    let n = block_len(b, block, size);
                    f.write_all_at(&other[..n], b * block as u64)?;
                    pb.inc(1);
                }
                f.sync_all()?;
            }
            let write_rand = t.elapsed().as_secs_f64();
            remove_all(&paths);
            Ok(vec![read_seq, read_rand, write_seq, write_rand])
        },
    )?;
    let title = format!(
        "Large files ({} x {} MiB, {} KiB requests, caches {}): seconds; ratios < 1 mean the first is faster",
        nfiles,
        args.size_mib,
        args.block_kib,
        if cache_dropped { "dropped" } else { "warm" }
    );
    println!("{}", results.table_targets_as_rows(&title));
    results.write_outputs(&args.common, &title)
}

fn remove_all(paths: &[std::path::PathBuf]) {
    for p in paths {
        let _ = fs::remove_file(Path::new(p));
    }
}

/// Length of block `b` (the last one may be short).
fn block_len(b: u64, block: usize, size: u64) -> usize {
    (size - b * block as u64).min(block as u64) as usize
}

/// 0..n in a random order (Fisher–Yates with a seeded generator).
fn shuffled(n: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    let mut rng = SplitMix(seed);
    for i in (1..v.len()).rev() {
        let j = (rng.next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// SplitMix64: a small seeded generator (no need for a crate here).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn shuffle_is_a_permutation() {
        let mut v = super::shuffled(1000, 7);
        v.sort_unstable();
        assert_eq!(v, (0..1000).collect::<Vec<_>>());
    }
}
