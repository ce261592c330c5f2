//! Re-authentication with one replica's own keys: open a frame the honest code produced, and
//! seal an altered message the way the original was authenticated (authenticator, single MAC
//! for the destination, or signature). MACs of other principals and other replicas'
//! signatures cannot be produced — embedded frames (client requests in a batch, VIEW-CHANGEs in
//! a NEW-VIEW) can only be reordered, dropped or replayed.

use super::Dest;
use byzfs_bft::message::Message;
use byzfs_bft::wire::{encode, Auth, AuthKind, Envelope, Frame, Header};
use byzfs_bft::{Principal, ReplicaId, ReplicaKeys};
use std::sync::Arc;

/// One replica's forging kit.
#[derive(Clone, Debug)]
pub struct Forger {
    keys: ReplicaKeys,
    max_frame: usize,
}

impl Forger {
    /// A forger holding `keys`.
    pub fn new(keys: ReplicaKeys, max_frame: usize) -> Forger {
        Forger { keys, max_frame }
    }

    /// The replica whose keys these are.
    pub fn me(&self) -> ReplicaId {
        self.keys.me
    }

    /// Parses and decodes a frame.
    pub fn open(&self, bytes: &[u8]) -> Option<(Header, Message)> {
        let f = Frame::parse(bytes, self.max_frame).ok()?;
        let m = f.decode().ok()?;
        Some((f.header, m))
    }

    /// Encodes `msg` from this replica for `to`, authenticated like `orig`.
    pub fn seal(&self, orig: &Header, msg: &Message, to: Dest) -> Arc<[u8]> {
        let env = Envelope {
            sender: Principal::Replica(self.keys.me),
            epoch: orig.epoch,
            flags: orig.flags,
            replier: orig.replier,
        };
        let auth = match (orig.auth, to) {
            (AuthKind::None, _) => Auth::None,
            // Replicas never send signed authenticators (clients' requests carry them, and a
            // replica cannot sign for a client): reseal with our own authenticator.
            (AuthKind::Authenticator | AuthKind::SignedAuthenticator, _) => {
                Auth::Authenticator(&self.keys.to_replica)
            }
            (AuthKind::Mac, Dest::Replica(j)) => match self.keys.to_replica.get(j as usize) {
                Some(k) => Auth::Mac(k),
                None => Auth::None,
            },
            (AuthKind::Mac, Dest::Client(c)) => match self.keys.clients.get(&c) {
                Some((to_client, _)) => Auth::Mac(to_client),
                None => Auth::None,
            },
            (AuthKind::Signature, _) => Auth::Signature(&self.keys.signing),
        };
        encode(env, msg, auth).into()
    }

    /// A new message from this replica, signed (VIEW-CHANGE, NEW-VIEW).
    pub fn sign(&self, epoch: u32, msg: &Message) -> Arc<[u8]> {
        encode(
            Envelope::new(Principal::Replica(self.keys.me), epoch),
            msg,
            Auth::Signature(&self.keys.signing),
        )
        .into()
    }

    /// `msg` under replica `as_`'s name, for `to`: the header says `as_`, the authentication
    /// has the kind `kind` but is made with this replica's own keys (or is absent for
    /// [`AuthKind::None`]) — all a faulty replica can do, and never valid.
    pub fn impersonate(
        &self,
        as_: ReplicaId,
        epoch: u32,
        msg: &Message,
        kind: AuthKind,
        to: Dest,
    ) -> Arc<[u8]> {
        let env = Envelope::new(Principal::Replica(as_), epoch);
        let auth = match (kind, to) {
            (AuthKind::Authenticator | AuthKind::SignedAuthenticator, _) => {
                Auth::Authenticator(&self.keys.to_replica)
            }
            (AuthKind::Mac, Dest::Replica(j)) => match self.keys.to_replica.get(j as usize) {
                Some(k) => Auth::Mac(k),
                None => Auth::None,
            },
            (AuthKind::Signature, _) => Auth::Signature(&self.keys.signing),
            _ => Auth::None,
        };
        encode(env, msg, auth).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use byzfs_bft::message::Prepare;
    use byzfs_bft::{Digest, TestKeys};

    fn prepare(replica: ReplicaId) -> Message {
        Message::Prepare(Prepare {
            view: 0,
            seq: 1,
            digest: Digest::ZERO,
            replica,
        })
    }

    #[test]
    fn impersonated_frames_never_verify() {
        let tk = TestKeys::new(5, 4);
        let fg = Forger::new(tk.replica(1, [9]), 1 << 20);
        let p = prepare(3);
        let r2 = tk.replica(2, []);
        for kind in [AuthKind::Authenticator, AuthKind::Mac, AuthKind::Signature] {
            let forged = fg.impersonate(3, 0, &p, kind, Dest::Replica(2));
            let f = Frame::parse(&forged, 1 << 20).expect("parses");
            assert_eq!(f.header.sender, Principal::Replica(3));
            assert_eq!(f.header.auth, kind);
            let ok = match kind {
                AuthKind::Authenticator => f.verify_mac(&r2.from_replica[3], 2),
                AuthKind::Mac => f.verify_mac(&r2.from_replica[3], 0),
                _ => f.verify_signature(&r2.replica_public[3]),
            };
            assert!(!ok, "{kind:?}");
        }
    }

    #[test]
    fn resealed_frames_verify_for_their_receiver() {
        let tk = TestKeys::new(5, 4);
        let fg = Forger::new(tk.replica(1, [9]), 1 << 20);
        let p = prepare(1);
        let orig = encode(
            Envelope::new(Principal::Replica(1), 0),
            &p,
            Auth::Authenticator(&tk.replica(1, []).to_replica),
        );
        let (h, mut m) = fg.open(&orig).expect("parses");
        if let Message::Prepare(p) = &mut m {
            p.seq = 2;
        }
        let forged = fg.seal(&h, &m, Dest::Replica(2));
        let f = Frame::parse(&forged, 1 << 20).expect("parses");
        let r2 = tk.replica(2, []);
        assert!(f.verify_mac(&r2.from_replica[1], 2));
        assert!(matches!(
            f.decode(),
            Ok(Message::Prepare(Prepare { seq: 2, .. }))
        ));
    }
}
