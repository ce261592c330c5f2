//! The backups' watch on the primary's throughput (`replica/monitor.rs`, Aardvark,
//! docs/PROTOCOL.md §5.3 measure 4): a backup votes out a primary that orders too little while a
//! client waits, and only then.

use super::*;

/// A second client: it waits at the backup while `CLIENT`'s requests keep running.
const OTHER: ClientId = CLIENT + 1;

/// Backup 1 in view 0 with room for a long run: `T` = 5 s, checkpoints far apart.
fn backup(tune: impl Fn(&mut Config)) -> (Config, Replica<Counter>) {
    let mut cfg = config();
    cfg.checkpoint_interval = 128;
    cfg.log_window = 256;
    cfg.view_change_timeout = Duration::from_secs(5);
    tune(&mut cfg);
    let mut b = replica_with(1, &cfg, [CLIENT, OTHER]);
    drain(&mut b);
    (cfg, b)
}

/// Drives the backup: fires its timers up to each input's time, then delivers the input;
/// returns every event it emitted. Before each timer the other replicas' STATUS arrives
/// (as every 150 ms in a cluster): in step with the backup, or `ahead` of it.
struct Run {
    cfg: Config,
    b: Replica<Counter>,
    seq: Seq,
    rid: RequestId,
    events: Vec<Event>,
    /// Peers whose STATUS reports 300 batches executed; the others report the backup's own.
    ahead: Vec<ReplicaId>,
    /// No STATUS arrives (the backup's peers are still reconnecting).
    silent: bool,
}

impl Run {
    fn new(tune: impl Fn(&mut Config)) -> Run {
        let (cfg, b) = backup(tune);
        Run {
            cfg,
            b,
            seq: 0,
            rid: 0,
            events: Vec::new(),
            ahead: Vec::new(),
            silent: false,
        }
    }

    fn until(&mut self, t: Time) {
        while let Some(at) = self.b.poll_timeout().filter(|&at| at <= t) {
            if !self.silent {
                for j in [0, 2, 3] {
                    let executed = if self.ahead.contains(&j) {
                        300
                    } else {
                        self.b.last_executed()
                    };
                    let st = status_msg(j, self.b.view(), true, 0, executed);
                    self.b.handle_message(at, &from_replica(&self.cfg, j, &st));
                }
            }
            self.b.handle_timeout(at);
            self.collect();
        }
    }

    fn collect(&mut self) {
        for a in drain(&mut self.b) {
            if let Action::Event(e) = a {
                self.events.push(e);
            }
        }
    }

    /// `CLIENT`'s next `count` requests, ordered in one committed batch at `ms`.
    fn batch(&mut self, ms: u64, count: u64) {
        let now = Time::ZERO + Duration::from_millis(ms);
        self.until(now);
        if self.b.view() != 0 {
            return;
        }
        let requests = (0..count)
            .map(|_| {
                self.rid += 1;
                request(&self.cfg, self.rid, b"w", false)
            })
            .collect();
        self.seq += 1;
        let batch = BatchBody {
            requests,
            big: vec![],
            nondet: vec![1],
        };
        order_in_view_0(&self.cfg, &mut self.b, now, self.seq, batch, true);
        self.collect();
    }

    /// `OTHER` retransmits its request `rid` to the backup at `ms` (its reply is late).
    fn other_waits(&mut self, ms: u64, rid: RequestId) -> Vec<u8> {
        let now = Time::ZERO + Duration::from_millis(ms);
        self.until(now);
        let req = client_request(&self.cfg, OTHER, rid, b"o", false, ReqAuth::Signed);
        self.b.handle_message(now, &req);
        self.collect();
        req
    }

    /// The primary finally orders `req` at `ms`.
    fn order(&mut self, ms: u64, req: Vec<u8>) {
        let now = Time::ZERO + Duration::from_millis(ms);
        self.until(now);
        if self.b.view() != 0 {
            return;
        }
        self.seq += 1;
        order_in_view_0(&self.cfg, &mut self.b, now, self.seq, batch_of(req), true);
        self.collect();
    }

    /// Three seconds of a fast primary: five requests every 100 ms (25 units a period).
    fn fast_start(&mut self) {
        for i in 0..30 {
            self.batch(i * 100, 5);
        }
    }

    fn slow_verdicts(&self) -> Vec<&Event> {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::PrimaryTooSlow { .. }))
            .collect()
    }
}

/// The attack the view-change timer cannot see: after a fast start the primary holds each
/// batch just under `T` (4 s of 5), so every request executes before the timer runs out and
/// the timer restarts. The backup, with a client waiting, votes it out at the first period
/// the client waited through: 0 units against 90 % of the best period (25).
#[test]
fn a_backup_votes_out_a_primary_that_holds_every_batch_under_the_timeout() {
    let mut r = Run::new(|_| {});
    r.fast_start();
    let req = r.other_waits(3000, 1);
    r.order(7000, req);
    r.until(Time::ZERO + Duration::from_secs(20));
    assert_eq!(
        r.slow_verdicts(),
        vec![&Event::PrimaryTooSlow {
            view: 0,
            units: 0,
            required: 23,
        }]
    );
    assert_eq!((r.b.view(), r.b.stats().monitor_complaints), (1, 1));
    assert_eq!(
        r.b.last_executed(),
        30,
        "the held batch never ran in view 0"
    );
}

/// Without the watch the same primary keeps its view: each held batch executes before the
/// view-change timer expires (docs/PROTOCOL.md §5.3: throughput falls by orders of magnitude).
#[test]
fn without_the_watch_the_slow_primary_keeps_its_view() {
    let mut r = Run::new(|c| c.monitor.enabled = false);
    r.fast_start();
    let mut ms = 3000;
    for rid in 1..=4 {
        let req = r.other_waits(ms, rid);
        ms += 4000;
        r.order(ms, req);
    }
    r.until(Time::ZERO + Duration::from_secs(20));
    assert!(r.slow_verdicts().is_empty());
    assert_eq!((r.b.view(), r.b.stats().view_changes), (0, 0));
    assert_eq!(r.b.last_executed(), 34, "one request per 4 s");
}

/// A load that shrinks is not a slow primary: after the fast start a client sends one
/// request a second, each ordered within 100 ms; no request waits a whole `patience`.
#[test]
fn a_lighter_load_served_promptly_is_not_judged() {
    let mut r = Run::new(|_| {});
    r.fast_start();
    for rid in 1..=15 {
        let ms = 2000 + rid * 1000;
        let req = r.other_waits(ms, rid);
        r.order(ms + 100, req);
    }
    r.until(Time::ZERO + Duration::from_secs(20));
    assert!(r.slow_verdicts().is_empty());
    assert_eq!((r.b.view(), r.b.stats().monitor_complaints), (0, 0));
    assert_eq!(r.b.last_executed(), 45);
}

/// A backup that reported its own steps as long (`busy_for`) does not judge that period:
/// its slowness is not the primary's.
#[test]
fn a_busy_backup_does_not_judge_the_period() {
    let mut r = Run::new(|_| {});
    r.fast_start();
    let _held = r.other_waits(3000, 1);
    for ms in (3100..20_000).step_by(400) {
        r.until(Time::ZERO + Duration::from_millis(ms));
        r.b.busy_for(Duration::from_millis(60));
    }
    assert!(r.slow_verdicts().is_empty());
    assert_eq!(r.b.stats().monitor_complaints, 0);
}

/// The raise (Aardvark's regular view changes): a primary that keeps its pace while a client
/// waits is judged against a bar raised 5 % a period, so even a steady primary's view ends
/// (25 units a period: 22.5 × 1.05³ = 26.0 at the fourth judged period, 4.5 s).
#[test]
fn under_sustained_demand_the_raised_bar_ends_even_a_steady_view() {
    let mut r = Run::new(|c| c.monitor.raise_percent = 5);
    r.fast_start();
    let _waiting = r.other_waits(1400, 1);
    for i in 30..100 {
        r.batch(i * 100, 5);
    }
    assert_eq!(
        r.slow_verdicts(),
        vec![&Event::PrimaryTooSlow {
            view: 0,
            units: 25,
            required: 27,
        }]
    );
    assert_eq!(r.b.view(), 1);
}

/// The floor, Aardvark's heartbeat: with no history (a fresh backup), even during the
/// grace, a primary that orders nothing while a client waits is voted out at the first full
/// period the client waited through (`floor_per_s` = 4: 2 units a period). Without a floor
/// only the view-change timer would.
#[test]
fn the_floor_holds_without_history_and_during_the_grace() {
    let mut r = Run::new(|_| {});
    let _held = r.other_waits(100, 1);
    r.until(Time::ZERO + Duration::from_millis(1000));
    assert_eq!(
        r.slow_verdicts(),
        vec![&Event::PrimaryTooSlow {
            view: 0,
            units: 0,
            required: 2,
        }]
    );
    assert_eq!(r.b.view(), 1);
    let mut r = Run::new(|c| c.monitor.floor_per_s = 0);
    let _held = r.other_waits(100, 1);
    r.until(Time::ZERO + Duration::from_millis(4900));
    assert!(
        r.slow_verdicts().is_empty(),
        "no history, no floor: only the timer"
    );
}

/// A backup that accepted a batch naming a body it lacks does not judge: the primary has
/// ordered it, and the body is crossing (at 5 Mb/s, for seconds; after a view change, from
/// whichever replica holds it). The same wait without that batch is voted out by the floor
/// (above). A primary that names bodies nobody has stalls its own slot and is replaced by
/// the view-change timer (`monitor.rs` `lacks_ordered_bodies`).
#[test]
fn a_backup_waiting_for_an_ordered_body_does_not_judge() {
    let mut r = Run::new(|_| {});
    let _held = r.other_waits(100, 1);
    let now = Time::ZERO + Duration::from_millis(200);
    r.until(now);
    let (batch, _) = big_batch_of(&request(&r.cfg, 1, &[b'w'; 2000], false));
    let pp = from_replica(&r.cfg, 0, &pre_prepare_msg(0, 1, batch));
    r.b.handle_message(now, &pp);
    r.collect();
    r.until(Time::ZERO + Duration::from_millis(3000));
    assert!(r.slow_verdicts().is_empty());
    assert_eq!(r.b.view(), 0);
}

/// A backup that lags does not judge: while `f+1` replicas' STATUS report more batches
/// executed than it has plus `batch_window` (it missed a checkpoint; a replica restarted
/// without its data), it executes nothing because it is behind, not because the primary is
/// slow. Its vote would leave it alone in a higher view (`crates/byzfs/tests/faults.rs`
/// `replica_restarted_without_its_data_rejoins_by_state_transfer`). One replica's report (a
/// faulty primary's claim) does not silence the watch.
#[test]
fn a_lagging_backup_does_not_judge_the_primary() {
    let ahead = |ahead: Vec<ReplicaId>| {
        let mut r = Run::new(|_| {});
        r.ahead = ahead;
        let _held = r.other_waits(100, 1);
        r.until(Time::ZERO + Duration::from_millis(3000));
        (r.slow_verdicts().len(), r.b.view())
    };
    assert_eq!(ahead(vec![2, 3]), (0, 0), "f+1 replicas ahead: it lags");
    assert_eq!(ahead(vec![0]), (1, 1), "one replica ahead proves nothing");
}

/// A backup that heard no other replica's STATUS in a period (it just started and its
/// peers are still reconnecting, or it is cut off) knows nothing of what the primary
/// ordered, and does not judge it (the same CI failure, before the peers' links were up).
#[test]
fn a_backup_that_hears_no_peer_does_not_judge() {
    let mut r = Run::new(|_| {});
    r.silent = true;
    let _held = r.other_waits(100, 1);
    r.until(Time::ZERO + Duration::from_millis(3000));
    assert!(r.slow_verdicts().is_empty());
    assert_eq!(r.b.view(), 0);
}

/// A backup behind a gap (it lacks batch 1, as after a restart without its data) commits
/// the primary's later batches but cannot run them: their work counts when they commit, so
/// the waiting client does not make it vote out a primary that is ordering
/// (`crates/byzfs/tests/faults.rs` `replica_restarted_without_its_data_rejoins_by_state_transfer`).
#[test]
fn a_backup_behind_a_gap_credits_the_batches_it_commits() {
    let mut r = Run::new(|_| {});
    r.seq = 1;
    let _held = r.other_waits(50, 1);
    for i in 1..30 {
        r.batch(i * 100, 5);
    }
    r.until(Time::ZERO + Duration::from_millis(3000));
    assert!(r.slow_verdicts().is_empty(), "{:?}", r.slow_verdicts());
    assert_eq!((r.b.view(), r.b.last_executed()), (0, 0));
}

/// With the links' rate stated (1 Mb/s), a client waiting on a 100 KB body is demand only
/// once it has waited the patience and the time three copies of the body take at that rate
/// (2.4 s: the client's to the primary, the primary's to its fan-out): the floor votes at
/// the first period after 3.0 s (3.5 s), not at 1 s as it does with the rate unstated.
/// At `slow-1` every new primary was voted out half a second into its view, its clients
/// having waited through the view change with batches that need seconds of link.
#[test]
fn with_the_rate_stated_a_big_body_is_demand_only_after_its_crossing() {
    let vote_at = |kbps: u64| {
        let mut r = Run::new(|c| c.link_rate_kbps = kbps);
        let now = Time::ZERO + Duration::from_millis(100);
        r.until(now);
        let req = client_request(&r.cfg, OTHER, 1, &[b'o'; 100_000], false, ReqAuth::Signed);
        r.b.handle_message(now, &req);
        r.collect();
        (1..=10u64).map(|k| k * 500).find(|&ms| {
            r.until(Time::ZERO + Duration::from_millis(ms));
            r.b.view() != 0
        })
    };
    assert_eq!([vote_at(0), vote_at(1_000)], [Some(1_000), Some(3_500)]);
}

/// With the links' rate stated, a client's wait counts from the view's start: a backup
/// that installs a new view does not judge its primary on what the client waited before
/// (`monitor.rs` `judge`). Here the client's request waits from 1.5 s (patience 800 ms)
/// and the watch restarts at 2 s as at a view's installation (no grace): the floor votes
/// at 2.5 s unstated (waited since 1.5 s), at 3.0 s stated (since 2.0 s).
#[test]
fn with_the_rate_stated_a_wait_counts_from_the_view_start() {
    let vote_at = |kbps: u64| {
        let mut r = Run::new(|c| {
            c.link_rate_kbps = kbps;
            c.monitor.grace = Duration::ZERO;
            c.monitor.patience = Duration::from_millis(800);
        });
        let _held = r.other_waits(1_500, 1);
        // What installing a view does to the watch, at 2 s.
        r.until(Time::ZERO + Duration::from_millis(2_000));
        r.b.handle_timeout(Time::ZERO + Duration::from_millis(2_000));
        r.b.monitor_view_start();
        r.collect();
        (1..=10u64).map(|k| 2_000 + k * 500).find(|&ms| {
            r.until(Time::ZERO + Duration::from_millis(ms));
            r.b.view() != 0
        })
    };
    assert_eq!([vote_at(0), vote_at(1_000)], [Some(2_500), Some(3_000)]);
}
