//! `byzfs status`: asks every replica for its status over the handshake's status request
//! (unauthenticated, read-only; see byzfs-net's README).

use crate::run_file::RunFile;
use byzfs_bft::{ReplicaId, View};
use byzfs_net::cluster::ClusterConfig;
use byzfs_net::handshake::query_status;
use byzfs_net::status::NodeStatus;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The cluster file.
    #[arg(long)]
    config: PathBuf,
    /// Per-replica timeout.
    #[arg(long, default_value_t = 2_000)]
    timeout_ms: u64,
    /// Counters (flood shedding, votes against a primary) are shown as their rise between two
    /// samples this far apart, never as totals since a replica started (README "When a replica
    /// dies"); 0 takes one sample and shows none.
    #[arg(long, default_value_t = 1_000)]
    interval_ms: u64,
}

/// Exit status when the cluster serves but tolerates no more faults (README "When a replica
/// dies"); 1 when it cannot serve, 0 when it tolerates at least one more.
const EXIT_NO_MORE_FAULTS: u8 = 2;

/// Appends one formatted line to a `String`.
macro_rules! say {
    ($o:ident, $($t:tt)*) => {{
        $o.push_str(&format!($($t)*));
        $o.push('\n');
    }};
}

/// Writes `text` to stdout; a closed pipe is not an error.
fn emit(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

/// One status request to every replica, at once; by replica id.
async fn sample(cluster: &ClusterConfig, timeout: Duration) -> Vec<(ReplicaId, Answer)> {
    let mut set = tokio::task::JoinSet::new();
    for r in &cluster.replicas {
        let (c, id) = (cluster.clone(), r.id);
        set.spawn(async move {
            let r = query_status(&c, id, timeout).await;
            (id, r.map_err(|e| e.to_string()))
        });
    }
    let mut out = Vec::new();
    while let Some(Ok(r)) = set.join_next().await {
        out.push(r);
    }
    out.sort_by_key(|(id, _)| *id);
    out
}

/// A replica's status, or why it gave none.
type Answer = Result<NodeStatus, String>;

pub fn run(a: StatusArgs) -> anyhow::Result<ExitCode> {
    crate::logging::init("warn");
    let cluster = ClusterConfig::load(&a.config)?;
    let timeout = Duration::from_millis(a.timeout_ms);
    let interval = Duration::from_millis(a.interval_ms);
    let (before, after) = byzfs_net::signals::runtime()?.block_on(async {
        let before = if interval.is_zero() {
            None
        } else {
            let b = sample(&cluster, timeout).await;
            tokio::time::sleep(interval).await;
            Some(b)
        };
        (before, sample(&cluster, timeout).await)
    });
    let facts = Facts {
        config: a.config.clone(),
        addresses: cluster
            .replicas
            .iter()
            .map(|r| r.address.to_string())
            .collect(),
        quorum: cluster.bft.quorum(),
        log_window: cluster.bft.log_window,
        interval,
        run: RunFile::of_running_up(&a.config),
    };
    let (text, code) = render(&facts, before.as_deref(), &after);
    // The whole report is written at once, so a reader that closes early (`| head`) ends
    // the command quietly instead of making it panic.
    emit(&text)?;
    Ok(ExitCode::from(code))
}

/// What [`render`] needs besides the samples.
struct Facts {
    config: PathBuf,
    /// Each replica's address, by id.
    addresses: Vec<String>,
    quorum: usize,
    log_window: u64,
    /// Between the two samples.
    interval: Duration,
    /// How a running `byzfs up` runs the replicas (`crate::run_file`).
    run: Option<RunFile>,
}

/// How much `count` of `now` rose since `before` (a replica restarted in between counts
/// from 0); `None` without an earlier sample.
fn rise(
    before: Option<&[(ReplicaId, Answer)]>,
    id: ReplicaId,
    now: &NodeStatus,
    count: impl Fn(&NodeStatus) -> u64,
) -> Option<u64> {
    let (_, earlier) = before?.iter().find(|(i, _)| *i == id)?;
    let earlier = earlier.as_ref().ok()?;
    let (a, b) = (count(earlier), count(now));
    Some(if b >= a { b - a } else { b })
}

/// The report and the exit status: 0 while the cluster tolerates another fault,
/// [`EXIT_NO_MORE_FAULTS`] when it serves with none to spare, 1 when it cannot serve.
fn render(
    f: &Facts,
    before: Option<&[(ReplicaId, Answer)]>,
    results: &[(ReplicaId, Answer)],
) -> (String, u8) {
    let mut o = String::new();
    let n = f.addresses.len();
    let quorum = f.quorum;
    say!(
        o,
        "{:<8} {:<22} {:<10} {:>6} {:>8} {:>14} {:>12} {:>6} {:>8} {:<11} {:>9} {:<16} {:<16}",
        "replica",
        "address",
        "reachable",
        "view",
        "primary",
        "last_executed",
        "last_stable",
        "peers",
        "clients",
        "durability",
        "on_disk",
        "state_digest",
        "stable_digest"
    );
    let mut reachable = 0;
    for (id, r) in results {
        let addr = f.addresses.get(*id as usize).map_or("?", String::as_str);
        match r {
            Ok(s) => {
                reachable += 1;
                let view = if s.has_new_view {
                    s.view.to_string()
                } else {
                    format!("{}*", s.view)
                };
                say!(o,
                    "{:<8} {:<22} {:<10} {:>6} {:>8} {:>14} {:>12} {:>6} {:>8} {:<11} {:>9} {:<16} {:<16}",
                    id,
                    addr,
                    "yes",
                    view,
                    s.primary,
                    s.last_executed,
                    s.last_stable,
                    format!("{}/{}", s.peers_connected, n - 1),
                    s.clients_connected,
                    s.durability,
                    human_bytes(s.data_bytes),
                    short(&s.state_digest),
                    short(&s.stable_digest)
                );
            }
            Err(e) => say!(o, "{id:<8} {addr:<22} no ({e})"),
        }
    }
    if results
        .iter()
        .any(|(_, r)| r.as_ref().is_ok_and(|s| !s.has_new_view))
    {
        say!(o, "* view change in progress");
    }
    say!(o, "on_disk: the data directory's size on disk; state_digest: live state (service and reply cache) at the last status tick; stable_digest: last stable checkpoint (first 16 hex digits)");
    say!(
        o,
        "{reachable} of {n} replicas reachable; the cluster needs {quorum} to make progress"
    );
    let seen: Vec<(ReplicaId, Option<&NodeStatus>)> = results
        .iter()
        .map(|(id, r)| (*id, r.as_ref().ok()))
        .collect();
    let h = health(&seen, f.log_window);
    for line in &h.notes {
        say!(o, "{line}");
    }
    for (id, r) in results {
        if r.is_err() {
            say!(o, "replica {id}: {}", restart_note(f, *id));
        }
    }
    let secs = f.interval.as_secs_f64();
    let unreachable = |p: ReplicaId| results.iter().any(|(id, r)| *id == p && r.is_err());
    for (id, s) in results
        .iter()
        .filter_map(|(id, r)| Some((*id, r.as_ref().ok()?)))
    {
        // ARCHITECTURE.md "Defences under attack": a view change this replica started
        // because the primary's throughput fell short under load. A primary that is down
        // falls short too: name that instead of calling it slow.
        let votes = rise(before, id, s, |s| s.core.monitor_complaints).unwrap_or(0);
        if votes > 0 {
            let old_primary = before
                .and_then(|b| b.iter().find(|(i, _)| *i == id))
                .and_then(|(_, r)| r.as_ref().ok())
                .map(|s| s.primary);
            match old_primary {
                Some(p) if unreachable(p) => say!(
                    o,
                    "replica {id}: voted out primary {p} in the last {secs:.1} s: it does not \
                     answer (down, not slow)"
                ),
                _ => say!(
                    o,
                    "replica {id}: voted out a primary too slow under load {votes} time(s) in \
                     the last {secs:.1} s"
                ),
            }
        }
        // Flood protection (`byzfs-net/src/node/shed.rs`) and blacklisted clients.
        let net =
            |r: &'static str| move |s: &NodeStatus| s.net.dropped.get(r).copied().unwrap_or(0);
        let shed = rise(before, id, s, net("shed")).unwrap_or(0);
        let blacklisted = rise(before, id, s, net("blacklisted_client")).unwrap_or(0);
        if shed > 0 || blacklisted > 0 {
            say!(
                o,
                "replica {id}: in the last {secs:.1} s dropped {shed} frame(s) or handshake(s) of \
                 sources shed for flooding, {blacklisted} frame(s) of blacklisted clients (the \
                 log names them)"
            );
        }
        // What the replica wrote for the requests it executed (docs/BENCHMARKS.md
        // "Replicas that write what they store once"): its log and database, and the
        // service's store if it counts its writes.
        let executed = rise(before, id, s, |s| {
            s.core.requests_executed + s.core.read_only_executed
        })
        .unwrap_or(0);
        let store =
            |name: &'static str| move |s: &NodeStatus| s.service.get(name).copied().unwrap_or(0);
        let log_bytes = rise(before, id, s, |s| s.disk.log_bytes).unwrap_or(0);
        let store_bytes = rise(before, id, s, store("store_bytes_written")).unwrap_or(0);
        let syncs = rise(before, id, s, |s| s.disk.syncs()).unwrap_or(0);
        let store_syncs = rise(before, id, s, store("store_syncs")).unwrap_or(0);
        if executed > 0 {
            let per = |v: u64| v as f64 / executed as f64;
            say!(
                o,
                "replica {id}: in the last {secs:.1} s executed {executed} request(s), wrote \
                 {} to its log and {} to its store with {} sync(s) ({} B and {:.2} syncs per \
                 request)",
                human_bytes(log_bytes),
                human_bytes(store_bytes),
                syncs + store_syncs,
                per(log_bytes + store_bytes).round(),
                per(syncs + store_syncs)
            );
        }
    }
    let in_step = h.in_step.len();
    let code = match h.view {
        Some(v) if in_step >= quorum => {
            say!(
                o,
                "{in_step} of {n} replicas in step in view {v}: the cluster tolerates {} more \
                 faulty, slow or unreachable replica(s)",
                in_step - quorum
            );
            if in_step > quorum {
                0
            } else {
                EXIT_NO_MORE_FAULTS
            }
        }
        Some(v) => {
            say!(
                o,
                "only {in_step} of {n} replicas in step in view {v}; the cluster needs {quorum} \
                 to make progress"
            );
            1
        }
        None => {
            say!(
                o,
                "no replica reachable holds a view: a view change is in progress"
            );
            1
        }
    };
    (o, code)
}

/// What brings unreachable replica `id` back: the running `byzfs up` (which restarts it),
/// or the command that restarts it by hand.
fn restart_note(f: &Facts, id: ReplicaId) -> String {
    let mine = f
        .run
        .as_ref()
        .and_then(|run| Some((run.pid, run.replicas.iter().find(|r| r.id == id)?)));
    match mine {
        Some((up, r)) => match r.pid {
            Some(pid) => format!(
                "byzfs up (pid {up}) runs it as pid {pid}: it is starting, or stopped (SIGSTOP) \
                 or overloaded"
            ),
            None => r.state.clone(),
        },
        None => format!(
            "restart it by hand as it ran before, e.g. `byzfs replica --config {} --id {id} \
             --data DATA_DIR [--service fs]` (by default its key and data are beside the config: \
             replica-{id}.key, data/replica-{id})",
            f.config.display()
        ),
    }
}

/// Which replicas are in step with the others, and why each other one is not.
struct Health {
    /// The view most reachable replicas run (ties: the highest); `None` if none runs one.
    view: Option<View>,
    in_step: Vec<ReplicaId>,
    /// One line per replica not in step.
    notes: Vec<String>,
}

/// Replica `id` is in step if it is reachable, runs the cluster's view (it holds its
/// NEW-VIEW), is not fetching state, and has executed within the log window of the furthest
/// replica in that view (further behind, it can take no part in agreement: it needs a state
/// transfer; the window also absorbs the snapshots' skew, at most a status interval). A replica alone in a higher view (its view-change timer
/// fired, the others' did not) takes no part until the others change view too (PBFT): it
/// is reachable, yet the cluster tolerates one fault fewer meanwhile.
fn health(statuses: &[(ReplicaId, Option<&NodeStatus>)], log_window: u64) -> Health {
    let running: Vec<&NodeStatus> = statuses
        .iter()
        .filter_map(|(_, s)| *s)
        .filter(|s| s.has_new_view)
        .collect();
    let view = running
        .iter()
        .map(|s| s.view)
        .max_by_key(|&v| (running.iter().filter(|s| s.view == v).count(), v));
    let furthest = running
        .iter()
        .filter(|s| Some(s.view) == view)
        .map(|s| s.last_executed)
        .max()
        .unwrap_or(0);
    let mut h = Health {
        view,
        in_step: Vec::new(),
        notes: Vec::new(),
    };
    for &(id, s) in statuses {
        let Some(s) = s else {
            h.notes.push(format!(
                "replica {id}: unreachable (not running or not listening)"
            ));
            continue;
        };
        let note = match view {
            None => Some(format!("replica {id}: changing to view {}", s.view)),
            Some(v) if s.view > v => Some(format!(
                "replica {id}: alone in view {}{} while the others run view {v}: it takes no \
                 part until they change view too",
                s.view,
                if s.has_new_view { "" } else { " (view change)" }
            )),
            Some(v) if s.view == v && !s.has_new_view => Some(format!(
                "replica {id}: in view {v} but without its NEW-VIEW yet: it takes part when \
                 a peer sends it (or, if none has it, after its view-change timer)"
            )),
            Some(v) if s.view < v => Some(format!(
                "replica {id}: not yet in view {v} (in view {}): it joins when it gets the \
                 NEW-VIEW",
                s.view
            )),
            Some(_) if s.fetching => Some(format!("replica {id}: fetching state")),
            Some(_) if furthest.saturating_sub(s.last_executed) > log_window => Some(format!(
                "replica {id}: behind, executed up to {} where others reached {furthest} \
                 (it catches up by state transfer at the next stable checkpoint)",
                s.last_executed
            )),
            Some(v) if s.withholds_prepares_up_to.is_some() => Some(format!(
                "replica {id}: restored after a power cut, it withholds its PREPAREs in view \
                 {v} up to sequence number {} (it may have lost votes there) and votes \
                 above it; it still commits and executes",
                s.withholds_prepares_up_to.unwrap_or_default()
            )),
            Some(_) => None,
        };
        match note {
            Some(n) => h.notes.push(n),
            None => h.in_step.push(id),
        }
    }
    h
}

/// The first 16 hex digits of a digest (enough to compare replicas by eye).
fn short(hex: &str) -> &str {
    hex.get(..16).unwrap_or(hex)
}

/// `bytes` for a table: `-` for none, else in KiB, MiB or GiB.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    if bytes == 0 {
        return "-".into();
    }
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_file::RunReplica;

    fn st(view: View, has_new_view: bool, last_executed: u64) -> NodeStatus {
        NodeStatus {
            view,
            has_new_view,
            last_executed,
            ..NodeStatus::default()
        }
    }

    /// `health` of replicas 0, 1, … in order, with a log window of 256.
    fn health_of(replicas: &[Option<&NodeStatus>]) -> Health {
        let numbered: Vec<(ReplicaId, Option<&NodeStatus>)> =
            (0..).zip(replicas.iter().copied()).collect();
        health(&numbered, 256)
    }

    #[test]
    fn sizes_read_as_a_person_would() {
        let shown: Vec<String> = [0, 512, 1536, 5 << 20, (3 << 30) + (1 << 29)]
            .into_iter()
            .map(human_bytes)
            .collect();
        assert_eq!(shown, ["-", "512.0 B", "1.5 KiB", "5.0 MiB", "3.5 GiB"]);
    }

    #[test]
    fn all_in_step() {
        let a = st(2, true, 500);
        let b = st(2, true, 498);
        let h = health_of(&[Some(&a), Some(&b), Some(&a), Some(&b)]);
        assert_eq!(h.view, Some(2));
        assert_eq!(h.in_step, vec![0, 1, 2, 3]);
        assert!(h.notes.is_empty());
    }

    #[test]
    fn a_replica_alone_in_a_higher_view_is_not_in_step() {
        let running = st(2, true, 500);
        let alone = st(3, false, 500);
        let h = health_of(&[Some(&running), Some(&running), Some(&alone), Some(&running)]);
        assert_eq!(h.view, Some(2));
        assert_eq!(h.in_step, vec![0, 1, 3]);
        assert_eq!(h.notes.len(), 1);
        assert!(
            h.notes[0].starts_with("replica 2: alone in view 3 (view change)"),
            "{:?}",
            h.notes
        );
    }

    #[test]
    fn unreachable_behind_older_view_and_fetching_replicas_are_named() {
        let a = st(4, true, 1000);
        let behind = st(4, true, 700);
        let older = st(3, true, 1000);
        let mut fetching = st(4, true, 990);
        fetching.fetching = true;
        let waiting = st(4, false, 1000);
        let h = health_of(&[
            Some(&a),
            Some(&behind),
            None,
            Some(&older),
            Some(&fetching),
            Some(&a),
            Some(&a),
            Some(&waiting),
        ]);
        assert_eq!(h.view, Some(4));
        assert_eq!(h.in_step, vec![0, 5, 6]);
        let joined = h.notes.join("\n");
        for want in [
            "replica 1: behind, executed up to 700 where others reached 1000",
            "replica 2: unreachable",
            "replica 3: not yet in view 4 (in view 3)",
            "replica 4: fetching state",
            "replica 7: in view 4 but without its NEW-VIEW yet",
        ] {
            assert!(joined.contains(want), "{want}: {joined}");
        }
    }

    #[test]
    fn a_backup_withholding_its_prepares_is_named_and_not_counted_in_step() {
        let a = st(0, true, 300);
        let mut cut = st(0, true, 300);
        cut.withholds_prepares_up_to = Some(540);
        let h = health_of(&[Some(&a), Some(&a), Some(&cut), Some(&a)]);
        assert_eq!(h.in_step, vec![0, 1, 3]);
        assert!(
            h.notes[0].starts_with(
                "replica 2: restored after a power cut, it withholds its PREPAREs in view 0 \
                 up to sequence number 540"
            ),
            "{:?}",
            h.notes
        );
    }

    #[test]
    fn no_view_while_every_replica_changes_view() {
        let changing = st(5, false, 10);
        let h = health_of(&[Some(&changing), Some(&changing)]);
        assert_eq!(h.view, None);
        assert!(h.in_step.is_empty());
        assert_eq!(h.notes.len(), 2);
    }

    #[test]
    fn the_most_common_view_wins_ties_go_to_the_higher() {
        let v1 = st(1, true, 10);
        let v2 = st(2, true, 10);
        let h = health_of(&[Some(&v1), Some(&v2)]);
        assert_eq!(h.view, Some(2));
        let h = health_of(&[Some(&v1), Some(&v1), Some(&v2)]);
        assert_eq!(h.view, Some(1));
    }

    /// Four replicas on ports 7000.., quorum 3, sampled 1 s apart.
    fn facts(run: Option<RunFile>) -> Facts {
        Facts {
            config: "/c/cluster.toml".into(),
            addresses: (7000..7004).map(|p| format!("127.0.0.1:{p}")).collect(),
            quorum: 3,
            log_window: 256,
            interval: Duration::from_secs(1),
            run,
        }
    }

    /// A replica in step in view 0 (primary 0) at sequence number 40.
    fn up(id: ReplicaId) -> Answer {
        Ok(NodeStatus {
            replica: id,
            durability: "disk".into(),
            peers_connected: 3,
            data_bytes: 3 << 20,
            state_digest: "00112233445566778899".into(),
            stable_digest: "aabbccddeeff00112233".into(),
            last_stable: 0,
            ..st(0, true, 40)
        })
    }

    fn down() -> Answer {
        Err("cannot connect to 127.0.0.1:7002: Connection refused (os error 111)".into())
    }

    const HEAD: &str = "replica  address                reachable    view  primary  last_executed  last_stable  peers  clients durability    on_disk state_digest     stable_digest   \n";
    const ROW: &str = "      0        0             40            0    3/3        0 disk          3.0 MiB 0011223344556677 aabbccddeeff0011\n";
    const LEGEND: &str = "on_disk: the data directory's size on disk; state_digest: live state (service and reply cache) at the last status tick; stable_digest: last stable checkpoint (first 16 hex digits)\n";

    fn row(id: ReplicaId) -> String {
        format!("{id:<8} 127.0.0.1:{:<12} yes       {ROW}", 7000 + id)
    }

    #[test]
    fn all_up_exits_0() {
        let now: Vec<_> = (0..4).map(|i| (i, up(i))).collect();
        let (text, code) = render(&facts(None), Some(&now), &now);
        let want = [
            HEAD.to_string(),
            row(0),
            row(1),
            row(2),
            row(3),
            LEGEND.into(),
            "4 of 4 replicas reachable; the cluster needs 3 to make progress\n".into(),
            "4 of 4 replicas in step in view 0: the cluster tolerates 1 more faulty, slow or \
             unreachable replica(s)\n"
                .into(),
        ]
        .concat();
        assert_eq!((text.as_str(), code), (want.as_str(), 0));
    }

    #[test]
    fn one_down_exits_2_and_names_up_restarting_it() {
        let now = vec![(0, up(0)), (1, up(1)), (2, down()), (3, up(3))];
        let run = RunFile {
            pid: 99,
            replicas: vec![RunReplica {
                id: 2,
                command: vec!["/bin/byzfs".into(), "replica".into()],
                log: "/c/logs/replica-2.log".into(),
                pid: None,
                state: "exited; byzfs up (pid 99) restarts it 2.0 s after the exit".into(),
            }],
        };
        let (text, code) = render(&facts(Some(run)), Some(&now), &now);
        let want = [
            HEAD.to_string(),
            row(0),
            row(1),
            "2        127.0.0.1:7002         no (cannot connect to 127.0.0.1:7002: Connection \
             refused (os error 111))\n"
                .into(),
            row(3),
            LEGEND.into(),
            "3 of 4 replicas reachable; the cluster needs 3 to make progress\n".into(),
            "replica 2: unreachable (not running or not listening)\n".into(),
            "replica 2: exited; byzfs up (pid 99) restarts it 2.0 s after the exit\n".into(),
            "3 of 4 replicas in step in view 0: the cluster tolerates 0 more faulty, slow or \
             unreachable replica(s)\n"
                .into(),
        ]
        .concat();
        assert_eq!((text.as_str(), code), (want.as_str(), EXIT_NO_MORE_FAULTS));
    }

    #[test]
    fn two_down_exit_1_with_the_general_restart_command() {
        let now = vec![(0, up(0)), (1, down()), (2, down()), (3, up(3))];
        let (text, code) = render(&facts(None), None, &now);
        let tail: Vec<&str> = text.lines().skip(6).collect();
        assert_eq!(
            tail,
            [
                "2 of 4 replicas reachable; the cluster needs 3 to make progress",
                "replica 1: unreachable (not running or not listening)",
                "replica 2: unreachable (not running or not listening)",
                "replica 1: restart it by hand as it ran before, e.g. `byzfs replica --config \
                 /c/cluster.toml --id 1 --data DATA_DIR [--service fs]` (by default its key and \
                 data are beside the config: replica-1.key, data/replica-1)",
                "replica 2: restart it by hand as it ran before, e.g. `byzfs replica --config \
                 /c/cluster.toml --id 2 --data DATA_DIR [--service fs]` (by default its key and \
                 data are beside the config: replica-2.key, data/replica-2)",
                "only 2 of 4 replicas in step in view 0; the cluster needs 3 to make progress",
            ]
        );
        assert_eq!(code, 1);
    }

    /// Counters since a replica started are not news: only their rise between the samples
    /// shows, and a vote against a primary that does not answer says so.
    #[test]
    fn counters_show_only_what_rose_between_the_samples() {
        let with = |id, shed: u64, votes: u64, primary: ReplicaId| {
            let mut s = up(id).unwrap_or_default();
            s.net.dropped.insert("shed".into(), shed);
            s.core.monitor_complaints = votes;
            s.primary = primary;
            Ok(s)
        };
        // Replica 1 shed 151 long ago; replica 3 sheds now and voted out primary 0, now down.
        let before = vec![
            (0, with(0, 0, 0, 0)),
            (1, with(1, 151, 2, 0)),
            (2, with(2, 0, 0, 0)),
            (3, with(3, 10, 0, 0)),
        ];
        let now = vec![
            (0, down()),
            (1, with(1, 151, 2, 1)),
            (2, with(2, 0, 0, 1)),
            (3, with(3, 25, 1, 1)),
        ];
        let (text, _) = render(&facts(None), Some(&before), &now);
        let notes: Vec<&str> = text.lines().filter(|l| l.contains("in the last")).collect();
        assert_eq!(
            notes,
            [
                "replica 3: voted out primary 0 in the last 1.0 s: it does not answer (down, \
                 not slow)",
                "replica 3: in the last 1.0 s dropped 15 frame(s) or handshake(s) of sources \
                 shed for flooding, 0 frame(s) of blacklisted clients (the log names them)",
            ]
        );
        // A replica restarted between the samples counts from zero.
        let restarted = vec![(3, with(3, 4, 0, 1))];
        let (text, _) = render(&facts(None), Some(&before), &restarted);
        assert!(
            text.contains("replica 3: in the last 1.0 s dropped 4 frame(s)"),
            "{text}"
        );
    }

    /// What each replica wrote per request it executed between the samples; nothing for a
    /// replica that executed none.
    #[test]
    fn writes_per_request_show_what_rose() {
        let with = |id, executed: u64, log: u64, syncs: u64, store: u64, store_syncs: u64| {
            let mut s = up(id).unwrap_or_default();
            s.core.requests_executed = executed;
            s.disk.log_bytes = log;
            s.disk.log_syncs = syncs;
            s.disk.db_commits = 1;
            s.service.insert("store_bytes_written".into(), store);
            s.service.insert("store_syncs".into(), store_syncs);
            Ok(s)
        };
        let before: Vec<_> = (0..4)
            .map(|i| (i, with(i, 100, 1 << 20, 50, 0, 0)))
            .collect();
        let mut now = before.clone();
        now[1] = (1, with(1, 300, (1 << 20) + 409_600, 150, 3 << 20, 2));
        let (text, _) = render(&facts(None), Some(&before), &now);
        let notes: Vec<&str> = text.lines().filter(|l| l.contains("in the last")).collect();
        assert_eq!(
            notes,
            [
                "replica 1: in the last 1.0 s executed 200 request(s), wrote 400.0 KiB to its \
                 log and 3.0 MiB to its store with 102 sync(s) (17777 B and 0.51 syncs per \
                 request)"
            ]
        );
    }
}
