//! Who the replicas let state which credentials ([`ClientPolicy`]), and the admission of
//! each request under it: the grant a request carries ([`crate::proto::grant`]) checked
//! against the session that sent it, its signature verified once and remembered.
//!
//! **How it is checked** ([`crate::FileService`], every request, ordered and read-only): under
//! [`ClientPolicy::Certified`], the grant's signature must verify under the admin key and the
//! cluster id, it must be for the certificate of the session that sent the request
//! (`client >> session_bits`), and the credentials must be within it
//! ([`Grant::allows`](crate::proto::grant::Grant::allows)); `EPERM` otherwise. Verified
//! grants are memoised (a pure function of the signed bytes, so determinism is unaffected),
//! so a client pays one Ed25519 verification per replica, not one per request. The replicas'
//! own clients (certificate ids from `replica_clients`, certified by the replica's key, not
//! the admin's) carry no grant and may only report their disk and read the agreed capacity
//! ([`crate::capacity`]).

use crate::proto::cred::Credentials;
use crate::proto::errno::Errno;
use crate::proto::grant::SignedGrant;
use crate::proto::op::Op;

/// Who the replicas let state which credentials ([`crate::FsConfig::client_policy`]).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum ClientPolicy {
    /// Every request is refused `EPERM`: a configuration that names no policy serves no one,
    /// so no caller trusts clients by omission.
    #[default]
    Closed,
    /// Credentials are taken as sent (AUTH_SYS with every host trusted): only for tests and
    /// simulations that build an in-memory service themselves.
    Trusted,
    /// Every request must carry a grant the admin signed for its session's certificate, and
    /// stay within it (the module docs). Every replica and the unreplicated server.
    Certified(Box<Certified>),
}

/// The parameters of [`ClientPolicy::Certified`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Certified {
    /// The admin's public key (`cluster.toml`).
    pub admin: ed25519_dalek::VerifyingKey,
    /// The cluster id, which every grant's signature covers.
    pub cluster_id: [u8; 16],
    /// Bits of a protocol client id below its certificate id
    /// (`byzfs_net::cert::SESSION_BITS`).
    pub session_bits: u32,
    /// The first certificate id of the replicas' own clients
    /// (`byzfs_net::cert::REPLICA_CLIENT_FIRST`): from there on, no grant, and only
    /// [`Op::ReportCapacity`] and [`Op::StatFs`].
    pub replica_clients: u64,
}

/// Grants verified so far, most recent last ([`GRANT_CACHE`] at most): memoises
/// [`SignedGrant::verify`], a pure function, so it changes no result.
#[derive(Default)]
pub(crate) struct Verified(std::sync::Mutex<Vec<SignedGrant>>);

/// Grants kept verified: a replica serves a handful of client certificates at once.
pub const GRANT_CACHE: usize = 64;

impl Verified {
    fn check(&self, g: &SignedGrant, c: &Certified) -> bool {
        let mut seen = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if seen.iter().any(|s| s == g) {
            return true;
        }
        if !g.verify(&c.admin, &c.cluster_id) {
            return false;
        }
        if seen.len() == GRANT_CACHE {
            seen.remove(0);
        }
        seen.push(g.clone());
        true
    }

    /// Whether `client` (a protocol client id) may send `op` with `cred` and `grant` under
    /// `policy`; `EPERM` otherwise.
    pub(crate) fn admit(
        &self,
        policy: &ClientPolicy,
        client: u64,
        cred: &Credentials,
        op: &Op,
        grant: Option<&SignedGrant>,
    ) -> Result<(), Errno> {
        let c = match policy {
            ClientPolicy::Trusted => return Ok(()),
            ClientPolicy::Closed => return Err(Errno::EPERM),
            ClientPolicy::Certified(c) => c,
        };
        let cert = client.checked_shr(c.session_bits).unwrap_or(0);
        if cert >= c.replica_clients {
            // A replica's own client: its disk report and the agreed capacity it reads
            // back (`crates/byzfs/src/capacity_report.rs`), nothing else.
            return match op {
                Op::ReportCapacity { .. } | Op::StatFs => Ok(()),
                _ => Err(Errno::EPERM),
            };
        }
        match grant {
            Some(g) if g.cert_id == cert && g.grant.allows(cred) && self.check(g, c) => Ok(()),
            _ => Err(Errno::EPERM),
        }
    }
}
