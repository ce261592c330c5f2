//! `byzfs keygen` and `byzfs client-key`.

use anyhow::Context as _;
use byzfs_net::cluster::ClusterConfig;
use byzfs_net::keygen::{client_key_path, keygen as generate, KeygenOptions};
use byzfs_net::{AdminSecret, ClientCredential};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct KeygenArgs {
    /// Number of replicas, 3f+1 (4, 7, 10, …).
    #[arg(long, default_value_t = 4)]
    replicas: usize,
    /// Directory to write into (created if needed; existing keys are never overwritten).
    #[arg(long)]
    out: PathBuf,
    /// Port of replica 0; replica i listens on base-port + i. 0 picks free ports.
    #[arg(long, default_value_t = 7000)]
    base_port: u16,
    /// Host the replicas listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Give the replicas no Unix sockets, so that every link uses TCP even on one host
    /// (by default each replica also listens on `DIR/replica-<id>.sock` when --host is a
    /// loopback address, and local peers and clients connect there).
    #[arg(long)]
    tcp_only: bool,
}

pub fn keygen(a: KeygenArgs) -> anyhow::Result<ExitCode> {
    let mut opts = KeygenOptions::local(a.replicas, &a.host, a.base_port)?;
    opts.local_sockets &= !a.tcp_only;
    let g = generate(&a.out, &opts)?;
    println!("wrote {}", g.config.display());
    for p in g
        .replica_keys
        .iter()
        .chain([&g.admin_key])
        .chain(&g.client_keys)
    {
        println!("wrote {} (mode 0600)", p.display());
    }
    let client = g
        .client_keys
        .first()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    println!(
        "\nstart replica i with: byzfs replica --config {} --id i --key {}\n\
         then try:             byzfs kv --config {} --key {client} put hello world",
        g.config.display(),
        a.out.join("replica-i.key").display(),
        g.config.display(),
    );
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct ClientKeyArgs {
    /// The cluster file.
    #[arg(long)]
    config: PathBuf,
    /// The admin key (default: admin.key beside the config).
    #[arg(long)]
    admin_key: Option<PathBuf>,
    /// The new client's id (0..=16777215).
    #[arg(long)]
    id: u64,
    /// Where to write the credential (default: client-<id>.key beside the config).
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn client_key(a: ClientKeyArgs) -> anyhow::Result<ExitCode> {
    let cluster = ClusterConfig::load(&a.config)?;
    let admin_path = a
        .admin_key
        .unwrap_or_else(|| crate::beside(&a.config, "admin.key"));
    let admin = AdminSecret::load(&admin_path, &cluster)?;
    let out = a.out.unwrap_or_else(|| {
        client_key_path(a.config.parent().unwrap_or_else(|| ".".as_ref()), a.id)
    });
    ClientCredential::issue(&cluster, &admin, a.id)?
        .write(&out)
        .with_context(|| format!("client {}", a.id))?;
    println!("wrote {} (mode 0600): client {}", out.display(), a.id);
    Ok(ExitCode::SUCCESS)
}
