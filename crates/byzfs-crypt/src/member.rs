//! Members of a group (docs/ENCRYPTION.md "Keys"): who a member is (an
//! [`Identity`]: an X25519 key pair for lockboxes and an Ed25519 key pair for what it signs
//! as a group's owner), how a group's keys reach members (one lockbox each, kept in the
//! group's replicated record), and how an owner derives every version's keys from its
//! identity alone, so it keeps no file per group.
//!
//! A lockbox as stored in the record: `member's X25519 public key (32) ‖ role (1: 0 reader,
//! 1 writer) ‖` [`crate::lockbox`] of `version (4, big-endian) ‖ seed s_v (32) ‖ [writer
//! secret key (32) ‖ writer certificate (64), writers only]`, bound (associated data) to the
//! cluster, the group id, the owner's key, the version and the role ([`GroupRef`]), so a
//! lockbox copied into another group's record, another owner's or another cluster's does
//! not open. The public prefix lets each member find its own and the owner list who is in;
//! the replicas learn members' public keys and roles, not keys.
//!
//! **One identity, many clusters.** Every key derives from the owner's chain head, which
//! derives from the owner's secret, the cluster id (`cluster.toml`'s `cluster_id`) and the
//! group id: the same identity and group name on two clusters give unrelated seeds, writer
//! keys, content and name keys; certificates, headers and writer proofs name the cluster
//! too, so nothing of one cluster is accepted on another.
//!
//! A **writer certificate** is the owner's Ed25519 signature over the cluster, the group, a
//! version and that version's writer public key ([`writer_cert`]). Writers put it in every
//! file header they sign ([`crate::header`]), so a reader checks a header of any key
//! version with the owner's public key alone: the group's record holds the current writer
//! key only.
//!
//! ```
//! use byzfs_crypt::member::{open_mine, seal_record, Identity, Role};
//! let mut rng = rand_core::OsRng;
//! let owner = Identity::generate(&mut rng);
//! let bob = Identity::generate(&mut rng);
//! let team = owner.group_ref(&[9; 16], "team");
//! let members = [(owner.member_key(), Role::Writer), (bob.member_key(), Role::Reader)];
//! let (writer, boxes) = seal_record(&owner, &team, 1, &members, &mut rng).unwrap();
//! let mine = open_mine(&bob, &team, &boxes, 1, &writer).unwrap();
//! assert_eq!((mine.keys.version(), mine.writer.is_some()), (1, false));
//! ```

use crate::lockbox;
use crate::regression::{GroupKeys, Owner};
use crate::CryptError;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use rand_core::{CryptoRng, RngCore};
use x25519_dalek::{PublicKey, StaticSecret};

/// The same derivation as `byzfs_fs::proto::group::group_id`, which the replicas check
/// (its test compares the two).
pub const GROUP_ID: &str = "byzfs-crypt 2026-11 group id from owner and name";
const GROUP_HEAD: &str = "byzfs-crypt 2026-12 owner's chain head of a group on a cluster";
const WRITER: &str = "byzfs-crypt 2026-12 writer key of a group version";
const LOCKBOX: &[u8] = b"byzfs-crypt 2026-12 lockbox of a group version\0";

/// A group as what is bound to it: the cluster it lives on, its id and its owner's Ed25519
/// public key. Lockboxes, writer certificates and file headers are bound to all three.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct GroupRef {
    /// The cluster's id (`cluster.toml`'s `cluster_id`).
    pub cluster: [u8; 16],
    /// The group's id ([`group_id`]).
    pub group: [u8; 16],
    /// The owner's Ed25519 public key.
    pub owner: [u8; 32],
}

/// A member's secrets.
#[derive(Clone)]
pub struct Identity {
    x25519: StaticSecret,
    ed25519: SigningKey,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("member_key", &self.member_key())
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// A new identity with random keys.
    pub fn generate(rng: &mut (impl RngCore + CryptoRng)) -> Identity {
        let mut e = [0u8; 32];
        rng.fill_bytes(&mut e);
        Identity {
            x25519: StaticSecret::random_from_rng(&mut *rng),
            ed25519: SigningKey::from_bytes(&e),
        }
    }

    /// An identity from its two secret keys (X25519, Ed25519), as stored in its file.
    pub fn from_secrets(x25519: [u8; 32], ed25519: [u8; 32]) -> Identity {
        Identity {
            x25519: StaticSecret::from(x25519),
            ed25519: SigningKey::from_bytes(&ed25519),
        }
    }

    /// The two secret keys (X25519, Ed25519), for the identity's file.
    pub fn secrets(&self) -> ([u8; 32], [u8; 32]) {
        (self.x25519.to_bytes(), self.ed25519.to_bytes())
    }

    /// What others add this member by: its X25519 public key.
    pub fn member_key(&self) -> [u8; 32] {
        PublicKey::from(&self.x25519).to_bytes()
    }

    /// The Ed25519 key it signs group records with as an owner.
    pub fn signing_key(&self) -> &SigningKey {
        &self.ed25519
    }

    /// Its Ed25519 public key: a group's `owner`.
    pub fn owner_key(&self) -> [u8; 32] {
        self.ed25519.verifying_key().to_bytes()
    }

    /// The id of the group this identity owns under `name` ([`group_id`]).
    pub fn group_id(&self, name: &str) -> [u8; 16] {
        group_id(&self.owner_key(), name)
    }

    /// Its group `name` on cluster `cluster`.
    pub fn group_ref(&self, cluster: &[u8; 16], name: &str) -> GroupRef {
        GroupRef {
            cluster: *cluster,
            group: self.group_id(name),
            owner: self.owner_key(),
        }
    }

    /// The key chain of a group it owns on cluster `cluster`, derived from its secret: no
    /// state per group, and unrelated chains on two clusters.
    pub fn owner_chain(&self, cluster: &[u8; 16], group: &[u8; 16]) -> Owner {
        let mut h = blake3::Hasher::new_derive_key(GROUP_HEAD);
        h.update(&self.ed25519.to_bytes());
        h.update(cluster);
        h.update(group);
        Owner::from_bytes(*h.finalize().as_bytes())
    }
}

/// The id of the group owner `owner` (Ed25519 public key) names `name`: anyone who knows
/// both computes it; nobody can make another owner's group id theirs.
pub fn group_id(owner: &[u8; 32], name: &str) -> [u8; 16] {
    let mut h = blake3::Hasher::new_derive_key(GROUP_ID);
    h.update(owner);
    h.update(name.as_bytes());
    let mut id = [0u8; 16];
    id.copy_from_slice(&h.finalize().as_bytes()[..16]);
    id
}

/// What a member may do.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    /// Reads: holds the seed (content and name keys).
    Reader,
    /// Reads and writes: also holds the version's writer key.
    Writer,
}

/// A member's keys of one version, from its lockbox.
pub struct MemberKeys {
    /// The seed of the version (older versions derive from it).
    pub keys: GroupKeys,
    /// The version's writer key and its certificate ([`writer_cert`]), for writers.
    pub writer: Option<(SigningKey, [u8; 64])>,
}

fn cert_bytes(g: &GroupRef, version: u32, writer: &[u8; 32]) -> Vec<u8> {
    let mut m = b"byzfs-crypt 2026-12 writer certificate\0".to_vec();
    m.extend_from_slice(&g.cluster);
    m.extend_from_slice(&g.group);
    m.extend_from_slice(&version.to_be_bytes());
    m.extend_from_slice(writer);
    m
}

/// The owner's certificate that `writer` is the writer key of `version` of group `g`.
pub fn writer_cert(owner: &Identity, g: &GroupRef, version: u32, writer: &[u8; 32]) -> [u8; 64] {
    owner
        .ed25519
        .sign(&cert_bytes(g, version, writer))
        .to_bytes()
}

/// Checks a [`writer_cert`] under the owner's public key `g.owner`.
pub fn verify_writer_cert(
    g: &GroupRef,
    version: u32,
    writer: &[u8; 32],
    cert: &[u8; 64],
) -> Result<(), CryptError> {
    let owner =
        VerifyingKey::from_bytes(&g.owner).map_err(|_| CryptError::Malformed("owner key"))?;
    owner
        .verify_strict(
            &cert_bytes(g, version, writer),
            &Signature::from_bytes(cert),
        )
        .map_err(|_| CryptError::BadSignature("writer certificate"))
}

/// The writer key of version `version` of a group whose chain is `chain`: random-looking to
/// anyone without the owner's secret, and not derivable from any seed.
fn writer_key(chain: &Owner, version: u32) -> SigningKey {
    let mut h = blake3::Hasher::new_derive_key(WRITER);
    h.update(&chain.to_bytes());
    h.update(&version.to_be_bytes());
    SigningKey::from_bytes(h.finalize().as_bytes())
}

/// What a lockbox of version `version` for a member of role `role` is bound to.
fn lockbox_bound(g: &GroupRef, version: u32, writer: bool) -> Vec<u8> {
    let mut b = LOCKBOX.to_vec();
    b.extend_from_slice(&g.cluster);
    b.extend_from_slice(&g.group);
    b.extend_from_slice(&g.owner);
    b.extend_from_slice(&version.to_be_bytes());
    b.push(u8::from(writer));
    b
}

/// The record parts of version `version` of group `g`, owned by `owner` (`g.owner` must be
/// its key, or members refuse the lockboxes): the writer public key, and one lockbox per
/// member.
pub fn seal_record(
    owner: &Identity,
    g: &GroupRef,
    version: u32,
    members: &[([u8; 32], Role)],
    rng: &mut (impl RngCore + CryptoRng),
) -> Result<([u8; 32], Vec<Vec<u8>>), CryptError> {
    if g.owner != owner.owner_key() {
        return Err(CryptError::Malformed("a group of another owner"));
    }
    let chain = owner.owner_chain(&g.cluster, &g.group);
    let keys = chain.group_keys(version)?;
    let writer = writer_key(&chain, version);
    let (_, seed) = keys.to_parts();
    let boxes = members
        .iter()
        .map(|(member, role)| {
            let mut payload = version.to_be_bytes().to_vec();
            payload.extend_from_slice(&seed);
            if *role == Role::Writer {
                payload.extend_from_slice(&writer.to_bytes());
                let public = writer.verifying_key().to_bytes();
                payload.extend_from_slice(&writer_cert(owner, g, version, &public));
            }
            let is_writer = *role == Role::Writer;
            let mut b = member.to_vec();
            b.push(u8::from(is_writer));
            let bound = lockbox_bound(g, version, is_writer);
            b.extend(lockbox::seal(
                &PublicKey::from(*member),
                &bound,
                &payload,
                rng,
            ));
            b
        })
        .collect();
    Ok((writer.verifying_key().to_bytes(), boxes))
}

/// The members the lockboxes name (malformed ones skipped).
pub fn members_of(lockboxes: &[Vec<u8>]) -> Vec<([u8; 32], Role)> {
    lockboxes
        .iter()
        .filter_map(|b| {
            let member: [u8; 32] = b.get(..32)?.try_into().ok()?;
            let role = match b.get(32)? {
                0 => Role::Reader,
                1 => Role::Writer,
                _ => return None,
            };
            Some((member, role))
        })
        .collect()
}

/// Opens `me`'s lockbox among `lockboxes` of group `g`'s record at `version` with writer
/// public key `writer`: the lockbox must be bound to `g` and `version`, the keys of that
/// version, a writer key that one and certified by `g.owner`.
pub fn open_mine(
    me: &Identity,
    g: &GroupRef,
    lockboxes: &[Vec<u8>],
    version: u32,
    writer: &[u8; 32],
) -> Result<MemberKeys, CryptError> {
    let mine = me.member_key();
    let b = lockboxes
        .iter()
        .find(|b| b.get(..32) == Some(&mine[..]))
        .ok_or(CryptError::NotMember)?;
    let role = *b.get(32).ok_or(CryptError::Malformed("lockbox role"))?;
    if role > 1 {
        return Err(CryptError::Malformed("lockbox role"));
    }
    let bound = lockbox_bound(g, version, role == 1);
    let payload = lockbox::open(&me.x25519, &bound, &b[33..])?;
    let (head, rest) = payload.split_at(4.min(payload.len()));
    let got = u32::from_be_bytes(
        head.try_into()
            .map_err(|_| CryptError::Malformed("lockbox payload"))?,
    );
    if got != version {
        return Err(CryptError::Tampered("lockbox version"));
    }
    let (seed, writer_secret) = match (role, rest.len()) {
        (0, 32) => (rest, None),
        (1, 128) => (&rest[..32], Some(&rest[32..])),
        _ => return Err(CryptError::Malformed("lockbox payload")),
    };
    let seed: [u8; 32] = seed
        .try_into()
        .map_err(|_| CryptError::Malformed("lockbox seed"))?;
    let writer_key = match writer_secret {
        None => None,
        Some(s) => {
            let (secret, cert) = s.split_at(32);
            let secret: [u8; 32] = secret
                .try_into()
                .map_err(|_| CryptError::Malformed("lockbox writer key"))?;
            let cert: [u8; 64] = cert
                .try_into()
                .map_err(|_| CryptError::Malformed("lockbox writer certificate"))?;
            let k = SigningKey::from_bytes(&secret);
            if k.verifying_key().to_bytes() != *writer {
                return Err(CryptError::Tampered("lockbox writer key"));
            }
            verify_writer_cert(g, version, writer, &cert)?;
            Some((k, cert))
        }
    };
    Ok(MemberKeys {
        keys: GroupKeys::from_parts(version, seed),
        writer: writer_key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::OsRng;

    const CLUSTER: [u8; 16] = [3; 16];

    #[test]
    fn the_owner_derives_every_version_and_members_open_only_theirs() {
        let owner = Identity::generate(&mut OsRng);
        let (bob, carol) = (
            Identity::generate(&mut OsRng),
            Identity::generate(&mut OsRng),
        );
        let g = owner.group_ref(&CLUSTER, "team");
        assert_eq!(g.group, group_id(&owner.owner_key(), "team"));
        assert_ne!(g.group, owner.group_id("other"));
        let members = [
            (owner.member_key(), Role::Writer),
            (bob.member_key(), Role::Reader),
        ];
        let (w1, v1) = seal_record(&owner, &g, 1, &members, &mut OsRng).unwrap();
        assert_eq!(members_of(&v1), members.to_vec());
        let o = open_mine(&owner, &g, &v1, 1, &w1).unwrap();
        let b = open_mine(&bob, &g, &v1, 1, &w1).unwrap();
        assert_eq!(o.keys, b.keys);
        let (wk, cert) = o.writer.unwrap();
        assert_eq!(wk.verifying_key().to_bytes(), w1);
        // The certificate holds for this cluster, group, owner, version and key only.
        assert_eq!(verify_writer_cert(&g, 1, &w1, &cert), Ok(()));
        let bad = Err(CryptError::BadSignature("writer certificate"));
        assert_eq!(verify_writer_cert(&g, 2, &w1, &cert), bad);
        let other_group = GroupRef {
            group: [0; 16],
            ..g
        };
        assert_eq!(verify_writer_cert(&other_group, 1, &w1, &cert), bad);
        let other_cluster = GroupRef {
            cluster: [4; 16],
            ..g
        };
        assert_eq!(verify_writer_cert(&other_cluster, 1, &w1, &cert), bad);
        assert_eq!(verify_writer_cert(&g, 1, &[9; 32], &cert), bad);
        let bobs = GroupRef {
            owner: bob.owner_key(),
            ..g
        };
        assert_eq!(verify_writer_cert(&bobs, 1, &w1, &cert), bad);
        assert!(b.writer.is_none());
        assert_eq!(
            open_mine(&carol, &g, &v1, 1, &w1).err(),
            Some(CryptError::NotMember)
        );
        // Bob removed: version 2, another writer key; its seed gives version 1's.
        let (w2, v2) = seal_record(&owner, &g, 2, &members[..1], &mut OsRng).unwrap();
        assert_ne!(w1, w2);
        assert_eq!(
            open_mine(&bob, &g, &v2, 2, &w2).err(),
            Some(CryptError::NotMember)
        );
        let o2 = open_mine(&owner, &g, &v2, 2, &w2).unwrap();
        assert_eq!(o2.keys.older(1).unwrap(), o.keys);
        // The same identity reproduces the same keys: the owner keeps no state per group.
        let again = Identity::from_secrets(owner.secrets().0, owner.secrets().1);
        let (w2b, v2b) = seal_record(&again, &g, 2, &members[..1], &mut OsRng).unwrap();
        assert_eq!(w2b, w2);
        assert_eq!(open_mine(&owner, &g, &v2b, 2, &w2).unwrap().keys, o2.keys);
        // Nobody seals a record naming another owner.
        assert_eq!(
            seal_record(&bob, &g, 3, &members, &mut OsRng).err(),
            Some(CryptError::Malformed("a group of another owner"))
        );
    }

    #[test]
    fn a_lockbox_that_does_not_fit_its_record_is_refused() {
        let owner = Identity::generate(&mut OsRng);
        let g = owner.group_ref(&CLUSTER, "team");
        let me = [(owner.member_key(), Role::Writer)];
        let (w1, v1) = seal_record(&owner, &g, 1, &me, &mut OsRng).unwrap();
        let (w2, _) = seal_record(&owner, &g, 2, &me, &mut OsRng).unwrap();
        // An old lockbox served as the current version's, or with another writer key.
        assert_eq!(
            open_mine(&owner, &g, &v1, 2, &w2).err(),
            Some(CryptError::Tampered("lockbox"))
        );
        assert_eq!(
            open_mine(&owner, &g, &v1, 1, &w2).err(),
            Some(CryptError::Tampered("lockbox writer key"))
        );
        // A flipped bit anywhere after the public prefix; a writer's role turned reader's,
        // or made up.
        for i in 33..v1[0].len() {
            let mut t = v1.clone();
            t[0][i] ^= 1;
            assert!(open_mine(&owner, &g, &t, 1, &w1).is_err(), "bit {i}");
        }
        let mut t = v1.clone();
        t[0][32] = 0;
        assert_eq!(
            open_mine(&owner, &g, &t, 1, &w1).err(),
            Some(CryptError::Tampered("lockbox"))
        );
        t[0][32] = 2;
        assert_eq!(
            open_mine(&owner, &g, &t, 1, &w1).err(),
            Some(CryptError::Malformed("lockbox role"))
        );
        t[0].truncate(40);
        assert!(open_mine(&owner, &g, &t, 1, &w1).is_err());
        t[0].truncate(20);
        assert_eq!(
            open_mine(&owner, &g, &t, 1, &w1).err(),
            Some(CryptError::NotMember)
        );
    }

    /// Issue #43 item 5 (4): a lockbox is bound to its group, owner, version and cluster;
    /// the owner's lockboxes copied into another record (a squatter's) do not open there.
    #[test]
    fn a_lockbox_moved_to_another_group_owner_version_or_cluster_does_not_open() {
        let owner = Identity::generate(&mut OsRng);
        let bob = Identity::generate(&mut OsRng);
        let g = owner.group_ref(&CLUSTER, "team");
        let members = [(bob.member_key(), Role::Writer)];
        let (w, boxes) = seal_record(&owner, &g, 1, &members, &mut OsRng).unwrap();
        assert!(open_mine(&bob, &g, &boxes, 1, &w).is_ok());
        let elsewhere = [
            GroupRef {
                group: owner.group_id("other"),
                ..g
            },
            GroupRef {
                owner: bob.owner_key(),
                ..g
            },
            GroupRef {
                cluster: [4; 16],
                ..g
            },
        ];
        for other in elsewhere {
            assert_eq!(
                open_mine(&bob, &other, &boxes, 1, &w).err(),
                Some(CryptError::Tampered("lockbox")),
                "{other:?}"
            );
        }
    }

    /// Issue #43 item 5 (5): one identity on two clusters derives unrelated seeds and
    /// writer keys for the same group name.
    #[test]
    fn one_identity_on_two_clusters_derives_unrelated_keys() {
        let owner = Identity::generate(&mut OsRng);
        let (a, b) = (
            owner.group_ref(&[1; 16], "default"),
            owner.group_ref(&[2; 16], "default"),
        );
        assert_eq!(a.group, b.group, "the id names owner and name only");
        let chain_a = owner.owner_chain(&a.cluster, &a.group);
        let chain_b = owner.owner_chain(&b.cluster, &b.group);
        assert_ne!(chain_a.to_bytes(), chain_b.to_bytes());
        let me = [(owner.member_key(), Role::Writer)];
        let (wa, ba) = seal_record(&owner, &a, 1, &me, &mut OsRng).unwrap();
        let (wb, bb) = seal_record(&owner, &b, 1, &me, &mut OsRng).unwrap();
        assert_ne!(wa, wb);
        let (ka, kb) = (
            open_mine(&owner, &a, &ba, 1, &wa).unwrap(),
            open_mine(&owner, &b, &bb, 1, &wb).unwrap(),
        );
        assert_ne!(ka.keys.to_parts(), kb.keys.to_parts());
        assert_ne!(ka.keys.content_key(&[5; 16]), kb.keys.content_key(&[5; 16]));
        assert!(open_mine(&owner, &b, &ba, 1, &wa).is_err());
    }
}
