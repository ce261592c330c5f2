//! PostMark (Katcher 1997; Debian package `postmark`), as in the BFT library's Figure 9.
//!
//! The real `postmark` binary runs in the target directory with a script on its standard
//! input: the seed's configuration (`--preset seed`: 10,000 files of 512 B–16 KiB, 100,000
//! transactions) or a small one for quick runs (`--preset quick`: 1,000 files, 5,000
//! transactions). PostMark creates the file pool, runs the transactions (read or append,
//! create or delete), then deletes the pool.
//!
//! PostMark reports its own times with one-second resolution, which is too coarse for quick
//! runs, so the phases are timed here from its output, which it flushes as it goes:
//! `create` (the initial pool), `transactions`, `delete` (the remaining pool), `total`, and
//! `throughput`: transactions per second of the transaction phase (the seed's figure).

use super::report::{run_targets, Bound, Metric};
use super::CommonArgs;
use anyhow::{bail, Context as _};
use std::io::{Read as _, Write as _};
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

/// `byzfs bench postmark`
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
            name: "throughput",
            unit: "tx/s",
        },
        Metric {
            name: "create",
            unit: "s",
        },
        Metric {
            name: "transactions",
            unit: "s",
        },
        Metric {
            name: "delete",
            unit: "s",
        },
        Metric {
            name: "total",
            unit: "s",
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
            pb.set_length(3);
            pb.set_message("create");
            pb.enable_steady_tick(std::time::Duration::from_millis(200));
            let script = format!(
                "set location {}\nset number {files}\nset transactions {transactions}\n\
             set size 512 16384\nset seed 42\nrun\nquit\n",
                dir.display()
            );
            let p = run_postmark(&args.postmark, &script, &mut |phase| {
                pb.inc(1);
                pb.set_message(phase);
            })?;
            Ok(vec![
                f64::from(transactions) / p.transactions,
                p.create,
                p.transactions,
                p.delete,
                p.create + p.transactions + p.delete,
            ])
        },
    )?;
    let title = format!(
        "PostMark ({files} files, 512 B-16 KiB, {transactions} transactions): \
         ratio = first / second (tx/s: higher is faster; s: lower is faster)"
    );
    println!("{}", results.table_targets_as_rows(&title));
    // Issue #4: PostMark ByzFS >= 0.75 x NO-REP (transactions per second).
    print!(
        "{}",
        results.target_checks("throughput", Bound::AtLeast(0.75))
    );
    results.write_outputs(&args.common, &title)
}

/// Wall times of PostMark's three phases, in seconds.
struct Phases {
    create: f64,
    transactions: f64,
    delete: f64,
}

/// Runs PostMark with `script` on its standard input and times its phases from its output,
/// which it flushes as it goes: "Creating files...", "Done\nPerforming transactions",
/// "Done\nDeleting files...", "Done". (Its own report has one-second resolution.)
fn run_postmark(
    bin: &str,
    script: &str,
    on_phase: &mut dyn FnMut(&'static str),
) -> anyhow::Result<Phases> {
    let mut child = Command::new(bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {bin}"))?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(script.as_bytes())?;
    let mut stderr = child.stderr.take().expect("piped");
    let errs = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut stdout = child.stdout.take().expect("piped");
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    let marks = [
        "Creating files",
        "Performing transactions",
        "Deleting files",
    ];
    let mut at: [Option<Instant>; 3] = [None; 3];
    loop {
        let n = stdout.read(&mut buf)?;
        let now = Instant::now();
        if n == 0 {
            break;
        }
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
        for (i, m) in marks.iter().enumerate() {
            if at[i].is_none() && text.contains(m) {
                at[i] = Some(now);
                if i > 0 {
                    on_phase(["", "transactions", "delete"][i]);
                }
            }
        }
    }
    let end = Instant::now();
    let status = child.wait()?;
    on_phase("done");
    let errs = errs.join().unwrap_or_default();
    if !status.success() {
        bail!("postmark failed ({status}): {}", errs.trim());
    }
    let [Some(c), Some(t), Some(d)] = at else {
        bail!("unexpected PostMark output (no phase markers):\n{text}{errs}");
    };
    Ok(Phases {
        create: (t - c).as_secs_f64(),
        transactions: (d - t).as_secs_f64(),
        delete: (end - d).as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    /// A stand-in for PostMark that prints its phase markers with pauses between them.
    #[test]
    fn times_phases_from_the_output() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("fake-postmark");
        std::fs::write(
            &bin,
            "#!/bin/sh\ncat > /dev/null\nprintf 'pm>Creating files...'\nsleep 0.1\n\
             printf 'Done\\nPerforming transactions..'\nsleep 0.3\n\
             printf 'Done\\nDeleting files...'\nprintf 'Done\\nTime:\\n'\n",
        )
        .unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut phases = Vec::new();
        let p = super::run_postmark(bin.to_str().unwrap(), "run\nquit\n", &mut |ph| {
            phases.push(ph)
        })
        .unwrap();
        assert_eq!(phases, ["transactions", "delete", "done"]);
        assert!(
            p.create >= 0.1 && p.transactions >= 0.3,
            "{:?}",
            (p.create, p.transactions)
        );
        assert!(p.delete < 0.3);
    }
}
