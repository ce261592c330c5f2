//! Fixed-size byte arrays written as lowercase hex in TOML files and as raw bytes in binary
//! encodings (postcard), so one type serves the config, the key files and the handshake.

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `N` bytes; hex in human-readable formats, raw bytes otherwise.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hex<const N: usize>(pub [u8; N]);

impl<const N: usize> core::fmt::Debug for Hex<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl<const N: usize> Serialize for Hex<N> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&hex::encode(self.0))
        } else {
            s.serialize_bytes(&self.0)
        }
    }
}

struct HexVisitor<const N: usize>;

impl<const N: usize> Visitor<'_> for HexVisitor<N> {
    type Value = Hex<N>;

    fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{N} bytes written as {} hex digits", 2 * N)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Hex<N>, E> {
        let mut out = [0u8; N];
        hex::decode_to_slice(v, &mut out).map_err(|_| {
            E::custom(format_args!(
                "expected {N} bytes written as {} hex digits",
                2 * N
            ))
        })?;
        Ok(Hex(out))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Hex<N>, E> {
        <[u8; N]>::try_from(v)
            .map(Hex)
            .map_err(|_| E::invalid_length(v.len(), &self))
    }
}

impl<'de, const N: usize> Deserialize<'de> for Hex<N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Hex<N>, D::Error> {
        if d.is_human_readable() {
            d.deserialize_str(HexVisitor::<N>)
        } else {
            d.deserialize_bytes(HexVisitor::<N>)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct T {
        k: Hex<4>,
    }

    #[test]
    fn hex_in_toml_and_bytes_in_postcard() {
        let t = T {
            k: Hex([1, 2, 0xab, 0xff]),
        };
        let s = toml::to_string(&t).unwrap();
        assert_eq!(s.trim(), r#"k = "0102abff""#);
        assert_eq!(toml::from_str::<T>(&s).unwrap(), t);
        assert!(toml::from_str::<T>(r#"k = "0102""#).is_err());
        assert!(toml::from_str::<T>(r#"k = "zz02abff""#).is_err());
        let b = postcard::to_allocvec(&t).unwrap();
        assert_eq!(b, vec![4, 1, 2, 0xab, 0xff]);
        assert_eq!(postcard::from_bytes::<T>(&b).unwrap(), t);
    }
}
