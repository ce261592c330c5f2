//! `byzfs keygen` and `byzfs client-key`.

use anyhow::Context as _;
use byzfs_fs::proto::grant::{Ids, NOBODY};
use byzfs_fs::Grant;
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
    /// Each replica's own address, in replica order (`host:port`, comma-separated; as many
    /// as replicas, 3f+1): for a cluster across machines (docs/DEPLOY.md). Replaces
    /// --replicas, --host and --base-port.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["replicas", "host", "base_port", "hosts_file"])]
    hosts: Vec<String>,
    /// A TOML file with the replicas' addresses, `hosts = ["a:7000", "b:7000", …]`, in
    /// replica order (as --hosts).
    #[arg(long, conflicts_with_all = ["replicas", "host", "base_port"])]
    hosts_file: Option<PathBuf>,
    /// Give the replicas no Unix sockets, so that every link uses TCP even on one host
    /// (by default each replica also listens on `DIR/replica-<id>.sock` when --host is a
    /// loopback address, and local peers and clients connect there).
    #[arg(long)]
    tcp_only: bool,
    /// The file system's capacity, what `df` shows (bytes, or with a K, M, G or T suffix:
    /// powers of 1024). Default: fitted to the free disk of --out, shared by the replicas
    /// on loopback addresses (`[fs]` in the cluster file says what was chosen). Each
    /// replica's disk needs about 2.5 times this.
    #[arg(long, value_parser = parse_size)]
    fs_capacity: Option<u64>,
    /// The most inodes (files, directories, links). Default: one per 512 bytes of capacity.
    #[arg(long)]
    fs_inodes: Option<u64>,
}

/// The `hosts` list of a TOML file.
fn hosts_file(p: &std::path::Path) -> anyhow::Result<Vec<String>> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Hosts {
        hosts: Vec<String>,
    }
    let text =
        std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
    let h: Hosts = toml::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{} is not a hosts file ({}); write `hosts = [\"a:7000\", \"b:7000\", \"c:7000\", \"d:7000\"]`",
            p.display(),
            e.message().trim()
        )
    })?;
    Ok(h.hosts)
}

/// `N`, `NK`, `NM`, `NG` or `NT` (powers of 1024) as bytes.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("{s:?}: the suffix must be K, M, G or T")),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a size such as 500G"))?;
    n.checked_mul(1 << shift)
        .filter(|&b| b > 0)
        .ok_or_else(|| format!("{s:?} is out of range"))
}

pub fn keygen(a: KeygenArgs) -> anyhow::Result<ExitCode> {
    let hosts = match &a.hosts_file {
        Some(p) => hosts_file(p)?,
        None => a.hosts.clone(),
    };
    let mut opts = if hosts.is_empty() {
        KeygenOptions::local(a.replicas, &a.host, a.base_port)?
    } else {
        KeygenOptions::hosts(&hosts)?
    };
    opts.local_sockets &= !a.tcp_only;
    // The cluster's first client acts for every user of its host, root too, as the local
    // cluster's own (`byzfs up`); `byzfs client-key` issues restricted ones.
    opts.client_grant = Some(byzfs_fs::Grant::trusted_host().encode());
    if a.fs_capacity.is_some() || a.fs_inodes.is_some() {
        let capacity_bytes = a
            .fs_capacity
            .unwrap_or(byzfs_net::cluster::FsLimits::default().capacity_bytes);
        opts.fs = Some(byzfs_net::cluster::FsLimits {
            capacity_bytes,
            max_inodes: a
                .fs_inodes
                .unwrap_or((capacity_bytes / 512).clamp(1 << 16, 1 << 32)),
            ..byzfs_net::cluster::FsLimits::default()
        });
    }
    let g = generate(&a.out, &opts)?;
    println!("wrote {}", g.config.display());
    let fs = ClusterConfig::load(&g.config)?.fs;
    println!(
        "file system: {} GiB, {} inodes{} (df shows this; each replica's disk needs about {} GiB)",
        fs.capacity_bytes >> 30,
        fs.max_inodes,
        if a.fs_capacity.is_none() {
            format!(" (fitted to the free disk of {})", a.out.display())
        } else {
            String::new()
        },
        fs.disk_needed() >> 30
    );
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
    if !hosts.is_empty() {
        println!(
            "\ncopy {} and replica-i.key (only its own) to the machine of replica i ({}); \
             docs/DEPLOY.md has the rest",
            g.config.display(),
            hosts.join(", ")
        );
    }
    println!(
        "\nstart replica i with: byzfs replica --config {} --id i --key {}\n\
         then try:             byzfs kv --config {} --key {client} put hello world",
        g.config.display(),
        a.out.join("replica-i.key").display(),
        g.config.display(),
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        let got: Vec<Result<u64, String>> = ["4096", "500G", "2t", " 3 M", "0", "5X", "1.5G"]
            .into_iter()
            .map(parse_size)
            .collect();
        assert_eq!(
            got,
            vec![
                Ok(4096),
                Ok(500 << 30),
                Ok(2 << 40),
                Ok(3 << 20),
                Err("\"0\" is out of range".into()),
                Err("\"5X\": the suffix must be K, M, G or T".into()),
                Err("\"1.5G\" is not a size such as 500G".into()),
            ]
        );
    }
}

#[derive(Args, Debug)]
pub struct ClientKeyArgs {
    /// The cluster file.
    #[arg(long)]
    config: PathBuf,
    /// The admin key (default: admin.key beside the config).
    #[arg(long)]
    admin_key: Option<PathBuf>,
    /// The new client's id (0..=16773119; the 4096 ids above are the replicas' own).
    #[arg(long)]
    id: u64,
    /// Where to write the credential (default: `client-<id>.key` beside the config).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The user ids the client may act as: ids and ranges (`1000,2000-2099`), `any` (a host
    /// trusted with all its users but root), or `none` (only the anonymous user). Required.
    #[arg(long, value_parser = Ids::parse)]
    uids: Option<Ids>,
    /// The group ids it may act as, primary or supplementary, written as --uids. Required.
    #[arg(long, value_parser = Ids::parse)]
    gids: Option<Ids>,
    /// Let it act as root (uid 0 and gid 0): only for a host trusted as NFS's
    /// `no_root_squash`. Without it, root is mapped to the anonymous user.
    #[arg(long)]
    root: bool,
    /// The user a caller it may not act for is mapped to (NFS's `anonuid`).
    #[arg(long, default_value_t = NOBODY)]
    anon_uid: u32,
    /// The group such a caller, or a group outside --gids, is mapped to (NFS's `anongid`).
    #[arg(long, default_value_t = NOBODY)]
    anon_gid: u32,
}

/// The grant `a` asks for; an error that says what to give if it is incomplete or unsafe.
fn grant_of(a: &ClientKeyArgs) -> anyhow::Result<Grant> {
    let (Some(uids), Some(gids)) = (a.uids.clone(), a.gids.clone()) else {
        anyhow::bail!(
            "say which users and groups client {} may act as: --uids 1000,2000-2099 --gids \
             1000 (or any, or none for only the anonymous user {}:{}); add --root only for \
             a host trusted with root",
            a.id,
            a.anon_uid,
            a.anon_gid
        );
    };
    let grant = Grant {
        uids,
        gids,
        root: a.root,
        anon_uid: a.anon_uid,
        anon_gid: a.anon_gid,
    };
    grant.check()?;
    Ok(grant)
}

pub fn client_key(a: ClientKeyArgs) -> anyhow::Result<ExitCode> {
    let grant = grant_of(&a)?;
    let cluster = ClusterConfig::load(&a.config)?;
    let admin_path = a
        .admin_key
        .clone()
        .unwrap_or_else(|| crate::beside(&a.config, "admin.key"));
    let admin = AdminSecret::load(&admin_path, &cluster)?;
    let out = a.out.clone().unwrap_or_else(|| {
        client_key_path(a.config.parent().unwrap_or_else(|| ".".as_ref()), a.id)
    });
    ClientCredential::issue_with_grant(&cluster, &admin, a.id, grant.encode())?
        .write(&out)
        .with_context(|| format!("client {}", a.id))?;
    println!(
        "wrote {} (mode 0600): client {} ({})",
        out.display(),
        a.id,
        grant.describe()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod client_key_tests {
    use super::*;
    use byzfs_fs::proto::grant::Ids;
    use clap::Parser as _;

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        a: ClientKeyArgs,
    }

    /// The grant the flags ask for, or the error's text.
    fn grant(flags: &str) -> Result<Grant, String> {
        let args = ["byzfs", "--config", "c.toml", "--id", "5"]
            .into_iter()
            .chain(flags.split_whitespace());
        let cli = Cli::try_parse_from(args).map_err(|e| {
            let text = e.to_string();
            text.lines().next().unwrap_or_default().to_string()
        })?;
        grant_of(&cli.a).map_err(|e| e.to_string())
    }

    #[test]
    fn flags_make_the_grant() {
        assert_eq!(
            grant("--uids 2000-2099,1000,2100 --gids 100"),
            Ok(Grant {
                uids: Ids::Ranges(vec![(1000, 1000), (2000, 2100)]),
                gids: Ids::Ranges(vec![(100, 100)]),
                root: false,
                anon_uid: 65534,
                anon_gid: 65534,
            })
        );
        assert_eq!(
            grant("--uids any --gids any --root --anon-uid 99 --anon-gid 98"),
            Ok(Grant {
                uids: Ids::Any,
                gids: Ids::Any,
                root: true,
                anon_uid: 99,
                anon_gid: 98,
            })
        );
        assert_eq!(
            grant("--uids none --gids none").map(|g| g.describe()),
            Ok("uids none, gids none, not root, anonymous 65534:65534".into())
        );
        assert_eq!(
            grant("--uids 0-10 --gids 5 --root").map(|g| g.describe()),
            Ok("uids 0-10, gids 5, root, anonymous 65534:65534".into())
        );
    }

    /// A grant `byzfs_net::cert` issues verifies where the replicas check it
    /// (`byzfs_fs::proto::grant`): both build the same signed bytes.
    #[test]
    fn issued_grants_verify_at_the_replicas() {
        let admin = ed25519_dalek::SigningKey::from_bytes(&[3; 32]);
        let grant = grant("--uids 1000,2000-2099 --gids 100").unwrap();
        let issued = byzfs_net::cert::ClientGrant::issue(&admin, &[1; 16], 5, grant.encode());
        let carried = byzfs_fs::SignedGrant {
            cert_id: 5,
            grant: Grant::decode(&issued.grant).unwrap(),
            signature: issued.signature.0.to_vec(),
        };
        assert!(carried.verify(&admin.verifying_key(), &[1; 16]));
        // Ed25519 signatures are deterministic: the same bytes were signed.
        assert_eq!(
            carried,
            byzfs_fs::SignedGrant::sign(&admin, &[1; 16], 5, grant)
        );
    }

    #[test]
    fn bad_flags_say_what_to_write() {
        let many: Vec<String> = (0..33).map(|i| (10 * i + 1).to_string()).collect();
        let many = format!("--uids {} --gids 1", many.join(","));
        let cases = [
            ("", "say which users and groups client 5 may act as: --uids 1000,2000-2099 --gids 1000 (or any, or none for only the anonymous user 65534:65534); add --root only for a host trusted with root"),
            ("--uids 1000", "say which users and groups client 5 may act as: --uids 1000,2000-2099 --gids 1000 (or any, or none for only the anonymous user 65534:65534); add --root only for a host trusted with root"),
            ("--uids 0,1000 --gids 1000", "uid 0 is root's; add --root to let this client act as root, or leave 0 out"),
            ("--uids 1000 --gids 0-100", "gid 0 is root's; add --root to let this client act as root, or leave 0 out"),
            ("--uids 1000 --gids 1000 --anon-uid 0", "--anon-uid 0 maps callers to root; choose another id (default 65534)"),
            ("--uids 1000 --gids 1000 --anon-gid 0", "--anon-gid 0 maps callers to root; choose another id (default 65534)"),
            ("--uids 1000-999 --gids 1", "error: invalid value '1000-999' for '--uids <UIDS>': \"1000-999\" in \"1000-999\" is an empty range; write it low-high"),
            ("--uids alice --gids 1", "error: invalid value 'alice' for '--uids <UIDS>': \"alice\" in \"alice\" is not an id; write ids and ranges such as 1000,2000-2099, or any, or none"),
            ("--uids 1 --gids 1,,2", "error: invalid value '1,,2' for '--gids <GIDS>': \"\" in \"1,,2\" is not an id; write ids and ranges such as 1000,2000-2099, or any, or none"),
            (many.as_str(), "error: invalid value '1,11,21,31,41,51,61,71,81,91,101,111,121,131,141,151,161,171,181,191,201,211,221,231,241,251,261,271,281,291,301,311,321' for '--uids <UIDS>': \"1,11,21,31,41,51,61,71,81,91,101,111,121,131,141,151,161,171,181,191,201,211,221,231,241,251,261,271,281,291,301,311,321\" has 33 ranges; a certificate holds at most 32"),
        ];
        for (flags, want) in cases {
            assert_eq!(grant(flags), Err(want.to_string()), "{flags}");
        }
    }
}
