//! Frames of a [`LogStore`](super::LogStore)'s segments: one per call that changes the store.
//!
//! A frame is `body length (u32 LE) ‖ first 8 bytes of BLAKE3(body) ‖ body`, and a body is a
//! kind byte and its fields (integers little-endian):
//!
//! | kind | body after the kind byte |
//! |---|---|
//! | 1 `Apply` | count (u32), then per write: key length (u32), key, 0 (delete) or 1 and value length (u32) and value |
//! | 2 `Checkpoint` | seq (u64) |
//! | 3 `Rollback` | — |
//! | 4 `Discard` | seq (u64): checkpoints below it |
//! | 5 `FinishImport` | seq (u64) |
//! | 6 `Keep` | seq (u64): the checkpoint the owner is about to record |
//! | 7 `Reopen` | seq (u64) |
//! | 8 `Moved` | count (u32), then per value: old segment (u64), old offset (u64), length (u32), then the value |
//! | 9 `Base` | the log's format (u64), then the whole index (`Index::encode`) |
//! | 10 `Format` | the log's format (u64): the first frame of a new log |
//!
//! Values sit in frames as they are, so the index points into the segment at a value's
//! bytes ([`encode_apply`] says where each one starts) and a read is one `pread`.
//!
//! The bytes come back from a disk, so decoding bounds every length by what is left before
//! it allocates, and never panics: a frame that does not decode is the end of the log (a
//! write a crash cut short) or damage, and the caller decides which.

/// Bytes before a frame's body.
pub const HEADER: usize = 12;

/// Largest body accepted when reading (a larger length is damage, not data).
pub const BODY_MAX: usize = 1 << 30;

const APPLY: u8 = 1;
const CHECKPOINT: u8 = 2;
const ROLLBACK: u8 = 3;
const DISCARD: u8 = 4;
const FINISH_IMPORT: u8 = 5;
const KEEP: u8 = 6;
const REOPEN: u8 = 7;
const MOVED: u8 = 8;
const BASE: u8 = 9;
const FORMAT: u8 = 10;

/// One write of an `Apply` frame: the key, and the value's offset in the body and its bytes
/// (`None`: deleted).
pub type Write<'a> = (&'a [u8], Option<(usize, &'a [u8])>);

/// Where a moved value was (segment, offset, length).
pub type Place = (u64, u64, u32);

/// One value of a `Moved` frame: its old place, and the offset and bytes of the copy.
pub type MovedValue<'a> = (Place, usize, &'a [u8]);

/// A decoded frame body. Offsets are from the start of the body.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// One operation's writes: key, and the value's offset and bytes (`None`: deleted).
    Apply(Vec<Write<'a>>),
    Checkpoint(u64),
    Rollback,
    Discard(u64),
    FinishImport(u64),
    Keep(u64),
    Reopen(u64),
    /// Values copied out of older segments by compaction: old place, and the offset and
    /// bytes of the copy.
    Moved(Vec<MovedValue<'a>>),
    /// The whole index (compaction starts a segment with it), in the log's format:
    /// replaces the one replayed.
    Base(u64, &'a [u8]),
    /// The log's on-disk format (the first frame of a new log).
    Format(u64),
}

/// A frame around `body`.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + body.len());
    // Bodies are built from one operation's writes or one partition, far below 4 GiB;
    // `LogStore` refuses larger ones before calling this.
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&blake3::hash(body).as_bytes()[..8]);
    out.extend_from_slice(body);
    out
}

/// The body of a frame with one seq (`Checkpoint`, `Discard`, `FinishImport`, `Keep`,
/// `Reopen`).
fn with_seq(kind: u8, seq: u64) -> Vec<u8> {
    let mut b = vec![kind];
    b.extend_from_slice(&seq.to_le_bytes());
    b
}

pub fn checkpoint(seq: u64) -> Vec<u8> {
    with_seq(CHECKPOINT, seq)
}
pub fn rollback() -> Vec<u8> {
    vec![ROLLBACK]
}
pub fn discard(seq: u64) -> Vec<u8> {
    with_seq(DISCARD, seq)
}
pub fn finish_import(seq: u64) -> Vec<u8> {
    with_seq(FINISH_IMPORT, seq)
}
pub fn keep(seq: u64) -> Vec<u8> {
    with_seq(KEEP, seq)
}
pub fn reopen(seq: u64) -> Vec<u8> {
    with_seq(REOPEN, seq)
}

fn put_len(b: &mut Vec<u8>, n: usize) -> Option<()> {
    b.extend_from_slice(&u32::try_from(n).ok()?.to_le_bytes());
    Some(())
}

/// The body of an `Apply` frame, and the offset in it of each value written (in `writes`'
/// order; `None` for a deletion). `None` if a key or value is 4 GiB or more.
pub fn encode_apply<'a>(
    writes: impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)>,
) -> Option<(Vec<u8>, Vec<Option<usize>>)> {
    let mut b = vec![APPLY, 0, 0, 0, 0];
    let mut offs = Vec::new();
    for (k, v) in writes {
        put_len(&mut b, k.len())?;
        b.extend_from_slice(k);
        match v {
            None => {
                b.push(0);
                offs.push(None);
            }
            Some(v) => {
                b.push(1);
                put_len(&mut b, v.len())?;
                offs.push(Some(b.len()));
                b.extend_from_slice(v);
            }
        }
    }
    let n = u32::try_from(offs.len()).ok()?;
    b[1..5].copy_from_slice(&n.to_le_bytes());
    Some((b, offs))
}

/// The body of a `Moved` frame: each value with its old place; and the offset of each copy.
pub fn encode_moved<'a>(
    values: impl Iterator<Item = (Place, &'a [u8])>,
) -> Option<(Vec<u8>, Vec<usize>)> {
    let mut b = vec![MOVED, 0, 0, 0, 0];
    let mut offs = Vec::new();
    for ((seg, off, len), v) in values {
        b.extend_from_slice(&seg.to_le_bytes());
        b.extend_from_slice(&off.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        offs.push(b.len());
        b.extend_from_slice(v);
    }
    let n = u32::try_from(offs.len()).ok()?;
    b[1..5].copy_from_slice(&n.to_le_bytes());
    Some((b, offs))
}

/// The start of a `Base` frame's body: the kind byte and the format; the index
/// (`Index::encode`) follows.
pub fn base_head(format: u64) -> Vec<u8> {
    with_seq(BASE, format)
}

/// The body of a `Format` frame.
pub fn format(format: u64) -> Vec<u8> {
    with_seq(FORMAT, format)
}

/// Reads fields from a body, never past its end.
pub(super) struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8]) -> Reader<'a> {
        Reader { b, at: 0 }
    }
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.b.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
    pub fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    pub fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    pub fn left(&self) -> usize {
        self.b.len() - self.at
    }
}

/// Decodes a body; `None` if it is not one this module writes (any trailing byte included).
pub fn decode(body: &[u8]) -> Option<Frame<'_>> {
    let mut r = Reader { b: body, at: 0 };
    let f = match r.u8()? {
        APPLY => {
            let n = r.u32()? as usize;
            // Each write takes at least 5 bytes: no count promises more than the body holds.
            let mut w = Vec::with_capacity(n.min(r.left() / 5));
            for _ in 0..n {
                let k = r.bytes()?;
                let v = match r.u8()? {
                    0 => None,
                    1 => {
                        let len = r.u32()? as usize;
                        let at = r.at;
                        Some((at, r.take(len)?))
                    }
                    _ => return None,
                };
                w.push((k, v));
            }
            Frame::Apply(w)
        }
        CHECKPOINT => Frame::Checkpoint(r.u64()?),
        ROLLBACK => Frame::Rollback,
        DISCARD => Frame::Discard(r.u64()?),
        FINISH_IMPORT => Frame::FinishImport(r.u64()?),
        KEEP => Frame::Keep(r.u64()?),
        REOPEN => Frame::Reopen(r.u64()?),
        MOVED => {
            let n = r.u32()? as usize;
            let mut w = Vec::with_capacity(n.min(r.left() / 20));
            for _ in 0..n {
                let seg = r.u64()?;
                let off = r.u64()?;
                let len = r.u32()?;
                let at = r.at;
                let v = r.take(len as usize)?;
                w.push(((seg, off, len), at, v));
            }
            Frame::Moved(w)
        }
        BASE => {
            let format = r.u64()?;
            Frame::Base(format, r.take(r.left())?)
        }
        FORMAT => Frame::Format(r.u64()?),
        _ => return None,
    };
    (r.left() == 0).then_some(f)
}

/// The body length a frame header announces, if its checksum is then to be checked against
/// a body of that length (`None`: longer than [`BODY_MAX`]).
pub fn body_len(header: &[u8; HEADER]) -> Option<usize> {
    let n = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    (n <= BODY_MAX).then_some(n)
}

/// Whether `body` is the one the header's checksum names.
pub fn checks(header: &[u8; HEADER], body: &[u8]) -> bool {
    blake3::hash(body).as_bytes()[..8] == header[4..12]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_apply_frame_says_where_each_value_lies() {
        let (b, offs) =
            encode_apply([(&b"k1"[..], Some(&b"value"[..])), (&b"k2"[..], None)].into_iter())
                .unwrap();
        assert_eq!(offs, vec![Some(16), None]);
        assert_eq!(&b[16..21], b"value");
        assert_eq!(
            decode(&b),
            Some(Frame::Apply(vec![
                (&b"k1"[..], Some((16, &b"value"[..]))),
                (&b"k2"[..], None)
            ]))
        );
        let (m, moffs) = encode_moved([((3, 40, 5), &b"value"[..])].into_iter()).unwrap();
        assert_eq!(
            decode(&m),
            Some(Frame::Moved(vec![((3, 40, 5), moffs[0], &b"value"[..])]))
        );
        for (body, f) in [
            (checkpoint(7), Frame::Checkpoint(7)),
            (rollback(), Frame::Rollback),
            (discard(8), Frame::Discard(8)),
            (finish_import(9), Frame::FinishImport(9)),
            (keep(10), Frame::Keep(10)),
            (reopen(11), Frame::Reopen(11)),
            (format(1), Frame::Format(1)),
        ] {
            assert_eq!(decode(&body), Some(f));
        }
        let mut longer = checkpoint(7);
        longer.push(0);
        assert_eq!(decode(&longer), None, "a trailing byte");
        let framed = frame(&checkpoint(7));
        let header: [u8; HEADER] = framed[..HEADER].try_into().unwrap();
        assert_eq!(body_len(&header), Some(9));
        assert!(checks(&header, &framed[HEADER..]));
        assert!(!checks(&header, &checkpoint(8)));
    }

    proptest! {
        /// Random and mutated bodies decode or are refused, never panic, and a body that
        /// decodes as `Apply` re-encodes to itself.
        #[test]
        fn hostile_bodies_never_panic(
            writes in proptest::collection::vec(
                (proptest::collection::vec(any::<u8>(), 0..12),
                 proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40))),
                0..6),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
            cut in any::<usize>(),
            random in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let (mut b, _) = encode_apply(
                writes.iter().map(|(k, v)| (k.as_slice(), v.as_deref()))).unwrap();
            prop_assert!(matches!(decode(&b), Some(Frame::Apply(_))));
            for (i, x) in flips {
                let n = b.len();
                b[i % n] ^= x;
            }
            let cut = cut % (b.len() + 1);
            for body in [&b[..], &b[..cut], &random[..]] {
                if let Some(Frame::Apply(w)) = decode(body) {
                    let (again, _) = encode_apply(
                        w.iter().map(|(k, v)| (*k, v.map(|(_, v)| v)))).unwrap();
                    prop_assert_eq!(again.as_slice(), body);
                }
            }
        }
    }
}
