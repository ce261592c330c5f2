//! Postcard, as everywhere in ByzFS: the one encoding of what the protocol carries.

use serde::{Deserialize, Serialize};

/// Postcard encoding of `v`.
pub(crate) fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    // Serializing these types into a growable Vec cannot fail: every sequence has a known
    // length and no impl returns a custom error.
    postcard::to_allocvec(v).expect("postcard serialization into a Vec is infallible")
}

/// Postcard decoding of exactly `b` (trailing bytes rejected); never panics.
pub(crate) fn decode<'a, T: Deserialize<'a>>(b: &'a [u8]) -> Option<T> {
    match postcard::take_from_bytes(b) {
        Ok((v, [])) => Some(v),
        _ => None,
    }
}
