//! Key generation: a cluster directory with `cluster.toml`, one secret key file per replica,
//! the admin key and a credential for a default client.

use crate::cluster::{ClusterConfig, FsLimits, ReplicaInfo, CLUSTER_FILE, LOCAL_SOCKET_PATH_MAX};
use crate::error::SetupError;
use crate::keyfile::{create_file, AdminSecret, ClientCredential, ReplicaSecret};
use byzfs_bft::{ClientId, Config, ReplicaId};
use ed25519_dalek::SigningKey;
use rand_core::{OsRng, RngCore as _};
use std::path::{Path, PathBuf};
use x25519_dalek::{PublicKey, StaticSecret};

/// The client id `keygen` issues a credential for.
pub const DEFAULT_CLIENT: ClientId = 1;

/// What to generate.
#[derive(Clone, Debug)]
pub struct KeygenOptions {
    /// Replica addresses (`host:port`), one per replica; their number must be `3f+1`.
    pub addresses: Vec<String>,
    /// Clients to issue credentials for.
    pub clients: Vec<ClientId>,
    /// The grant their credentials carry (a service's encoding, signed by the admin:
    /// [`crate::cert::ClientGrant`]); `None`: none (the file service refuses them).
    pub client_grant: Option<Vec<u8>>,
    /// Protocol parameters (`f` is derived from the number of addresses).
    pub protocol: Config,
    /// Give each replica a Unix-domain socket in the output directory,
    /// `DIR/replica-<i>.sock` (see [`crate::stream`]), unless that path is longer than a
    /// socket path may be ([`LOCAL_SOCKET_PATH_MAX`]): then that replica gets none and is
    /// reached over TCP only.
    pub local_sockets: bool,
    /// The file service's limits; `None`: fitted to the output directory's free disk
    /// ([`FsLimits::fitting`]), shared by the replicas on loopback addresses (every other
    /// replica is assumed to have a disk like it).
    pub fs: Option<FsLimits>,
}

impl KeygenOptions {
    /// `replicas` replicas on `host`, at consecutive ports from `base_port`; `base_port == 0`
    /// asks the OS for free ports instead (handy for tests and throw-away clusters).
    pub fn local(replicas: usize, host: &str, base_port: u16) -> Result<Self, SetupError> {
        check_replicas(replicas)?;
        let ports: Vec<u16> = if base_port == 0 {
            free_ports(replicas).map_err(|source| SetupError::Io {
                path: PathBuf::from("127.0.0.1:0"),
                action: "bind",
                error: source,
            })?
        } else {
            (0..replicas)
                .map(|i| {
                    u16::try_from(i)
                        .ok()
                        .and_then(|i| base_port.checked_add(i))
                        .ok_or_else(|| {
                            SetupError::Usage(format!(
                                "--base-port {base_port} + {replicas} replicas exceeds port 65535"
                            ))
                        })
                })
                .collect::<Result<_, _>>()?
        };
        Ok(KeygenOptions {
            addresses: ports.iter().map(|p| format!("{host}:{p}")).collect(),
            clients: vec![DEFAULT_CLIENT],
            client_grant: None,
            protocol: Config::new(1),
            local_sockets: is_loopback(host),
            fs: None,
        })
    }
}

impl KeygenOptions {
    /// One replica per address (`host:port`, in replica order), as an operator deploys
    /// across machines: each replica listens on its own host; Unix sockets only if every
    /// host is this machine's loopback.
    pub fn hosts(addresses: &[String]) -> Result<Self, SetupError> {
        check_replicas(addresses.len())?;
        let mut seen = std::collections::BTreeSet::new();
        for a in addresses {
            let port = a.rsplit_once(':').and_then(|(h, p)| {
                (!h.is_empty()).then_some(())?;
                p.parse::<u16>().ok().filter(|&p| p != 0)
            });
            if port.is_none() {
                return Err(SetupError::Usage(format!(
                    "{a:?} is not host:port (such as 10.0.0.1:7000, replica-a.example.org:7000 \
                     or [2001:db8::1]:7000)"
                )));
            }
            if !seen.insert(a.as_str()) {
                return Err(SetupError::Usage(format!(
                    "{a:?} is given twice; every replica needs an address of its own"
                )));
            }
        }
        Ok(KeygenOptions {
            addresses: addresses.to_vec(),
            clients: vec![DEFAULT_CLIENT],
            client_grant: None,
            protocol: Config::new(1),
            local_sockets: addresses
                .iter()
                .all(|a| a.rsplit_once(':').is_some_and(|(h, _)| is_loopback(h))),
            fs: None,
        })
    }
}

/// Whether `host` names this machine's loopback interface (every replica then shares the
/// host, so Unix sockets reach them).
fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Path of replica `id`'s Unix socket in cluster directory `dir`, if `dir` can be made
/// absolute and the path is short enough for a socket.
pub fn local_socket_path(dir: &Path, id: ReplicaId) -> Option<PathBuf> {
    let p = std::path::absolute(dir)
        .ok()?
        .join(format!("replica-{id}.sock"));
    let s = p.to_str()?;
    (s.len() <= LOCAL_SOCKET_PATH_MAX).then_some(p)
}

fn check_replicas(n: usize) -> Result<u32, SetupError> {
    if n < 4 || n % 3 != 1 {
        return Err(SetupError::Usage(format!(
            "--replicas {n} is not 3f+1 for some f >= 1; use 4, 7, 10, ..."
        )));
    }
    u32::try_from((n - 1) / 3)
        .map_err(|_| SetupError::Usage(format!("--replicas {n} is too large")))
}

/// `n` ports free on 127.0.0.1 (bound, then released: another process may take one before
/// it is used). They are drawn at random from below the kernel's ephemeral range, which
/// outgoing connections never take: a port the kernel hands out for `:0` is the next one
/// some client's `connect` may take, and did — a replica of a test cluster then failed with
/// "Address already in use" (`byzfs/tests/mount.rs` under the parallel test run).
pub fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    use rand_core::RngCore as _;
    let low = ephemeral_low().unwrap_or(32768);
    let (from, to) = (EPHEMERAL_FREE_FROM, low);
    let mut listeners: Vec<std::net::TcpListener> = Vec::with_capacity(n);
    if to > from + 1024 {
        let mut tries = 0;
        while listeners.len() < n && tries < 64 * n {
            tries += 1;
            let port = from + (rand_core::OsRng.next_u32() % u32::from(to - from)) as u16;
            if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", port)) {
                listeners.push(l);
            }
        }
    }
    // A machine whose ephemeral range leaves no room below it: the kernel's choice.
    while listeners.len() < n {
        listeners.push(std::net::TcpListener::bind("127.0.0.1:0")?);
    }
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect()
}

/// The lowest port [`free_ports`] draws from (above the registered services most machines run).
const EPHEMERAL_FREE_FROM: u16 = 20000;

/// The first port of the kernel's ephemeral range (`net.ipv4.ip_local_port_range`).
fn ephemeral_low() -> Option<u16> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

/// Bytes available to an unprivileged writer on the file system holding `dir`; 0 if it
/// cannot be asked.
pub fn free_disk(dir: &Path) -> u64 {
    nix::sys::statvfs::statvfs(dir).map_or(0, |s| {
        s.blocks_available().saturating_mul(s.fragment_size())
    })
}

/// Paths of the generated files.
#[derive(Clone, Debug)]
pub struct Generated {
    /// `DIR/cluster.toml`.
    pub config: PathBuf,
    /// `DIR/replica-<i>.key`, by id.
    pub replica_keys: Vec<PathBuf>,
    /// `DIR/admin.key`.
    pub admin_key: PathBuf,
    /// `DIR/client-<c>.key`, in the order of [`KeygenOptions::clients`].
    pub client_keys: Vec<PathBuf>,
}

/// Path of replica `id`'s key file in a cluster directory.
pub fn replica_key_path(dir: &Path, id: ReplicaId) -> PathBuf {
    dir.join(format!("replica-{id}.key"))
}

/// Path of client `c`'s credential in a cluster directory.
pub fn client_key_path(dir: &Path, c: ClientId) -> PathBuf {
    dir.join(format!("client-{c}.key"))
}

/// Generates a cluster into `out` (created if needed; existing files are never overwritten).
pub fn keygen(out: &Path, opts: &KeygenOptions) -> Result<Generated, SetupError> {
    let f = check_replicas(opts.addresses.len())?;
    std::fs::create_dir_all(out).map_err(|source| SetupError::Io {
        path: out.to_path_buf(),
        action: "create",
        error: source,
    })?;
    let mut cluster_id = [0u8; 16];
    OsRng.fill_bytes(&mut cluster_id);
    let admin = AdminSecret {
        ed25519: SigningKey::generate(&mut OsRng),
    };
    let secrets: Vec<ReplicaSecret> = (0..opts.addresses.len())
        .map(|i| ReplicaSecret {
            id: i as ReplicaId,
            x25519: StaticSecret::random_from_rng(OsRng),
            ed25519: SigningKey::generate(&mut OsRng),
        })
        .collect();
    let config_path = out.join(CLUSTER_FILE);
    let mut bft = opts.protocol.clone();
    bft.f = f;
    let fs = opts.fs.unwrap_or_else(|| {
        let local = opts
            .addresses
            .iter()
            .filter(|a| a.rsplit_once(':').is_some_and(|(h, _)| is_loopback(h)))
            .count();
        FsLimits::fitting(free_disk(out), local.max(1) as u64)
    });
    let cluster = ClusterConfig {
        path: config_path.clone(),
        cluster_id,
        admin_public: admin.ed25519.verifying_key(),
        bft,
        fs,
        replicas: secrets
            .iter()
            .zip(&opts.addresses)
            .map(|(s, a)| ReplicaInfo {
                id: s.id,
                address: a.clone(),
                local_socket: if opts.local_sockets {
                    local_socket_path(out, s.id)
                } else {
                    None
                },
                x25519_public: PublicKey::from(&s.x25519),
                ed25519_public: s.ed25519.verifying_key(),
            })
            .collect(),
    };
    // Validate exactly as a node will, before writing anything.
    let text = cluster.to_toml();
    ClusterConfig::parse(&text, &config_path)?;
    create_file(&config_path, &text, 0o644)?;
    let admin_key = out.join("admin.key");
    admin.write(&admin_key)?;
    let mut replica_keys = Vec::new();
    for s in &secrets {
        let p = replica_key_path(out, s.id);
        s.write(&p)?;
        replica_keys.push(p);
    }
    let mut client_keys = Vec::new();
    for &c in &opts.clients {
        let p = client_key_path(out, c);
        match &opts.client_grant {
            Some(g) => ClientCredential::issue_with_grant(&cluster, &admin, c, g.clone())?,
            None => ClientCredential::issue(&cluster, &admin, c)?,
        }
        .write(&p)?;
        client_keys.push(p);
    }
    Ok(Generated {
        config: config_path,
        replica_keys,
        admin_key,
        client_keys,
    })
}
