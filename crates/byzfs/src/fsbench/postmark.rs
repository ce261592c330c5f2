//! PostMark (Katcher 1997; Debian package `postmark`), as in the BFT library's Figure 9.
//!
//! The real `postmark` binary runs in the target directory with a script on its standard
//! input: the seed's configuration (`--preset seed`: 10,000 files of 512 B–16 KiB, 100,000
//! transactions) or a small one for quick runs (`--preset quick`: 1,000 files, 5,000
//! transactions). PostMark creates the file pool, runs the transactions (read or append,
//! create or delete), then deletes the pool.
//!
//! Three figures per target: `transactions`, PostMark's own transaction rate (it times with
//! one-second resolution, so quick runs are coarse); `elapsed`, the wall time of the whole
//! run measured here; and `overall`, transactions divided by `elapsed`, which is precise at
//! any size and includes creating and deleting the pool.

use super::report::{run_targets, Metric};
use super::CommonArgs;
use anyhow::{bail, Context as _};
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Instant;

/// PostMark's configuration.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// The seed's: 10,000 files of 512 B–16 KiB, 100,000 transactions.
    Seed,
    /// 1,000 files, 5,000 transactions (a few seconds).
    Quick,
}

/// `byzfs fsbench postmark`
#[derive(clap::Args, Debug)]
pub struct PostmarkArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The configuration.
    #[arg(long, value_enum, default_value_t = Preset::Seed)]
    preset: Preset,
    /// Override the preset's number of files.
    #[arg(long)]
    files: Option<u32>,
    /// Override the preset's number of transactions.
    #[arg(long)]
    transactions: Option<u32>,
    /// The PostMark binary.
    #[arg(long, default_value = "postmark")]
    postmark: String,
}

pub fn run(args: PostmarkArgs) -> anyhow::Result<()> {
    let (files0, tx0) = match args.preset {
        Preset::Seed => (10_000, 100_000),
        Preset::Quick => (1_000, 5_000),
    };
    let files = args.files.unwrap_or(files0);
    let transactions = args.transactions.unwrap_or(tx0);
    if Command::new(&args.postmark)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err()
    {
        bail!(
            "`{}` not found: install PostMark with `apt-get install -y postmark` (or pass --postmark PATH)",
            args.postmark
        );
    }
    let metrics = vec![
        Metric {
            name: "transactions",
            unit: "tx/s",
        },
        Metric {
            name: "elapsed",
            unit: "s",
        },
        Metric {
            name: "overall",
            unit: "tx/s",
        },
    ];
    let params = serde_json::json!({
        "preset": format!("{:?}", args.preset).to_lowercase(),
        "files": files,
        "transactions": transactions,
        "size_min": 512,
        "size_max": 16384,
        "seed": 42,
        "durability": format!("{:?}", args.common.durability).to_lowercase(),
        "runs": args.common.runs,
    });
    let results = run_targets(
        &args.common,
        "postmark",
        metrics,
        params,
        &mut |_, dir, pb| {
            pb.set_message("postmark");
            pb.set_length(1);
            pb.enable_steady_tick(std::time::Duration::from_millis(200));
            let script = format!(
                "set location {}\nset number {files}\nset transactions {transactions}\n\
             set size 512 16384\nset seed 42\nrun\nquit\n",
                dir.display()
            );
            let t = Instant::now();
            let mut child = Command::new(&args.postmark)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .with_context(|| format!("starting {}", args.postmark))?;
            child
                .stdin
                .take()
                .expect("piped")
                .write_all(script.as_bytes())?;
            let out = child.wait_with_output()?;
            let elapsed = t.elapsed().as_secs_f64();
            pb.inc(1);
            let stdout = String::from_utf8_lossy(&out.stdout);
            if !out.status.success() {
                bail!(
                    "postmark failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            let (tx_secs, tx_rate) = parse_transactions(&stdout).with_context(|| {
                format!("no \"seconds of transactions\" line in PostMark's output:\n{stdout}")
            })?;
            if tx_secs < 5 {
                tracing::info!("PostMark timed the transactions at {tx_secs} s (1 s resolution)");
            }
            Ok(vec![tx_rate, elapsed, f64::from(transactions) / elapsed])
        },
    )?;
    let title = format!(
        "PostMark ({files} files, 512 B-16 KiB, {transactions} transactions): \
         ratios > 1 mean the first is faster in tx/s, slower in s"
    );
    println!("{}", results.table_targets_as_rows(&title));
    results.write_outputs(&args.common, &title)
}

/// From "\tN seconds of transactions (R per second)": (N, R).
fn parse_transactions(out: &str) -> Option<(u64, f64)> {
    let line = out
        .lines()
        .find(|l| l.contains("seconds of transactions"))?;
    let secs = line.split_whitespace().next()?.parse().ok()?;
    let rate = line
        .split('(')
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some((secs, rate))
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_postmark_output() {
        let out = "Time:\n\t12 seconds total\n\t10 seconds of transactions (10000 per second)\n";
        assert_eq!(super::parse_transactions(out), Some((10, 10000.0)));
    }
}
