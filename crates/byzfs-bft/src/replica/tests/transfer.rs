//! Checkpoints and state transfer (§2): garbage collection, a lagging replica catching up,
//! partitions larger than a message.

use super::*;

#[test]
fn cluster_commits_checkpoints_and_garbage_collects() {
    let mut c = Cluster::new(config());
    for rid in 1..=9 {
        let req = request(&c.cfg, rid, b"w", false);
        c.deliver_all(&req);
    }
    for r in &c.r {
        assert_eq!(r.last_executed(), 9);
        assert_eq!(r.last_stable(), 8, "checkpoint every 4, stable with 2f+1");
        assert_eq!(r.service().count(), 9);
    }
    let d = c.r[0].state_digest();
    assert!(c.r.iter().all(|r| r.state_digest() == d));
}

#[test]
fn lagging_replica_catches_up_by_state_transfer() {
    let mut c = Cluster::new(config());
    c.down[3] = true;
    for rid in 1..=13 {
        let req = request(&c.cfg, rid, b"w", false);
        c.deliver_all(&req);
    }
    assert_eq!(c.r[0].last_stable(), 12);
    c.down[3] = false;
    c.advance(Duration::from_secs(1));
    assert!(c.r[3].stats().state_transfers >= 1);
    assert_eq!(c.r[3].last_executed(), 13);
    assert_eq!(c.r[3].state_digest(), c.r[0].state_digest());
}

/// A replica whose service keeps its own state executes nothing past a checkpoint it
/// fetched until its driver has recorded it (docs/PROTOCOL.md §2.7): until then a crash
/// takes it back to the checkpoint recorded before, and its log holds none of the batches
/// between the two.
#[test]
fn nothing_executes_on_a_fetched_checkpoint_before_its_record() {
    let mut c = Cluster::new(config());
    let keys = TestKeys::new(1, c.cfg.n());
    c.r[3] = Replica::new(
        c.cfg.clone(),
        keys.replica(3, [CLIENT]),
        Counter::persisting(&ServiceDisk::default()),
        3,
        c.now,
    );
    c.with_disk(3);
    for rid in 1..=8 {
        let req = request(&c.cfg, rid, b"w", false);
        c.deliver_all(&req);
    }
    assert_eq!(c.r[3].last_stable(), 8);
    // Down while the others reach checkpoint 12 (batch 13 lies within the log window of
    // the checkpoint it recorded, 8); its records wait from now on.
    c.held_records[3] = Some(Vec::new());
    c.down[3] = true;
    for rid in 9..=13 {
        let req = request(&c.cfg, rid, b"w", false);
        c.deliver_all(&req);
    }
    assert_eq!(c.r[0].last_executed(), 13);
    c.down[3] = false;
    c.advance(Duration::from_secs(1));
    let r3 = &c.r[3];
    assert_eq!(r3.stats().state_transfers, 1);
    assert_eq!(
        (r3.last_stable(), r3.last_executed(), r3.service().count()),
        (12, 12, 12),
        "batch 13 waits for the record of checkpoint 12"
    );
    assert_eq!(c.held_records[3], Some(vec![12]));
    c.held_records[3] = None;
    c.r[3].checkpoint_recorded(12);
    c.pump();
    c.advance(Duration::from_secs(1));
    assert_eq!((c.r[3].last_executed(), c.r[3].service().count()), (13, 13));
    assert_eq!(c.r[3].state_digest(), c.r[0].state_digest());
}

/// A cluster of 72 KiB messages and 36 KiB state chunks that ran 60 writes of 6 KiB values
/// (about 90 KiB per partition of the counter's 4) while replica 3 was down; it is up again.
pub(super) fn cluster_with_a_replica_behind_big_partitions() -> Cluster {
    let mut cfg = config();
    cfg.op_bytes_max = 8 * 1024;
    cfg.batch_bytes_max = 8 * 1024;
    cfg.message_bytes_max = 72 * 1024;
    cfg.state_chunk_bytes = 36 * 1024;
    cfg.validate().unwrap();
    let mut c = Cluster::new(cfg);
    c.down[3] = true;
    for rid in 1..=60u64 {
        let mut op = vec![b'w'];
        op.extend((0..6 * 1024).map(|i| (rid as usize * 31 + i) as u8));
        let req = request(&c.cfg, rid, &op, false);
        c.deliver_all(&req);
    }
    c.down[3] = false;
    c
}

/// Partitions larger than a message travel in chunks, joined and checked as a whole.
#[test]
fn state_transfer_moves_partitions_larger_than_a_message_in_chunks() {
    let mut c = cluster_with_a_replica_behind_big_partitions();
    let chunk = c.cfg.state_chunk_bytes;
    let seq = c.r[0].last_stable();
    let biggest = (0..4)
        .filter_map(|p| c.r[0].service().export_partition(seq, p))
        .map(|d| d.len())
        .max()
        .unwrap();
    assert!(
        biggest > 2 * chunk,
        "{biggest} bytes: at least three chunks"
    );
    c.advance(Duration::from_secs(1));
    assert!(c.r[3].stats().state_transfers >= 1);
    assert_eq!(c.r[3].last_executed(), c.r[0].last_executed());
    assert_eq!(c.r[3].state_digest(), c.r[0].state_digest());
    assert_eq!(c.r[3].service().count(), 60);
    let st = c.r[3].stats();
    assert!(
        st.state_chunks_fetched > st.state_parts_fetched + 4,
        "{} chunks for {} partitions",
        st.state_chunks_fetched,
        st.state_parts_fetched
    );
    assert_eq!(
        c.r[3]
            .stats()
            .dropped
            .get(&DropReason::Invalid)
            .copied()
            .unwrap_or(0),
        0,
        "no chunk refused"
    );
}

/// A replier's chunk that claims more than a partition may hold, or that is shorter than the
/// agreed chunk length, is refused and the replier replaced; the fetch completes from another.
#[test]
fn a_chunk_with_a_false_total_is_refused_and_the_replier_replaced() {
    let mut c = cluster_with_a_replica_behind_big_partitions();
    // Let replica 3 learn the target and ask its replier for the partition digests, then
    // hand it the replier's first chunk of a partition, with forged totals.
    c.lose = Some(Tag::StatePart);
    c.advance(Duration::from_millis(400));
    let f = c.r[3].fetch.clone().expect("fetching");
    assert!(f.parts.is_some(), "partition digests accepted");
    let part = *f.needed.first().expect("a partition to fetch");
    let seq = f.seq;
    let tk = TestKeys::new(1, c.cfg.n());
    let forge = |replier: ReplicaId, total: u64, len: usize| {
        let m = Message::StatePart(StatePart {
            replica: replier,
            seq,
            part,
            offset: 0,
            total,
            data: vec![0; len],
        });
        let rk = tk.replica(replier, [CLIENT]);
        encode(
            Envelope::new(Principal::Replica(replier), 0),
            &m,
            Auth::Mac(&rk.to_replica[3]),
        )
    };
    let chunk = c.cfg.state_chunk_bytes;
    // Refused, the replier is replaced and every needed partition asked of the new one from
    // its start (the old one may have lied about the chunks it sent).
    let asked_of = |replier: ReplicaId| -> Vec<Out> {
        f.needed
            .iter()
            .map(|&part| {
                let what = FetchWhat::StatePart {
                    seq,
                    part,
                    offset: 0,
                };
                Out::Send(replier, Message::Fetch(Fetch { replica: 3, what }))
            })
            .collect()
    };
    let too_big = forge(f.replier, state_transfer::PARTITION_BYTES_MAX + 1, chunk);
    c.r[3].handle_message(c.now, &too_big);
    let second = c.r[3].fetch.as_ref().unwrap().replier;
    assert_ne!(second, f.replier, "the lying replier was replaced");
    assert_eq!(outputs(drain(&mut c.r[3])), asked_of(second));
    assert_eq!(c.r[3].stats().dropped[&DropReason::Invalid], 1);
    // A drip of 100-byte chunks of a 1 MiB partition: refused too.
    c.r[3].handle_message(c.now, &forge(second, 1 << 20, 100));
    let third = c.r[3].fetch.as_ref().unwrap().replier;
    assert_ne!(third, second);
    assert_eq!(outputs(drain(&mut c.r[3])), asked_of(third));
    assert_eq!(c.r[3].stats().dropped[&DropReason::Invalid], 2);
    c.lose = None;
    c.advance(Duration::from_secs(2));
    assert_eq!(c.r[3].state_digest(), c.r[0].state_digest());
}

/// Once a partition's first chunk tells its length, the fetcher asks `CHUNKS_AHEAD` more at
/// once, and joins chunks that come out of order: asked one after the other, a partition of
/// many chunks took longer than a fast cluster lends a checkpoint for (simulator:
/// fs-partition 0, docs/PROTOCOL.md §2.4).
#[test]
fn chunks_of_a_partition_are_asked_ahead_and_joined_out_of_order() {
    let mut c = cluster_with_a_replica_behind_big_partitions();
    c.cfg.state_chunk_bytes = 8 * 1024;
    for r in &mut c.r {
        r.config.state_chunk_bytes = 8 * 1024;
    }
    c.lose = Some(Tag::StatePart);
    c.advance(Duration::from_millis(400));
    let f = c.r[3].fetch.clone().expect("fetching");
    let (seq, replier) = (f.seq, f.replier);
    let chunk = c.cfg.state_chunk_bytes as u64;
    let (part, data) = f
        .needed
        .iter()
        .filter_map(|&p| Some((p, c.r[replier as usize].service().export_partition(seq, p)?)))
        .max_by_key(|(_, d)| d.len())
        .expect("a partition to fetch");
    let total = data.len() as u64;
    assert!(total > 6 * chunk, "{total} bytes: more than 6 chunks");
    let rk = TestKeys::new(1, c.cfg.n()).replica(replier, [CLIENT]);
    let chunk_at = |offset: u64| {
        let end = (offset + chunk).min(total);
        let m = Message::StatePart(StatePart {
            replica: replier,
            seq,
            part,
            offset,
            total,
            data: data[offset as usize..end as usize].to_vec(),
        });
        encode(
            Envelope::new(Principal::Replica(replier), 0),
            &m,
            Auth::Mac(&rk.to_replica[3]),
        )
    };
    let ask = |offset: u64| {
        let what = FetchWhat::StatePart { seq, part, offset };
        Out::Send(replier, Message::Fetch(Fetch { replica: 3, what }))
    };
    drain(&mut c.r[3]);
    c.r[3].handle_message(c.now, &chunk_at(0));
    assert_eq!(
        outputs(drain(&mut c.r[3])),
        (1..=4).map(|k| ask(k * chunk)).collect::<Vec<_>>(),
        "four chunks asked ahead"
    );
    // The third comes first: kept, and one more asked to keep four ahead.
    c.r[3].handle_message(c.now, &chunk_at(3 * chunk));
    assert_eq!(outputs(drain(&mut c.r[3])), vec![ask(5 * chunk)]);
    // A copy of it again, or a chunk never asked, is late.
    c.r[3].handle_message(c.now, &chunk_at(3 * chunk));
    c.r[3].handle_message(c.now, &chunk_at(6 * chunk));
    assert_eq!(outputs(drain(&mut c.r[3])), vec![]);
    assert_eq!(c.r[3].stats().dropped[&DropReason::Stale], 2);
    // The rest, in any order, completes the partition (its digest checked).
    let mut rest: Vec<u64> = (1..total.div_ceil(chunk)).filter(|&k| k != 3).collect();
    rest.reverse();
    for _ in 0..total.div_ceil(chunk) {
        let Some(&k) = rest.last() else { break };
        rest.pop();
        c.r[3].handle_message(c.now, &chunk_at(k * chunk));
        drain(&mut c.r[3]);
    }
    let f = c.r[3].fetch.as_ref();
    assert!(
        f.is_none_or(|f| !f.needed.contains(&part)),
        "partition {part} imported"
    );
    assert_eq!(c.r[3].stats().dropped.get(&DropReason::Invalid), None);
}

/// A fetch whose answers do not come waits longer before each retry: four STATUS intervals,
/// then 8, 16 and at most 32 (at 1 Mb/s a fixed 600 ms asked one replier after another for
/// a STATE-META that took over a second to cross); the first answer that checks shortens
/// the wait again.
#[test]
fn a_fetch_left_unanswered_retries_after_doubling_gaps() {
    let mut c = cluster_with_a_replica_behind_big_partitions();
    c.lose = Some(Tag::StateMeta);
    let step = Duration::from_millis(10);
    let mut timed_out = Vec::new();
    let mut last = 0;
    for _ in 0..2000 {
        c.advance(step);
        let t = c.r[3].fetch.as_ref().map_or(0, |f| f.timeouts);
        if t != last {
            timed_out.push(c.now);
            last = t;
        }
    }
    let i = c.cfg.status_interval.as_millis() as u64;
    let gaps: Vec<u64> = timed_out
        .windows(2)
        .map(|w| (w[1].as_micros() - w[0].as_micros()) / 1000 / i)
        .collect();
    assert_eq!(gaps, [8, 16, 32, 32, 32]);
    c.lose = None;
    c.advance(Duration::from_secs(6));
    assert!(c.r[3].fetch.is_none(), "the transfer finished");
    assert_eq!(c.r[3].state_digest(), c.r[0].state_digest());
}

/// A checkpoint a lagging replica fetches stays held at its replier while the cluster makes
/// newer ones stable (`state_transfer.rs`, "Lent checkpoints"): the replier still answers
/// for it four checkpoints later. A loan ends when the fetcher stops asking, or once the
/// checkpoint is [`state_transfer::LEND_WINDOWS`] log windows below the stable one, whatever
/// the fetcher asks (a faulty one cannot make a replier hold its undo records for ever).
#[test]
fn a_checkpoint_being_fetched_outlives_newer_stable_checkpoints() {
    let mut c = Cluster::new(config());
    c.down[3] = true;
    let mut rid = 0;
    let mut write_until_stable = |c: &mut Cluster, stable: Seq| {
        while c.r[0].last_stable() < stable {
            rid += 1;
            let req = request(&c.cfg, rid, b"w", false);
            c.deliver_all(&req);
        }
    };
    let tk = TestKeys::new(1, c.cfg.n());
    let fetch = |c: &mut Cluster, seq: Seq| -> Vec<Out> {
        let m = Message::Fetch(Fetch {
            replica: 3,
            what: FetchWhat::StateMeta { seq },
        });
        let rk = tk.replica(3, [CLIENT]);
        let frame = encode(
            Envelope::new(Principal::Replica(3), 0),
            &m,
            Auth::Mac(&rk.to_replica[0]),
        );
        drain(&mut c.r[0]);
        c.r[0].handle_message(c.now, &frame);
        outputs(drain(&mut c.r[0]))
    };
    let answers = |out: &[Out], seq: Seq| {
        out.iter()
            .any(|o| matches!(o, Out::Send(3, Message::StateMeta(m)) if m.seq == seq))
    };
    write_until_stable(&mut c, 8);
    assert_eq!(c.r[0].last_stable(), 8);
    assert!(answers(&fetch(&mut c, 8), 8));
    // Four checkpoints later, still asked for: still held.
    for stable in [12, 16, 20, 24] {
        write_until_stable(&mut c, stable);
        assert!(answers(&fetch(&mut c, 8), 8), "at stable {stable}");
    }
    // Beyond four log windows (8 + 4 × 8 = 40) the loan ends though the fetcher still asks,
    // and the checkpoints it kept go with it.
    write_until_stable(&mut c, 44);
    assert_eq!(fetch(&mut c, 8), []);
    assert_eq!(fetch(&mut c, 12), []);
    assert_eq!(c.r[0].stats().dropped[&DropReason::Stale], 2);
    // A loan the fetcher stops renewing lapses: checkpoint 44, asked once, is gone at the
    // first stable checkpoint after the loan's 64 STATUS intervals.
    assert!(answers(&fetch(&mut c, 44), 44));
    write_until_stable(&mut c, 48);
    assert!(answers(&fetch(&mut c, 44), 44), "lent");
    c.now = c.now + c.cfg.status_interval * 65;
    write_until_stable(&mut c, 52);
    assert_eq!(fetch(&mut c, 44), []);
}
