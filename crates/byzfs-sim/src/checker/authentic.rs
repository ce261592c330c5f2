//! No correct replica acts on a frame a replica never sent (docs/PROTOCOL.md §1.3, §6.6): a frame
//! whose header names replica `j` as its sender but that no instance of `j` ever put on the
//! network — an impersonator's forgery, or one the network corrupted — must be dropped by
//! the correct replica it reaches, in the step that receives it.
//!
//! What a replica sent is recorded by its header: MACs and signatures cover the header,
//! which holds the body's digest, so a frame is genuine exactly when its header is one that
//! replica emitted (relays of genuine frames, such as VIEW-CHANGEs inside STATUS answers,
//! stay genuine; an authenticator entry damaged for another receiver does not matter).

use super::Sink;
use byzfs_bft::wire::HEADER_LEN;
use byzfs_bft::{ReplicaId, Time};
use std::collections::{BTreeMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};

/// Checker name.
pub const NAME: &str = "authentic";

/// The replica that a frame's header names as its sender, if it names a replica.
pub fn claimed_replica(bytes: &[u8]) -> Option<ReplicaId> {
    let h = bytes.get(..HEADER_LEN)?;
    if h[4] != 0 {
        return None;
    }
    let mut id = [0u8; 8];
    id.copy_from_slice(&h[8..16]);
    ReplicaId::try_from(u64::from_le_bytes(id)).ok()
}

fn header_key(bytes: &[u8]) -> Option<u64> {
    let h = bytes.get(..HEADER_LEN)?;
    // `DefaultHasher::new()` has fixed keys: the same in every run.
    let mut s = DefaultHasher::new();
    h.hash(&mut s);
    Some(s.finish())
}

/// The authenticity checker.
#[derive(Clone, Debug, Default)]
pub struct Authentic {
    /// Headers of every frame a replica instance sent under its own name, hashed.
    emitted: HashSet<u64>,
    /// Per correct instance, the forged frame its current step received and has not dropped.
    pending: BTreeMap<usize, String>,
}

impl Authentic {
    /// An instance of replica `id` put `bytes` on the network (a relay of another
    /// replica's frame, or a forgery, adds nothing).
    pub fn on_emit(&mut self, id: ReplicaId, bytes: &[u8]) {
        if claimed_replica(bytes) != Some(id) {
            return;
        }
        if let Some(k) = header_key(bytes) {
            self.emitted.insert(k);
        }
    }

    /// Whether `bytes` claims to come from a replica that never sent its header: `Some(j)`,
    /// the replica it claims to be, if so.
    pub fn forged(&self, bytes: &[u8]) -> Option<ReplicaId> {
        let j = claimed_replica(bytes)?;
        let k = header_key(bytes)?;
        (!self.emitted.contains(&k)).then_some(j)
    }

    /// Correct `inst` is about to take forged frame `what` (see [`Authentic::forged`]).
    pub fn expect_drop(&mut self, inst: usize, what: String) {
        self.pending.insert(inst, what);
    }

    /// `inst` dropped its input.
    pub fn on_dropped(&mut self, inst: usize) {
        self.pending.remove(&inst);
    }

    /// After a step of correct `inst`: a forged input it did not drop is a violation.
    pub fn on_step_end(&mut self, sink: &mut Sink, now: Time, inst: usize) {
        if let Some(what) = self.pending.remove(&inst) {
            sink.report(
                NAME,
                now,
                format!("r{inst} took a frame its claimed sender never sent: {what}"),
            );
        }
    }

    /// `inst` restarted: a step cut short by a crash judges nothing.
    pub fn on_restart(&mut self, inst: usize) {
        self.pending.remove(&inst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use byzfs_bft::message::{Message, Prepare};
    use byzfs_bft::wire::{encode, Auth, Envelope};
    use byzfs_bft::{Digest, Principal};

    fn prepare(sender: ReplicaId, replica: ReplicaId, seq: u64) -> Vec<u8> {
        let m = Message::Prepare(Prepare {
            view: 0,
            seq,
            digest: Digest::ZERO,
            replica,
        });
        encode(Envelope::new(Principal::Replica(sender), 0), &m, Auth::None)
    }

    #[test]
    fn a_forged_frame_must_be_dropped_in_its_step() {
        let mut a = Authentic::default();
        let mut s = Sink::new(1, "t");
        let genuine = prepare(2, 2, 1);
        a.on_emit(2, &genuine);
        assert_eq!(a.forged(&genuine), None);
        let forged = prepare(2, 2, 7);
        a.on_emit(1, &forged);
        assert_eq!(a.forged(&forged), Some(2), "emitted by r1 under r2's name");
        a.expect_drop(0, "PREPARE".into());
        a.on_dropped(0);
        a.on_step_end(&mut s, Time(0), 0);
        assert!(!s.any());
        a.expect_drop(0, "PREPARE".into());
        a.on_step_end(&mut s, Time(0), 0);
        assert_eq!(
            s.violations()[0].message,
            "r0 took a frame its claimed sender never sent: PREPARE"
        );
    }

    #[test]
    fn a_damaged_authentication_trailer_keeps_a_frame_genuine() {
        let mut a = Authentic::default();
        let mut f = prepare(1, 1, 3);
        a.on_emit(1, &f);
        f.extend_from_slice(&[0xAB; 8]);
        assert_eq!(a.forged(&f), None);
    }
}
