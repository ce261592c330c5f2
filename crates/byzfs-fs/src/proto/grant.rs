//! What a client may act as (issue #43): the user and group ids a client certificate lets
//! its requests state, whether it may act as root, and the anonymous ids a caller it may not
//! act for is mapped to (NFS `all_squash`/`anonuid`).
//!
//! **Why in the request.** A request's credentials are the client's word (AUTH_SYS); without a
//! limit, every client key is root on every plain tree. The grant is signed by the cluster's admin
//! key (`byzfs client-key` issues it with the certificate, `byzfs_net::cert`) and every request
//! carries it ([`super::request::Request::grant`]), so a replica checks it with no state of its
//! own: it may execute a request with no copy of the client's certificate (replaying its log after
//! a restart, before clients reconnect), and a decision from replica-local state would then differ
//! between replicas.
//!
//! **How it is checked:** [`crate::policy`].
//!
//! **Root and id 0.** uid 0 and gid 0 (primary or supplementary) are allowed only with
//! `root`, whatever the lists say, as Linux's nfsd `root_squash` treats both.

use super::codec::encode;
use super::cred::Credentials;
use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

/// Most ranges in one id list: bounds a grant's size before decoding allocates.
pub const MAX_RANGES: usize = 32;
/// The default anonymous user and group (`nobody`/`nogroup`, as NFS's default `anonuid`).
pub const NOBODY: u32 = 65534;
/// What the admin's signature over a grant starts with.
pub const DOMAIN: &[u8] = b"byzfs client grant v1\0";

/// A set of user or group ids.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Ids {
    /// Every id (a host trusted with all its users; id 0 still needs [`Grant::root`]).
    Any,
    /// The ids in these inclusive ranges, at most [`MAX_RANGES`].
    Ranges(#[serde(deserialize_with = "bounded_ranges")] Vec<(u32, u32)>),
}

impl Ids {
    /// Whether `id` is in the set.
    pub fn contains(&self, id: u32) -> bool {
        match self {
            Ids::Any => true,
            Ids::Ranges(r) => r.iter().any(|&(lo, hi)| lo <= id && id <= hi),
        }
    }

    /// Parses `any`, `none`, or comma-separated ids and ranges (`1000,2000-2099`), sorted and
    /// merged; at most [`MAX_RANGES`] ranges after merging.
    pub fn parse(s: &str) -> Result<Ids, String> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("any") {
            return Ok(Ids::Any);
        }
        if t.eq_ignore_ascii_case("none") {
            return Ok(Ids::Ranges(Vec::new()));
        }
        let id = |x: &str| {
            x.trim().parse::<u32>().map_err(|_| {
                format!("{x:?} in {s:?} is not an id; write ids and ranges such as 1000,2000-2099, or any, or none")
            })
        };
        let mut ranges = Vec::new();
        for part in t.split(',') {
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (id(a)?, id(b)?),
                None => (id(part)?, id(part)?),
            };
            if lo > hi {
                return Err(format!(
                    "{part:?} in {s:?} is an empty range; write it low-high"
                ));
            }
            ranges.push((lo, hi));
        }
        ranges.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        if merged.len() > MAX_RANGES {
            return Err(format!(
                "{s:?} has {} ranges; a certificate holds at most {MAX_RANGES}",
                merged.len()
            ));
        }
        Ok(Ids::Ranges(merged))
    }
}

impl core::fmt::Display for Ids {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Ids::Any => f.write_str("any"),
            Ids::Ranges(r) if r.is_empty() => f.write_str("none"),
            Ids::Ranges(r) => {
                for (i, &(lo, hi)) in r.iter().enumerate() {
                    let sep = if i == 0 { "" } else { "," };
                    if lo == hi {
                        write!(f, "{sep}{lo}")?;
                    } else {
                        write!(f, "{sep}{lo}-{hi}")?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// Refuses more than [`MAX_RANGES`] ranges before allocating for them.
fn bounded_ranges<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(u32, u32)>, D::Error> {
    struct Bounded;
    impl<'de> Visitor<'de> for Bounded {
        type Value = Vec<(u32, u32)>;

        fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            write!(f, "at most {MAX_RANGES} id ranges")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let hint = seq.size_hint().unwrap_or(0);
            if hint > MAX_RANGES {
                return Err(de::Error::invalid_length(hint, &self));
            }
            let mut v = Vec::with_capacity(hint);
            while let Some(r) = seq.next_element()? {
                if v.len() == MAX_RANGES {
                    return Err(de::Error::invalid_length(v.len() + 1, &self));
                }
                v.push(r);
            }
            Ok(v)
        }
    }
    d.deserialize_seq(Bounded)
}

/// What a client certificate lets its requests state as credentials.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Hash, Debug)]
pub struct Grant {
    /// User ids it may act as (besides `anon_uid`).
    pub uids: Ids,
    /// Group ids it may act as, primary or supplementary (besides `anon_gid`).
    pub gids: Ids,
    /// Whether it may act as uid 0 and gid 0.
    pub root: bool,
    /// The user a caller it may not act for is mapped to (always allowed).
    pub anon_uid: u32,
    /// The group such a caller, or a primary group outside `gids`, is mapped to (always
    /// allowed).
    pub anon_gid: u32,
}

/// Why a grant is not issued ([`Grant::check`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// A list names id 0 but the grant is not for root.
    #[error("{0} 0 is root's; add --root to let this client act as root, or leave 0 out")]
    ZeroWithoutRoot(&'static str),
    /// An anonymous id is 0 but the grant is not for root.
    #[error("--anon-{0} 0 maps callers to root; choose another id (default {NOBODY})")]
    AnonIsRoot(&'static str),
    /// Too many ranges.
    #[error("{0} has more than {MAX_RANGES} ranges")]
    TooManyRanges(&'static str),
}

impl Grant {
    /// Every user and group, root too: the local cluster's own client (`byzfs up`), a host
    /// trusted as NFS trusts an AUTH_SYS host with `no_root_squash`.
    pub fn trusted_host() -> Grant {
        Grant {
            uids: Ids::Any,
            gids: Ids::Any,
            root: true,
            anon_uid: NOBODY,
            anon_gid: NOBODY,
        }
    }

    /// Checks what an issuer should refuse: id 0 listed without `root`, an anonymous id 0
    /// without `root`, too many ranges.
    pub fn check(&self) -> Result<(), GrantError> {
        for (name, ids) in [("uid", &self.uids), ("gid", &self.gids)] {
            if let Ids::Ranges(r) = ids {
                if r.len() > MAX_RANGES {
                    return Err(GrantError::TooManyRanges(name));
                }
                if !self.root && r.iter().any(|&(lo, _)| lo == 0) {
                    return Err(GrantError::ZeroWithoutRoot(name));
                }
            }
        }
        if !self.root && self.anon_uid == 0 {
            return Err(GrantError::AnonIsRoot("uid"));
        }
        if !self.root && self.anon_gid == 0 {
            return Err(GrantError::AnonIsRoot("gid"));
        }
        Ok(())
    }

    /// Whether requests may run as user `uid`.
    pub fn allows_uid(&self, uid: u32) -> bool {
        if uid == 0 {
            return self.root;
        }
        uid == self.anon_uid || self.uids.contains(uid)
    }

    /// Whether requests may run with group `gid` (primary or supplementary).
    pub fn allows_gid(&self, gid: u32) -> bool {
        if gid == 0 {
            return self.root;
        }
        gid == self.anon_gid || self.gids.contains(gid)
    }

    /// Whether `cred` is within the grant: its uid, its gid and every supplementary group.
    pub fn allows(&self, cred: &Credentials) -> bool {
        self.allows_uid(cred.uid)
            && self.allows_gid(cred.gid)
            && cred.groups.iter().all(|&g| self.allows_gid(g))
    }

    /// `cred` as the mount sends it: a user it may not act for becomes the anonymous user
    /// and group with no supplementary groups (root squashed unless `root`); otherwise a
    /// primary group outside the grant becomes the anonymous group and supplementary groups
    /// outside it are dropped. Within a valid grant ([`Grant::check`]) the result is always
    /// allowed, and `cred` itself if it was.
    pub fn squash(&self, cred: &Credentials) -> Credentials {
        if !self.allows_uid(cred.uid) {
            return Credentials::user(self.anon_uid, self.anon_gid);
        }
        Credentials {
            uid: cred.uid,
            gid: if self.allows_gid(cred.gid) {
                cred.gid
            } else {
                self.anon_gid
            },
            groups: cred
                .groups
                .iter()
                .copied()
                .filter(|&g| self.allows_gid(g))
                .collect(),
        }
    }

    /// The encoding the admin signs (postcard).
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    /// Decodes an encoded grant (bounded); `None` unless `b` is exactly one.
    pub fn decode(b: &[u8]) -> Option<Grant> {
        match postcard::take_from_bytes(b) {
            Ok((g, [])) => Some(g),
            _ => None,
        }
    }

    /// One line for people: `uids 1000,2000-2099, gids any, root, anonymous 65534:65534`.
    pub fn describe(&self) -> String {
        format!(
            "uids {}, gids {}, {}, anonymous {}:{}",
            self.uids,
            self.gids,
            if self.root { "root" } else { "not root" },
            self.anon_uid,
            self.anon_gid
        )
    }
}

/// The bytes the admin signs for certificate `cert_id`'s grant, whose encoding is
/// `grant`: [`DOMAIN`], the cluster id, the id (8 bytes LE), the encoding
/// (`byzfs_net::cert::grant_signed_bytes` builds the same).
pub fn signed_bytes(cluster_id: &[u8; 16], cert_id: u64, grant: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(DOMAIN.len() + 24 + grant.len());
    v.extend_from_slice(DOMAIN);
    v.extend_from_slice(cluster_id);
    v.extend_from_slice(&cert_id.to_le_bytes());
    v.extend_from_slice(grant);
    v
}

/// A grant with the admin's signature, as a request carries it.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Hash, Debug)]
pub struct SignedGrant {
    /// The certificate id it was issued for.
    pub cert_id: u64,
    /// The grant.
    pub grant: Grant,
    /// The admin's Ed25519 signature over [`signed_bytes`] (64 bytes).
    #[serde(with = "byzfs_bft::message::bytes")]
    pub signature: Vec<u8>,
}

impl SignedGrant {
    /// Signs `grant` for certificate `cert_id` of cluster `cluster_id` (tests; the CLI
    /// issues grants through `byzfs_net::cert`).
    pub fn sign(
        admin: &ed25519_dalek::SigningKey,
        cluster_id: &[u8; 16],
        cert_id: u64,
        grant: Grant,
    ) -> SignedGrant {
        use ed25519_dalek::Signer as _;
        let sig = admin.sign(&signed_bytes(cluster_id, cert_id, &grant.encode()));
        SignedGrant {
            cert_id,
            grant,
            signature: sig.to_bytes().to_vec(),
        }
    }

    /// Whether the signature verifies under `admin` for `cluster_id`.
    pub fn verify(&self, admin: &ed25519_dalek::VerifyingKey, cluster_id: &[u8; 16]) -> bool {
        let Ok(sig) = <[u8; 64]>::try_from(self.signature.as_slice()) else {
            return false;
        };
        let msg = signed_bytes(cluster_id, self.cert_id, &self.grant.encode());
        admin
            .verify_strict(&msg, &ed25519_dalek::Signature::from_bytes(&sig))
            .is_ok()
    }
}
