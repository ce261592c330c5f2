//! Authentication of what a replica receives and sends (docs/PROTOCOL.md §1.3, §5.3; ARCHITECTURE.md
//! "Crypto" and Deviations 1 and 5): each message kind carries the authentication its role
//! needs, client requests are MAC'd and signed (signatures checked lazily, once per digest),
//! and outgoing frames are encoded with an authenticator, a MAC or a signature.

use super::{Replica, M};
use crate::crypto::Digest;
use crate::ids::{ClientId, Principal, ReplicaId};
use crate::message::Message;
use crate::service::Service;
use crate::wire::{Auth, AuthKind, Envelope, Frame};
use std::sync::Arc;

/// How to authenticate an outgoing replica message.
#[derive(Clone, Copy)]
pub(super) enum AuthChoice {
    Authenticator,
    MacTo(ReplicaId),
    Signature,
}

impl<S: Service> Replica<S> {
    /// Checks a frame's authentication: replicas' normal-case traffic carries an authenticator
    /// (our slot is checked), VIEW-CHANGE and NEW-VIEW a signature, clients' requests an
    /// authenticator, point-to-point replica messages a single MAC.
    pub(super) fn authentic(&self, frame: &Frame<'_>) -> bool {
        use crate::message::Tag;
        // Each kind carries the authentication its role needs: VIEW-CHANGE and NEW-VIEW are
        // signed (NEW-VIEW forwards them as proof), multicasts carry authenticators (so they
        // can be relayed), point-to-point answers a single MAC.
        let kind_ok = match frame.header.tag {
            Tag::ViewChange | Tag::NewView => frame.header.auth == AuthKind::Signature,
            Tag::Request => matches!(
                frame.header.auth,
                AuthKind::Authenticator | AuthKind::SignedAuthenticator
            ),
            Tag::PrePrepare | Tag::Prepare | Tag::Commit | Tag::Status => {
                frame.header.auth == AuthKind::Authenticator
            }
            Tag::Checkpoint => matches!(frame.header.auth, AuthKind::Authenticator | AuthKind::Mac),
            Tag::Fetch | Tag::BatchData | Tag::StateMeta | Tag::StatePart => {
                frame.header.auth == AuthKind::Mac
            }
            Tag::Reply => false,
        };
        if !kind_ok {
            return false;
        }
        match frame.header.sender {
            Principal::Replica(j) => {
                let j = j as usize;
                if j >= self.n() || j == self.me as usize {
                    return false;
                }
                if self.mutated(M::SkipReplicaAuth) {
                    return true;
                }
                match frame.header.auth {
                    AuthKind::Signature => frame.verify_signature(&self.keys.replica_public[j]),
                    AuthKind::Authenticator => {
                        frame.header.auth_len as usize == self.n() * crate::crypto::MAC_LEN
                            && frame.verify_mac(&self.keys.from_replica[j], self.me as usize)
                    }
                    AuthKind::Mac => frame.verify_mac(&self.keys.from_replica[j], 0),
                    AuthKind::None | AuthKind::SignedAuthenticator => false,
                }
            }
            // Client authentication is checked in `on_request` (MAC first, then the signature
            // where needed), because a request whose MAC fails for us may still be accepted on
            // its signature (§5.3) or inside a pre-prepare (§1.14).
            Principal::Client(_) => matches!(
                frame.header.auth,
                AuthKind::Authenticator | AuthKind::SignedAuthenticator
            ),
        }
    }

    /// Whether `c` signs its requests (we hold its public key).
    pub(super) fn client_signs(&self, c: ClientId) -> bool {
        self.keys.client_public.contains_key(&c)
    }

    /// Whether a client's request frame has the authentication its client uses — a signed
    /// authenticator with one MAC per replica if it signs, a plain authenticator if it is
    /// MAC-only — and a valid MAC for this replica. A signing client's read-only request may
    /// carry a plain authenticator: it is executed on our MAC alone, never forwarded or
    /// ordered (`on_request` still asks for the signature if it must order it). The MAC is
    /// the cheap first check; only a signature is transferable.
    pub(super) fn client_mac_ok(&self, frame: &Frame<'_>) -> bool {
        let Principal::Client(c) = frame.header.sender else {
            return false;
        };
        let Some((_, from_client)) = self.keys.clients.get(&c) else {
            return false;
        };
        let macs = self.n() * crate::crypto::MAC_LEN;
        let plain =
            frame.header.auth == AuthKind::Authenticator && frame.header.auth_len as usize == macs;
        let shape_ok = if self.client_signs(c) {
            let read_only = frame.header.flags & crate::client::FLAG_READ_ONLY != 0;
            (frame.header.auth == AuthKind::SignedAuthenticator
                && frame.header.auth_len as usize == crate::crypto::SIG_LEN + macs)
                || (plain && read_only)
        } else {
            plain
        };
        shape_ok && frame.verify_mac(from_client, self.me as usize)
    }

    /// Whether a signing client's request frame carries a valid signature (the expensive,
    /// transferable check; counted).
    pub(super) fn client_signature_ok(&mut self, frame: &Frame<'_>) -> bool {
        let Principal::Client(c) = frame.header.sender else {
            return false;
        };
        let Some(key) = self.keys.client_public.get(&c) else {
            return false;
        };
        let macs = self.n() * crate::crypto::MAC_LEN;
        if frame.header.auth != AuthKind::SignedAuthenticator
            || frame.header.auth_len as usize != crate::crypto::SIG_LEN + macs
        {
            return false;
        }
        self.stats.client_signatures_verified += 1;
        frame.verify_signed_authenticator(key)
    }

    /// Authenticates a signing client's request for a use that must be transferable (ordering,
    /// forwarding, the view-change timer): the signature must verify. A bad signature under a
    /// good MAC proves the client faulty and blacklists it (§5.3).
    pub(super) fn client_request_signed(&mut self, frame: &Frame<'_>, mac_ok: bool) -> bool {
        if self.client_signature_ok(frame) {
            return true;
        }
        // Only a signature that fails proves the client faulty: an unsigned read-only frame
        // under a good MAC is merely not enough to order (a replica that does not treat the
        // operation as read-only asks for the signed retransmission by dropping it).
        let signed = frame.header.auth == AuthKind::SignedAuthenticator;
        if let (true, true, Principal::Client(c)) = (mac_ok, signed, frame.header.sender) {
            if self.requests.blacklist.insert(c) {
                self.stats.clients_blacklisted += 1;
                tracing::info!(
                    replica = self.me,
                    client = c,
                    "client blacklisted: bad signature"
                );
            }
        }
        false
    }

    /// Whether stored request `d` may be vouched for: its signature was checked, or is
    /// checked now (deferred by a backup, `on_request`). One that fails is forgotten (and its
    /// client blacklisted if our MAC verified): it is neither proposed nor waited for.
    pub(super) fn signature_checked(&mut self, d: Digest) -> bool {
        let Some(r) = self.requests.store.get(&d) else {
            return false;
        };
        if r.sig_checked {
            return true;
        }
        let (bytes, c) = (r.frame.clone(), r.client);
        let ok = match Frame::parse(&bytes, self.config.message_bytes_max) {
            Ok(f) => {
                let mac_ok = self.client_mac_ok(&f);
                self.client_request_signed(&f, mac_ok)
            }
            Err(_) => false,
        };
        if ok {
            if let Some(r) = self.requests.store.get_mut(&d) {
                r.sig_checked = true;
            }
        } else {
            // A body a logged batch names stays: our MAC vouched for it, and execution needs it.
            if !self.body_in_log(&d) {
                self.requests.store.remove(&d);
            }
            if self
                .requests
                .pending
                .get(&c)
                .is_some_and(|&(_, pd)| pd == d)
            {
                self.requests.pending.remove(&c);
                self.monitor_served(c);
            }
        }
        ok
    }

    /// Before the view-change timer moves us on: checks the deferred signatures of the pending
    /// requests (forgetting those that fail). Whether any pending request remains to justify a
    /// view change; a faulty client's badly signed request alone must not (Aardvark's
    /// framing of the primary, docs/PROTOCOL.md §5.3).
    pub(super) fn pending_signatures_checked(&mut self) -> bool {
        let pending: Vec<Digest> = self.requests.pending.values().map(|&(_, d)| d).collect();
        for d in pending {
            // One that fails leaves `pending` (see `signature_checked`).
            if self.requests.store.contains_key(&d) {
                self.signature_checked(d);
            }
        }
        !self.requests.pending.is_empty()
    }

    pub(super) fn encode(&self, msg: &Message, auth: AuthChoice) -> Arc<[u8]> {
        let env = Envelope::new(Principal::Replica(self.me), self.config.epoch);
        let auth = match auth {
            AuthChoice::Authenticator => Auth::Authenticator(&self.keys.to_replica),
            AuthChoice::MacTo(j) => Auth::Mac(&self.keys.to_replica[j as usize]),
            AuthChoice::Signature => Auth::Signature(&self.keys.signing),
        };
        crate::wire::encode(env, msg, auth).into()
    }
}
