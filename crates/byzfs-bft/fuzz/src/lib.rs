//! Shared bodies of the fuzz targets.
//!
//! `decode_frame` sees what a replica's socket sees. Random bytes rarely get past the body
//! digest, so each `decode_<tag>` target wraps its input in a valid header for one tag: the
//! digest then matches and libFuzzer explores that message's postcard decoder directly.

use byzfs_bft::crypto::{MacKey, TestKeys};
use byzfs_bft::message::Tag;
use byzfs_bft::wire::{self, Auth, Envelope, Frame};
use byzfs_bft::{Digest, Principal};

/// Largest frame the targets accept (libFuzzer's inputs are far smaller).
const MAX_LEN: usize = 4 << 20;

/// Decodes `data` as the body of a `tag` frame. Anything that decodes must have that tag and
/// survive a re-encode unchanged.
pub fn decode_body(tag: Tag, data: &[u8]) {
    let env = Envelope::new(Principal::Replica(0), 0);
    let bytes = wire::encode_with_body(env, tag, data, Digest::of(data), Auth::None);
    let frame = Frame::parse(&bytes, MAX_LEN).expect("a valid header around any body parses");
    assert_eq!(frame.body, data);
    if let Ok(msg) = frame.decode() {
        assert_eq!(msg.tag(), tag);
        let again = wire::encode(env, &msg, Auth::None);
        let reparsed = Frame::parse(&again, MAX_LEN).expect("re-encoded frame parses");
        assert_eq!(reparsed.decode().expect("re-encoded body decodes"), msg);
    }
}

/// Feeds raw bytes to the parser and decoder, then to every authentication check.
pub fn decode_frame(data: &[u8]) {
    let Ok(frame) = Frame::parse(data, MAX_LEN) else {
        return;
    };
    let _ = frame.decode();
    let key = MacKey::from_bytes([7; 32]);
    for slot in 0..=byzfs_bft::config::MAX_REPLICAS {
        let _ = frame.verify_mac(&key, slot);
    }
    let public = TestKeys::new(0, 4).signing(0).verifying_key();
    let _ = frame.verify_signature(&public);
}
