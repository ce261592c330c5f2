//! Secret key files: one per replica (`replica-<i>.key`), the admin's (`admin.key`) and one
//! per client (`client-<c>.key`, the secret plus the admin-signed certificate). TOML, created
//! with mode 0600; a node refuses a key file that group or others can access, that belongs to
//! another node, or that does not match the public keys of `cluster.toml`.

use crate::cert::ClientCert;
use crate::cluster::ClusterConfig;
use crate::error::{toml_error, SetupError};
use crate::hex::Hex;
use byzfs_bft::ReplicaId;
use ed25519_dalek::SigningKey;
use serde::{Deserialize, Serialize};
use std::io::Write as _;
use std::path::Path;
use x25519_dalek::{PublicKey, StaticSecret};

/// A replica's secrets.
#[derive(Clone)]
pub struct ReplicaSecret {
    /// The replica.
    pub id: ReplicaId,
    /// X25519 static secret (MAC key agreement).
    pub x25519: StaticSecret,
    /// Ed25519 signing key (VIEW-CHANGE, NEW-VIEW).
    pub ed25519: SigningKey,
}

/// The admin's signing key (client certificates).
#[derive(Clone)]
pub struct AdminSecret {
    /// Ed25519 signing key.
    pub ed25519: SigningKey,
}

/// A client's credential: its X25519 secret and its certificate.
#[derive(Clone)]
pub struct ClientCredential {
    /// X25519 static secret (MAC keys).
    pub x25519: StaticSecret,
    /// Ed25519 secret (signs every request, docs/PROTOCOL.md §5.3).
    pub ed25519: SigningKey,
    /// The admin-signed certificate.
    pub cert: ClientCert,
    /// What its requests may state as credentials to the file service, admin-signed
    /// ([`crate::cert::ClientGrant`]); `None` in a credential for other services, or issued
    /// before grants (the file service then refuses its every request).
    pub grant: Option<crate::cert::ClientGrant>,
}

impl core::fmt::Debug for ReplicaSecret {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "ReplicaSecret({}, ..)", self.id)
    }
}

impl core::fmt::Debug for AdminSecret {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("AdminSecret(..)")
    }
}

impl core::fmt::Debug for ClientCredential {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "ClientCredential({}, ..)", self.cert.client)
    }
}

/// The file as written.
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum KeyFile {
    Replica {
        id: ReplicaId,
        x25519_secret_key: Hex<32>,
        ed25519_secret_key: Hex<32>,
    },
    Admin {
        ed25519_secret_key: Hex<32>,
    },
    Client {
        x25519_secret_key: Hex<32>,
        ed25519_secret_key: Hex<32>,
        certificate: ClientCert,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grant: Option<Box<crate::cert::ClientGrant>>,
    },
}

impl KeyFile {
    fn kind(&self) -> &'static str {
        match self {
            KeyFile::Replica { .. } => "replica",
            KeyFile::Admin { .. } => "admin",
            KeyFile::Client { .. } => "client",
        }
    }

    fn to_text(&self) -> String {
        let body = toml::to_string(self)
            // Strings, integers and one table always serialise.
            .expect("a key file always serialises to TOML");
        format!(
            "# ByzFS {} secret key. Keep it private (mode 0600); never put it in cluster.toml.\n{body}",
            self.kind()
        )
    }
}

/// Reads a secret file after checking that it exists and that only its owner can access it.
fn read_secret(path: &Path) -> Result<KeyFile, SetupError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SetupError::Missing {
                path: path.to_path_buf(),
                hint: "generate keys with: byzfs keygen --replicas 4 --out DIR, or pass the right key file".into(),
            })
        }
        Err(source) => {
            return Err(SetupError::Io {
                path: path.to_path_buf(),
                action: "read",
                error: source,
            })
        }
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(SetupError::KeyPermissions {
                path: path.to_path_buf(),
                mode,
            });
        }
    }
    #[cfg(not(unix))]
    let _ = meta;
    let text = std::fs::read_to_string(path).map_err(|source| SetupError::Io {
        path: path.to_path_buf(),
        action: "read",
        error: source,
    })?;
    toml::from_str(&text).map_err(|e| toml_error(path, &text, &e))
}

/// Creates `path` with mode 0600 and writes `text`; never overwrites.
pub(crate) fn create_file(path: &Path, text: &str, mode: u32) -> Result<(), SetupError> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut f = opts.open(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::AlreadyExists {
            SetupError::Usage(format!(
                "{} already exists; choose an empty --out directory (keys are never overwritten)",
                path.display()
            ))
        } else {
            SetupError::Io {
                path: path.to_path_buf(),
                action: "create",
                error: source,
            }
        }
    })?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|source| SetupError::Io {
            path: path.to_path_buf(),
            action: "write",
            error: source,
        })
}

fn wrong_kind(path: &Path, expected: &'static str, found: &KeyFile) -> SetupError {
    SetupError::WrongKeyKind {
        path: path.to_path_buf(),
        expected,
        found: found.kind(),
    }
}

impl ReplicaSecret {
    /// Loads replica `id`'s key file and checks it against `cluster`.
    pub fn load(path: &Path, cluster: &ClusterConfig, id: ReplicaId) -> Result<Self, SetupError> {
        let info = cluster.replica(id)?;
        let file = read_secret(path)?;
        let KeyFile::Replica {
            id: found,
            x25519_secret_key,
            ed25519_secret_key,
        } = file
        else {
            return Err(wrong_kind(path, "replica", &file));
        };
        if found != id {
            return Err(SetupError::WrongReplicaKey {
                path: path.to_path_buf(),
                expected: id,
                found,
            });
        }
        let secret = ReplicaSecret {
            id,
            x25519: StaticSecret::from(x25519_secret_key.0),
            ed25519: SigningKey::from_bytes(&ed25519_secret_key.0),
        };
        if PublicKey::from(&secret.x25519) != info.x25519_public
            || secret.ed25519.verifying_key() != info.ed25519_public
        {
            return Err(SetupError::KeyMismatch {
                key: path.to_path_buf(),
                config: cluster.path.clone(),
                what: format!("replica {id}'s public keys"),
            });
        }
        Ok(secret)
    }

    /// Writes the key file (mode 0600).
    pub fn write(&self, path: &Path) -> Result<(), SetupError> {
        let file = KeyFile::Replica {
            id: self.id,
            x25519_secret_key: Hex(self.x25519.to_bytes()),
            ed25519_secret_key: Hex(self.ed25519.to_bytes()),
        };
        create_file(path, &file.to_text(), 0o600)
    }
}

impl AdminSecret {
    /// Loads the admin key and checks it against `cluster`.
    pub fn load(path: &Path, cluster: &ClusterConfig) -> Result<Self, SetupError> {
        let file = read_secret(path)?;
        let KeyFile::Admin { ed25519_secret_key } = file else {
            return Err(wrong_kind(path, "admin", &file));
        };
        let ed25519 = SigningKey::from_bytes(&ed25519_secret_key.0);
        if ed25519.verifying_key() != cluster.admin_public {
            return Err(SetupError::KeyMismatch {
                key: path.to_path_buf(),
                config: cluster.path.clone(),
                what: "admin_public_key".into(),
            });
        }
        Ok(AdminSecret { ed25519 })
    }

    /// Writes the key file (mode 0600).
    pub fn write(&self, path: &Path) -> Result<(), SetupError> {
        let file = KeyFile::Admin {
            ed25519_secret_key: Hex(self.ed25519.to_bytes()),
        };
        create_file(path, &file.to_text(), 0o600)
    }
}

impl ClientCredential {
    /// A new credential for `client`, signed by `admin`.
    pub fn issue(
        cluster: &ClusterConfig,
        admin: &AdminSecret,
        client: byzfs_bft::ClientId,
    ) -> Result<Self, SetupError> {
        if client >= crate::cert::REPLICA_CLIENT_FIRST {
            return Err(SetupError::Usage(format!(
                "client id {client} is out of range; use 0..={} (the ids above are the \
                 replicas' own)",
                crate::cert::REPLICA_CLIENT_FIRST - 1
            )));
        }
        Ok(Self::signed_by(&admin.ed25519, cluster, client))
    }

    /// A new credential for `client`, signed by `admin`, with `grant` (a service's encoding
    /// of what the client may do: `byzfs_fs::proto::grant::Grant`) signed for it.
    pub fn issue_with_grant(
        cluster: &ClusterConfig,
        admin: &AdminSecret,
        client: byzfs_bft::ClientId,
        grant: Vec<u8>,
    ) -> Result<Self, SetupError> {
        if grant.len() > crate::cert::GRANT_MAX {
            return Err(SetupError::Usage(format!(
                "the grant is {} bytes, more than {}; name fewer ranges",
                grant.len(),
                crate::cert::GRANT_MAX
            )));
        }
        let mut c = Self::issue(cluster, admin, client)?;
        c.grant = Some(crate::cert::ClientGrant::issue(
            &admin.ed25519,
            &cluster.cluster_id,
            client,
            grant,
        ));
        Ok(c)
    }

    /// A fresh credential for `replica`'s own client (its disk reports), certified by the
    /// replica's key ([`crate::cert::REPLICA_CLIENT_FIRST`]); never written to a file.
    pub fn for_replica(
        cluster: &ClusterConfig,
        replica: &ReplicaSecret,
    ) -> Result<Self, SetupError> {
        let client = crate::cert::replica_client_id(replica.id).ok_or_else(|| {
            SetupError::Usage(format!(
                "replica id {} has no client id of its own (at most {} replicas)",
                replica.id,
                crate::cert::CLIENT_ID_MAX - crate::cert::REPLICA_CLIENT_FIRST + 1
            ))
        })?;
        Ok(Self::signed_by(&replica.ed25519, cluster, client))
    }

    /// Fresh keys for `client`, certified by `signer`.
    fn signed_by(
        signer: &SigningKey,
        cluster: &ClusterConfig,
        client: byzfs_bft::ClientId,
    ) -> Self {
        let x25519 = StaticSecret::random_from_rng(rand_core::OsRng);
        let public = PublicKey::from(&x25519).to_bytes();
        let ed25519 = SigningKey::generate(&mut rand_core::OsRng);
        let cert = ClientCert::issue(
            signer,
            cluster.cluster_id,
            client,
            public,
            ed25519.verifying_key().to_bytes(),
        );
        ClientCredential {
            x25519,
            ed25519,
            cert,
            grant: None,
        }
    }

    /// Loads a client credential and checks its certificate against `cluster`.
    pub fn load(path: &Path, cluster: &ClusterConfig) -> Result<Self, SetupError> {
        let file = read_secret(path)?;
        let KeyFile::Client {
            x25519_secret_key,
            ed25519_secret_key,
            certificate,
            grant,
        } = file
        else {
            return Err(wrong_kind(path, "client", &file));
        };
        let mismatch = |what: &str| SetupError::KeyMismatch {
            key: path.to_path_buf(),
            config: cluster.path.clone(),
            what: what.into(),
        };
        match certificate.verify_in(cluster) {
            Ok(()) => {}
            Err(crate::cert::CertError::WrongCluster) => return Err(mismatch("cluster_id")),
            Err(crate::cert::CertError::BadSignature) => return Err(mismatch("admin_public_key")),
            Err(
                e @ (crate::cert::CertError::ClientIdRange(_)
                | crate::cert::CertError::NoSuchReplica(_)),
            ) => return Err(SetupError::Usage(format!("{}: {e}", path.display()))),
        }
        if let Some(g) = &grant {
            g.verify(
                &cluster.admin_public,
                &cluster.cluster_id,
                certificate.client,
            )
            .map_err(|_| mismatch("admin_public_key"))?;
        }
        let x25519 = StaticSecret::from(x25519_secret_key.0);
        if PublicKey::from(&x25519).to_bytes() != certificate.x25519_public_key.0 {
            return Err(SetupError::Inconsistent {
                path: path.to_path_buf(),
                message: "the secret key does not match the certificate's public key; issue a new credential".into(),
            });
        }
        let ed25519 = SigningKey::from_bytes(&ed25519_secret_key.0);
        if ed25519.verifying_key().to_bytes() != certificate.ed25519_public_key.0 {
            return Err(SetupError::Inconsistent {
                path: path.to_path_buf(),
                message: "the signing key does not match the certificate's Ed25519 key; issue a new credential".into(),
            });
        }
        Ok(ClientCredential {
            x25519,
            ed25519,
            cert: certificate,
            grant: grant.map(|g| *g),
        })
    }

    /// Writes the credential file (mode 0600).
    pub fn write(&self, path: &Path) -> Result<(), SetupError> {
        let file = KeyFile::Client {
            x25519_secret_key: Hex(self.x25519.to_bytes()),
            ed25519_secret_key: Hex(self.ed25519.to_bytes()),
            certificate: self.cert.clone(),
            grant: self.grant.clone().map(Box::new),
        };
        create_file(path, &file.to_text(), 0o600)
    }
}
