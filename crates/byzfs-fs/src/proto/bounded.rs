//! Bounded decoding of operations and replies (issue #43; docs/PROTOCOL.md "Requests").
//!
//! [`Op`] contains itself ([`Op::Batch`], [`Op::MakeAt`], [`Op::Signed`]) and so does
//! [`Reply`] ([`Reply::Batch`]); postcard has no depth limit, so a request nested 200,000
//! deep (400 KB) overflowed every replica's stack while it was decoded — in
//! `Service::is_read_only`, before anything else looked at it, and again at each restart
//! once it was in the log. Here every self-nested field is decoded through a guard that
//! counts levels, and every list a correct client keeps short is counted while it is
//! decoded, so a decode's depth and its allocations are bounded by constants, not by the
//! input: a request beyond them does not decode, and executes as `EINVAL` at every replica
//! (as any undecodable request does).
//!
//! The bounds are those a correct client stays within ([`MAX_NESTING`]: a signed batch of
//! creations at reserved handles, `Signed { Batch [ MakeAt { Create } ] }`), so decoding
//! refuses nothing the file service would have run. [`Op::nesting_ok`] then refuses the
//! shapes no correct client sends (a batch in a batch, a signed operation in another).
//!
//! The level count is thread-local: a decode runs on one thread from start to end, and the
//! guard gives its level back when dropped, on success and on error alike.
//!
//! Tests: `tests/garbage.rs` (`deep_nesting_is_refused_without_overflow`, the random and
//! mutated requests), and the unit tests below.

use super::batch::MAX_BATCH;
use super::op::{Op, MAX_GATHER_READS};
use super::reply::Reply;
use serde::de::{self, Deserialize, Deserializer, SeqAccess, Visitor};
use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;

/// Most nested fields a decode may enter: `Signed { Batch [ MakeAt { Create } ] }` enters
/// three ([`Op::Signed`]'s `op`, the batch's list, [`Op::MakeAt`]'s `make`).
pub const MAX_NESTING: u32 = 3;

thread_local! {
    /// Nested fields entered by the decode running on this thread.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// One nested level entered; leaving it (drop) gives the level back.
struct Level;

impl Level {
    fn enter<E: de::Error>() -> Result<Level, E> {
        DEPTH.with(|d| {
            let n = d.get();
            if n >= MAX_NESTING {
                Err(E::custom(format_args!(
                    "operations nested more than {MAX_NESTING} deep"
                )))
            } else {
                d.set(n + 1);
                Ok(Level)
            }
        })
    }
}

impl Drop for Level {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Decodes a nested operation ([`Op::MakeAt`]'s `make`, [`Op::Signed`]'s `op`).
pub(crate) fn nested_op<'de, D: Deserializer<'de>>(d: D) -> Result<Box<Op>, D::Error> {
    let _level = Level::enter::<D::Error>()?;
    Op::deserialize(d).map(Box::new)
}

/// Decodes [`Op::Batch`]'s members: one level deeper, at most [`MAX_BATCH`].
pub(crate) fn batch_ops<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Op>, D::Error> {
    let _level = Level::enter::<D::Error>()?;
    at_most::<D, Op, { MAX_BATCH }>(d)
}

/// Decodes [`Reply::Batch`]'s members: one level deeper, at most as many as a batch or a
/// gathered read has.
pub(crate) fn batch_replies<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Reply>, D::Error> {
    let _level = Level::enter::<D::Error>()?;
    at_most::<D, Reply, { MAX_BATCH_REPLIES }>(d)
}

/// Most members of a [`Reply::Batch`].
const MAX_BATCH_REPLIES: usize = if MAX_BATCH > MAX_GATHER_READS {
    MAX_BATCH
} else {
    MAX_GATHER_READS
};

/// A list of at most `N` elements: longer ones fail as soon as the length is read (or,
/// for a format that does not give it first, at element `N + 1`), before anything is
/// allocated for them.
pub(crate) fn at_most<'de, D, T, const N: usize>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    d.deserialize_seq(AtMost::<T, N>(PhantomData))
}

struct AtMost<T, const N: usize>(PhantomData<T>);

impl<'de, T: Deserialize<'de>, const N: usize> Visitor<'de> for AtMost<T, N> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a list of at most {N} elements")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let hint = seq.size_hint();
        if let Some(n) = hint.filter(|&n| n > N) {
            return Err(de::Error::invalid_length(n, &self));
        }
        let mut out = Vec::with_capacity(hint.unwrap_or(0));
        while let Some(x) = seq.next_element()? {
            if out.len() == N {
                return Err(de::Error::invalid_length(N + 1, &self));
            }
            out.push(x);
        }
        Ok(out)
    }
}

/// Lists in operations that a correct client keeps short, decoded through [`at_most`].
pub(crate) mod lists {
    use super::at_most;
    use crate::proto::attr::SetAttr;
    use crate::proto::batch::MAX_BATCH;
    use crate::proto::handle::FileHandle;
    use crate::proto::op::{MAX_GATHER_READS, MAX_SETATTRS};
    use crate::proto::proof::{WriterProof, MAX_PROOFS};
    use serde::Deserializer;

    /// [`Op::WriteSetAttr`](crate::proto::op::Op::WriteSetAttr)'s `sets`.
    pub(crate) fn sets<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<SetAttr>, D::Error> {
        at_most::<D, SetAttr, MAX_SETATTRS>(d)
    }

    /// [`Op::ReadGather`](crate::proto::op::Op::ReadGather)'s `ranges`.
    pub(crate) fn ranges<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(u64, u32)>, D::Error> {
        at_most::<D, (u64, u32), MAX_GATHER_READS>(d)
    }

    /// [`Op::Signed`](crate::proto::op::Op::Signed)'s `proofs`.
    pub(crate) fn proofs<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<WriterProof>, D::Error> {
        at_most::<D, WriterProof, MAX_PROOFS>(d)
    }

    /// [`Op::Signed`](crate::proto::op::Op::Signed)'s `headers` and `expect`.
    pub(crate) fn headers<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<(FileHandle, Vec<u8>)>, D::Error> {
        at_most::<D, (FileHandle, Vec<u8>), { MAX_BATCH }>(d)
    }
}

impl Op {
    /// Whether the operation is nested as a correct client nests it: a batch holds no batch and no
    /// signed operation, a signed operation holds no signed operation, [`Op::MakeAt`] holds a
    /// creation and [`Op::WriteAt`] a write. A request that fails this does not decode
    /// ([`Request::decode`](super::request::Request::decode)). Its recursion is bounded by
    /// [`MAX_NESTING`], which decoding enforced.
    pub fn nesting_ok(&self) -> bool {
        match self {
            Op::Signed { op, .. } => !matches!(**op, Op::Signed { .. }) && op.nesting_ok(),
            Op::Batch(ops) => ops
                .iter()
                .all(|op| !matches!(op, Op::Batch(_) | Op::Signed { .. }) && op.nesting_ok()),
            Op::MakeAt { make, .. } => matches!(
                **make,
                Op::Create { .. } | Op::Mkdir { .. } | Op::Symlink { .. } | Op::Mknod { .. }
            ),
            Op::WriteAt { write, .. } => matches!(
                **write,
                Op::Write { .. } | Op::WriteGather { .. } | Op::WriteSetAttr { .. }
            ),
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::cred::Credentials;
    use crate::proto::handle::FileHandle;
    use crate::proto::reply::FsResult;
    use crate::proto::request::{decode_result, encode_result, Request};

    fn create() -> Op {
        Op::Create {
            dir: FileHandle::ROOT,
            name: b"n".to_vec(),
            mode: 0o644,
            exclusive: true,
        }
    }

    fn make_at(make: Op) -> Op {
        Op::MakeAt {
            time: None,
            at: FileHandle::ROOT,
            make: Box::new(make),
        }
    }

    fn signed(op: Op) -> Op {
        Op::Signed {
            seq: 1,
            proofs: Vec::new(),
            op: Box::new(op),
            headers: Vec::new(),
            expect: Vec::new(),
        }
    }

    fn round_trips(op: Op) -> bool {
        let r = Request::new(Credentials::root(), op);
        Request::decode(&r.encode()) == Some(r)
    }

    #[test]
    fn what_a_correct_client_nests_decodes() {
        assert!(round_trips(signed(Op::Batch(vec![
            make_at(create()),
            create()
        ]))));
        assert!(round_trips(Op::Batch(vec![make_at(create()); 64])));
        assert!(round_trips(signed(make_at(create()))));
    }

    #[test]
    fn one_level_more_does_not_decode() {
        // Four nested fields: Signed > Batch > MakeAt > MakeAt.
        assert!(!round_trips(signed(Op::Batch(vec![make_at(make_at(
            create()
        ))]))));
        // The level count is given back after a refusal: the next decode is unaffected.
        assert!(round_trips(signed(Op::Batch(vec![make_at(create())]))));
        assert_eq!(DEPTH.with(Cell::get), 0);
    }

    #[test]
    fn shapes_no_correct_client_sends_do_not_decode() {
        assert!(!round_trips(Op::Batch(vec![Op::Batch(vec![create()])])));
        assert!(!round_trips(Op::Batch(vec![signed(create())])));
        assert!(!round_trips(signed(signed(create()))));
        assert!(!round_trips(make_at(Op::StatFs)));
        assert!(!round_trips(Op::Batch(vec![Op::StatFs; 65])));
    }

    #[test]
    fn replies_are_bounded_too() {
        let ok: FsResult = Ok(Reply::Batch(vec![Reply::Done; 64]));
        assert_eq!(decode_result(&encode_result(&ok)), Some(ok));
        let long: FsResult = Ok(Reply::Batch(vec![Reply::Done; 65]));
        assert_eq!(decode_result(&encode_result(&long)), None);
        let mut deep = Reply::Done;
        for _ in 0..4 {
            deep = Reply::Batch(vec![deep]);
        }
        assert_eq!(decode_result(&encode_result(&Ok(deep))), None);
    }

    /// The encoding of `Batch` nested `depth` deep around a `StatFs`, built as bytes (the
    /// value itself could not be dropped without recursing as deep).
    pub(crate) fn deep_batch_bytes(depth: usize) -> Vec<u8> {
        // Credentials: uid 0, gid 0, no groups; then `depth` times (Batch tag 45, one
        // member), then StatFs (tag 16); then no grant.
        let mut b = vec![0, 0, 0];
        for _ in 0..depth {
            b.extend_from_slice(&[45, 1]);
        }
        b.extend_from_slice(&[16, 0]);
        b
    }

    #[test]
    fn a_request_nested_200000_deep_is_refused_without_overflow() {
        let bytes = deep_batch_bytes(200_000);
        assert_eq!(Request::decode(&bytes), None);
        // Within the bound the same construction decodes (the bytes are well formed).
        assert!(Request::decode(&deep_batch_bytes(1)).is_some());
    }
}
