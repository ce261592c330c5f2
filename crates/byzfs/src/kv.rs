//! `byzfs kv`: poke a cluster's key-value service by hand.

use anyhow::{anyhow, bail, Context as _};
use byzfs_bft::services::kv::{KvOp, KvResult};
use byzfs_net::cluster::ClusterConfig;
use byzfs_net::keygen::{client_key_path, DEFAULT_CLIENT};
use byzfs_net::{ByzClient, ClientCredential};
use clap::{Args, Subcommand};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct KvArgs {
    /// The cluster file.
    #[arg(long)]
    config: PathBuf,
    /// The client credential (default: client-1.key beside the config).
    #[arg(long)]
    key: Option<PathBuf>,
    /// Give up after this long.
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    #[command(subcommand)]
    op: KvCommand,
}

#[derive(Subcommand, Debug)]
enum KvCommand {
    /// Set KEY to VALUE.
    Put { key: String, value: String },
    /// Print KEY's value (exit status 1 if absent). Read-only: answered without ordering.
    Get { key: String },
    /// Remove KEY.
    Delete { key: String },
    /// Append VALUE to KEY's value and print the result.
    Append { key: String, value: String },
}

/// The cluster of `config` and the client credential `key` (default: client-1.key beside
/// the config), as `kv` and `group` take them.
pub(crate) fn cluster_and_credential(
    config: &std::path::Path,
    key: Option<&std::path::Path>,
) -> anyhow::Result<(ClusterConfig, ClientCredential)> {
    let cluster = ClusterConfig::load(config)?;
    let key = key.map(std::path::Path::to_path_buf).unwrap_or_else(|| {
        client_key_path(
            config.parent().unwrap_or_else(|| ".".as_ref()),
            DEFAULT_CLIENT,
        )
    });
    let cred = ClientCredential::load(&key, &cluster)?;
    Ok((cluster, cred))
}

pub fn run(a: KvArgs) -> anyhow::Result<ExitCode> {
    crate::logging::init("warn");
    let (cluster, cred) = cluster_and_credential(&a.config, a.key.as_deref())?;
    let (op, read_only) = match &a.op {
        KvCommand::Put { key, value } => (
            KvOp::Put {
                key: key.clone().into_bytes(),
                value: value.clone().into_bytes(),
            },
            false,
        ),
        KvCommand::Get { key } => (
            KvOp::Get {
                key: key.clone().into_bytes(),
            },
            true,
        ),
        KvCommand::Delete { key } => (
            KvOp::Delete {
                key: key.clone().into_bytes(),
            },
            false,
        ),
        KvCommand::Append { key, value } => (
            KvOp::Append {
                key: key.clone().into_bytes(),
                value: value.clone().into_bytes(),
            },
            false,
        ),
    };
    let timeout = Duration::from_millis(a.timeout_ms);
    let result = byzfs_net::signals::runtime()?.block_on(async {
        let work = async {
            let mut client = ByzClient::connect(&cluster, &cred).await?;
            client.invoke(op.encode(), read_only).await
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| {
                anyhow!(
                    "no reply within {} ms; is the cluster up? (byzfs status --config {})",
                    a.timeout_ms,
                    a.config.display()
                )
            })?
            .context("kv")
    })?;
    let mut out = std::io::stdout().lock();
    match KvResult::decode(&result) {
        Some(KvResult::Ok) => writeln!(out, "OK")?,
        Some(KvResult::Value(Some(v))) => {
            out.write_all(&v)?;
            writeln!(out)?;
        }
        Some(KvResult::Value(None)) => {
            eprintln!("not found");
            return Ok(ExitCode::from(1));
        }
        Some(other) => bail!("unexpected result {other:?}"),
        None => {
            bail!("the cluster returned a result that does not decode; is it running --service kv?")
        }
    }
    Ok(ExitCode::SUCCESS)
}
