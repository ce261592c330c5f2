//! Client introductions between replicas.
//!
//! A replica learns a client's keys at the client's handshake. A client connected to the
//! primary only (faulty, or partitioned from the backups) would leave the backups unable to
//! authenticate its requests inlined in a PRE-PREPARE: the batch could not prepare and the
//! primary would be voted out — a faulty client framing a correct primary (docs/PROTOCOL.md
//! §1.14). So a replica that admits a client forwards the client's admin-signed certificate
//! and session to its peers; each verifies the certificate itself and derives the same keys
//! as at a handshake. A faulty replica can forward only genuine certificates, which gives a
//! peer nothing it would not learn from the client itself.
//!
//! Introductions travel on replica links beside protocol frames, with a prefix no protocol
//! frame has (protocol frames start with `"BZ"`, version 1).

use crate::cert::ClientCert;
use serde::{Deserialize, Serialize};

/// First bytes of an introduction frame.
pub const PREFIX: [u8; 4] = *b"BZci";

/// A client certificate and the session number it is used with.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ClientIntro {
    /// The admin-signed certificate.
    pub cert: ClientCert,
    /// The session (protocol client id = `cert.client << 40 | session`).
    pub session: u64,
}

impl ClientIntro {
    /// The frame that carries it.
    pub fn encode(&self) -> Vec<u8> {
        // Serialising plain owned data into a Vec cannot fail.
        postcard::to_extend(self, PREFIX.to_vec())
            .expect("postcard serialisation into a Vec is infallible")
    }

    /// Whether `frame` is an introduction (rather than a protocol frame).
    pub fn is_intro(frame: &[u8]) -> bool {
        frame.starts_with(&PREFIX)
    }

    /// Decodes an introduction frame; `None` if it is not one or does not parse.
    pub fn decode(frame: &[u8]) -> Option<ClientIntro> {
        let body = frame.strip_prefix(&PREFIX)?;
        match postcard::take_from_bytes::<ClientIntro>(body) {
            Ok((intro, [])) => Some(intro),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::SigningKey;

    #[test]
    fn round_trip_and_garbage() {
        let admin = SigningKey::from_bytes(&[1; 32]);
        let intro = ClientIntro {
            cert: ClientCert::issue(&admin, [2; 16], 3, [4; 32], [5; 32]),
            session: 99,
        };
        let f = intro.encode();
        assert!(ClientIntro::is_intro(&f));
        assert_eq!(ClientIntro::decode(&f), Some(intro));
        for cut in 0..f.len() {
            assert_eq!(ClientIntro::decode(&f[..cut]), None, "truncated at {cut}");
        }
        let mut extra = f.clone();
        extra.push(0);
        assert_eq!(ClientIntro::decode(&extra), None);
        assert!(!ClientIntro::is_intro(b"BZ\x01\x05rest"));
    }
}
