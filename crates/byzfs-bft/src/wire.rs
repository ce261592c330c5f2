//! The wire format: one fixed 64-byte header, a postcard body, then the authentication.
//!
//! ```text
//!  0..2   magic "BZ"          2  version (1)        3  tag
//!  4      sender kind (0 replica, 1 client)         5  flags (request: bit 0 = read-only)
//!  6      replier (request: designated replier, 0xFF = everyone)
//!  7      auth kind (0 none, 1 authenticator, 2 one MAC, 3 signature,
//!         4 signed authenticator)
//!  8..16  sender id (u64 LE)   16..20 epoch (u32)   20..24 body length (u32)
//! 24..28  auth length (u32)    28..32 zero          32..64 BLAKE3 digest of the body
//! ```
//!
//! MACs and signatures cover the header only; the header binds the body through its digest,
//! so a large body is hashed once, not once per receiver. A *signed authenticator* (client
//! requests, docs/PROTOCOL.md §5.3) is `signature ‖ MAC_0 ‖ … ‖ MAC_{n-1}`: the Ed25519 signature
//! covers the header, and each MAC covers `header ‖ signature`, so a receiver whose MAC checks
//! knows the client itself produced the signature (a bad one proves the client faulty). Sizes are checked before the body
//! is touched (docs/STYLE.md §8) and the body digest before it is decoded. Decoding never panics:
//! every failure is a [`DecodeError`].

use crate::crypto::{Digest, MacKey, MAC_LEN, SIG_LEN};
use crate::ids::Principal;
use crate::message::*;
use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Header length in bytes.
pub const HEADER_LEN: usize = 64;
const MAGIC: [u8; 2] = *b"BZ";
const VERSION: u8 = 1;
/// Replier byte meaning "every replica sends the full reply".
pub const REPLIER_ALL: u8 = 0xFF;

/// Why a frame was rejected. Each variant is a counted drop reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Shorter than a header.
    #[error("frame shorter than the header")]
    Truncated,
    /// Bad magic or version.
    #[error("bad magic or unsupported version")]
    BadVersion,
    /// Unknown tag or sender kind, or non-zero reserved bytes.
    #[error("unknown tag or malformed header field")]
    BadHeader,
    /// Declared lengths do not add up to the frame length, or exceed the limit.
    #[error("declared lengths do not match the frame")]
    BadLength,
    /// The body does not hash to the header's body digest.
    #[error("body digest mismatch")]
    BadDigest,
    /// The body does not decode as the tagged message.
    #[error("body does not decode")]
    BadBody,
    /// A message from another configuration epoch.
    #[error("wrong configuration epoch")]
    WrongEpoch,
}

/// How a frame is authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthKind {
    /// Unauthenticated (never accepted by a replica; used by tests and fuzzers).
    None = 0,
    /// A vector of MACs, one per replica, indexed by replica id.
    Authenticator = 1,
    /// A single MAC for one receiver.
    Mac = 2,
    /// An Ed25519 signature.
    Signature = 3,
    /// An Ed25519 signature over the header followed by a vector of MACs, one per replica,
    /// each over `header ‖ signature` (client requests).
    SignedAuthenticator = 4,
}

/// The decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Message kind.
    pub tag: Tag,
    /// The claimed sender (authenticated only once a MAC or signature checks).
    pub sender: Principal,
    /// Request flags (bit 0: read-only).
    pub flags: u8,
    /// Request: designated replier, or [`REPLIER_ALL`].
    pub replier: u8,
    /// Authentication kind.
    pub auth: AuthKind,
    /// Configuration epoch.
    pub epoch: u32,
    /// Body length.
    pub body_len: u32,
    /// Authentication length.
    pub auth_len: u32,
    /// Digest of the body (for a request, the request digest).
    pub body_digest: Digest,
}

/// A parsed frame borrowing the received bytes: header checked, body digest checked, body not
/// yet decoded, authentication not yet verified.
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    /// The header.
    pub header: Header,
    /// The raw header bytes (what MACs and signatures cover).
    pub header_bytes: &'a [u8],
    /// The raw body.
    pub body: &'a [u8],
    /// The raw authentication bytes.
    pub auth: &'a [u8],
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl<'a> Frame<'a> {
    /// Parses and length-checks a frame of at most `max_len` bytes and checks its body digest.
    pub fn parse(bytes: &'a [u8], max_len: usize) -> Result<Frame<'a>, DecodeError> {
        if bytes.len() < HEADER_LEN {
            return Err(DecodeError::Truncated);
        }
        if bytes.len() > max_len {
            return Err(DecodeError::BadLength);
        }
        let h = &bytes[..HEADER_LEN];
        if h[0..2] != MAGIC || h[2] != VERSION {
            return Err(DecodeError::BadVersion);
        }
        let tag = Tag::from_u8(h[3]).ok_or(DecodeError::BadHeader)?;
        let mut id = [0u8; 8];
        id.copy_from_slice(&h[8..16]);
        let id = u64::from_le_bytes(id);
        let sender = match h[4] {
            0 if id < crate::config::MAX_REPLICAS as u64 => Principal::Replica(id as u32),
            1 => Principal::Client(id),
            _ => return Err(DecodeError::BadHeader),
        };
        let auth = match h[7] {
            0 => AuthKind::None,
            1 => AuthKind::Authenticator,
            2 => AuthKind::Mac,
            3 => AuthKind::Signature,
            4 => AuthKind::SignedAuthenticator,
            _ => return Err(DecodeError::BadHeader),
        };
        if h[28..32] != [0, 0, 0, 0] {
            return Err(DecodeError::BadHeader);
        }
        let epoch = u32_at(h, 16);
        let body_len = u32_at(h, 20);
        let auth_len = u32_at(h, 24);
        let auth_ok = match auth {
            AuthKind::None => auth_len == 0,
            AuthKind::Authenticator => {
                (auth_len as usize).is_multiple_of(MAC_LEN)
                    && (auth_len as usize / MAC_LEN) <= crate::config::MAX_REPLICAS
            }
            AuthKind::Mac => auth_len as usize == MAC_LEN,
            AuthKind::Signature => auth_len as usize == SIG_LEN,
            AuthKind::SignedAuthenticator => {
                (auth_len as usize).checked_sub(SIG_LEN).is_some_and(|m| {
                    m.is_multiple_of(MAC_LEN) && m / MAC_LEN <= crate::config::MAX_REPLICAS
                })
            }
        };
        if !auth_ok {
            return Err(DecodeError::BadLength);
        }
        let total = HEADER_LEN as u64 + body_len as u64 + auth_len as u64;
        if total != bytes.len() as u64 {
            return Err(DecodeError::BadLength);
        }
        let body_end = HEADER_LEN + body_len as usize;
        let body = &bytes[HEADER_LEN..body_end];
        let mut d = [0u8; 32];
        d.copy_from_slice(&h[32..64]);
        let body_digest = Digest(d);
        if Digest::of(body) != body_digest {
            return Err(DecodeError::BadDigest);
        }
        Ok(Frame {
            header: Header {
                tag,
                sender,
                flags: h[5],
                replier: h[6],
                auth,
                epoch,
                body_len,
                auth_len,
                body_digest,
            },
            header_bytes: h,
            body,
            auth: &bytes[body_end..],
        })
    }

    /// Decodes the body as the message its tag names.
    pub fn decode(&self) -> Result<Message, DecodeError> {
        fn de<T: DeserializeOwned>(b: &[u8]) -> Result<T, DecodeError> {
            match postcard::take_from_bytes::<T>(b) {
                Ok((v, [])) => Ok(v),
                _ => Err(DecodeError::BadBody),
            }
        }
        let b = self.body;
        Ok(match self.header.tag {
            Tag::Request => {
                let r: Request = de(b)?;
                if canonical_request_len(r.client, r.rid, r.acked, r.after, r.op.len()) != b.len() {
                    return Err(DecodeError::BadBody);
                }
                Message::Request(r)
            }
            Tag::Reply => Message::Reply(de(b)?),
            Tag::PrePrepare => Message::PrePrepare(de(b)?),
            Tag::Prepare => Message::Prepare(de(b)?),
            Tag::Commit => Message::Commit(de(b)?),
            Tag::Checkpoint => Message::Checkpoint(de(b)?),
            Tag::ViewChange => Message::ViewChange(de(b)?),
            Tag::NewView => Message::NewView(de(b)?),
            Tag::Status => Message::Status(de(b)?),
            Tag::Fetch => Message::Fetch(de(b)?),
            Tag::BatchData => Message::BatchData(de(b)?),
            Tag::StateMeta => Message::StateMeta(de(b)?),
            Tag::StatePart => Message::StatePart(de(b)?),
        })
    }

    /// Checks the MAC meant for receiver slot `slot` (an authenticator's entry, or the single
    /// MAC when `auth` is [`AuthKind::Mac`]; for a signed authenticator the entry covers the
    /// header and the signature).
    pub fn verify_mac(&self, key: &MacKey, slot: usize) -> bool {
        let entry = |base: usize| {
            let start = slot.checked_mul(MAC_LEN)?.checked_add(base)?;
            self.auth.get(start..start.checked_add(MAC_LEN)?)
        };
        match self.header.auth {
            AuthKind::Authenticator => {
                entry(0).is_some_and(|mac| key.verify(self.header_bytes, mac))
            }
            AuthKind::Mac => key.verify(self.header_bytes, self.auth),
            AuthKind::SignedAuthenticator => match (self.auth.get(..SIG_LEN), entry(SIG_LEN)) {
                (Some(sig), Some(mac)) => key.verify2(self.header_bytes, sig, mac),
                _ => false,
            },
            AuthKind::None | AuthKind::Signature => false,
        }
    }

    /// Checks the frame's signature against `key` (a frame authenticated by a signature only).
    pub fn verify_signature(&self, key: &VerifyingKey) -> bool {
        self.header.auth == AuthKind::Signature
            && crate::crypto::verify_signature(key, self.header_bytes, self.auth)
    }

    /// Checks the signature of a signed authenticator (a client request) against `key`.
    pub fn verify_signed_authenticator(&self, key: &VerifyingKey) -> bool {
        self.header.auth == AuthKind::SignedAuthenticator
            && self
                .auth
                .get(..SIG_LEN)
                .is_some_and(|sig| crate::crypto::verify_signature(key, self.header_bytes, sig))
    }

    /// The number of MAC entries of an authenticator or signed authenticator (0 otherwise).
    pub fn mac_entries(&self) -> usize {
        match self.header.auth {
            AuthKind::Authenticator => self.auth.len() / MAC_LEN,
            AuthKind::SignedAuthenticator => self.auth.len().saturating_sub(SIG_LEN) / MAC_LEN,
            AuthKind::None | AuthKind::Mac | AuthKind::Signature => 0,
        }
    }
}

/// How to authenticate a frame being encoded.
pub enum Auth<'k> {
    /// No authentication.
    None,
    /// One MAC per key, in order (an authenticator for replicas `0..n`).
    Authenticator(&'k [MacKey]),
    /// One MAC for a single receiver.
    Mac(&'k MacKey),
    /// An Ed25519 signature.
    Signature(&'k SigningKey),
    /// A signature over the header, then one MAC per key over `header ‖ signature`.
    SignedAuthenticator(&'k SigningKey, &'k [MacKey]),
}

/// Header fields chosen by the encoder.
#[derive(Clone, Copy, Debug)]
pub struct Envelope {
    /// Sender.
    pub sender: Principal,
    /// Configuration epoch.
    pub epoch: u32,
    /// Request flags.
    pub flags: u8,
    /// Request replier.
    pub replier: u8,
}

impl Envelope {
    /// An envelope with no request fields.
    pub fn new(sender: Principal, epoch: u32) -> Envelope {
        Envelope {
            sender,
            epoch,
            flags: 0,
            replier: REPLIER_ALL,
        }
    }
}

/// Serialises the body of `msg`.
pub fn encode_body(msg: &Message) -> Vec<u8> {
    fn ser<T: Serialize>(v: &T) -> Vec<u8> {
        // Serialising plain owned data into a Vec cannot fail: postcard errors only on
        // unsupported types (none here) or a full fixed buffer (a Vec grows).
        postcard::to_allocvec(v).expect("postcard serialisation into a Vec is infallible")
    }
    match msg {
        Message::Request(m) => ser(m),
        Message::Reply(m) => ser(m),
        Message::PrePrepare(m) => ser(m),
        Message::Prepare(m) => ser(m),
        Message::Commit(m) => ser(m),
        Message::Checkpoint(m) => ser(m),
        Message::ViewChange(m) => ser(m),
        Message::NewView(m) => ser(m),
        Message::Status(m) => ser(m),
        Message::Fetch(m) => ser(m),
        Message::BatchData(m) => ser(m),
        Message::StateMeta(m) => ser(m),
        Message::StatePart(m) => ser(m),
    }
}

/// Builds a complete frame: header, body, authentication. The body is serialised straight
/// into the frame buffer and hashed there (no intermediate copy).
pub fn encode(env: Envelope, msg: &Message, auth: Auth<'_>) -> Vec<u8> {
    fn ser<T: Serialize>(v: &T, out: Vec<u8>) -> Vec<u8> {
        // Serialising plain owned data into a Vec cannot fail (see `encode_body`).
        postcard::to_extend(v, out).expect("postcard serialisation into a Vec is infallible")
    }
    let mut out = vec![0u8; HEADER_LEN];
    out = match msg {
        Message::Request(m) => ser(m, out),
        Message::Reply(m) => ser(m, out),
        Message::PrePrepare(m) => ser(m, out),
        Message::Prepare(m) => ser(m, out),
        Message::Commit(m) => ser(m, out),
        Message::Checkpoint(m) => ser(m, out),
        Message::ViewChange(m) => ser(m, out),
        Message::NewView(m) => ser(m, out),
        Message::Status(m) => ser(m, out),
        Message::Fetch(m) => ser(m, out),
        Message::BatchData(m) => ser(m, out),
        Message::StateMeta(m) => ser(m, out),
        Message::StatePart(m) => ser(m, out),
    };
    let body_len = out.len() - HEADER_LEN;
    let digest = Digest::of(&out[HEADER_LEN..]);
    let header = header_bytes(env, msg.tag(), body_len, digest, &auth);
    out[..HEADER_LEN].copy_from_slice(&header);
    append_auth(&mut out, &header, auth);
    out
}

/// Builds a frame around an already-serialised body whose digest is known (lets a client
/// re-authenticate a request without re-hashing it).
pub fn encode_with_body(
    env: Envelope,
    tag: Tag,
    body: &[u8],
    body_digest: Digest,
    auth: Auth<'_>,
) -> Vec<u8> {
    let header = header_bytes(env, tag, body.len(), body_digest, &auth);
    let mut out = Vec::with_capacity(HEADER_LEN + body.len() + auth_len(&auth).1);
    out.extend_from_slice(&header);
    out.extend_from_slice(body);
    append_auth(&mut out, &header, auth);
    out
}

fn auth_len(auth: &Auth<'_>) -> (AuthKind, usize) {
    match auth {
        Auth::None => (AuthKind::None, 0),
        Auth::Authenticator(keys) => (AuthKind::Authenticator, keys.len() * MAC_LEN),
        Auth::Mac(_) => (AuthKind::Mac, MAC_LEN),
        Auth::Signature(_) => (AuthKind::Signature, SIG_LEN),
        Auth::SignedAuthenticator(_, keys) => (
            AuthKind::SignedAuthenticator,
            SIG_LEN + keys.len() * MAC_LEN,
        ),
    }
}

fn header_bytes(
    env: Envelope,
    tag: Tag,
    body_len: usize,
    body_digest: Digest,
    auth: &Auth<'_>,
) -> [u8; HEADER_LEN] {
    let (kind, alen) = auth_len(auth);
    let (sk, id) = match env.sender {
        Principal::Replica(r) => (0u8, r as u64),
        Principal::Client(c) => (1u8, c),
    };
    let mut h = [0u8; HEADER_LEN];
    h[0..2].copy_from_slice(&MAGIC);
    h[2] = VERSION;
    h[3] = tag as u8;
    h[4] = sk;
    h[5] = env.flags;
    h[6] = env.replier;
    h[7] = kind as u8;
    h[8..16].copy_from_slice(&id.to_le_bytes());
    h[16..20].copy_from_slice(&env.epoch.to_le_bytes());
    h[20..24].copy_from_slice(&(body_len as u32).to_le_bytes());
    h[24..28].copy_from_slice(&(alen as u32).to_le_bytes());
    h[32..64].copy_from_slice(&body_digest.0);
    h
}

fn append_auth(out: &mut Vec<u8>, header: &[u8; HEADER_LEN], auth: Auth<'_>) {
    match auth {
        Auth::None => {}
        Auth::Authenticator(keys) => {
            for k in keys {
                out.extend_from_slice(&k.mac(header));
            }
        }
        Auth::Mac(k) => out.extend_from_slice(&k.mac(header)),
        Auth::Signature(k) => out.extend_from_slice(&crate::crypto::sign(k, header)),
        Auth::SignedAuthenticator(sk, keys) => {
            let sig = crate::crypto::sign(sk, header);
            out.extend_from_slice(&sig);
            for k in keys {
                out.extend_from_slice(&k.mac2(header, &sig));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::TestKeys;

    fn prepare() -> Message {
        Message::Prepare(Prepare {
            view: 3,
            seq: 9,
            digest: Digest::of(b"x"),
            replica: 2,
        })
    }

    #[test]
    fn round_trip_with_authenticator() {
        let keys = TestKeys::new(1, 4).replica(2, []);
        let bytes = encode(
            Envelope::new(Principal::Replica(2), 7),
            &prepare(),
            Auth::Authenticator(&keys.to_replica),
        );
        let f = Frame::parse(&bytes, 1 << 20).unwrap();
        assert_eq!(f.header.sender, Principal::Replica(2));
        assert_eq!(f.header.epoch, 7);
        assert_eq!(f.decode().unwrap(), prepare());
        let r0 = TestKeys::new(1, 4).replica(0, []);
        assert!(f.verify_mac(&r0.from_replica[2], 0));
        assert!(!f.verify_mac(&r0.from_replica[2], 1));
        assert!(!f.verify_mac(&r0.from_replica[1], 0));
    }

    #[test]
    fn rejects_tampered_body_and_lengths() {
        let mut bytes = encode(
            Envelope::new(Principal::Replica(0), 0),
            &prepare(),
            Auth::None,
        );
        assert!(Frame::parse(&bytes[..bytes.len() - 1], 1 << 20).is_err());
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert_eq!(
            Frame::parse(&bytes, 1 << 20).unwrap_err(),
            DecodeError::BadDigest
        );
        assert_eq!(
            Frame::parse(&bytes, 10).unwrap_err(),
            DecodeError::BadLength
        );
        assert_eq!(
            Frame::parse(&bytes[..10], 1 << 20).unwrap_err(),
            DecodeError::Truncated
        );
    }

    #[test]
    fn signed_authenticator_round_trip_and_binding() {
        let tk = TestKeys::new(1, 4);
        let c = tk.client(9);
        let sk = c.signing.as_ref().unwrap();
        let body = encode_body(&prepare());
        let bytes = encode_with_body(
            Envelope::new(Principal::Client(9), 0),
            Tag::Prepare,
            &body,
            Digest::of(&body),
            Auth::SignedAuthenticator(sk, &c.to_replica),
        );
        let f = Frame::parse(&bytes, 1 << 20).unwrap();
        assert_eq!(f.header.auth, AuthKind::SignedAuthenticator);
        assert_eq!(f.auth.len(), SIG_LEN + 4 * MAC_LEN);
        assert_eq!(f.mac_entries(), 4);
        for r in 0..4u32 {
            let rk = tk.replica(r, [9]);
            assert!(f.verify_mac(&rk.clients[&9].1, r as usize));
            assert!(!f.verify_mac(&rk.clients[&9].1, (r as usize + 1) % 4));
            assert!(f.verify_signed_authenticator(&rk.client_public[&9]));
            assert!(!f.verify_signature(&rk.client_public[&9]));
        }
        assert!(!f.verify_mac(&tk.replica(0, [9]).clients[&9].1, 4));
        assert!(!f.verify_signed_authenticator(&tk.client_signing(8).verifying_key()));
        // Each MAC covers the signature too: a flipped signature byte breaks every MAC (so a
        // network fault can never make a correct client look as if it signed badly).
        let mut bad = bytes.clone();
        let sig_at = HEADER_LEN + body.len();
        bad[sig_at + 5] ^= 1;
        let bf = Frame::parse(&bad, 1 << 20).unwrap();
        assert!(!bf.verify_signed_authenticator(&tk.replica(0, [9]).client_public[&9]));
        for r in 0..4u32 {
            assert!(!bf.verify_mac(&tk.replica(r, [9]).clients[&9].1, r as usize));
        }
        // Lengths: the signature must be present and the rest whole MACs.
        for alen in [0u32, 63, 65, 64 + 15, 64 + 33 * 16] {
            let mut h = bytes[..HEADER_LEN].to_vec();
            h[24..28].copy_from_slice(&alen.to_le_bytes());
            let mut fr = h;
            fr.extend_from_slice(&body);
            fr.extend(std::iter::repeat_n(0u8, alen as usize));
            assert_eq!(
                Frame::parse(&fr, 1 << 20).unwrap_err(),
                DecodeError::BadLength
            );
        }
    }

    #[test]
    fn signature_round_trip() {
        let keys = TestKeys::new(1, 4).replica(1, []);
        let bytes = encode(
            Envelope::new(Principal::Replica(1), 0),
            &prepare(),
            Auth::Signature(&keys.signing),
        );
        let f = Frame::parse(&bytes, 1 << 20).unwrap();
        assert!(f.verify_signature(&keys.replica_public[1]));
        assert!(!f.verify_signature(&keys.replica_public[0]));
    }
}
