//! The null service of the PBFT micro-benchmarks (Castro & Liskov, Table 1: "null operation
//! with arguments and results of different sizes").
//!
//! Operation encoding: byte 0 is the kind (0 = read-write, 1 = read-only), bytes 1..5 the
//! requested result size as `u32` LE, and the rest is argument padding, ignored. The result is
//! that many zero bytes, capped at the service's `max_result`. A malformed operation (shorter
//! than 5 bytes, or an unknown kind) gets an empty result and counts as read-write, the same
//! on every replica.
//!
//! Every ordered execution increments a replicated counter, so checkpoint digests change as
//! they would for a real service and state transfer has something to move.

use crate::ids::{ClientId, Seq};
use crate::service::Service;
use crate::state::PartitionedState;
use crate::time::Time;

/// Default cap on the size of a result: 1 MiB, so a request cannot make replicas allocate
/// without bound.
pub const DEFAULT_MAX_RESULT: usize = 1 << 20;

const KIND_READ_WRITE: u8 = 0;
const KIND_READ_ONLY: u8 = 1;
const HEADER_LEN: usize = 5;
/// The key of the replicated execution counter.
const OPS_KEY: &[u8] = b"ops";

/// Builds a null operation: `arg_size` bytes of padding and a request for `result_size` bytes
/// of result.
pub fn op(read_only: bool, arg_size: usize, result_size: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER_LEN + arg_size);
    v.push(if read_only {
        KIND_READ_ONLY
    } else {
        KIND_READ_WRITE
    });
    v.extend_from_slice(&result_size.to_le_bytes());
    v.resize(HEADER_LEN + arg_size, 0);
    v
}

/// `(read_only, result_size)` of a well-formed operation.
fn parse(op: &[u8]) -> Option<(bool, u32)> {
    let header = op.get(..HEADER_LEN)?;
    let read_only = match header[0] {
        KIND_READ_WRITE => false,
        KIND_READ_ONLY => true,
        _ => return None,
    };
    let size = u32::from_le_bytes([header[1], header[2], header[3], header[4]]);
    Some((read_only, size))
}

/// The null service: one partition holding one counter.
#[derive(Clone, Debug)]
pub struct NullService {
    state: PartitionedState,
    max_result: usize,
}

impl Default for NullService {
    fn default() -> Self {
        NullService::new(DEFAULT_MAX_RESULT)
    }
}

impl NullService {
    /// A null service whose results are at most `max_result` bytes.
    pub fn new(max_result: usize) -> Self {
        NullService {
            state: PartitionedState::new(1),
            max_result,
        }
    }

    /// Number of ordered executions reflected in the current state.
    pub fn ops_executed(&self) -> u64 {
        self.state
            .get(OPS_KEY)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map_or(0, u64::from_le_bytes)
    }

    /// The result of `op`: zeros of the requested size, capped; empty if malformed.
    fn result(&self, op: &[u8]) -> Vec<u8> {
        match parse(op) {
            Some((_, size)) => {
                let len = usize::try_from(size)
                    .unwrap_or(usize::MAX)
                    .min(self.max_result);
                vec![0; len]
            }
            None => Vec::new(),
        }
    }
}

impl Service for NullService {
    fn is_read_only(&self, op: &[u8]) -> bool {
        parse(op).is_some_and(|(ro, _)| ro)
    }

    /// No non-determinism: always empty.
    fn propose_nondet(&mut self, _seq: Seq, _now: Time) -> Vec<u8> {
        Vec::new()
    }

    fn check_nondet(&self, _seq: Seq, nondet: &[u8], _now: Time) -> bool {
        nondet.is_empty()
    }

    /// Increments the counter (for every ordered operation, malformed or not) and returns the
    /// requested zeros.
    fn execute(&mut self, _client: ClientId, op: &[u8], _nondet: &[u8]) -> Vec<u8> {
        let n = self.ops_executed().wrapping_add(1);
        self.state.put(OPS_KEY.to_vec(), n.to_le_bytes().to_vec());
        self.result(op)
    }

    fn execute_read_only(&self, _client: ClientId, op: &[u8]) -> Vec<u8> {
        self.result(op)
    }

    crate::delegate_state!(state);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_encoding_and_results() {
        let mut s = NullService::default();
        let rw = op(false, 100, 8);
        assert_eq!(rw.len(), 105);
        assert_eq!(rw[0], 0);
        assert_eq!(&rw[1..5], &8u32.to_le_bytes());
        assert_eq!(s.execute(1, &rw, &[]), vec![0; 8]);
        assert_eq!(s.execute(1, &op(false, 0, 0), &[]), Vec::<u8>::new());
        assert_eq!(s.execute_read_only(1, &op(true, 4096, 4096)), vec![0; 4096]);
    }

    #[test]
    fn classification_comes_from_the_op() {
        let s = NullService::default();
        assert!(s.is_read_only(&op(true, 0, 0)));
        assert!(!s.is_read_only(&op(false, 0, 0)));
        assert!(!s.is_read_only(&[1, 0, 0]), "short op is read-write");
        assert!(
            !s.is_read_only(&[2, 0, 0, 0, 0]),
            "unknown kind is read-write"
        );
        assert!(!s.is_read_only(&[]));
    }

    #[test]
    fn malformed_op_gives_empty_result() {
        let mut s = NullService::default();
        assert_eq!(s.execute(1, &[0, 5, 0], &[]), Vec::<u8>::new());
        assert_eq!(s.execute(1, &[9, 5, 0, 0, 0], &[]), Vec::<u8>::new());
        assert_eq!(s.execute_read_only(1, &[]), Vec::<u8>::new());
    }

    #[test]
    fn result_size_is_capped() {
        let mut s = NullService::new(10);
        assert_eq!(s.execute(1, &op(false, 0, u32::MAX), &[]).len(), 10);
        assert_eq!(s.execute_read_only(1, &op(true, 0, 11)).len(), 10);
        assert_eq!(
            NullService::default()
                .execute_read_only(1, &op(true, 0, u32::MAX))
                .len(),
            DEFAULT_MAX_RESULT
        );
    }

    #[test]
    fn counter_changes_digests_and_rolls_back() {
        let mut s = NullService::default();
        assert_eq!(s.partition_count(), 1);
        let d0 = s.checkpoint(0);
        s.execute(1, &op(false, 0, 0), &[]);
        s.execute(2, &op(true, 0, 0), &[]);
        assert_eq!(s.ops_executed(), 2);
        let d2 = s.current_partition_digests();
        assert_ne!(d0, d2);
        // Read-only execution leaves the state alone.
        s.execute_read_only(1, &op(true, 0, 3));
        assert_eq!(s.current_partition_digests(), d2);
        assert_eq!(s.rollback(), Some(0));
        assert_eq!(s.ops_executed(), 0);
        assert_eq!(s.current_partition_digests(), d0);
    }

    #[test]
    fn nondet_is_empty() {
        let mut s = NullService::default();
        assert!(s.propose_nondet(1, Time::from_micros(5)).is_empty());
        assert!(s.check_nondet(1, &[], Time::ZERO));
        assert!(!s.check_nondet(1, &[0], Time::ZERO));
    }

    #[test]
    fn state_transfer_round_trip() {
        let mut a = NullService::default();
        for _ in 0..3 {
            a.execute(1, &op(false, 0, 0), &[]);
        }
        let d = a.checkpoint(128);
        let mut b = NullService::default();
        let data = a.export_partition(128, 0).expect("held");
        assert!(!b.import_partition(0, &data, crate::crypto::Digest::ZERO));
        assert!(b.import_partition(0, &data, d[0]));
        assert_eq!(b.finish_import(128), d);
        assert_eq!(b.ops_executed(), 3);
        assert_eq!(b.checkpoint_partition_digests(128), Some(d));
    }
}
