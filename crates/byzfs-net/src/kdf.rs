//! Key derivation: pairwise MAC keys are derived from static X25519 keys, never stored.
//!
//! ```text
//! salt        = "byzfs" ‖ cluster_id (16 bytes) ‖ epoch (u32 LE)
//! key(i → j)  = HKDF-SHA256(ikm = X25519(sk_i, pk_j), salt, info = "byzfs mac v1" ‖ i ‖ j)
//! client c → replica j: info = "byzfs client->replica mac v1" ‖ c ‖ j, ikm = X25519(sk_c, pk_j)
//! replica j → client c: info = "byzfs replica->client mac v1" ‖ c ‖ j
//! handshake proofs:     "byzfs replica hello v1" ‖ i ‖ j, "byzfs client hello v1" ‖ c ‖ j
//! ```
//!
//! Replica ids are `u32` LE, client ids `u64` LE (the protocol id, session included, for MAC
//! keys; the certificate id for the hello proof). X25519 is symmetric, so both ends compute
//! the same key for each direction; distinct labels keep directions and purposes apart. A
//! shared secret that is not contributory (a low-order public key) is refused.

use crate::cluster::ClusterConfig;
use crate::error::SetupError;
use crate::keyfile::{ClientCredential, ReplicaSecret};
use byzfs_bft::{ClientId, ClientKeys, MacKey, ReplicaId, ReplicaKeys};
use hkdf::Hkdf;
use sha2::Sha256;
use std::collections::BTreeMap;
use x25519_dalek::{PublicKey, StaticSecret};

const MAC_LABEL: &[u8] = b"byzfs mac v1";
const CLIENT_TO_REPLICA_LABEL: &[u8] = b"byzfs client->replica mac v1";
const REPLICA_TO_CLIENT_LABEL: &[u8] = b"byzfs replica->client mac v1";
const REPLICA_HELLO_LABEL: &[u8] = b"byzfs replica hello v1";
const CLIENT_HELLO_LABEL: &[u8] = b"byzfs client hello v1";

/// The HKDF salt of a cluster epoch.
pub fn salt(cluster_id: &[u8; 16], epoch: u32) -> Vec<u8> {
    let mut s = Vec::with_capacity(25);
    s.extend_from_slice(b"byzfs");
    s.extend_from_slice(cluster_id);
    s.extend_from_slice(&epoch.to_le_bytes());
    s
}

/// An X25519 shared secret, or `None` if `public` is a low-order point.
pub fn shared_secret(secret: &StaticSecret, public: &PublicKey) -> Option<[u8; 32]> {
    let s = secret.diffie_hellman(public);
    s.was_contributory().then(|| s.to_bytes())
}

fn expand(shared: &[u8; 32], salt: &[u8], label: &[u8], ids: &[&[u8]]) -> MacKey {
    let hk = Hkdf::<Sha256>::new(Some(salt), shared);
    let mut info = Vec::with_capacity(label.len() + 16);
    info.extend_from_slice(label);
    for id in ids {
        info.extend_from_slice(id);
    }
    let mut okm = [0u8; 32];
    // 32 bytes is far below HKDF-SHA256's limit of 255 × 32, so expansion cannot fail.
    hk.expand(&info, &mut okm)
        .expect("32-byte HKDF-SHA256 output is always valid");
    MacKey::from_bytes(okm)
}

/// MAC key for messages from replica `from` to replica `to`.
pub fn replica_mac_key(shared: &[u8; 32], salt: &[u8], from: ReplicaId, to: ReplicaId) -> MacKey {
    expand(
        shared,
        salt,
        MAC_LABEL,
        &[&from.to_le_bytes(), &to.to_le_bytes()],
    )
}

/// `(client → replica, replica → client)` MAC keys of protocol client `client`.
pub fn client_mac_keys(
    shared: &[u8; 32],
    salt: &[u8],
    client: ClientId,
    replica: ReplicaId,
) -> (MacKey, MacKey) {
    let ids: [&[u8]; 2] = [&client.to_le_bytes(), &replica.to_le_bytes()];
    (
        expand(shared, salt, CLIENT_TO_REPLICA_LABEL, &ids),
        expand(shared, salt, REPLICA_TO_CLIENT_LABEL, &ids),
    )
}

/// Key of the handshake proof of replica `from` dialing replica `to`.
pub fn replica_hello_key(shared: &[u8; 32], salt: &[u8], from: ReplicaId, to: ReplicaId) -> MacKey {
    expand(
        shared,
        salt,
        REPLICA_HELLO_LABEL,
        &[&from.to_le_bytes(), &to.to_le_bytes()],
    )
}

/// Key of the handshake proof of certificate client `client` dialing replica `replica`.
pub fn client_hello_key(
    shared: &[u8; 32],
    salt: &[u8],
    client: ClientId,
    replica: ReplicaId,
) -> MacKey {
    expand(
        shared,
        salt,
        CLIENT_HELLO_LABEL,
        &[&client.to_le_bytes(), &replica.to_le_bytes()],
    )
}

fn low_order(cluster: &ClusterConfig, whose: String) -> SetupError {
    SetupError::Inconsistent {
        path: cluster.path.clone(),
        message: format!(
            "{whose} x25519 public key is a low-order point; regenerate the keys with byzfs keygen"
        ),
    }
}

/// The core's keys of replica `secret.id` (no clients yet: they join through the handshake).
pub fn replica_keys(
    cluster: &ClusterConfig,
    secret: &ReplicaSecret,
) -> Result<ReplicaKeys, SetupError> {
    let me = secret.id;
    let s = salt(&cluster.cluster_id, cluster.bft.epoch);
    let mut to_replica = Vec::with_capacity(cluster.n());
    let mut from_replica = Vec::with_capacity(cluster.n());
    for r in &cluster.replicas {
        let shared = shared_secret(&secret.x25519, &r.x25519_public)
            .ok_or_else(|| low_order(cluster, format!("replica {}'s", r.id)))?;
        to_replica.push(replica_mac_key(&shared, &s, me, r.id));
        from_replica.push(replica_mac_key(&shared, &s, r.id, me));
    }
    Ok(ReplicaKeys {
        me,
        to_replica,
        from_replica,
        clients: BTreeMap::new(),
        client_public: BTreeMap::new(),
        signing: secret.ed25519.clone(),
        replica_public: cluster.replicas.iter().map(|r| r.ed25519_public).collect(),
    })
}

/// The core's keys of protocol client `client` (a session of `cred`).
pub fn client_keys(
    cluster: &ClusterConfig,
    cred: &ClientCredential,
    client: ClientId,
) -> Result<ClientKeys, SetupError> {
    let s = salt(&cluster.cluster_id, cluster.bft.epoch);
    let mut to_replica = Vec::with_capacity(cluster.n());
    let mut from_replica = Vec::with_capacity(cluster.n());
    for r in &cluster.replicas {
        let shared = shared_secret(&cred.x25519, &r.x25519_public)
            .ok_or_else(|| low_order(cluster, format!("replica {}'s", r.id)))?;
        let (to, from) = client_mac_keys(&shared, &s, client, r.id);
        to_replica.push(to);
        from_replica.push(from);
    }
    Ok(ClientKeys {
        me: client,
        to_replica,
        from_replica,
        signing: Some(cred.ed25519.clone()),
    })
}
