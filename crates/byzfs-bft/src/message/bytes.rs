//! Byte strings encoded with `serialize_bytes`: in postcard exactly the encoding of a
//! `Vec<u8>` (varint length, then the bytes), so the wire does not change, but one call
//! instead of one per byte. Decoding a 1 MiB request's operation byte by byte took a
//! quarter of a replica's CPU under random 8 KiB writes (`perf`, docs/BENCHMARKS.md
//! "Encrypted mounts"). Used with `#[serde(with = "…")]`: [`self`] for `Vec<u8>`,
//! [`opt`] for `Option<Vec<u8>>`, [`list`] for `Vec<Vec<u8>>`; the file service's
//! operations use it too.

use serde::de::{Deserializer, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;

/// Serializes `v` as one byte string.
pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(v)
}

/// Deserializes a byte string (or, from a self-describing format, a sequence of bytes).
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    d.deserialize_byte_buf(BytesVisitor)
}

struct BytesVisitor;

impl<'de> Visitor<'de> for BytesVisitor {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a byte string")
    }

    fn visit_bytes<E>(self, v: &[u8]) -> Result<Vec<u8>, E> {
        Ok(v.to_vec())
    }

    fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(v)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        let mut out = Vec::new();
        while let Some(b) = seq.next_element()? {
            out.push(b);
        }
        Ok(out)
    }
}

/// One byte string, for the helpers below.
#[derive(Serialize, Deserialize)]
struct Bytes(#[serde(with = "self")] Vec<u8>);

#[derive(Serialize)]
struct BytesRef<'a>(#[serde(with = "self")] &'a [u8]);

/// `Option<Vec<u8>>` as an option of one byte string.
pub mod opt {
    use super::{Bytes, BytesRef};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Serializes `v`.
    pub fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        v.as_deref().map(BytesRef).serialize(s)
    }

    /// Deserializes what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        Ok(Option::<Bytes>::deserialize(d)?.map(|b| b.0))
    }
}

/// `Vec<Vec<u8>>` as a sequence of byte strings.
pub mod list {
    use super::{Bytes, BytesRef, SerializeSeq};
    use serde::{Deserialize, Deserializer, Serializer};

    /// Serializes `v`.
    pub fn serialize<S: Serializer>(v: &[Vec<u8>], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(v.len()))?;
        for b in v {
            seq.serialize_element(&BytesRef(b))?;
        }
        seq.end()
    }

    /// Deserializes what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Vec<u8>>, D::Error> {
        Ok(Vec::<Bytes>::deserialize(d)?
            .into_iter()
            .map(|b| b.0)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Plain {
        a: Vec<u8>,
        b: Option<Vec<u8>>,
        c: Vec<Vec<u8>>,
    }

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Fast {
        #[serde(with = "super")]
        a: Vec<u8>,
        #[serde(with = "super::opt")]
        b: Option<Vec<u8>>,
        #[serde(with = "super::list")]
        c: Vec<Vec<u8>>,
    }

    #[test]
    fn the_encoding_is_postcards_encoding_of_plain_vectors() {
        for (a, b, c) in [
            (vec![], None, vec![]),
            (vec![1, 2, 3], Some(vec![]), vec![vec![]]),
            (
                vec![7; 300],
                Some(vec![9; 200]),
                vec![vec![1], vec![2; 130]],
            ),
        ] {
            let plain = Plain {
                a: a.clone(),
                b: b.clone(),
                c: c.clone(),
            };
            let fast = Fast { a, b, c };
            let p = postcard::to_allocvec(&plain).unwrap();
            let f = postcard::to_allocvec(&fast).unwrap();
            assert_eq!(p, f, "same bytes on the wire");
            assert_eq!(postcard::from_bytes::<Fast>(&p).unwrap(), fast);
            assert_eq!(postcard::from_bytes::<Plain>(&f).unwrap(), plain);
        }
    }
}
