//! Busy time (`Replica::busy_for`, ARCHITECTURE.md Deviations 26): a replica that was
//! executing does not blame the primary.

use super::*;

/// What a driver does once a step that took `busy` of wall time ends at `end`: it reports
/// the busy time (if `report`), then handles the deadlines that passed meanwhile before the
/// input queued meanwhile (as byzfs-net's event loop does at the top of every turn).
/// Returns the outputs of that timeout step.
pub(super) fn end_long_step(
    b: &mut Replica<Counter>,
    busy: Duration,
    end: Time,
    report: bool,
) -> Vec<Out> {
    if report {
        b.busy_for(busy);
    }
    drain(b);
    if b.poll_timeout().is_some_and(|t| t <= end) {
        b.handle_timeout(end);
    }
    outputs(drain(b))
}

/// What the backup outputs at the end of a long step in view 0 when its view-change timer
/// fires there: the STATUS due meanwhile (the STATUS timer comes first), then its move to view 1
/// (§3.2) reporting the batch at seq 1 it prepared (`d`); without the view change, the STATUS
/// alone.
fn at_end_of_long_step(b: &Replica<Counter>, last_executed: Seq, vc: Option<Digest>) -> Vec<Out> {
    let status = Out::Broadcast(status_msg(1, 0, true, 0, last_executed));
    let ckpt0 = b.checkpoints.own[&0];
    let moves = vc.map(|d| moves_to_view_1(1, ckpt0, Some(d)));
    std::iter::once(status)
        .chain(moves.into_iter().flatten())
        .collect()
}

/// A backup whose view-change timer runs for a pending request executes that request
/// tentatively in a step that takes `2T` (every replica does the same, so the COMMITs come
/// only after it). Returns the backup after the step's end and the COMMITs, and what it
/// output at the step's end, with the digest of the batch.
pub(super) fn slow_tentative_execution(report: bool) -> (Replica<Counter>, Vec<Out>, Digest) {
    let cfg = config();
    assert!(cfg.tentative_execution);
    let mut b = replica(1, &cfg);
    drain(&mut b);
    let req = request(&cfg, 1, b"w", false);
    b.handle_message(Time(0), &req);
    assert!(b.timers.is_set(TimerKind::ViewChange), "a pending request");
    let start = Time(0) + Duration::from_millis(10);
    let batch = batch_of(req);
    let d = batch_digest(&batch).unwrap();
    order_in_view_0(&cfg, &mut b, start, 1, batch, false);
    assert_eq!((b.last_tentative(), b.last_executed()), (1, 0));
    let busy = 2 * cfg.view_change_timeout;
    let end = start + busy;
    let out = end_long_step(&mut b, busy, end, report);
    deliver_commits(&cfg, &mut b, end, 1, d);
    drain(&mut b);
    (b, out, d)
}

/// The livelock of a request that takes long to execute everywhere (an `rm` of a 1 GiB
/// file took ~48 s): the view-change timer armed before the step expired during it, fired
/// as soon as the step ended, and rolled the tentative execution back — view after view.
#[test]
fn a_backup_busy_executing_tentatively_does_not_blame_the_primary() {
    let (b, out, d) = slow_tentative_execution(false);
    assert_eq!(
        b.view(),
        1,
        "unreported, the step's time counts against the primary"
    );
    assert_eq!(out, at_end_of_long_step(&b, 0, Some(d)));
    assert_eq!(b.stats().rollbacks, 1, "the execution is rolled back");
    assert_eq!(b.last_executed(), 0);

    let (b, out, _) = slow_tentative_execution(true);
    assert_eq!(out, at_end_of_long_step(&b, 0, None));
    assert_eq!((b.view(), b.has_new_view()), (0, true));
    assert_eq!(b.stats().view_changes, 0);
    assert_eq!(b.stats().rollbacks, 0);
    assert_eq!(b.stats().busy_steps, 1);
    assert_eq!(b.last_executed(), 1, "the request commits normally");
    assert_eq!(b.service().count(), 1);
    assert!(!b.timers.is_set(TimerKind::ViewChange), "nothing pending");
}

/// A committed execution is progress, but the step restarts the view-change timer from the
/// `now` it was given — stale by the time the step ends. With another client's request
/// pending (the primary proposes it once it has executed the first one too), unreported
/// busy time makes the timer fire at the step's end. Returns the backup, what it output at
/// the step's end, and the digest of the first batch.
pub(super) fn slow_committed_execution(report: bool) -> (Replica<Counter>, Vec<Out>, Digest) {
    let mut cfg = config();
    cfg.tentative_execution = false;
    let other = CLIENT + 1;
    let mut b = replica_with(1, &cfg, [CLIENT, other]);
    drain(&mut b);
    let r1 = request(&cfg, 1, b"w", false);
    let r2 = client_request(&cfg, other, 1, b"w", false, ReqAuth::Signed);
    b.handle_message(Time(0), &r1);
    let start = Time(0) + Duration::from_millis(10);
    b.handle_message(start, &r2);
    let d1 = batch_digest(&batch_of(r1.clone())).unwrap();
    order_in_view_0(&cfg, &mut b, start, 1, batch_of(r1), true);
    assert_eq!(b.last_executed(), 1);
    assert!(b.timers.is_set(TimerKind::ViewChange), "r2 still pending");
    let busy = 2 * cfg.view_change_timeout;
    let end = start + busy;
    let out = end_long_step(&mut b, busy, end, report);
    // The primary, free again too, proposes r2.
    order_in_view_0(&cfg, &mut b, end, 2, batch_of(r2), true);
    drain(&mut b);
    (b, out, d1)
}

#[test]
fn a_backup_busy_executing_a_committed_request_does_not_blame_the_primary() {
    let (b, out, d1) = slow_committed_execution(false);
    assert_eq!(
        b.view(),
        1,
        "unreported, the step's time counts against the primary"
    );
    assert_eq!(out, at_end_of_long_step(&b, 1, Some(d1)));
    assert_eq!(b.last_executed(), 1, "r2 is not executed in view 0");

    let (b, out, _) = slow_committed_execution(true);
    assert_eq!(out, at_end_of_long_step(&b, 1, None));
    assert_eq!((b.view(), b.stats().view_changes), (0, 0));
    assert_eq!(b.last_executed(), 2, "r2 commits normally");
    assert!(!b.timers.is_set(TimerKind::ViewChange), "nothing pending");
}

/// The cap: a replica that says it is busy after every step (or a driver that
/// over-reports) still leaves a silent primary's view, `view_change_timeout_max` late at
/// most — a faulty primary is still replaced.
#[test]
fn a_replica_busy_for_ever_still_replaces_a_silent_primary() {
    let cfg = config();
    let jitter = Duration::from_millis(100); // VTIMER_JITTER
    let mut b = replica(1, &cfg);
    drain(&mut b);
    b.handle_message(Time(0), &request(&cfg, 1, b"w", false));
    let for_ever = Duration::from_secs(3600);
    b.busy_for(for_ever);
    drain(&mut b);
    let bound = Time(0) + cfg.view_change_timeout + jitter + cfg.view_change_timeout_max;
    let mut now = Time(0);
    let mut out = vec![];
    while b.view() == 0 && now <= bound {
        now = b.poll_timeout().unwrap();
        b.handle_timeout(now);
        if b.view() == 0 {
            b.busy_for(for_ever);
        }
        out = outputs(drain(&mut b));
    }
    assert_eq!(b.view(), 1, "the silent primary is replaced");
    assert!(
        now >= Time(0) + cfg.view_change_timeout + cfg.view_change_timeout_max,
        "pushed back by the whole allowance first (view change at {now:?})"
    );
    assert!(b.stats().busy_steps > 1);
    // Its VIEW-CHANGE went out like any other (the primary never pre-prepared the request:
    // nothing prepared to report).
    let ckpt0 = b.checkpoints.own[&0];
    assert_eq!(out, moves_to_view_1(1, ckpt0, None));
    assert!(!b.has_new_view());
    assert_eq!(b.stats().view_changes, 1);
}
