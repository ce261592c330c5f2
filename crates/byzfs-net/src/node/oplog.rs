//! The unreplicated server's durability (NO-REP with `--durability disk`): the same redb store
//! and group commit as a replica ([`crate::storage::DiskDurability`]), so that the baseline
//! pays what the replicas pay for "same durability" (issue #4 item 4).
//!
//! Every executed read-write request is stored as a one-request batch (its client frame and
//! the non-deterministic input it ran with) with an `Executed` record, in the turn's one
//! fsync'd transaction, before any reply of that turn leaves. Every `interval` operations the
//! service takes a checkpoint; its changed partitions, plus one more partition holding the
//! reply cache (so a request retransmitted across a restart is answered, not re-executed),
//! are stored as a checkpoint image, which drops the log below it. At start the server
//! imports the stored image and re-executes the log after it. A service that persists its
//! own state (`Service::persists_state`, the file service in `disk` mode) is made durable
//! just before the commit that stores a checkpoint, which then holds only its digests, and
//! reopens at that checkpoint instead of importing it (as a replica does: ARCHITECTURE.md
//! "Durability").
//!
//! In `memory` mode nothing is written and no checkpoint is taken.

use crate::storage::Durability;
use byzfs_bft::message::{BatchBody, RequestView};
use byzfs_bft::wire::Frame;
use byzfs_bft::{
    CheckpointImage, ClientId, Digest, PersistRecord, RequestId, Seq, Service, StoreRecord,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Client → its last executed request id and result.
pub(crate) type ReplyCache = BTreeMap<ClientId, (RequestId, Vec<u8>)>;

/// What the server stores and when.
pub(crate) struct OpLog {
    durability: Box<dyn Durability>,
    /// Whether anything is written (`false` in memory mode).
    writes: bool,
    /// Operations between checkpoints.
    interval: u64,
    /// Sequence number of the last logged operation.
    seq: Seq,
    /// Sequence number of the last stored checkpoint.
    stable: Seq,
    /// Partition digests of the last stored image (empty before the first).
    stored_digests: Vec<Digest>,
    records: Vec<PersistRecord>,
    stores: Vec<StoreRecord>,
}

impl OpLog {
    /// A log over `durability` (its name `"memory"` turns writing off) with a checkpoint every
    /// `interval` operations.
    pub(crate) fn new(durability: Box<dyn Durability>, interval: u64) -> OpLog {
        let writes = durability.name() != "memory";
        OpLog {
            durability,
            writes,
            interval: interval.max(1),
            seq: 0,
            stable: 0,
            stored_digests: Vec::new(),
            records: Vec::new(),
            stores: Vec::new(),
        }
    }

    /// Sequence number of the last stored checkpoint (0 before the first).
    pub(crate) fn stable(&self) -> Seq {
        self.stable
    }

    /// The storage mode's name.
    pub(crate) fn mode(&self) -> &'static str {
        self.durability.name()
    }

    /// What the durability wrote ([`Durability::counters`]).
    pub(crate) fn disk_counters(&self) -> crate::storage::DiskCounters {
        self.durability.counters()
    }

    /// Rebuilds `service` and `replies` from what was stored before this start. Returns the
    /// number of operations re-executed after the stored checkpoint.
    pub(crate) fn restore<S: Service>(
        &mut self,
        service: &mut S,
        replies: &mut ReplyCache,
        max_frame: usize,
    ) -> Result<u64, String> {
        let Some(loaded) = self.durability.take_loaded() else {
            return Ok(0);
        };
        let pc = service.partition_count() as usize;
        if let Some(ck) = &loaded.checkpoint {
            if ck.parts.len() != pc + 1 {
                return Err(format!(
                    "stored checkpoint has {} partitions, the service {} (+1 reply cache)",
                    ck.parts.len(),
                    pc
                ));
            }
            let stored: Vec<Digest> = ck.parts[..pc].iter().map(|(d, _)| *d).collect();
            let reopen = service.persists_state()
                && ck.parts[..pc].iter().any(|(_, content)| content.is_empty());
            let digests = if reopen {
                service.reopen(ck.seq).map_err(|e| {
                    format!(
                        "the service's own store cannot return to checkpoint {}: {e}",
                        ck.seq
                    )
                })?
            } else {
                for (p, (digest, content)) in ck.parts[..pc].iter().enumerate() {
                    // `p < pc`, and `pc` came from a u32.
                    if !service.import_partition(p as u32, content, *digest) {
                        return Err(format!("stored partition {p} does not match its digest"));
                    }
                }
                service.finish_import(ck.seq)
            };
            if digests != stored {
                return Err(format!(
                    "stored checkpoint {} does not match its digests",
                    ck.seq
                ));
            }
            let (digest, content) = &ck.parts[pc];
            if Digest::of(content) != *digest {
                return Err("stored reply cache does not match its digest".into());
            }
            *replies = postcard::from_bytes(content)
                .map_err(|e| format!("stored reply cache does not decode: {e}"))?;
            self.seq = ck.seq;
            self.stable = ck.seq;
            self.stored_digests = ck.parts.iter().map(|(d, _)| *d).collect();
        }
        let executed: std::collections::BTreeSet<Seq> = loaded
            .records
            .iter()
            .filter_map(|r| match r {
                PersistRecord::Executed { seq, .. } => Some(*seq),
                _ => None,
            })
            .collect();
        let mut batches: Vec<_> = loaded
            .batches
            .into_iter()
            .filter(|b| b.seq > self.seq && executed.contains(&b.seq))
            .collect();
        batches.sort_by_key(|b| b.seq);
        let mut replayed = 0;
        for b in batches {
            if b.seq != self.seq + 1 {
                return Err(format!(
                    "operation {} is missing from the log",
                    self.seq + 1
                ));
            }
            let frame = b
                .body
                .requests
                .first()
                .ok_or_else(|| format!("operation {} has no request", b.seq))?;
            let (client, rid, op) = decode_request(frame, max_frame)
                .ok_or_else(|| format!("operation {} does not decode", b.seq))?;
            let result = service.execute(client, op, &b.body.nondet);
            replies.insert(client, (rid, result));
            self.seq = b.seq;
            replayed += 1;
        }
        Ok(replayed)
    }

    /// Logs one executed read-write request: its client `frame` and the `nondet` it ran with.
    pub(crate) fn record(&mut self, frame: &[u8], nondet: &[u8]) {
        self.seq += 1;
        if !self.writes {
            return;
        }
        let body = BatchBody {
            requests: vec![frame.to_vec()],
            big: Vec::new(),
            nondet: nondet.to_vec(),
        };
        let digest = Digest::of(frame);
        self.stores.push(StoreRecord::Batch {
            seq: self.seq,
            digest,
            body: Arc::new(body),
            big: Vec::new(),
        });
        self.records.push(PersistRecord::Executed {
            seq: self.seq,
            digest,
        });
    }

    /// Ends a turn: takes a checkpoint if `interval` operations passed since the last one,
    /// then makes everything of the turn durable (one transaction). Replies of the turn may
    /// leave only after this returns `Ok`.
    pub(crate) fn commit<S: Service>(
        &mut self,
        service: &mut S,
        replies: &ReplyCache,
    ) -> std::io::Result<()> {
        if !self.writes {
            return Ok(());
        }
        let mut recorded = None;
        if self.seq >= self.stable + self.interval {
            self.checkpoint(service, replies);
            // The commit below records the checkpoint: the service's own store must hold it
            // first. The unreplicated server has no other work to do meanwhile: its disk
            // work runs here.
            let work = service
                .persist(self.stable)
                .map_err(std::io::Error::other)?;
            byzfs_bft::service::run_in_line(service, work).map_err(std::io::Error::other)?;
            recorded = Some(self.stable);
        }
        if self.records.is_empty() && self.stores.is_empty() {
            return Ok(());
        }
        let r = self.durability.commit(&self.records, &self.stores);
        self.records.clear();
        self.stores.clear();
        r?;
        if let Some(seq) = recorded {
            let work = service.recorded(seq).map_err(std::io::Error::other)?;
            byzfs_bft::service::run_in_line(service, work).map_err(std::io::Error::other)?;
        }
        Ok(())
    }

    /// Stores the service's state at `seq` (changed partitions only) and the reply cache.
    fn checkpoint<S: Service>(&mut self, service: &mut S, replies: &ReplyCache) {
        let seq = self.seq;
        let mut digests = service.checkpoint(seq);
        let cache = postcard::to_allocvec(replies).unwrap_or_default();
        digests.push(Digest::of(&cache));
        let pc = digests.len() - 1;
        let persists = service.persists_state();
        let mut changed = Vec::new();
        for (p, d) in digests.iter().enumerate() {
            if self.stored_digests.get(p) == Some(d) {
                continue;
            }
            let content = if p == pc {
                cache.clone()
            } else if persists {
                // The service keeps its own state: its digest suffices here.
                Vec::new()
            } else {
                // `p < pc`, which came from a u32 partition count.
                match service.export_partition(seq, p as u32) {
                    Some(c) => c,
                    None => return, // Cannot happen for the checkpoint just taken.
                }
            };
            changed.push((p as u32, *d, content));
        }
        let root = {
            let mut all = Vec::with_capacity(digests.len() * 32);
            for d in &digests {
                all.extend_from_slice(&d.0);
            }
            Digest::of(&all)
        };
        self.stores
            .push(StoreRecord::Checkpoint(Arc::new(CheckpointImage {
                seq,
                digest: root,
                partitions: digests.len() as u32,
                changed,
            })));
        // Only this checkpoint is kept (the service needs one to track changes against).
        service.discard_checkpoints_below(seq);
        self.stored_digests = digests;
        self.stable = seq;
    }
}

/// `(client, rid, op)` of a stored client request frame.
pub(crate) fn decode_request(frame: &[u8], max: usize) -> Option<(ClientId, RequestId, &[u8])> {
    let f = Frame::parse(frame, max).ok()?;
    let req = RequestView::decode(f.body)?;
    Some((req.client, req.rid, req.op))
}

#[cfg(test)]
mod tests {
    use super::*;
    use byzfs_bft::message::Message;
    use byzfs_bft::replica::DurableState;
    use byzfs_bft::services::kv::{KvOp, KvResult, KvService};
    use byzfs_bft::wire::{self, Auth, Envelope};
    use byzfs_bft::Principal;
    use std::sync::Mutex;

    /// A disk that keeps what it is given the way `DiskDurability` does, shared between
    /// "restarts".
    #[derive(Clone, Default)]
    struct FakeDisk(Arc<Mutex<DurableState>>);

    impl Durability for FakeDisk {
        fn commit(&mut self, r: &[PersistRecord], s: &[StoreRecord]) -> std::io::Result<()> {
            let mut st = self.0.lock().unwrap();
            for rec in r {
                st.apply_persist(*rec);
            }
            for rec in s {
                st.apply_store(rec);
            }
            Ok(())
        }
        fn name(&self) -> &'static str {
            "disk"
        }
        fn take_loaded(&mut self) -> Option<DurableState> {
            Some(self.0.lock().unwrap().clone())
        }
    }

    fn frame(client: ClientId, rid: RequestId, op: &KvOp) -> Vec<u8> {
        let req = byzfs_bft::message::Request {
            client,
            rid,
            acked: rid - 1,
            after: 0,
            op: op.encode(),
        };
        let env = Envelope::new(Principal::Client(client), 0);
        wire::encode(env, &Message::Request(req), Auth::None)
    }

    #[test]
    fn restore_rebuilds_state_and_reply_cache_from_checkpoint_and_log() {
        let disk = FakeDisk::default();
        let mut log = OpLog::new(Box::new(disk.clone()), 4);
        let mut kv = KvService::new();
        let mut replies = ReplyCache::new();
        for rid in 1..=10u64 {
            let op = KvOp::Append {
                key: b"k".to_vec(),
                value: format!("{rid};").into_bytes(),
            };
            let nondet = kv.propose_nondet(rid, byzfs_bft::Time(rid * 1000));
            let result = kv.execute(7, &op.encode(), &nondet);
            log.record(&frame(7, rid, &op), &nondet);
            replies.insert(7, (rid, result));
            log.commit(&mut kv, &replies).unwrap();
        }
        let stored = disk.0.lock().unwrap().clone();
        assert_eq!(stored.checkpoint.as_ref().map(|c| c.seq), Some(8));
        assert_eq!(
            stored.batches.len(),
            2,
            "the log below the checkpoint is dropped"
        );

        let mut fresh = KvService::new();
        let mut cache = ReplyCache::new();
        let mut again = OpLog::new(Box::new(disk.clone()), 4);
        assert_eq!(again.restore(&mut fresh, &mut cache, 1 << 20), Ok(2));
        assert_eq!(cache, replies, "the reply cache comes back too");
        let get = KvOp::Get { key: b"k".to_vec() }.encode();
        assert_eq!(
            fresh.execute_read_only(7, &get),
            kv.execute_read_only(7, &get)
        );
        assert_eq!(
            KvResult::decode(&fresh.execute_read_only(7, &get)),
            Some(KvResult::Value(Some(
                (1..=10)
                    .flat_map(|i| format!("{i};").into_bytes())
                    .collect()
            )))
        );
        // Logging goes on after the restored sequence number.
        again.record(&frame(7, 11, &KvOp::Time), &[]);
        assert_eq!(again.seq, 11);
    }

    #[test]
    fn memory_mode_writes_nothing() {
        let mut log = OpLog::new(Box::new(crate::storage::MemoryDurability), 1);
        let mut kv = KvService::new();
        log.record(&frame(1, 1, &KvOp::Time), &[]);
        log.commit(&mut kv, &ReplyCache::new()).unwrap();
        assert!(log.records.is_empty() && log.stores.is_empty());
    }
}
