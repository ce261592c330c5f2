//! `up.toml` in the cluster directory: how `byzfs up` runs each replica, so that
//! `byzfs status` can name a down replica's state and the exact command that restarts it by
//! hand (README "When a replica dies"). `up` rewrites it at each start, exit and restart, and
//! removes it when it stops.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file's name, beside `cluster.toml`.
pub const RUN_FILE: &str = "up.toml";

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFile {
    /// `byzfs up`'s process id.
    pub pid: u32,
    pub replicas: Vec<RunReplica>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunReplica {
    pub id: u32,
    /// The command that runs it by hand: `up`'s own, less `--exit-with-parent`, absolute paths.
    pub command: Vec<String>,
    pub log: PathBuf,
    /// Its process id while it runs.
    pub pid: Option<u32>,
    /// One line: "running", "restarting in 2.0 s (exit 3 of 5 allowed within 60 s)", or
    /// "given up: …".
    pub state: String,
}

impl RunFile {
    /// Writes `path` atomically (a reader never sees half a file).
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        let tmp = path.with_extension("toml.tmp");
        std::fs::write(&tmp, toml::to_string(self)?)?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    }

    /// The run file beside `config`, if `byzfs up` wrote one and still runs.
    pub fn of_running_up(config: &Path) -> Option<RunFile> {
        let text = std::fs::read_to_string(crate::beside(config, RUN_FILE)).ok()?;
        let run: RunFile = toml::from_str(&text).ok()?;
        // A process of that id runs `byzfs up` (ids are reused after a crash of `up`).
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", run.pid)).ok()?;
        cmdline
            .split(|&b| b == 0)
            .any(|arg| arg == b"up")
            .then_some(run)
    }
}

/// `args` as one shell command line, quoted where needed.
pub fn shell_line(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,@+".contains(&b));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_lines_quote_only_what_needs_it() {
        let args = ["byzfs", "replica", "--data", "/tmp/my dir", "it's", ""].map(String::from);
        assert_eq!(
            shell_line(&args),
            r"byzfs replica --data '/tmp/my dir' 'it'\''s' ''"
        );
    }
}
