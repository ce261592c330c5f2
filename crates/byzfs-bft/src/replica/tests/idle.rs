//! Idle checkpoints (docs/PROTOCOL.md §2.6, `replica/idle.rs`): a quiet primary pads to the
//! next checkpoint with null batches, which then becomes stable everywhere; a busy one
//! does not.

use super::*;

fn idle_config() -> Config {
    let mut c = config();
    c.idle_checkpoint = Duration::from_millis(300);
    c
}

#[test]
fn a_quiet_cluster_reaches_the_checkpoint_after_its_last_batch() {
    let mut c = Cluster::new(idle_config());
    c.write_all(1..=5, b"w");
    assert_eq!(c.r[0].last_executed(), 5);
    assert_eq!(c.r[0].last_stable(), 4, "K = 4");
    // Quiet for less than the idle time: nothing.
    c.advance(Duration::from_millis(200));
    assert_eq!(c.r[0].last_executed(), 5);
    c.advance(Duration::from_millis(200));
    for r in &c.r {
        assert_eq!((r.last_executed(), r.last_stable()), (8, 8));
        assert_eq!(r.state_digest(), c.r[0].state_digest());
    }
    assert_eq!(c.r[0].stats().idle_checkpoints, 1);
    assert_eq!(
        c.r[0].stats().pre_prepares_sent,
        8,
        "5 batches and 3 null ones"
    );
    // On a checkpoint already: no more padding however long it stays quiet.
    c.advance(Duration::from_secs(5));
    assert_eq!(c.r[0].last_executed(), 8);
    assert_eq!(c.r[0].stats().pre_prepares_sent, 8);
    // The next burst starts after the padding, and its clients are served as before.
    c.write_all(6..=6, b"w");
    assert_eq!(c.r[0].last_executed(), 9);
    assert!(c.replies.iter().any(|r| r.rid == 6));
}

#[test]
fn a_primary_ordering_now_and_then_pads_only_after_a_whole_quiet_spell() {
    let mut c = Cluster::new(idle_config());
    // A request every 200 ms: never 300 ms of quiet, so no padding.
    for rid in 1..=3 {
        c.write_all(rid..=rid, b"w");
        c.advance(Duration::from_millis(200));
    }
    assert_eq!(c.r[0].last_executed(), 3);
    assert_eq!(c.r[0].stats().idle_checkpoints, 0);
    c.advance(Duration::from_millis(600));
    assert_eq!((c.r[0].last_executed(), c.r[0].last_stable()), (4, 4));
    assert_eq!(c.r[0].stats().idle_checkpoints, 1);
}
