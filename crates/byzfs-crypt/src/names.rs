//! Encrypted names: AES-256-SIV under the directory's name key (deterministic: the same name
//! in the same directory always gives the same entry, so the replicas look names up as
//! before; different directories give unrelated entries), the name padded to a multiple of
//! 16 bytes (`0x80` then zeros) so only its length rounded up leaks, encoded base64url
//! without padding (never `/`, NUL, `.` or `..`).

use crate::CryptError;
use aes_siv::siv::Aes256Siv;
use aes_siv::KeyInit;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

/// Longest plain name that encrypts within the 255-byte limit on names.
pub const PLAIN_NAME_MAX: usize = 159;

/// The encrypted entry name of `name` in the directory whose name key is `key`.
pub fn seal(key: &[u8; 64], name: &[u8]) -> Result<String, CryptError> {
    if name.len() > PLAIN_NAME_MAX {
        return Err(CryptError::NameTooLong(name.len()));
    }
    let padded = pad(name);
    let mut siv = Aes256Siv::new(key.into());
    let sealed = siv
        .encrypt([b"byzfs-name1"], &padded)
        .map_err(|_| CryptError::Malformed("name"))?;
    Ok(URL_SAFE_NO_PAD.encode(sealed))
}

/// The plain name of an encrypted entry name.
pub fn open(key: &[u8; 64], entry: &str) -> Result<Vec<u8>, CryptError> {
    let sealed = URL_SAFE_NO_PAD
        .decode(entry)
        .map_err(|_| CryptError::Malformed("name encoding"))?;
    if sealed.len() < 32 || !sealed.len().is_multiple_of(16) {
        return Err(CryptError::Malformed("name length"));
    }
    let mut siv = Aes256Siv::new(key.into());
    let padded = siv
        .decrypt([b"byzfs-name1"], &sealed)
        .map_err(|_| CryptError::Tampered("name"))?;
    unpad(padded, "name padding")
}

/// `bytes` padded to a multiple of 16 bytes: `0x80`, then zeros. Names, link targets and
/// extended attributes' values are padded alike, so each leaks its length rounded up only.
pub(crate) fn pad(bytes: &[u8]) -> Vec<u8> {
    let mut padded = Vec::with_capacity(bytes.len() + 16);
    padded.extend_from_slice(bytes);
    padded.push(0x80);
    while !padded.len().is_multiple_of(16) {
        padded.push(0);
    }
    padded
}

/// What [`pad`] padded (`what` names it in the error if the padding is not one).
pub(crate) fn unpad(mut padded: Vec<u8>, what: &'static str) -> Result<Vec<u8>, CryptError> {
    match padded.iter().rposition(|&b| b != 0) {
        Some(i) if padded[i] == 0x80 => {
            padded.truncate(i);
            Ok(padded)
        }
        _ => Err(CryptError::Tampered(what)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_deterministic_per_directory_and_hide_their_length_to_16_bytes() {
        let (k1, k2) = ([1u8; 64], [2u8; 64]);
        let a = seal(&k1, b"Makefile").unwrap();
        assert_eq!(seal(&k1, b"Makefile").unwrap(), a, "deterministic");
        assert_ne!(seal(&k2, b"Makefile").unwrap(), a, "per directory");
        assert_eq!(open(&k1, &a), Ok(b"Makefile".to_vec()));
        assert_eq!(open(&k2, &a), Err(CryptError::Tampered("name")));
        // 1..=15 bytes all give 32 sealed bytes (43 characters); 16 gives 48.
        for n in 1..=15 {
            assert_eq!(seal(&k1, &vec![b'x'; n]).unwrap().len(), 43, "{n}");
        }
        assert_eq!(seal(&k1, &[b'x'; 16]).unwrap().len(), 64);
        let longest = seal(&k1, &[b'y'; PLAIN_NAME_MAX]).unwrap();
        assert!(longest.len() <= 255, "{}", longest.len());
        assert!(!longest.contains('/') && !longest.contains('\0'));
        assert_eq!(
            seal(&k1, &[b'y'; PLAIN_NAME_MAX + 1]),
            Err(CryptError::NameTooLong(PLAIN_NAME_MAX + 1))
        );
        // Names may hold any byte, including the padding marker and NUL-free binary.
        let odd = b"\x80\x01tail\x80";
        assert_eq!(open(&k1, &seal(&k1, odd).unwrap()), Ok(odd.to_vec()));
        let mut t = a.clone().into_bytes();
        t[5] = if t[5] == b'A' { b'B' } else { b'A' };
        assert!(open(&k1, std::str::from_utf8(&t).unwrap()).is_err());
        assert_eq!(open(&k1, "%%"), Err(CryptError::Malformed("name encoding")));
    }
}
