//! The callers' supplementary groups, which FUSE does not pass: read from
//! `/proc/<pid>/status` and kept for [`GROUPS_TTL`] per process.
//!
//! Reading that file for every request took 15 % of the mount's CPU in Andrew (the kernel
//! formats the whole status, memory statistics included; `perf`, docs/bench/HISTORY.md
//! "two levers dropped, the mount's CPU, and the bounds"), and a compiler makes hundreds of requests. Entries are keyed by pid, uid
//! and gid, so a pid reused by a process of another user is read afresh. A stale entry
//! matters only within a second of a `setgroups(2)`, and little then: the kernel checks
//! permissions first with the caller's real credentials (the mount uses
//! `default_permissions`, and the VFS clears set-group-ID on `chmod` itself), so a group
//! dropped within the last second opens nothing the kernel refused; a group gained within
//! the last second may make the replicas refuse the process (`EACCES`, `EPERM`) until the
//! entry expires.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a process's groups are reused.
pub const GROUPS_TTL: Duration = Duration::from_secs(1);
/// Processes remembered at most (expired ones are dropped first when it fills).
const MAX_ENTRIES: usize = 4096;

/// A process as the cache knows it: pid, uid, gid.
type Caller = (u32, u32, u32);

/// Supplementary groups by caller, with when they were read.
#[derive(Default)]
pub struct GroupCache {
    entries: Mutex<HashMap<Caller, (Vec<u32>, Instant)>>,
}

impl GroupCache {
    /// The supplementary groups of process `pid` running as `uid`/`gid`, as of at most
    /// [`GROUPS_TTL`] before `now`. A process that is gone (or a `/proc` without it) has none.
    pub fn get(&self, pid: u32, uid: u32, gid: u32, now: Instant) -> Vec<u32> {
        self.get_with(pid, uid, gid, now, read_groups)
    }

    fn get_with(
        &self,
        pid: u32,
        uid: u32,
        gid: u32,
        now: Instant,
        read: impl FnOnce(u32) -> Vec<u32>,
    ) -> Vec<u32> {
        let key = (pid, uid, gid);
        if let Ok(entries) = self.entries.lock() {
            if let Some((g, at)) = entries.get(&key) {
                if now.saturating_duration_since(*at) < GROUPS_TTL {
                    return g.clone();
                }
            }
        }
        let groups = read(pid);
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() >= MAX_ENTRIES {
                entries.retain(|_, (_, at)| now.saturating_duration_since(*at) < GROUPS_TTL);
                if entries.len() >= MAX_ENTRIES {
                    entries.clear();
                }
            }
            entries.insert(key, (groups.clone(), now));
        }
        groups
    }
}

/// The `Groups:` line of `/proc/<pid>/status`; empty if it cannot be read.
fn read_groups(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map(|s| parse_groups(&s))
        .unwrap_or_default()
}

fn parse_groups(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix("Groups:").map(|g| {
                g.split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect()
            })
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn parses_the_groups_line() {
        let status =
            "Name:\tcc1\nUid:\t1000\t1000\t1000\t1000\nGroups:\t4 24 1000 \nVmRSS:\t1 kB\n";
        assert_eq!(parse_groups(status), vec![4, 24, 1000]);
        assert_eq!(parse_groups("Groups:\t\n"), Vec::<u32>::new());
        assert_eq!(parse_groups("Name:\tx\n"), Vec::<u32>::new());
    }

    #[test]
    fn reads_this_process() {
        let pid = std::process::id();
        let want = parse_groups(&std::fs::read_to_string("/proc/self/status").unwrap());
        assert_eq!(read_groups(pid), want);
        assert!(read_groups(u32::MAX).is_empty(), "no such process");
    }

    #[test]
    fn reuses_groups_for_a_second_per_pid_uid_and_gid() {
        let cache = GroupCache::default();
        let count = Cell::new(0);
        let reads = &count;
        let t0 = Instant::now();
        let read = |g: u32| {
            move |_pid: u32| {
                reads.set(reads.get() + 1);
                vec![g]
            }
        };
        assert_eq!(cache.get_with(7, 1000, 1000, t0, read(1)), vec![1]);
        // Within the TTL: the first answer, no second read.
        let soon = t0 + GROUPS_TTL / 2;
        assert_eq!(cache.get_with(7, 1000, 1000, soon, read(2)), vec![1]);
        assert_eq!(reads.get(), 1);
        // Another uid or gid under the same pid (a reused pid): read afresh.
        assert_eq!(cache.get_with(7, 1001, 1000, soon, read(3)), vec![3]);
        assert_eq!(cache.get_with(7, 1000, 1001, soon, read(4)), vec![4]);
        assert_eq!(reads.get(), 3);
        // After the TTL: read again, and remembered anew.
        let later = t0 + GROUPS_TTL;
        assert_eq!(cache.get_with(7, 1000, 1000, later, read(5)), vec![5]);
        assert_eq!(cache.get_with(7, 1000, 1000, later, read(6)), vec![5]);
        assert_eq!(reads.get(), 4);
    }

    #[test]
    fn stays_bounded() {
        let cache = GroupCache::default();
        let t0 = Instant::now();
        for pid in 0..(MAX_ENTRIES as u32 + 10) {
            cache.get_with(pid, 0, 0, t0, |_| vec![]);
        }
        assert!(cache.entries.lock().unwrap().len() <= MAX_ENTRIES);
    }
}
