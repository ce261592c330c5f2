//! A replicated key-value store: the library's example service and the workload of the
//! simulator's checkers.
//!
//! Operations and results are postcard-encoded [`KvOp`] and [`KvResult`]. `Append` returns the
//! new value, so a history of appends shows exactly which writes each read observed.
//!
//! **Agreed time (docs/PROTOCOL.md §1.13).** The batch's non-deterministic input is an 8-byte LE
//! timestamp in microseconds. The primary proposes `max(now, last proposed + 1, last agreed +
//! 1)`; a backup accepts it if it is greater than the last agreed timestamp in its state and
//! within the clock tolerance (1 s by default) of its own clock. Execution never reads a
//! clock: the agreed timestamp is kept in the replicated state (so digests and checkpoints
//! cover it) and every operation of a batch sees the same value.
//!
//! User keys and internal keys share one [`PartitionedState`] of [`PARTITIONS`] partitions,
//! separated by a prefix byte, so no user key can overwrite the agreed clock.

use crate::ids::{ClientId, Seq};
use crate::service::Service;
use crate::state::PartitionedState;
use crate::time::Time;
use crate::write_tracker::WriteTracker;
use core::time::Duration;
use serde::{Deserialize, Serialize};

/// Number of state partitions of the key-value service.
pub const PARTITIONS: u32 = 64;

/// Default bound on `|proposed timestamp − local clock|` for a backup to accept a proposal.
pub const DEFAULT_CLOCK_TOLERANCE: Duration = Duration::from_secs(1);

/// Prefix byte of user keys in the state.
const USER_PREFIX: u8 = 0;
/// Key of the last agreed timestamp (prefix 1: internal).
const TS_KEY: &[u8] = &[1, b't', b's'];

/// A key-value operation.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum KvOp {
    /// Sets `key` to `value`. Result: [`KvResult::Ok`].
    Put {
        /// The key.
        key: Vec<u8>,
        /// The new value.
        value: Vec<u8>,
    },
    /// Reads `key`; the only read-only operation. Result: [`KvResult::Value`].
    Get {
        /// The key.
        key: Vec<u8>,
    },
    /// Removes `key`. Result: [`KvResult::Ok`].
    Delete {
        /// The key.
        key: Vec<u8>,
    },
    /// Appends `value` to the value of `key` (creating it if absent). Result:
    /// [`KvResult::Value`] with the new value.
    Append {
        /// The key.
        key: Vec<u8>,
        /// Bytes to append.
        value: Vec<u8>,
    },
    /// Sets `key` to `new` if its value equals `expect` (`None` = absent). Result:
    /// [`KvResult::Ok`] or [`KvResult::CasFailed`] with the current value.
    Cas {
        /// The key.
        key: Vec<u8>,
        /// The value required for the swap.
        expect: Option<Vec<u8>>,
        /// The value to store.
        new: Vec<u8>,
    },
    /// Returns the agreed timestamp of the executing batch. Result: [`KvResult::Time`].
    Time,
}

/// The result of a [`KvOp`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum KvResult {
    /// Done.
    Ok,
    /// A value, or `None` if the key is absent.
    Value(Option<Vec<u8>>),
    /// A compare-and-swap did not match; carries the current value.
    CasFailed(Option<Vec<u8>>),
    /// The agreed timestamp, in microseconds.
    Time(u64),
    /// The operation did not decode (or a mutating operation was sent as read-only).
    Invalid,
}

/// Postcard encoding of `v`.
fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    // Serializing these types into a growable Vec cannot fail: every sequence has a known
    // length and no impl returns a custom error.
    postcard::to_allocvec(v).expect("postcard serialization into a Vec is infallible")
}

/// Postcard decoding of exactly `b` (trailing bytes rejected); never panics.
fn decode<'a, T: Deserialize<'a>>(b: &'a [u8]) -> Option<T> {
    match postcard::take_from_bytes(b) {
        Ok((v, [])) => Some(v),
        _ => None,
    }
}

impl KvOp {
    /// The wire encoding (postcard).
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    /// Decodes an operation; `None` if `b` is not exactly one encoded operation.
    pub fn decode(b: &[u8]) -> Option<KvOp> {
        decode(b)
    }
}

impl KvResult {
    /// The wire encoding (postcard).
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    /// Decodes a result; `None` if `b` is not exactly one encoded result.
    pub fn decode(b: &[u8]) -> Option<KvResult> {
        decode(b)
    }
}

/// The state key of user key `key`.
fn user_key(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.push(USER_PREFIX);
    k.extend_from_slice(key);
    k
}

/// The key-value service.
#[derive(Clone, Debug)]
pub struct KvService {
    state: PartitionedState,
    /// Last timestamp this replica proposed as primary. Not replicated: it only keeps one
    /// primary's pipelined proposals increasing before earlier batches execute.
    last_proposed: u64,
    /// Clock tolerance for accepting a proposal, in microseconds.
    tolerance_us: u64,
    /// Which uncommitted batch wrote each key, for reads during tentative execution. Not
    /// replicated state.
    writes: WriteTracker,
}

impl Default for KvService {
    fn default() -> Self {
        KvService::new()
    }
}

impl KvService {
    /// An empty store with the default clock tolerance.
    pub fn new() -> Self {
        KvService::with_clock_tolerance(DEFAULT_CLOCK_TOLERANCE)
    }

    /// An empty store whose backups accept timestamps within `tolerance` of their clock.
    pub fn with_clock_tolerance(tolerance: Duration) -> Self {
        KvService {
            state: PartitionedState::new(PARTITIONS),
            last_proposed: 0,
            tolerance_us: u64::try_from(tolerance.as_micros()).unwrap_or(u64::MAX),
            writes: WriteTracker::new(),
        }
    }

    /// The current value of user key `key`.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.state.get(&user_key(key))
    }

    /// The last agreed timestamp in the replicated state (0 before the first batch).
    pub fn last_agreed_time(&self) -> u64 {
        self.state
            .get(TS_KEY)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map_or(0, u64::from_le_bytes)
    }

    /// Number of user keys.
    pub fn len(&self) -> usize {
        self.state.len() - usize::from(self.state.get(TS_KEY).is_some())
    }

    /// Whether there are no user keys.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Folds the batch's `nondet` into the agreed clock and returns the timestamp the
    /// operation sees. A timestamp above the stored one is a new batch: store it. An equal one
    /// is the same batch. A lower one (which `check_nondet` rejects) or a malformed input
    /// leaves the clock alone. So time never goes backwards and all operations of a batch see
    /// the same value.
    fn advance_clock(&mut self, nondet: &[u8]) -> u64 {
        let last = self.last_agreed_time();
        match <[u8; 8]>::try_from(nondet) {
            Ok(b) if u64::from_le_bytes(b) > last => {
                let ts = u64::from_le_bytes(b);
                self.put(TS_KEY.to_vec(), b.to_vec());
                ts
            }
            _ => last,
        }
    }

    /// Sets a state key, recording the write for reads during tentative execution.
    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.writes.record(&key);
        self.state.put(key, value);
    }

    fn read(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.get(key).map(<[u8]>::to_vec)
    }

    fn apply(&mut self, op: KvOp, ts: u64) -> KvResult {
        match op {
            KvOp::Put { key, value } => {
                self.put(user_key(&key), value);
                KvResult::Ok
            }
            KvOp::Get { key } => KvResult::Value(self.read(&key)),
            KvOp::Delete { key } => {
                let k = user_key(&key);
                self.writes.record(&k);
                self.state.delete(&k);
                KvResult::Ok
            }
            KvOp::Append { key, value } => {
                let mut v = self.read(&key).unwrap_or_default();
                v.extend_from_slice(&value);
                self.put(user_key(&key), v.clone());
                KvResult::Value(Some(v))
            }
            KvOp::Cas { key, expect, new } => {
                let current = self.read(&key);
                if current == expect {
                    self.put(user_key(&key), new);
                    KvResult::Ok
                } else {
                    KvResult::CasFailed(current)
                }
            }
            KvOp::Time => KvResult::Time(ts),
        }
    }
}

impl Service for KvService {
    /// Only `Get` is read-only; anything undecodable is read-write (it executes as `Invalid`).
    fn is_read_only(&self, op: &[u8]) -> bool {
        matches!(KvOp::decode(op), Some(KvOp::Get { .. }))
    }

    /// `max(now, last proposed + 1, last agreed + 1)` as 8 bytes LE.
    fn propose_nondet(&mut self, _seq: Seq, now: Time) -> Vec<u8> {
        let agreed = self.last_agreed_time();
        super::timestamp::propose(&mut self.last_proposed, agreed, now)
    }

    /// Exactly 8 bytes, above the last agreed timestamp, within the tolerance of `now`.
    fn check_nondet(&self, _seq: Seq, nondet: &[u8], now: Time) -> bool {
        super::timestamp::check(nondet, self.last_agreed_time(), now, self.tolerance_us)
    }

    fn execute(&mut self, _client: ClientId, op: &[u8], nondet: &[u8]) -> Vec<u8> {
        let ts = self.advance_clock(nondet);
        let result = match KvOp::decode(op) {
            Some(op) => self.apply(op, ts),
            None => KvResult::Invalid,
        };
        result.encode()
    }

    /// Answers `Get`; any other operation is `Invalid` here (it must be ordered).
    fn execute_read_only(&self, _client: ClientId, op: &[u8]) -> Vec<u8> {
        let result = match KvOp::decode(op) {
            Some(KvOp::Get { key }) => KvResult::Value(self.read(&key)),
            _ => KvResult::Invalid,
        };
        result.encode()
    }

    fn begin_batch(&mut self, seq: Seq, committed: Seq) {
        self.writes.begin_batch(seq, committed);
    }

    /// A `Get` of a key no uncommitted batch wrote.
    fn execute_read_only_committed(
        &self,
        client: ClientId,
        op: &[u8],
        committed: Seq,
    ) -> Option<Vec<u8>> {
        if let Some(KvOp::Get { key }) = KvOp::decode(op) {
            if self.writes.written_after(&user_key(&key), committed) {
                return None;
            }
        }
        Some(self.execute_read_only(client, op))
    }

    crate::delegate_state!(state);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(t: u64) -> Vec<u8> {
        t.to_le_bytes().to_vec()
    }

    /// Executes `op` with timestamp `t` and decodes the result.
    fn run(s: &mut KvService, op: KvOp, t: u64) -> KvResult {
        KvResult::decode(&s.execute(1, &op.encode(), &ts(t))).expect("result decodes")
    }

    fn put(k: &[u8], v: &[u8]) -> KvOp {
        KvOp::Put {
            key: k.to_vec(),
            value: v.to_vec(),
        }
    }

    fn get(k: &[u8]) -> KvOp {
        KvOp::Get { key: k.to_vec() }
    }

    #[test]
    fn encodings_round_trip() {
        let ops = [
            put(b"k", b"v"),
            get(b"k"),
            KvOp::Delete { key: b"k".to_vec() },
            KvOp::Append {
                key: b"k".to_vec(),
                value: b"x".to_vec(),
            },
            KvOp::Cas {
                key: b"k".to_vec(),
                expect: None,
                new: b"n".to_vec(),
            },
            KvOp::Time,
        ];
        for op in ops {
            assert_eq!(KvOp::decode(&op.encode()), Some(op.clone()));
            let mut long = op.encode();
            long.push(0);
            assert_eq!(KvOp::decode(&long), None, "trailing bytes rejected");
        }
        for r in [
            KvResult::Ok,
            KvResult::Value(Some(b"v".to_vec())),
            KvResult::CasFailed(None),
            KvResult::Time(7),
            KvResult::Invalid,
        ] {
            assert_eq!(KvResult::decode(&r.encode()), Some(r.clone()));
        }
        assert_eq!(KvResult::decode(&[0xff, 0xff]), None);
    }

    #[test]
    fn put_get_delete() {
        let mut s = KvService::new();
        assert_eq!(run(&mut s, get(b"a"), 1), KvResult::Value(None));
        assert_eq!(run(&mut s, put(b"a", b"1"), 2), KvResult::Ok);
        assert_eq!(
            run(&mut s, get(b"a"), 3),
            KvResult::Value(Some(b"1".to_vec()))
        );
        assert_eq!(s.get(b"a"), Some(&b"1"[..]));
        assert_eq!(s.len(), 1);
        let ro = s.execute_read_only(2, &get(b"a").encode());
        assert_eq!(
            KvResult::decode(&ro),
            Some(KvResult::Value(Some(b"1".to_vec())))
        );
        assert_eq!(
            run(&mut s, KvOp::Delete { key: b"a".to_vec() }, 4),
            KvResult::Ok
        );
        assert_eq!(s.get(b"a"), None);
        assert!(s.is_empty());
    }

    #[test]
    fn append_returns_new_value() {
        let mut s = KvService::new();
        let app = |v: &[u8]| KvOp::Append {
            key: b"log".to_vec(),
            value: v.to_vec(),
        };
        assert_eq!(
            run(&mut s, app(b"a"), 1),
            KvResult::Value(Some(b"a".to_vec()))
        );
        assert_eq!(
            run(&mut s, app(b"bc"), 2),
            KvResult::Value(Some(b"abc".to_vec()))
        );
        assert_eq!(s.get(b"log"), Some(&b"abc"[..]));
    }

    #[test]
    fn compare_and_swap() {
        let mut s = KvService::new();
        let cas = |e: Option<&[u8]>, n: &[u8]| KvOp::Cas {
            key: b"c".to_vec(),
            expect: e.map(<[u8]>::to_vec),
            new: n.to_vec(),
        };
        assert_eq!(run(&mut s, cas(None, b"1"), 1), KvResult::Ok);
        assert_eq!(
            run(&mut s, cas(None, b"2"), 2),
            KvResult::CasFailed(Some(b"1".to_vec()))
        );
        assert_eq!(
            run(&mut s, cas(Some(b"0"), b"2"), 3),
            KvResult::CasFailed(Some(b"1".to_vec()))
        );
        assert_eq!(run(&mut s, cas(Some(b"1"), b"2"), 4), KvResult::Ok);
        assert_eq!(s.get(b"c"), Some(&b"2"[..]));
    }

    #[test]
    fn time_is_agreed_and_shared_by_a_batch() {
        let mut s = KvService::new();
        assert_eq!(run(&mut s, KvOp::Time, 1000), KvResult::Time(1000));
        // A second op of the same batch sees the same time.
        assert_eq!(run(&mut s, KvOp::Time, 1000), KvResult::Time(1000));
        assert_eq!(run(&mut s, KvOp::Time, 2000), KvResult::Time(2000));
        // Time never goes backwards, even for a stale or malformed nondet.
        assert_eq!(run(&mut s, KvOp::Time, 1500), KvResult::Time(2000));
        let r = s.execute(1, &KvOp::Time.encode(), &[1, 2, 3]);
        assert_eq!(KvResult::decode(&r), Some(KvResult::Time(2000)));
        assert_eq!(s.last_agreed_time(), 2000);
        // A user key named like the internal clock key does not touch the clock.
        run(&mut s, put(b"ts", &[0xff; 8]), 2001);
        run(&mut s, put(TS_KEY, &[0xff; 8]), 2002);
        assert_eq!(s.last_agreed_time(), 2002);
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn invalid_op() {
        let mut s = KvService::new();
        let r = s.execute(1, &[0xff, 0x01], &ts(5));
        assert_eq!(KvResult::decode(&r), Some(KvResult::Invalid));
        assert_eq!(
            KvResult::decode(&s.execute(1, &[], &ts(6))),
            Some(KvResult::Invalid)
        );
        // Mutations sent down the read-only path are refused and change nothing.
        let d = s.current_partition_digests();
        let r = s.execute_read_only(1, &put(b"k", b"v").encode());
        assert_eq!(KvResult::decode(&r), Some(KvResult::Invalid));
        assert_eq!(s.current_partition_digests(), d);
        assert_eq!(s.get(b"k"), None);
    }

    #[test]
    fn classification() {
        let s = KvService::new();
        assert!(s.is_read_only(&get(b"k").encode()));
        assert!(!s.is_read_only(&put(b"k", b"v").encode()));
        assert!(!s.is_read_only(&KvOp::Time.encode()));
        assert!(!s.is_read_only(
            &KvOp::Append {
                key: vec![],
                value: vec![]
            }
            .encode()
        ));
        assert!(!s.is_read_only(&[0xff]));
        assert!(!s.is_read_only(&[]));
    }

    #[test]
    fn reads_during_tentative_execution_wait_only_for_keys_it_wrote() {
        let mut s = KvService::new();
        s.begin_batch(1, 0);
        run(&mut s, put(b"a", b"1"), 1);
        run(&mut s, put(b"b", b"1"), 1);
        // Batch 2 runs tentatively (1 is committed) and writes `a` only.
        s.begin_batch(2, 1);
        run(&mut s, put(b"a", b"2"), 2);
        let read = |s: &KvService, k: &[u8]| {
            s.execute_read_only_committed(1, &get(k).encode(), 1)
                .map(|r| KvResult::decode(&r).expect("result decodes"))
        };
        assert_eq!(read(&s, b"a"), None);
        assert_eq!(read(&s, b"b"), Some(KvResult::Value(Some(b"1".to_vec()))));
        assert_eq!(read(&s, b"c"), Some(KvResult::Value(None)));
        // A delete counts as a write.
        s.begin_batch(3, 2);
        run(&mut s, KvOp::Delete { key: b"b".to_vec() }, 3);
        assert_eq!(
            s.execute_read_only_committed(1, &get(b"b").encode(), 2),
            None
        );
        // Once 3 commits, nothing waits.
        s.begin_batch(4, 3);
        assert!(s
            .execute_read_only_committed(1, &get(b"b").encode(), 3)
            .is_some());
    }

    #[test]
    fn nondet_proposals_are_monotonic() {
        let mut p = KvService::new();
        let t = |b: Vec<u8>| u64::from_le_bytes(b.try_into().expect("8 bytes"));
        assert_eq!(t(p.propose_nondet(1, Time::from_micros(100))), 100);
        // Pipelined proposals at the same (or an earlier) clock still increase.
        assert_eq!(t(p.propose_nondet(2, Time::from_micros(100))), 101);
        assert_eq!(t(p.propose_nondet(3, Time::from_micros(50))), 102);
        assert_eq!(t(p.propose_nondet(4, Time::from_micros(500))), 500);
        // Bounded below by the replicated clock (e.g. a new primary with a slow clock).
        let mut q = KvService::new();
        run(&mut q, KvOp::Time, 10_000);
        assert_eq!(t(q.propose_nondet(9, Time::from_micros(20))), 10_001);
        // Starting at time zero still yields an acceptable timestamp.
        let mut z = KvService::new();
        let n = z.propose_nondet(1, Time::ZERO);
        assert!(KvService::new().check_nondet(1, &n, Time::ZERO));
    }

    #[test]
    fn nondet_check_rejects_skew_and_stale() {
        let mut b = KvService::new();
        let now = Time::from_micros(10_000_000);
        assert!(b.check_nondet(1, &ts(10_000_000), now));
        assert!(
            b.check_nondet(1, &ts(11_000_000), now),
            "exactly the tolerance"
        );
        assert!(b.check_nondet(1, &ts(9_000_000), now));
        assert!(!b.check_nondet(1, &ts(11_000_001), now), "too far ahead");
        assert!(!b.check_nondet(1, &ts(8_999_999), now), "too far behind");
        assert!(!b.check_nondet(1, &[0; 7], now));
        assert!(!b.check_nondet(1, &[0; 9], now));
        assert!(!b.check_nondet(1, &[], now));
        run(&mut b, KvOp::Time, 10_000_000);
        assert!(
            !b.check_nondet(2, &ts(10_000_000), now),
            "not above the agreed time"
        );
        assert!(b.check_nondet(2, &ts(10_000_001), now));
        let tight = KvService::with_clock_tolerance(Duration::from_millis(1));
        assert!(!tight.check_nondet(1, &ts(10_001_001), now));
        assert!(tight.check_nondet(1, &ts(10_001_000), now));
    }

    #[test]
    fn checkpoint_and_rollback_through_the_service_trait() {
        let mut s = KvService::new();
        assert_eq!(s.partition_count(), PARTITIONS);
        run(&mut s, put(b"a", b"1"), 10);
        let d = s.checkpoint(128);
        assert_eq!(d.len(), PARTITIONS as usize);
        assert_eq!(s.checkpoint_partition_digests(128), Some(d.clone()));
        run(&mut s, put(b"a", b"2"), 20);
        run(&mut s, put(b"b", b"3"), 30);
        assert_ne!(s.current_partition_digests(), d);
        assert_eq!(s.rollback(), Some(128));
        assert_eq!(s.current_partition_digests(), d);
        assert_eq!(s.get(b"a"), Some(&b"1"[..]));
        assert_eq!(s.get(b"b"), None);
        assert_eq!(s.last_agreed_time(), 10, "the agreed clock rolls back too");
        s.discard_checkpoints_below(129);
        assert_eq!(s.checkpoint_partition_digests(128), None);
        assert_eq!(s.rollback(), None);
    }

    #[test]
    fn state_transfer_through_the_service_trait() {
        let mut a = KvService::new();
        for i in 0..40u8 {
            run(&mut a, put(&[i], &[i; 3]), u64::from(i) + 1);
        }
        let d = a.checkpoint(256);
        run(&mut a, put(&[0], b"later"), 100);
        let mut b = KvService::new();
        for p in 0..PARTITIONS {
            let data = a.export_partition(256, p).expect("held");
            assert!(b.import_partition(p, &data, d[p as usize]));
        }
        assert_eq!(b.finish_import(256), d);
        assert_eq!(b.get(&[0]), Some(&[0u8; 3][..]));
        assert_eq!(b.last_agreed_time(), 40);
        assert_eq!(b.len(), 40);
    }
}
