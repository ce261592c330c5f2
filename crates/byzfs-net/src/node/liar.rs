//! **Test-only fault injection**, compiled only with the feature `byzantine` (which the
//! test script turns on and release builds lack): a replica that lies to its clients
//! (`byzfs replica --byzantine lie-replies`, `crates/byzfs/tests/faults.rs`).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// **Test-only fault injection**: every REPLY this replica sends to a client is re-encoded
/// with a wrong result before it leaves, under a valid MAC (a real Byzantine lie, not
/// garbage the client would drop as unauthentic). A full result is replaced by
/// `corrupt(result)` and its digest by that result's digest; a digest-only reply gets a
/// different digest. The replica's own state, log, reply cache and votes are untouched.
/// Used by the fault tests (`byzfs replica --byzantine lie-replies`) to check that clients
/// accept only what f+1 (2f+1 for tentative and read-only replies) replicas agree on.
#[derive(Clone)]
pub struct LieToClients {
    /// Maps a true result to the lie sent in its place (should differ from the input).
    pub corrupt: Arc<CorruptResult>,
    /// Lies told so far.
    pub told: Arc<LiesTold>,
}

/// How a test liar turns a true result into a lie.
pub type CorruptResult = dyn Fn(&[u8]) -> Vec<u8> + Send + Sync;

/// Counts of a test liar's lies ([`LieToClients`]).
#[derive(Debug, Default)]
pub struct LiesTold {
    /// Full results at most `full_reply_threshold` bytes long (every replica sends those).
    pub full_small: AtomicU64,
    /// Full results above the threshold: sent as the designated replier (or when the client
    /// asked every replica for the full result).
    pub full_large: AtomicU64,
    /// Digest-only replies (another replica was the designated replier).
    pub digest_only: AtomicU64,
}

impl LieToClients {
    /// A liar that replaces results by `corrupt(result)`.
    pub fn new(corrupt: impl Fn(&[u8]) -> Vec<u8> + Send + Sync + 'static) -> LieToClients {
        LieToClients {
            corrupt: Arc::new(corrupt),
            told: Arc::default(),
        }
    }
}

impl std::fmt::Debug for LieToClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LieToClients")
            .field("told", &self.told)
            .finish_non_exhaustive()
    }
}

/// Test-only fault injection ([`LieToClients`]): `bytes`, a REPLY to a client, with a
/// wrong result, re-authenticated with the client's key so that it is a believable lie.
/// Anything else (or without a key) is passed through.
pub(super) fn lie(
    liar: &LieToClients,
    key: Option<&byzfs_bft::MacKey>,
    shared: &super::Shared,
    bytes: Arc<[u8]>,
) -> Arc<[u8]> {
    use byzfs_bft::message::Message;
    use byzfs_bft::wire::{self, Auth, Envelope, Frame};
    use std::sync::atomic::Ordering;
    let Some(key) = key else { return bytes };
    let Ok(frame) = Frame::parse(&bytes, usize::MAX) else {
        return bytes;
    };
    let Ok(Message::Reply(mut r)) = frame.decode() else {
        return bytes;
    };
    match r.result.take() {
        Some(truth) => {
            let lie = (liar.corrupt)(&truth);
            r.result_digest = byzfs_bft::Digest::of(&lie);
            r.result = Some(lie);
            if truth.len() > shared.cluster.bft.full_reply_threshold {
                &liar.told.full_large
            } else {
                &liar.told.full_small
            }
            .fetch_add(1, Ordering::Relaxed);
        }
        None => {
            let mut d = r.result_digest.0;
            d[0] ^= 0x80;
            d[31] ^= 0x01;
            r.result_digest = byzfs_bft::Digest(d);
            liar.told.digest_only.fetch_add(1, Ordering::Relaxed);
        }
    }
    tracing::debug!(
        replica = shared.me,
        client = r.client,
        rid = r.rid,
        full = r.result.is_some(),
        "byzantine test mode: lied to a client"
    );
    let env = Envelope::new(frame.header.sender, frame.header.epoch);
    wire::encode(env, &Message::Reply(r), Auth::Mac(key)).into()
}
