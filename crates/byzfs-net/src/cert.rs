//! Client certificates and client sessions.
//!
//! A client is admitted by a certificate — its id, its X25519 public key (MAC keys) and its
//! Ed25519 public key (request signatures, docs/PROTOCOL.md §5.3), signed by the cluster's admin
//! key (whose public half is in `cluster.toml`) — so adding a client needs no replica restart
//! and no config edit.
//!
//! **Grants.** A credential also carries what its requests may state as credentials to the
//! file service ([`ClientGrant`]: which user and group ids, whether root), signed by the
//! admin apart from the certificate, because the file service checks it in every request
//! with no copy of the certificate (`byzfs_fs::proto::grant`). Its encoding is the file service's;
//! here it is opaque bytes, so this crate stays independent of any service.
//!
//! **Sessions.** Every client process ([`crate::ByzClient`], the unreplicated client) runs as
//! a fresh *session*: its protocol client id is `certificate id << 40 | session`. The
//! certificate authorises every session of its id; replicas check the session's prefix
//! against the certificate. Two processes that share a client id would share its reply
//! cache and its locks: the replicas would send one's replies to the other (a mount then
//! waited for ever) and take one's locks for the other's. So the session number is random
//! (40 bits: two live sessions of one certificate collide with odds of 2^-40 per pair),
//! not the connect time in milliseconds as before, which two mounts started together
//! shared. And since a number may be drawn again later, request ids start at the connect
//! time in microseconds, above any id an earlier session could have used (one request per
//! microsecond at most), so the reply cache never answers a new session with an old
//! session's result.

use crate::hex::Hex;
use byzfs_bft::{ClientId, ReplicaId};
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use rand_core::{OsRng, RngCore as _};
use serde::{Deserialize, Serialize};

/// Bits of a protocol client id that number sessions.
pub const SESSION_BITS: u32 = 40;
/// Largest certificate client id (the remaining 24 bits).
pub const CLIENT_ID_MAX: ClientId = (1 << (64 - SESSION_BITS)) - 1;
/// Certificate ids from here to [`CLIENT_ID_MAX`] belong to the replicas' own clients
/// (their disk reports, `byzfs_fs::capacity`): replica `r`'s is `REPLICA_CLIENT_FIRST + r`,
/// certified by replica `r`'s Ed25519 key rather than the admin's, so a replica needs no
/// credential besides its own key and no other party can speak for it.
pub const REPLICA_CLIENT_FIRST: ClientId = CLIENT_ID_MAX + 1 - 4096;

/// The certificate id of replica `replica`'s own client, if the reserved range holds it.
pub fn replica_client_id(replica: ReplicaId) -> Option<ClientId> {
    let id = REPLICA_CLIENT_FIRST + ClientId::from(replica);
    (id <= CLIENT_ID_MAX).then_some(id)
}

/// The replica whose own client certificate id `client` is, if it is one.
pub fn replica_of_client(client: ClientId) -> Option<ReplicaId> {
    (REPLICA_CLIENT_FIRST..=CLIENT_ID_MAX)
        .contains(&client)
        .then(|| (client - REPLICA_CLIENT_FIRST) as ReplicaId)
}

const CERT_DOMAIN: &[u8] = b"byzfs client certificate v2\0";

/// A client certificate.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ClientCert {
    /// The cluster it admits the client to.
    pub cluster_id: Hex<16>,
    /// The client id (`0..=CLIENT_ID_MAX`).
    pub client: ClientId,
    /// The client's X25519 public key.
    pub x25519_public_key: Hex<32>,
    /// The client's Ed25519 public key: replicas verify its request signatures with it.
    pub ed25519_public_key: Hex<32>,
    /// Admin Ed25519 signature over the fields above.
    pub signature: Hex<64>,
}

/// Why a certificate is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CertError {
    /// Issued for another cluster.
    #[error("the certificate is for another cluster")]
    WrongCluster,
    /// The client id does not fit beside a session number.
    #[error("client id {0} is out of range (0..=16777215)")]
    ClientIdRange(ClientId),
    /// The signature does not verify under the admin key (or, for a replica's own
    /// client, that replica's key).
    #[error("the certificate is not signed by this cluster's admin key")]
    BadSignature,
    /// A replica's own client id ([`REPLICA_CLIENT_FIRST`]) for a replica the cluster does
    /// not have.
    #[error("client id is reserved for replica {0}, which this cluster does not have")]
    NoSuchReplica(ReplicaId),
}

fn signed_bytes(
    cluster_id: &[u8; 16],
    client: ClientId,
    x25519: &[u8; 32],
    ed25519: &[u8; 32],
) -> Vec<u8> {
    let mut v = Vec::with_capacity(CERT_DOMAIN.len() + 88);
    v.extend_from_slice(CERT_DOMAIN);
    v.extend_from_slice(cluster_id);
    v.extend_from_slice(&client.to_le_bytes());
    v.extend_from_slice(x25519);
    v.extend_from_slice(ed25519);
    v
}

impl ClientCert {
    /// Signs a certificate for `client` with public keys `x25519` (MACs) and `ed25519`
    /// (request signatures).
    pub fn issue(
        admin: &SigningKey,
        cluster_id: [u8; 16],
        client: ClientId,
        x25519: [u8; 32],
        ed25519: [u8; 32],
    ) -> ClientCert {
        let sig = admin.sign(&signed_bytes(&cluster_id, client, &x25519, &ed25519));
        ClientCert {
            cluster_id: Hex(cluster_id),
            client,
            x25519_public_key: Hex(x25519),
            ed25519_public_key: Hex(ed25519),
            signature: Hex(sig.to_bytes()),
        }
    }

    /// The client's request-verifying key, if the certificate's bytes are a valid point.
    pub fn verifying_key(&self) -> Option<VerifyingKey> {
        VerifyingKey::from_bytes(&self.ed25519_public_key.0).ok()
    }

    /// Checks the certificate against `cluster`: its id, and the admin's key, or for a
    /// replica's own client ([`REPLICA_CLIENT_FIRST`]) that replica's key.
    pub fn verify_in(&self, cluster: &crate::ClusterConfig) -> Result<(), CertError> {
        match replica_of_client(self.client) {
            Some(r) => {
                let replica = cluster
                    .replicas
                    .get(r as usize)
                    .ok_or(CertError::NoSuchReplica(r))?;
                self.verify(&replica.ed25519_public, &cluster.cluster_id)
            }
            None => self.verify(&cluster.admin_public, &cluster.cluster_id),
        }
    }

    /// Checks the certificate's cluster id, id range and signature under `signer`.
    pub fn verify(&self, admin: &VerifyingKey, cluster_id: &[u8; 16]) -> Result<(), CertError> {
        if &self.cluster_id.0 != cluster_id {
            return Err(CertError::WrongCluster);
        }
        if self.client > CLIENT_ID_MAX {
            return Err(CertError::ClientIdRange(self.client));
        }
        let sig = ed25519_dalek::Signature::from_bytes(&self.signature.0);
        admin
            .verify_strict(
                &signed_bytes(
                    cluster_id,
                    self.client,
                    &self.x25519_public_key.0,
                    &self.ed25519_public_key.0,
                ),
                &sig,
            )
            .map_err(|_| CertError::BadSignature)
    }
}

/// What the admin signs for certificate `client`'s grant `grant` (its encoding):
/// `byzfs_fs::proto::grant::DOMAIN`, the cluster id, the id (8 bytes LE) and the encoding, as
/// `byzfs_fs::proto::grant::signed_bytes` checks (test `issued_grants_verify_at_the_replicas` in
/// `crates/byzfs/src/keygen.rs`).
pub fn grant_signed_bytes(cluster_id: &[u8; 16], client: ClientId, grant: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(GRANT_DOMAIN.len() + 24 + grant.len());
    v.extend_from_slice(GRANT_DOMAIN);
    v.extend_from_slice(cluster_id);
    v.extend_from_slice(&client.to_le_bytes());
    v.extend_from_slice(grant);
    v
}

const GRANT_DOMAIN: &[u8] = b"byzfs client grant v1\0";

/// Most bytes of an encoded grant (two lists of 32 ranges fit in 700).
pub const GRANT_MAX: usize = 1024;

/// A grant (`byzfs_fs::proto::grant::Grant`, encoded) with the admin's signature: what a client's
/// requests may state as credentials.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ClientGrant {
    /// The encoded grant.
    #[serde(with = "hex_vec")]
    pub grant: Vec<u8>,
    /// The admin's Ed25519 signature over [`grant_signed_bytes`].
    pub signature: Hex<64>,
}

impl ClientGrant {
    /// Signs encoded grant `grant` for certificate `client` of cluster `cluster_id`.
    pub fn issue(
        admin: &SigningKey,
        cluster_id: &[u8; 16],
        client: ClientId,
        grant: Vec<u8>,
    ) -> ClientGrant {
        let sig = admin.sign(&grant_signed_bytes(cluster_id, client, &grant));
        ClientGrant {
            grant,
            signature: Hex(sig.to_bytes()),
        }
    }

    /// Checks the signature under `admin` for certificate `client` of `cluster_id`.
    pub fn verify(
        &self,
        admin: &VerifyingKey,
        cluster_id: &[u8; 16],
        client: ClientId,
    ) -> Result<(), CertError> {
        let sig = ed25519_dalek::Signature::from_bytes(&self.signature.0);
        admin
            .verify_strict(&grant_signed_bytes(cluster_id, client, &self.grant), &sig)
            .map_err(|_| CertError::BadSignature)
    }
}

/// Variable-length bytes as hex in a key file.
mod hex_vec {
    use serde::{de, Deserialize as _, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        if text.len() > 2 * super::GRANT_MAX {
            return Err(de::Error::custom(format_args!(
                "a grant is at most {} bytes",
                super::GRANT_MAX
            )));
        }
        hex::decode(&text).map_err(|_| de::Error::custom("expected bytes written as hex digits"))
    }
}

/// The protocol client id of `session` of certificate id `client`, if both fit.
pub fn session_client_id(client: ClientId, session: u64) -> Option<ClientId> {
    (client <= CLIENT_ID_MAX && session < (1 << SESSION_BITS))
        .then_some(client << SESSION_BITS | session)
}

/// The certificate id of protocol client id `client` (its session bits dropped).
pub fn certificate_of(client: ClientId) -> ClientId {
    client >> SESSION_BITS
}

/// A new session number: 40 random bits (see the module docs).
pub fn new_session() -> u64 {
    OsRng.next_u64() & ((1u64 << SESSION_BITS) - 1)
}

/// The first request id of a session started now: the time in microseconds since the UNIX
/// epoch (see the module docs).
pub fn first_request_id() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_verify_and_tamper() {
        let admin = SigningKey::from_bytes(&[3; 32]);
        let cert = ClientCert::issue(&admin, [1; 16], 5, [9; 32], [8; 32]);
        cert.verify(&admin.verifying_key(), &[1; 16]).unwrap();
        assert_eq!(
            cert.verify(&admin.verifying_key(), &[2; 16]),
            Err(CertError::WrongCluster)
        );
        let mut forged = cert.clone();
        forged.ed25519_public_key = Hex([7; 32]);
        assert_eq!(
            forged.verify(&admin.verifying_key(), &[1; 16]),
            Err(CertError::BadSignature),
            "the signing key is certified too"
        );
        let mut forged = cert.clone();
        forged.client = 6;
        assert_eq!(
            forged.verify(&admin.verifying_key(), &[1; 16]),
            Err(CertError::BadSignature)
        );
        let other = SigningKey::from_bytes(&[4; 32]);
        assert_eq!(
            cert.verify(&other.verifying_key(), &[1; 16]),
            Err(CertError::BadSignature)
        );
        let big = ClientCert::issue(&admin, [1; 16], CLIENT_ID_MAX + 1, [9; 32], [8; 32]);
        assert!(matches!(
            big.verify(&admin.verifying_key(), &[1; 16]),
            Err(CertError::ClientIdRange(_))
        ));
    }

    #[test]
    fn grants_are_bound_to_their_cluster_and_certificate() {
        let admin = SigningKey::from_bytes(&[3; 32]);
        let g = ClientGrant::issue(&admin, &[1; 16], 5, vec![1, 2, 3]);
        assert_eq!(g.verify(&admin.verifying_key(), &[1; 16], 5), Ok(()));
        let refused = [
            g.verify(&admin.verifying_key(), &[2; 16], 5),
            g.verify(&admin.verifying_key(), &[1; 16], 6),
            g.verify(
                &SigningKey::from_bytes(&[4; 32]).verifying_key(),
                &[1; 16],
                5,
            ),
            ClientGrant {
                grant: vec![1, 2, 4],
                ..g.clone()
            }
            .verify(&admin.verifying_key(), &[1; 16], 5),
        ];
        assert_eq!(refused, [Err(CertError::BadSignature); 4]);
        let mut signed = GRANT_DOMAIN.to_vec();
        signed.extend_from_slice(&[1; 16]);
        signed.extend_from_slice(&5u64.to_le_bytes());
        signed.extend_from_slice(&[1, 2, 3]);
        assert_eq!(grant_signed_bytes(&[1; 16], 5, &[1, 2, 3]), signed);
    }

    #[test]
    fn sessions_are_distinct_and_fit() {
        let sessions: std::collections::BTreeSet<u64> = (0..1000).map(|_| new_session()).collect();
        assert_eq!(sessions.len(), 1000, "distinct");
        assert!(sessions.iter().all(|&s| s < 1 << SESSION_BITS));
        let (a, b) = (first_request_id(), first_request_id());
        assert!(
            a > 1_700_000_000_000_000 && b >= a,
            "microseconds since 1970"
        );
        assert_eq!(session_client_id(1, 7), Some((1 << 40) | 7));
        assert_eq!(session_client_id(CLIENT_ID_MAX + 1, 0), None);
        assert_eq!(session_client_id(0, 1 << 40), None);
    }
}
