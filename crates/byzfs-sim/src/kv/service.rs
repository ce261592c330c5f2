//! Stand-in for `byzfs_bft::services::kv::KvService`: a whole-state, one-partition
//! implementation of the [`Service`] trait with the agreed semantics (it reuses the reference
//! [`KvModel`]). Simple rather than fast. Delete once the real service lands (see [`crate::kv`]).

use super::model::{nondet_ts, KvModel};
use super::op::{KvOp, KvResult};
use byzfs_bft::ids::{ClientId, Seq};
use byzfs_bft::{Digest, Service, Time};
use std::collections::BTreeMap;

/// How far a backup lets the primary's proposed timestamp stray from its own clock, in µs.
pub const NONDET_TOLERANCE_US: u64 = 1_000_000;

/// The stand-in key-value service.
#[derive(Clone, Debug, Default)]
pub struct KvService {
    live: KvModel,
    checkpoints: BTreeMap<Seq, KvModel>,
    importing: Option<KvModel>,
}

fn encode_model(m: &KvModel, out: &mut Vec<u8>) {
    out.extend_from_slice(&m.last_ts().to_le_bytes());
    for (k, v) in m.entries() {
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(k);
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
}

fn decode_model(b: &[u8]) -> Option<KvModel> {
    let ts = u64::from_le_bytes(b.get(..8)?.try_into().ok()?);
    let mut rest = &b[8..];
    let mut entries = Vec::new();
    while !rest.is_empty() {
        let mut field = || -> Option<Vec<u8>> {
            let len = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
            let v = rest.get(4..4usize.checked_add(len)?)?.to_vec();
            rest = &rest[4 + len..];
            Some(v)
        };
        let k = field()?;
        let v = field()?;
        entries.push((k, v));
    }
    Some(KvModel::from_parts(entries, ts))
}

fn digest_of(m: &KvModel) -> Digest {
    let mut b = Vec::new();
    encode_model(m, &mut b);
    Digest::of(&b)
}

impl KvService {
    /// An empty store.
    pub fn new() -> KvService {
        KvService::default()
    }
}

impl Service for KvService {
    fn is_read_only(&self, op: &[u8]) -> bool {
        matches!(KvOp::decode(op), Some(KvOp::Get { .. }))
    }

    fn propose_nondet(&mut self, _seq: Seq, now: Time) -> Vec<u8> {
        now.as_micros().to_le_bytes().to_vec()
    }

    fn check_nondet(&self, _seq: Seq, nondet: &[u8], now: Time) -> bool {
        nondet.len() == 8 && nondet_ts(nondet).abs_diff(now.as_micros()) <= NONDET_TOLERANCE_US
    }

    fn execute(&mut self, _client: ClientId, op: &[u8], nondet: &[u8]) -> Vec<u8> {
        self.live.execute_bytes(op, nondet).encode()
    }

    fn execute_read_only(&self, _client: ClientId, op: &[u8]) -> Vec<u8> {
        match KvOp::decode(op) {
            Some(op) => self.live.read_only(&op).encode(),
            None => KvResult::Invalid.encode(),
        }
    }

    fn partition_count(&self) -> u32 {
        1
    }

    fn checkpoint(&mut self, seq: Seq) -> Vec<Digest> {
        self.checkpoints.insert(seq, self.live.clone());
        vec![digest_of(&self.live)]
    }

    fn discard_checkpoints_below(&mut self, seq: Seq) {
        self.checkpoints = self.checkpoints.split_off(&seq);
    }

    fn rollback(&mut self) -> Option<Seq> {
        let (&seq, m) = self.checkpoints.last_key_value()?;
        self.live = m.clone();
        Some(seq)
    }

    fn current_partition_digests(&self) -> Vec<Digest> {
        vec![digest_of(&self.live)]
    }

    fn checkpoint_partition_digests(&self, seq: Seq) -> Option<Vec<Digest>> {
        self.checkpoints.get(&seq).map(|m| vec![digest_of(m)])
    }

    fn export_partition(&self, seq: Seq, part: u32) -> Option<Vec<u8>> {
        if part != 0 {
            return None;
        }
        let mut b = Vec::new();
        encode_model(self.checkpoints.get(&seq)?, &mut b);
        Some(b)
    }

    fn import_partition(&mut self, part: u32, data: &[u8], expected: Digest) -> bool {
        if part != 0 || Digest::of(data) != expected {
            return false;
        }
        match decode_model(data) {
            Some(m) => {
                self.importing = Some(m);
                true
            }
            None => false,
        }
    }

    fn finish_import(&mut self, seq: Seq) -> Vec<Digest> {
        if let Some(m) = self.importing.take() {
            self.live = m;
        }
        self.checkpoints.clear();
        self.checkpoints.insert(seq, self.live.clone());
        vec![digest_of(&self.live)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_rollback_and_transfer() {
        let mut s = KvService::new();
        let nd = 5u64.to_le_bytes();
        let put = KvOp::Put {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
        }
        .encode();
        s.execute(1, &put, &nd);
        let d4 = s.checkpoint(4);
        let app = KvOp::Append {
            key: b"k".to_vec(),
            value: b"w".to_vec(),
        }
        .encode();
        s.execute(1, &app, &nd);
        assert_ne!(s.current_partition_digests(), d4);
        assert_eq!(s.rollback(), Some(4));
        assert_eq!(s.current_partition_digests(), d4);
        let data = s.export_partition(4, 0).expect("held");
        let mut t = KvService::new();
        assert!(!t.import_partition(0, &data, Digest::ZERO));
        assert!(t.import_partition(0, &data, d4[0]));
        assert_eq!(t.finish_import(4), d4);
        let get = KvOp::Get { key: b"k".to_vec() }.encode();
        assert!(t.is_read_only(&get) && !t.is_read_only(&app));
        assert_eq!(
            KvResult::decode(&t.execute_read_only(9, &get)),
            Some(KvResult::Value(Some(b"v".to_vec())))
        );
        let nd = s.propose_nondet(1, Time(10));
        assert!(s.check_nondet(1, &nd, Time(20)));
        assert!(!s.check_nondet(1, &[1, 2], Time(20)));
    }
}
