//! A backup stopped (SIGSTOP) for longer than a checkpoint interval — and past the log
//! window — catches up after SIGCONT (issue #3, 9). Whether it gets there by the messages
//! its sockets buffered, by STATUS-driven retransmission or by state transfer depends on
//! timing; the test asserts that it gets there and then takes part again.

use crate::common;

use common::*;
use nix::sys::signal::Signal;

#[tokio::test]
async fn a_stopped_backup_catches_up_after_sigcont() {
    let up = Up::start(&["--service", "kv"]);
    let mut c = up.client().await;
    put(&mut c, "first", "1").await;
    let bft = &up.cluster.bft;
    let backup = 2;
    up.signal(backup, Signal::SIGSTOP);
    // One request per batch (one client, one outstanding request): a sequence number each.
    let n = (bft.log_window + bft.checkpoint_interval + 10) as usize;
    for i in 0..n {
        put(&mut c, &format!("k{i}"), &format!("v{i}")).await;
    }
    // The status a replica publishes trails its progress by up to a status tick: wait for
    // the stable checkpoint rather than read one snapshot (a clean-clone run read
    // last_executed 383, last_stable 256 right after the 394th put).
    let leader = up.wait_status(0, |s| s.last_stable > bft.log_window).await;
    up.signal(backup, Signal::SIGCONT);

    up.wait_status(backup as u32, |s| {
        s.last_executed >= leader.last_executed && s.last_stable >= leader.last_stable
    })
    .await;
    // And it takes part again: with replica 1 stopped too, the cluster still needs it.
    up.signal(1, Signal::SIGSTOP);
    put(&mut c, "after", "2").await;
    assert_eq!(get(&mut c, "k0").await, Some(b"v0".to_vec()));
    up.signal(1, Signal::SIGCONT);
}

/// `read_only_to_quorum`: reads go to the three backups first (the primary is replica 0).
/// With one of them stopped, the first reads are sent to the primary too once replies are
/// late (the hedge), long before the 150 ms retransmission; once the stopped backup has been
/// silent past the client's grace (`byzfs_bft::responsive`), reads leave it out and go to
/// the primary and the two others at once. None waits for a retransmission or falls back
/// to ordering (but one, on a loaded machine: below).
#[tokio::test]
async fn reads_to_2f_plus_1_replicas_are_hedged_past_a_stopped_backup() {
    let up = Up::start(&["--service", "kv"]);
    let mut cluster = up.cluster.clone();
    cluster.bft.read_only_to_quorum = true;
    let mut c = up.client_with(&cluster).await;
    put(&mut c, "k", "v").await;
    for _ in 0..20 {
        assert_eq!(get(&mut c, "k").await, Some(b"v".to_vec()));
    }
    let before = c.stats();
    assert_eq!(before.read_only_to_quorum, 20);
    up.signal(2, Signal::SIGSTOP);
    let start = std::time::Instant::now();
    // At least 20 reads, and on until one goes unhedged after one was hedged: the grace is
    // eight average reads (`byzfs_bft::responsive`), and under a loaded machine 20 quick
    // hedged reads could all fall within it (seen once in a full CI run); it is at most 1 s.
    // A backup that answered a warm-up read from behind is not designated, and left out of
    // reads, for a second (`DISTRUST_MIN_US`): reads skip it without a hedge until then
    // (a full CI run at b36818d: 20 reads, none hedged), so the hedge may come later.
    let (mut reads, mut hedged, mut unhedged_after) = (0u32, 0u32, 0u32);
    while reads < 20 || (unhedged_after == 0 && start.elapsed() < std::time::Duration::from_secs(5))
    {
        let h = c.stats().read_only_hedged;
        assert_eq!(get(&mut c, "k").await, Some(b"v".to_vec()));
        reads += 1;
        if c.stats().read_only_hedged > h {
            hedged += 1;
        } else if hedged > 0 {
            unhedged_after += 1;
        }
    }
    let took = start.elapsed();
    up.signal(2, Signal::SIGCONT);
    let s = c.stats();
    // The first read that asks the stopped backup is hedged (it was not known to be silent
    // yet); the reads after the grace leave it out.
    assert!(
        hedged >= 1 && unhedged_after >= 1,
        "{reads} reads, {hedged} hedged, {unhedged_after} unhedged after one was: {s:?}"
    );
    // Under a full CI run on two cores, one read's hedged answer came after the 150 ms
    // retransmission once (at 055fcea: one retransmission, that read then ordered); a hedge
    // that did not work would send every read after the stopped backup again.
    let again = s.retransmissions - before.retransmissions;
    let ordered = s.read_only_fallbacks - before.read_only_fallbacks;
    assert!(again <= 1 && ordered <= again, "{s:?}");
    assert!(took < std::time::Duration::from_secs(20), "{took:?}");
}
