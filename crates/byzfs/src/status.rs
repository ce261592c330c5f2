//! `byzfs status`: asks every replica for its status over the handshake's status request
//! (unauthenticated, read-only; see byzfs-net's README).

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
}

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

pub fn run(a: StatusArgs) -> anyhow::Result<ExitCode> {
    crate::logging::init("warn");
    let cluster = ClusterConfig::load(&a.config)?;
    let timeout = Duration::from_millis(a.timeout_ms);
    let results = byzfs_net::signals::runtime()?.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for r in &cluster.replicas {
            let (c, id) = (cluster.clone(), r.id);
            set.spawn(async move { (id, query_status(&c, id, timeout).await) });
        }
        let mut out = Vec::new();
        while let Some(Ok(r)) = set.join_next().await {
            out.push(r);
        }
        out.sort_by_key(|(id, _)| *id);
        out
    });
    // The whole report is written at once, so a reader that closes early (`| head`) ends
    // the command quietly instead of making it panic.
    let mut o = String::new();
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
    for (id, r) in &results {
        let addr = &cluster.replicas[*id as usize].address;
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
                    format!("{}/{}", s.peers_connected, cluster.n() - 1),
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
    let quorum = cluster.bft.quorum();
    say!(
        o,
        "{reachable} of {} replicas reachable; the cluster needs {quorum} to make progress",
        cluster.n()
    );
    let seen: Vec<(ReplicaId, Option<&NodeStatus>)> = results
        .iter()
        .map(|(id, r)| (*id, r.as_ref().ok()))
        .collect();
    let h = health(&seen, cluster.bft.log_window);
    for line in &h.notes {
        say!(o, "{line}");
    }
    for (id, s) in results
        .iter()
        .filter_map(|(id, r)| Some((id, r.as_ref().ok()?)))
    {
        // ARCHITECTURE.md "Defences under attack": each is a view change this replica
        // started because the primary's throughput fell short under load.
        if s.core.monitor_complaints > 0 {
            say!(
                o,
                "replica {id}: voted out a primary too slow under load {} time(s) (of {} view changes it started)",
                s.core.monitor_complaints,
                s.core.view_changes
            );
        }
        // Flood protection (`byzfs-net/src/node/shed.rs`) and blacklisted clients.
        let net = |r: &str| s.net.dropped.get(r).copied().unwrap_or(0);
        let (shed, blacklisted) = (net("shed"), net("blacklisted_client"));
        if shed > 0 || blacklisted > 0 {
            say!(
                o,
                "replica {id}: dropped {shed} frame(s) or handshake(s) of sources shed for flooding, {blacklisted} frame(s) of blacklisted clients (the log names them)"
            );
        }
    }
    let in_step = h.in_step.len();
    match h.view {
        Some(v) if in_step >= quorum => say!(
            o,
            "{in_step} of {} replicas in step in view {v}: the cluster tolerates {} more \
             faulty, slow or unreachable replica(s)",
            cluster.n(),
            in_step - quorum
        ),
        Some(v) => say!(
            o,
            "only {in_step} of {} replicas in step in view {v}; the cluster needs {quorum} \
             to make progress",
            cluster.n()
        ),
        None => say!(
            o,
            "no replica reachable holds a view: a view change is in progress"
        ),
    }
    emit(&o)?;
    Ok(if reachable >= quorum {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
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
            h.notes.push(format!("replica {id}: unreachable"));
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
}
