//! Protocol messages (docs/PROTOCOL.md §1.3, §2.4, §3). Plain data; the wire layout lives in
//! [`crate::wire`]. Names follow the paper.
//!
//! Every vote binds `(view, seq, digest)` — COMMIT included, unlike the BFT library — because
//! ByzzFuzz found an agreement violation in an implementation whose votes matched on `(v, n)`
//! alone (docs/PROTOCOL.md §5.2).

pub mod bytes;

use crate::crypto::Digest;
use crate::ids::{ClientId, ReplicaId, RequestId, Seq, View};
use serde::{Deserialize, Serialize};

/// Message kinds; the tag byte of the header. The body must decode as the matching struct.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Tag {
    /// [`Request`], client → replicas.
    Request = 1,
    /// [`Reply`], replica → client.
    Reply = 2,
    /// [`PrePrepare`].
    PrePrepare = 3,
    /// [`Prepare`].
    Prepare = 4,
    /// [`Commit`].
    Commit = 5,
    /// [`Checkpoint`].
    Checkpoint = 6,
    /// [`ViewChange`] (signed).
    ViewChange = 7,
    /// [`NewView`] (signed).
    NewView = 8,
    /// [`Status`].
    Status = 9,
    /// [`Fetch`].
    Fetch = 10,
    /// [`BatchData`].
    BatchData = 11,
    /// [`StateMeta`].
    StateMeta = 12,
    /// [`StatePart`].
    StatePart = 13,
}

impl Tag {
    /// Parses a tag byte.
    pub fn from_u8(b: u8) -> Option<Tag> {
        Some(match b {
            1 => Tag::Request,
            2 => Tag::Reply,
            3 => Tag::PrePrepare,
            4 => Tag::Prepare,
            5 => Tag::Commit,
            6 => Tag::Checkpoint,
            7 => Tag::ViewChange,
            8 => Tag::NewView,
            9 => Tag::Status,
            10 => Tag::Fetch,
            11 => Tag::BatchData,
            12 => Tag::StateMeta,
            13 => Tag::StatePart,
            _ => return None,
        })
    }

    /// Whether a frame of this tag is an agreement message (PREPARE, COMMIT, CHECKPOINT,
    /// VIEW-CHANGE, NEW-VIEW, STATUS, FETCH): small, and sent apart from bodies,
    /// PRE-PREPAREs and state so that it never waits behind them (`byzfs-net`'s
    /// `link_lane.rs` says why; the simulator's access links queue them apart too).
    pub fn is_agreement(self) -> bool {
        matches!(
            self,
            Tag::Prepare
                | Tag::Commit
                | Tag::Checkpoint
                | Tag::ViewChange
                | Tag::NewView
                | Tag::Status
                | Tag::Fetch
        )
    }

    /// The tag of a protocol frame (`"BZ"`, version 1, tag), if it is one.
    pub fn of_frame(frame: &[u8]) -> Option<Tag> {
        if !frame.starts_with(b"BZ\x01") {
            return None;
        }
        frame.get(3).copied().and_then(Tag::from_u8)
    }
}

/// ⟨REQUEST, o, t, c⟩. The read-only bit and the designated replier travel in the header (they
/// may change on retransmission); the body is exactly what the request digest covers, so the
/// body digest computed while parsing *is* the request digest (computed once).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The client.
    pub client: ClientId,
    /// Request id, strictly increasing per client.
    pub rid: RequestId,
    /// Every request of this client with an id up to `acked` has completed at the client or
    /// is a read-only request (never ordered under its id): replicas may drop the cached
    /// results of those. `acked < rid` and `rid - acked <= Config::client_window`.
    pub acked: RequestId,
    /// The client's ordered request this one must follow: the highest id below `rid` still
    /// outstanding when it was sent, or 0 if none was. It runs only after `after` has
    /// (docs/PROTOCOL.md §1.6, "several requests in flight").
    pub after: RequestId,
    /// The operation, opaque to the library.
    #[serde(with = "bytes")]
    pub op: Vec<u8>,
}

/// ⟨REPLY, v, t, c, i, r⟩, MAC'd for the client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    /// The replica's current view (lets the client learn the primary).
    pub view: View,
    /// The request answered.
    pub rid: RequestId,
    /// The client.
    pub client: ClientId,
    /// The sender.
    pub replica: ReplicaId,
    /// Executed tentatively (or read-only): the client needs `2f+1` matching.
    pub tentative: bool,
    /// Digest of the result.
    pub result_digest: Digest,
    /// The full result, or `None` for a digest-only reply (docs/PROTOCOL.md §1.12).
    #[serde(with = "bytes::opt")]
    pub result: Option<Vec<u8>>,
}

/// The content of a batch: what a PRE-PREPARE orders.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchBody {
    /// Inlined client requests, as the complete authenticated frames the clients sent, so
    /// that backups can check each client's MAC themselves (docs/PROTOCOL.md §1.14).
    #[serde(with = "bytes::list")]
    pub requests: Vec<Vec<u8>>,
    /// Digests of big requests sent by clients to every replica (SRT, §1.10).
    pub big: Vec<Digest>,
    /// Non-deterministic choices proposed by the primary (§1.13); empty for a null batch.
    #[serde(with = "bytes")]
    pub nondet: Vec<u8>,
}

/// ⟨PRE-PREPARE, v, n, d⟩ with the batch. `d` is not transmitted: receivers recompute it from
/// the batch (see [`crate::batch::batch_digest`]), so it can never disagree with the content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrePrepare {
    /// View.
    pub view: View,
    /// Sequence number.
    pub seq: Seq,
    /// The batch.
    pub batch: BatchBody,
}

/// ⟨PREPARE, v, n, d, i⟩.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prepare {
    /// View.
    pub view: View,
    /// Sequence number.
    pub seq: Seq,
    /// Batch digest.
    pub digest: Digest,
    /// Sender.
    pub replica: ReplicaId,
}

/// ⟨COMMIT, v, n, d, i⟩ (with the digest, see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commit {
    /// View.
    pub view: View,
    /// Sequence number.
    pub seq: Seq,
    /// Batch digest.
    pub digest: Digest,
    /// Sender.
    pub replica: ReplicaId,
}

/// ⟨CHECKPOINT, n, d, i⟩.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Sequence number of the last batch the checkpoint includes.
    pub seq: Seq,
    /// State digest (service state, reply cache).
    pub digest: Digest,
    /// Sender.
    pub replica: ReplicaId,
    /// The sender holds a stable certificate for this checkpoint.
    pub stable: bool,
}

/// A prepared certificate the sender held (P-info, docs/PROTOCOL.md §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PreparedEntry {
    /// Sequence number.
    pub seq: Seq,
    /// The latest view in which the sender held a prepared certificate for `seq`.
    pub view: View,
    /// The prepared batch digest.
    pub digest: Digest,
}

/// A batch the sender pre-prepared or prepared, whether or not it became prepared (Q-info):
/// the latest view in which the sender sent a PRE-PREPARE or PREPARE for `digest` at `seq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PrePreparedEntry {
    /// Sequence number.
    pub seq: Seq,
    /// Latest view of the sender's PRE-PREPARE/PREPARE for `digest` at `seq`.
    pub view: View,
    /// Batch digest.
    pub digest: Digest,
}

/// ⟨VIEW-CHANGE, v+1, h, C, P, Q, i⟩σi — signed, so NEW-VIEW can carry it as proof.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewChange {
    /// The view being moved to.
    pub view: View,
    /// Sender.
    pub replica: ReplicaId,
    /// Sequence number of the sender's last stable checkpoint `h`.
    pub last_stable: Seq,
    /// Checkpoints the sender holds at or above `h`, with their digests.
    pub checkpoints: Vec<(Seq, Digest)>,
    /// Prepared certificates held for sequence numbers in `(h, h+L]`, one per sequence number.
    pub prepared: Vec<PreparedEntry>,
    /// Pre-prepared/prepared entries in `(h, h+L]`, bounded per sequence number.
    pub pre_prepared: Vec<PrePreparedEntry>,
}

/// ⟨NEW-VIEW, v, V, min, max, picks⟩σp. `view_changes` are the signed VIEW-CHANGE frames the
/// decision was computed from; backups recompute the decision and reject any mismatch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewView {
    /// The new view.
    pub view: View,
    /// The complete, signed VIEW-CHANGE frames (at least `2f+1`, distinct senders).
    #[serde(with = "bytes::list")]
    pub view_changes: Vec<Vec<u8>>,
    /// The chosen checkpoint `min` and its digest.
    pub min: Seq,
    /// The chosen checkpoint's digest.
    pub min_digest: Digest,
    /// Batch digests for every sequence number in `(min, max)`; `Digest::ZERO` is never used
    /// (a null batch has its own digest).
    pub picks: Vec<Digest>,
}

/// Periodic STATUS: tells peers what the sender has, so they retransmit what it lacks
/// (docs/PROTOCOL.md §1.3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// Sender.
    pub replica: ReplicaId,
    /// Sender's current view.
    pub view: View,
    /// Sender holds the NEW-VIEW for `view` (not in limbo).
    pub has_new_view: bool,
    /// Sender's last stable checkpoint.
    pub last_stable: Seq,
    /// Sender's last executed (committed) sequence number.
    pub last_executed: Seq,
    /// Batches the sender knows by digest but lacks the body of.
    pub missing_batches: Vec<Digest>,
    /// Big requests the sender lacks, by digest.
    pub missing_requests: Vec<Digest>,
}

/// What a [`Fetch`] asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FetchWhat {
    /// The partition digests of checkpoint `seq` (answered by [`StateMeta`]).
    StateMeta {
        /// The checkpoint.
        seq: Seq,
    },
    /// One chunk of a partition of checkpoint `seq`: its encoding from byte `offset` on
    /// (answered by [`StatePart`]; a partition larger than one message travels in chunks).
    StatePart {
        /// The checkpoint.
        seq: Seq,
        /// Partition index.
        part: u32,
        /// First byte wanted of the partition's encoding.
        offset: u64,
    },
}

/// ⟨FETCH⟩ for state transfer (docs/PROTOCOL.md §2.4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fetch {
    /// Sender.
    pub replica: ReplicaId,
    /// What is asked for.
    pub what: FetchWhat,
}

/// A batch body sent in answer to a STATUS that lacks it; the receiver checks its digest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchData {
    /// Sender.
    pub replica: ReplicaId,
    /// The batch.
    pub batch: BatchBody,
}

/// Partition digests of a checkpoint; verified against the agreed checkpoint digest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateMeta {
    /// Sender.
    pub replica: ReplicaId,
    /// The checkpoint.
    pub seq: Seq,
    /// Digest of each partition.
    pub parts: Vec<Digest>,
}

/// A chunk of one partition's content: bytes `offset..offset + data.len()` of its encoding
/// (the owner's format), `total` bytes long. The fetcher joins the chunks and checks the whole
/// against the partition's digest from [`StateMeta`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatePart {
    /// Sender.
    pub replica: ReplicaId,
    /// The checkpoint.
    pub seq: Seq,
    /// Partition index.
    pub part: u32,
    /// Position of `data` in the partition's encoding.
    pub offset: u64,
    /// Length of the partition's whole encoding.
    pub total: u64,
    /// The chunk.
    #[serde(with = "bytes")]
    pub data: Vec<u8>,
}

/// Any protocol message.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Message {
    Request(Request),
    Reply(Reply),
    PrePrepare(PrePrepare),
    Prepare(Prepare),
    Commit(Commit),
    Checkpoint(Checkpoint),
    ViewChange(ViewChange),
    NewView(NewView),
    Status(Status),
    Fetch(Fetch),
    BatchData(BatchData),
    StateMeta(StateMeta),
    StatePart(StatePart),
}

impl Message {
    /// The tag of this message.
    pub fn tag(&self) -> Tag {
        match self {
            Message::Request(_) => Tag::Request,
            Message::Reply(_) => Tag::Reply,
            Message::PrePrepare(_) => Tag::PrePrepare,
            Message::Prepare(_) => Tag::Prepare,
            Message::Commit(_) => Tag::Commit,
            Message::Checkpoint(_) => Tag::Checkpoint,
            Message::ViewChange(_) => Tag::ViewChange,
            Message::NewView(_) => Tag::NewView,
            Message::Status(_) => Tag::Status,
            Message::Fetch(_) => Tag::Fetch,
            Message::BatchData(_) => Tag::BatchData,
            Message::StateMeta(_) => Tag::StateMeta,
            Message::StatePart(_) => Tag::StatePart,
        }
    }
}

/// A borrowed view of a [`Request`] body: decodes without copying the operation (the encoding
/// of `Vec<u8>` and `&[u8]` is the same in postcard).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub struct RequestView<'a> {
    /// The client.
    pub client: ClientId,
    /// Request id.
    pub rid: RequestId,
    /// See [`Request::acked`].
    pub acked: RequestId,
    /// See [`Request::after`].
    pub after: RequestId,
    /// The operation, borrowed from the frame.
    #[serde(borrow)]
    pub op: &'a [u8],
}

impl<'a> RequestView<'a> {
    /// Decodes a request body, rejecting trailing bytes and non-canonical encodings (so one
    /// request has exactly one digest).
    pub fn decode(body: &'a [u8]) -> Option<RequestView<'a>> {
        match postcard::take_from_bytes::<RequestView<'a>>(body) {
            Ok((v, []))
                if canonical_request_len(v.client, v.rid, v.acked, v.after, v.op.len())
                    == body.len() =>
            {
                Some(v)
            }
            _ => None,
        }
    }
}

/// Length of a varint (postcard's LEB128) encoding of `x`.
fn varint_len(mut x: u64) -> usize {
    let mut n = 1;
    while x >= 0x80 {
        x >>= 7;
        n += 1;
    }
    n
}

/// The length of the canonical encoding of a request body. postcard accepts over-long varints
/// when decoding; a body longer than this is a second encoding of the same request.
pub fn canonical_request_len(
    client: ClientId,
    rid: RequestId,
    acked: RequestId,
    after: RequestId,
    op_len: usize,
) -> usize {
    varint_len(client)
        + varint_len(rid)
        + varint_len(acked)
        + varint_len(after)
        + varint_len(op_len as u64)
        + op_len
}
