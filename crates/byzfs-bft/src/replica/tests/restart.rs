//! Restarts from durable state (§3.6 #11): what a replica promised survives, and what a
//! restarted primary or backup may do.

use super::*;

#[test]
fn restart_from_durable_state_rejoins() {
    let mut c = Cluster::new(config());
    c.write_all(1..=6, b"w");
    let r2 = std::mem::replace(&mut c.r[2], replica(2, &c.cfg));
    c.r[2] = r2.restart_from_durable(c.now);
    assert_eq!(c.r[2].last_executed(), 4, "back to its latest checkpoint");
    c.assert_keeps_up(2);
}

impl Cluster {
    /// Every replica executes the writes `rids` (operation `op`) to completion.
    pub(super) fn write_all(&mut self, rids: std::ops::RangeInclusive<u64>, op: &[u8]) {
        for rid in rids {
            let req = request(&self.cfg, rid, op, false);
            self.deliver_all(&req);
        }
    }
    /// Three more writes (7..=9); replica `i` executes them and ends with the others' state.
    pub(super) fn assert_keeps_up(&mut self, i: usize) {
        self.write_all(7..=9, b"w");
        self.advance(Duration::from_secs(1));
        assert_eq!(self.r[i].last_executed(), 9);
        assert_eq!(self.r[i].state_digest(), self.r[0].state_digest());
    }
    /// Replica `i` loses power: restored from its disk, which may lack its unsynced votes.
    pub(super) fn power_cut(&mut self, i: usize) {
        self.disks[i]
            .as_mut()
            .expect("replica has a disk")
            .proposals_durable = false;
        self.crash_and_restore(i);
        self.pump();
    }
    /// A cluster whose every replica stores its state on a simulated disk.
    pub(super) fn on_disks(cfg: Config) -> Self {
        let mut c = Cluster::new(cfg);
        for i in 0..c.r.len() {
            c.with_disk(i);
        }
        c
    }
    /// Replica `i` stores its state on a simulated disk from now on.
    pub(super) fn with_disk(&mut self, i: usize) {
        self.r[i].set_store_state(true);
        self.disks[i] = Some(DurableState::default());
    }
    /// Replica `i` crashes (everything volatile lost) and is rebuilt from its disk.
    pub(super) fn crash_and_restore(&mut self, i: usize) {
        let keys = TestKeys::new(1, self.cfg.n()).replica(i as u32, [CLIENT]);
        let disk = self.disks[i].clone().expect("replica has a disk");
        self.r[i] = Replica::restore(
            self.cfg.clone(),
            keys,
            Counter::new(),
            disk,
            1000 + i as u64,
            self.now,
        )
        .expect("restores");
    }
}

#[test]
fn restore_replays_executed_batches_above_the_stored_checkpoint() {
    let mut c = Cluster::new(config());
    c.with_disk(2);
    c.write_all(1..=6, b"w");
    assert_eq!(c.r[2].last_stable(), 4);
    let disk = c.disks[2].as_ref().unwrap();
    assert_eq!(disk.checkpoint.as_ref().map(|k| k.seq), Some(4));
    assert!(
        disk.records
            .iter()
            .all(|r| record_seq(*r).is_none_or(|s| s > 4)),
        "records at or below the stored checkpoint are dropped: {:?}",
        disk.records
    );
    let before = c.r[2].state_digest();
    c.crash_and_restore(2);
    assert_eq!(c.r[2].last_stable(), 4, "the stored checkpoint");
    assert_eq!(
        c.r[2].last_executed(),
        6,
        "5 and 6 re-executed from the log"
    );
    assert_eq!(c.r[2].service().count(), 6);
    assert_eq!(c.r[2].state_digest(), before);
    // Re-execution sends no replies. Its disk does not vouch for its unsynced votes (a
    // crash): it only records that it votes no PREPARE up to its horizon (9, from its first
    // vote at seq 1) in view 0. The restored replica keeps working.
    assert_eq!(
        outputs(drain(&mut c.r[2])),
        vec![Out::Persist(PersistRecord::AbstainUpTo { view: 0, seq: 9 })]
    );
    c.assert_keeps_up(2);
}

/// A restored replica still claims its stored checkpoint stable to a peer behind it: a peer
/// fetches on `f+1` stable claims only, and two restarted replicas that answered with
/// unstable CHECKPOINTs alone left the two others behind for ever (simulator:
/// fs-transfer-power-cuts 2668, after power cuts during a view change).
#[test]
fn a_restored_replica_claims_its_stored_checkpoint_stable_to_a_peer_behind_it() {
    let mut c = Cluster::new(config());
    c.with_disk(2);
    c.write_all(1..=6, b"w");
    let d = c.r[2].checkpoints.own[&4];
    c.crash_and_restore(2);
    drain(&mut c.r[2]);
    let behind = from_replica(&c.cfg, 3, &status_msg(3, 0, true, 0, 0));
    c.r[2].handle_message(c.now, &behind);
    let claim = |stable| {
        Message::Checkpoint(Checkpoint {
            seq: 4,
            digest: d,
            replica: 2,
            stable,
        })
    };
    assert_eq!(
        outputs(drain(&mut c.r[2])),
        vec![Out::Send(3, claim(true)), Out::Send(3, claim(false))]
    );
}

#[test]
fn restore_reopens_a_service_that_persists_its_state() {
    let mut c = Cluster::new(config());
    let disk = ServiceDisk::default();
    let keys = TestKeys::new(1, c.cfg.n());
    c.r[2] = Replica::new(
        c.cfg.clone(),
        keys.replica(2, [CLIENT]),
        Counter::persisting(&disk),
        2,
        c.now,
    );
    c.with_disk(2);
    c.write_all(1..=6, b"wxyz");
    assert_eq!(c.r[2].last_stable(), 4);
    // The replica's image holds the service's digests only, the reply cache in full.
    let stored = c.disks[2].clone().unwrap();
    let img = stored.checkpoint.as_ref().unwrap();
    assert_eq!(img.seq, 4);
    let svc = c.r[2].service().partition_count() as usize;
    assert!(img.parts[..svc].iter().all(|(_, data)| data.is_empty()));
    assert!(img.parts[svc..].iter().any(|(_, data)| !data.is_empty()));
    assert!(disk.borrow().contains_key(&4));
    let before = c.r[2].state_digest();
    let restore = |service: Counter| {
        Replica::restore(
            c.cfg.clone(),
            keys.replica(2, [CLIENT]),
            service,
            stored.clone(),
            7,
            c.now,
        )
    };
    let r = restore(Counter::persisting(&disk)).expect("reopens");
    assert_eq!((r.last_stable(), r.last_executed()), (4, 6));
    assert_eq!(r.service().count(), 6);
    assert_eq!(r.state_digest(), before);
    // A service whose store lost the checkpoint is refused, saying so.
    match restore(Counter::persisting(&ServiceDisk::default())) {
        Err(RestoreError::ServiceState { seq: 4, why }) => assert!(why.contains("no checkpoint")),
        other => panic!("restored without the service's state: {:?}", other.err()),
    }
    c.r[2] = r;
    c.assert_keeps_up(2);
}

#[test]
fn a_service_that_now_persists_its_state_still_imports_an_older_full_image() {
    // A data directory written before the service persisted its state (every partition's
    // content in the image): the upgrade imports it.
    let mut c = Cluster::new(config());
    c.with_disk(2);
    c.write_all(1..=6, b"w");
    let before = c.r[2].state_digest();
    let stored = c.disks[2].clone().unwrap();
    let keys = TestKeys::new(1, c.cfg.n());
    let r = Replica::restore(
        c.cfg.clone(),
        keys.replica(2, [CLIENT]),
        Counter::persisting(&ServiceDisk::default()),
        stored,
        7,
        c.now,
    )
    .expect("imports the full image");
    assert_eq!((r.last_stable(), r.last_executed()), (4, 6));
    assert_eq!(r.state_digest(), before);
}

#[test]
fn restore_every_replica_keeps_every_committed_write() {
    let mut c = Cluster::on_disks(config());
    c.write_all(1..=6, b"w");
    let digest = c.r[0].state_digest();
    for i in 0..4 {
        c.crash_and_restore(i);
        assert_eq!(c.r[i].last_executed(), 6);
        assert_eq!(c.r[i].state_digest(), digest);
    }
    c.replies.clear();
    let req = request(&c.cfg, 7, b"w", false);
    c.deliver_all(&req);
    c.advance(Duration::from_secs(2));
    assert!(c.r.iter().all(|r| r.last_executed() == 7));
    assert!(c
        .replies
        .iter()
        .any(|r| r.rid == 7 && r.result.as_deref() == Some(&7u64.to_le_bytes()[..])));
}

#[test]
fn tentatively_acknowledged_write_survives_a_crash_of_every_replica() {
    // Write 7 is prepared everywhere and executed tentatively (the client has its 2f+1
    // tentative replies), but every COMMIT is lost, then all four replicas crash. Only the
    // promises and the stored batch body remember it: a view change must bring it back.
    let mut c = Cluster::on_disks(config());
    c.write_all(1..=6, b"w");
    c.lose = Some(crate::message::Tag::Commit);
    c.replies.clear();
    let req7 = request(&c.cfg, 7, b"w", false);
    c.deliver_all(&req7);
    let tentative = c
        .replies
        .iter()
        .filter(|r| r.rid == 7 && r.tentative)
        .count();
    assert!(tentative >= 3, "acknowledged by 2f+1 tentative replies");
    assert!(c.r.iter().all(|r| r.last_executed() == 6));
    for i in 0..4 {
        c.crash_and_restore(i);
        assert_eq!(c.r[i].last_executed(), 6, "write 7 never committed here");
    }
    c.lose = None;
    // The client retransmits to everyone.
    c.deliver_all(&req7);
    c.advance(Duration::from_secs(5));
    for r in &c.r {
        assert!(r.view() >= 1, "recovered by a view change");
        assert!(r.last_executed() >= 7);
        assert_eq!(r.service().count(), 7, "write 7 executed exactly once");
    }
}

impl Cluster {
    /// Every replica has a disk, votes in view 1 (after replica 0 was down for a view
    /// change), and has executed five writes.
    pub(super) fn voted_in_view_one(&mut self) {
        for i in 0..self.r.len() {
            self.with_disk(i);
        }
        self.write_all(1..=2, b"w");
        self.down[0] = true;
        let req = request(&self.cfg, 3, b"w", false);
        self.deliver_all(&req);
        self.advance(Duration::from_secs(3));
        self.down[0] = false;
        self.write_all(4..=5, b"w");
        self.advance(Duration::from_secs(1));
        for r in &self.r {
            assert_eq!((r.view(), r.last_executed()), (1, 5), "voted in view 1");
        }
    }
}

#[test]
fn every_replica_restarted_after_voting_in_view_one_leaves_it() {
    // Every replica voted in view 1 and then crashed: no one holds view 1's NEW-VIEW (it is
    // volatile), and no VIEW-CHANGE for view 1 may carry view-1 votes. Their STATUS messages
    // must start the view-change timer and move them to view 2, rather than leave them
    // waiting for each other.
    let mut c = Cluster::new(config());
    c.voted_in_view_one();
    for i in 0..4 {
        c.crash_and_restore(i);
    }
    let req6 = request(&c.cfg, 6, b"w", false);
    c.deliver_all(&req6);
    c.advance(Duration::from_secs(5));
    for r in &c.r {
        assert!(r.has_new_view(), "replica {} installed a view", r.me);
        assert_eq!(r.view(), 2);
        assert_eq!(r.last_executed(), 6);
        assert_eq!(r.service().count(), 6, "every write once");
    }
}

#[test]
fn a_lone_backup_restarted_after_voting_in_view_one_rejoins_it() {
    // Its peers still hold view 1's NEW-VIEW: it gets it again and stays in view 1 rather
    // than moving on to view 2 alone (the timer that ends a view no one installed does not
    // start: its peers' STATUS messages say they hold the NEW-VIEW).
    let mut c = Cluster::new(config());
    c.voted_in_view_one();
    c.crash_and_restore(2);
    assert!(!c.r[2].has_new_view());
    c.advance(Duration::from_secs(10));
    assert_eq!(c.r[2].view(), 1);
    assert!(c.r[2].has_new_view());
    assert!(c.r.iter().all(|r| r.view() == 1), "no view change");
    c.write_all(6..=6, b"w");
    c.advance(Duration::from_secs(1));
    assert_eq!(c.r[2].last_executed(), 6);
    assert_eq!(c.r[2].state_digest(), c.r[1].state_digest());
}

#[test]
fn a_checkpoint_is_announced_only_after_a_sync() {
    // The `Executed` records a driver may keep unsynced must be durable before the
    // CHECKPOINT that vouches for them, and only a replica that stores its state asks.
    for stored in [false, true] {
        let cfg = config();
        let mut r = replica(1, &cfg);
        r.set_store_state(stored);
        let seq = cfg.checkpoint_interval;
        r.make_checkpoint(seq);
        let announce = Out::Broadcast(Message::Checkpoint(Checkpoint {
            seq,
            digest: r.checkpoints.own[&seq],
            replica: 1,
            stable: false,
        }));
        let sync = stored.then_some(Out::Other(Action::Sync));
        assert_eq!(
            outputs(drain(&mut r)),
            sync.into_iter().chain([announce]).collect::<Vec<_>>(),
            "stored: {stored}"
        );
    }
}

#[test]
fn a_checkpoint_a_new_view_chose_survives_a_restart_before_its_state_transfer() {
    // Replica 3 misses writes 1..=6 (checkpoint 4 becomes stable at the others), then helps
    // install view 1, whose NEW-VIEW chooses checkpoint 4. Its state transfer cannot finish
    // (every STATE-PART is lost), and it crashes: it must still vouch for checkpoint 4.
    let mut c = Cluster::on_disks(config());
    c.down[3] = true;
    c.write_all(1..=6, b"w");
    c.down[3] = false;
    c.down[0] = true;
    c.lose = Some(crate::message::Tag::StatePart);
    let req = request(&c.cfg, 7, b"w", false);
    c.deliver_all(&req);
    c.advance(Duration::from_secs(3));
    let four = c.r[1]
        .checkpoints
        .own
        .get(&4)
        .copied()
        .expect("stable at 1");
    assert_eq!((c.r[3].view(), c.r[3].last_stable()), (1, 0));
    assert!(c.r[3].has_new_view());
    assert_eq!(c.r[3].certified_checkpoint(), Some((4, four)));
    assert!(c.disks[3]
        .as_ref()
        .unwrap()
        .records
        .contains(&PersistRecord::Certified {
            seq: 4,
            digest: four
        }));
    c.crash_and_restore(3);
    assert_eq!(c.r[3].last_stable(), 0);
    assert_eq!(
        c.r[3].certified_checkpoint(),
        Some((4, four)),
        "kept across the restart"
    );
    // Once the transfer completes, the checkpoint is its own stable one.
    c.lose = None;
    c.down[0] = false;
    c.advance(Duration::from_secs(5));
    assert!(c.r[3].last_stable() >= 4);
    assert_eq!(c.r[3].certified_checkpoint(), None);
}

#[test]
fn restore_from_an_empty_disk_is_a_fresh_replica() {
    let cfg = config();
    let keys = TestKeys::new(1, cfg.n());
    let r = Replica::restore(
        cfg.clone(),
        keys.replica(1, [CLIENT]),
        Counter::new(),
        DurableState::default(),
        1,
        Time::ZERO,
    )
    .expect("restores");
    assert_eq!(r.state_digest(), replica(1, &cfg).state_digest());
    assert_eq!((r.view(), r.last_executed(), r.last_stable()), (0, 0, 0));
}

#[test]
fn restore_keeps_promises_and_a_restored_primary_gives_up_its_view() {
    let cfg = config();
    let keys = TestKeys::new(1, cfg.n());
    // Replica 1 is the primary of view 1; it promised a digest at seq 3.
    let d = Digest::of(b"batch");
    let durable = DurableState {
        records: vec![
            PersistRecord::View(1),
            PersistRecord::Prepared {
                view: 1,
                seq: 3,
                digest: d,
            },
        ],
        ..DurableState::default()
    };
    let mut r = Replica::restore(
        cfg.clone(),
        keys.replica(1, [CLIENT]),
        Counter::new(),
        durable,
        1,
        Time::ZERO,
    )
    .expect("restores");
    assert_eq!(r.view(), 2, "gave up view 1");
    assert!(!r.has_new_view());
    assert_eq!(outputs(drain(&mut r)), gives_up_its_view(&r, 3, d));
}

/// What restored primary `r` outputs as it gives up the view it restarted in (for
/// `r.view()`), holding one promise there, `d` at `seq`: nothing vouches for its unsynced
/// votes, but it wrote no `VoteHorizon` and has no stable checkpoint, so there is nothing to
/// abstain from (no `AbstainUpTo` record); then the new view, durable before its
/// VIEW-CHANGE (§3.2), which reports `d` as pre-prepared (Q-info; no COMMIT record, so no
/// P-info).
fn gives_up_its_view(r: &Replica<Counter>, seq: Seq, d: Digest) -> Vec<Out> {
    let (view, given_up) = (r.view(), r.view() - 1);
    vec![
        Out::Persist(PersistRecord::View(view)),
        Out::Broadcast(Message::ViewChange(ViewChange {
            view,
            replica: r.id(),
            last_stable: 0,
            checkpoints: vec![(0, r.checkpoints.own[&0])],
            prepared: vec![],
            pre_prepared: vec![PrePreparedEntry {
                seq,
                view: given_up,
                digest: d,
            }],
        })),
    ]
}

#[test]
fn a_primary_restored_without_all_its_proposals_gives_up_view_0() {
    let cfg = config();
    let keys = TestKeys::new(1, cfg.n());
    let d = Digest::of(b"batch");
    // Replica 0, primary of view 0, had proposed (at least) seq 3; the record was synced.
    let durable = |proposals_durable| DurableState {
        records: vec![PersistRecord::Proposed {
            view: 0,
            seq: 3,
            digest: d,
        }],
        proposals_durable,
        ..DurableState::default()
    };
    let restore = |d: DurableState| {
        Replica::restore(
            cfg.clone(),
            keys.replica(0, [CLIENT]),
            Counter::new(),
            d,
            1,
            Time::ZERO,
        )
        .expect("restores")
    };
    // After a crash, a later proposal may have been lost with the unsynced log tail: it
    // must not assign sequence numbers in view 0 again.
    let mut r = restore(durable(false));
    assert_eq!(r.view(), 1, "gave up view 0");
    assert_eq!(outputs(drain(&mut r)), gives_up_its_view(&r, 3, d));
    // Not a whole-output check: in view-change limbo the replica also forwards the request
    // to view 1's primary, which docs/PROTOCOL.md §1.5 says a backup does not do in limbo.
    let req = request(&cfg, 1, b"w", false);
    r.handle_message(Time(10), &req);
    assert!(
        !drain(&mut r)
            .iter()
            .any(|a| matches!(a, Action::Persist(PersistRecord::Proposed { .. }))),
        "no proposal after the restart"
    );
    // After a clean stop every proposal is on disk: it stays the primary (and assigns
    // nothing at or below seq 3 again: `seqno` starts at its highest vote).
    let mut r = restore(durable(true));
    assert_eq!(r.view(), 0);
    // Nothing to send: it holds no body for seq 3 to pre-prepare again (see
    // `a_primary_that_keeps_its_view_sends_its_pre_prepares_again`).
    assert_eq!(outputs(drain(&mut r)), vec![]);
}

#[test]
fn a_primary_that_keeps_its_view_sends_its_pre_prepares_again() {
    let cfg = config();
    let keys = TestKeys::new(1, cfg.n());
    let body = BatchBody {
        requests: vec![],
        big: vec![],
        nondet: vec![1],
    };
    let d = batch_digest(&body).unwrap();
    // Replica 0 proposed seq 1 and stopped cleanly before any backup saw it.
    let durable = DurableState {
        records: vec![PersistRecord::Proposed {
            view: 0,
            seq: 1,
            digest: d,
        }],
        batches: vec![crate::replica::StoredBatch {
            seq: 1,
            digest: d,
            body: body.clone(),
            big: vec![],
        }],
        proposals_durable: true,
        ..DurableState::default()
    };
    let mut r = Replica::restore(
        cfg.clone(),
        keys.replica(0, [CLIENT]),
        Counter::new(),
        durable,
        1,
        Time::ZERO,
    )
    .expect("restores");
    assert_eq!(r.view(), 0);
    // Its proposals vouched for, it records nothing new (no abstention).
    assert_eq!(
        outputs(drain(&mut r)),
        vec![Out::Broadcast(pre_prepare_msg(0, 1, body))]
    );
}

impl Cluster {
    /// Every replica crashes and is rebuilt from its disk, as after a kill on a machine
    /// that did not restart (its driver vouches for the proposals).
    pub(super) fn restart_all_keeping_proposals(&mut self) {
        for i in 0..self.r.len() {
            if let Some(d) = &mut self.disks[i] {
                d.proposals_durable = true;
            }
            self.crash_and_restore(i);
        }
    }
}

#[test]
fn a_backup_that_missed_a_batch_catches_up_after_a_whole_cluster_restart() {
    // Replica 3 misses write 1, which the others execute; then every replica restarts. No
    // one holds a vote for it any more except as a durable promise: the primary's rebuilt
    // PRE-PREPARE and the backups' rebuilt PREPAREs and COMMITs, resent on replica 3's
    // STATUS, must let it execute write 1 in view 0 rather than wait for a checkpoint or
    // start a view change alone.
    let mut c = Cluster::on_disks(config());
    c.down[3] = true;
    c.write_all(1..=1, b"w");
    c.down[3] = false;
    assert_eq!(c.r[3].last_executed(), 0);
    c.restart_all_keeping_proposals();
    let req = request(&c.cfg, 2, b"w", false);
    c.deliver_all(&req);
    c.advance(Duration::from_secs(2));
    for r in &c.r {
        assert_eq!((r.view(), r.last_executed()), (0, 2), "replica {}", r.me);
    }
    assert_eq!(c.r[3].state_digest(), c.r[1].state_digest());
}

#[test]
fn a_primary_that_missed_the_commit_catches_up_from_its_backups_rebuilt_votes() {
    // The primary proposes write 1 and goes down; the backups execute it. Every replica
    // restarts, and every PRE-PREPARE is lost from then on, so the backups cannot prepare
    // it again: only their rebuilt PREPAREs and COMMITs, resent on the primary's STATUS,
    // can bring the primary to write 1.
    let mut c = Cluster::on_disks(config());
    let req = request(&c.cfg, 1, b"w", false);
    c.r[0].handle_message(c.now, &req);
    c.down[0] = true;
    c.pump();
    c.down[0] = false;
    assert_eq!(c.r[0].last_executed(), 0);
    assert!(c.r[1..].iter().all(|r| r.last_executed() == 1));
    c.restart_all_keeping_proposals();
    c.lose = Some(crate::message::Tag::PrePrepare);
    c.advance(Duration::from_millis(450));
    assert_eq!((c.r[0].view(), c.r[0].last_executed()), (0, 1));
    c.lose = None;
    c.write_all(2..=2, b"w");
    for r in &c.r {
        assert_eq!((r.view(), r.last_executed()), (0, 2), "replica {}", r.me);
    }
}

#[test]
fn a_backup_whose_votes_are_not_vouched_for_abstains_up_to_its_horizon_across_restarts() {
    // Replica 2's unsynced `Voted` records may have been lost (a power cut), all at or below
    // its durable vote horizon (9: its first vote, at 1, recorded 1 + the log window of 8).
    // Restored in view 0, it must send no PREPARE there up to 9, even after a later restart
    // that kept everything, yet still commit and execute from the others' PREPAREs; above 9,
    // and in the next view, it votes.
    let mut c = Cluster::on_disks(config());
    c.write_all(1..=1, b"w");
    let votes_of = |c: &Cluster, seq: u64| -> Vec<View> {
        c.disks[2]
            .as_ref()
            .unwrap()
            .records
            .iter()
            .filter_map(|r| match *r {
                PersistRecord::Voted { view, seq: s, .. } if s == seq => Some(view),
                _ => None,
            })
            .collect()
    };
    assert_eq!(votes_of(&c, 1), vec![0], "a backup's PREPARE record");
    c.power_cut(2);
    assert!(c.disks[2]
        .as_ref()
        .unwrap()
        .records
        .contains(&PersistRecord::AbstainUpTo { view: 0, seq: 9 }));
    c.write_all(2..=2, b"w");
    assert_eq!(votes_of(&c, 2), Vec::<View>::new(), "no PREPARE in view 0");
    assert!(
        c.disks[2]
            .as_ref()
            .unwrap()
            .batches
            .iter()
            .any(|b| b.seq == 2),
        "the body of what it committed is stored with its first vote"
    );
    assert_eq!(
        c.r[2].last_executed(),
        2,
        "committed from the others' PREPAREs"
    );
    // A kill on the same machine keeps every append: the abstention still holds.
    c.disks[2].as_mut().unwrap().proposals_durable = true;
    c.crash_and_restore(2);
    c.write_all(3..=3, b"w");
    assert_eq!(votes_of(&c, 3), Vec::<View>::new(), "still none in view 0");
    assert_eq!(c.r[2].last_executed(), 3);
    // Above the horizon, in view 0 still, it votes again.
    c.write_all(4..=10, b"w");
    assert_eq!(c.r[2].view(), 0);
    assert_eq!(
        votes_of(&c, 9),
        Vec::<View>::new(),
        "none up to the horizon"
    );
    assert_eq!(votes_of(&c, 10), vec![0], "a PREPARE above the horizon");
    assert_eq!(c.r[2].last_executed(), 10);
    // View 1 (replica 0 down for a view change): it votes there too.
    c.down[0] = true;
    let req = request(&c.cfg, 11, b"w", false);
    c.deliver_all(&req);
    c.advance(Duration::from_secs(3));
    c.down[0] = false;
    // Two writes: the checkpoint at 12 drops the records at or below it.
    c.write_all(12..=13, b"w");
    c.advance(Duration::from_secs(1));
    assert_eq!(c.r[2].view(), 1);
    let in_view_1 = c.disks[2]
        .as_ref()
        .unwrap()
        .records
        .iter()
        .filter(|r| matches!(r, PersistRecord::Voted { view: 1, .. }))
        .count();
    assert!(
        in_view_1 > 0,
        "PREPAREs in view 1: {:?}",
        c.disks[2].as_ref().unwrap().records
    );
    assert_eq!(c.r[2].state_digest(), c.r[3].state_digest());
}

#[test]
fn a_batch_an_abstaining_backup_committed_but_could_not_execute_survives_its_crash() {
    // Replica 2 abstains in view 0 (restored from records that may lack votes), so no
    // PREPARE of its own stores the bodies it commits. It misses batch 2, then commits batch
    // 3, which cannot execute before 2: the body must reach its disk with the COMMIT's record,
    // or the crash that follows leaves it a commitment it holds no batch for.
    let mut c = Cluster::on_disks(config());
    c.write_all(1..=1, b"w");
    c.power_cut(2);
    c.down[2] = true;
    c.write_all(2..=2, b"w");
    c.down[2] = false;
    c.write_all(3..=3, b"w");
    assert_eq!(c.r[0].last_executed(), 3);
    assert_eq!(c.r[2].last_executed(), 1, "batch 3 waits for batch 2");
    let disk = c.disks[2].as_ref().unwrap();
    let committed = disk
        .records
        .iter()
        .find_map(|r| match *r {
            PersistRecord::Committed { seq: 3, digest, .. } => Some(digest),
            _ => None,
        })
        .expect("batch 3 committed at replica 2");
    assert!(
        !disk
            .records
            .iter()
            .any(|r| matches!(r, PersistRecord::Voted { seq: 3, .. })),
        "replica 2 abstained: {:?}",
        disk.records
    );
    assert!(
        disk.batches
            .iter()
            .any(|b| b.seq == 3 && b.digest == committed),
        "the body is stored with the COMMIT's record"
    );
    c.disks[2].as_mut().unwrap().proposals_durable = true;
    c.crash_and_restore(2);
    c.advance(Duration::from_secs(1));
    assert_eq!(c.r[2].last_executed(), 3);
    assert_eq!(c.r[2].state_digest(), c.r[0].state_digest());
}

#[test]
fn restore_refuses_a_corrupt_checkpoint() {
    let mut c = Cluster::new(config());
    c.with_disk(1);
    for rid in 1..=4 {
        let req = request(&c.cfg, rid, b"w", false);
        c.deliver_all(&req);
    }
    let good = c.disks[1].clone().unwrap();
    let keys = || TestKeys::new(1, 4).replica(1, [CLIENT]);
    let restore = |d: DurableState| {
        Replica::restore(c.cfg.clone(), keys(), Counter::new(), d, 1, Time::ZERO).err()
    };
    assert_eq!(restore(good.clone()), None);
    // A changed byte in a partition's content.
    let mut bad = good.clone();
    let ck = bad.checkpoint.as_mut().unwrap();
    let i = ck.parts.iter().position(|(_, p)| p.len() > 1).unwrap();
    let last = ck.parts[i].1.len() - 1;
    ck.parts[i].1[last] ^= 1;
    assert_eq!(restore(bad), Some(RestoreError::BadPartition(i as u32)));
    // A changed partition digest no longer adds up to the root.
    let mut bad = good.clone();
    bad.checkpoint.as_mut().unwrap().parts[0].0 = Digest::of(b"x");
    assert_eq!(restore(bad), Some(RestoreError::BadCheckpoint(4)));
    // Missing partitions.
    let mut bad = good;
    bad.checkpoint.as_mut().unwrap().parts.pop();
    assert!(matches!(
        restore(bad),
        Some(RestoreError::PartitionCount { .. })
    ));
}
