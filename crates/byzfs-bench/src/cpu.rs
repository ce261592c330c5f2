//! CPU time from `/proc` accounting, for every benchmark: the client side (this process
//! and the children it has waited for, e.g. `make`, `postmark`) and the servers (bindfs,
//! replicas, the mount), so tables can put CPU seconds beside wall time on a shared machine.

use std::fs;
use std::time::Duration;

/// Clock ticks per second of `/proc/*/stat` times (`USER_HZ`, 100 on Linux's mainstream
/// architectures).
const TICKS_PER_SEC: f64 = 100.0;

/// Fields 14.. of `/proc/PID/stat` (utime, stime, cutime, cstime, …), parsed after the
/// command name, which may contain spaces and parentheses.
fn stat_times(pid: &str) -> Option<[u64; 4]> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    // `rest` starts at field 3 (state); utime is field 14.
    let f: Vec<&str> = rest.split(' ').collect();
    let get = |i: usize| f.get(i - 3).and_then(|v| v.parse().ok());
    Some([get(14)?, get(15)?, get(16)?, get(17)?])
}

/// CPU seconds of this process and of its waited-for children.
pub fn client_secs() -> f64 {
    stat_times("self").map_or(0.0, |t| t.iter().sum::<u64>() as f64 / TICKS_PER_SEC)
}

/// CPU seconds (user + system) of live processes `pids`; processes that exited count 0.
pub fn process_secs(pids: &[i32]) -> f64 {
    pids.iter()
        .filter_map(|p| stat_times(&p.to_string()))
        .map(|t| (t[0] + t[1]) as f64 / TICKS_PER_SEC)
        .sum()
}

/// CPU time (user + system) of live processes `pids`, as a [`Duration`].
pub fn process_time(pids: &[i32]) -> Duration {
    Duration::from_secs_f64(process_secs(pids))
}

/// This process's own CPU time (the load generator's clients), without its children.
pub fn own_time() -> Duration {
    stat_times("self").map_or(Duration::ZERO, |t| {
        Duration::from_secs_f64((t[0] + t[1]) as f64 / TICKS_PER_SEC)
    })
}

/// Process ids whose command line satisfies `f`.
pub fn pids_where(f: impl Fn(&[String]) -> bool) -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                let argv: Vec<String> = c
                    .split(|&b| b == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect();
                f(&argv)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_own_cpu_time() {
        // Spin until the accounting moves (ticks are 10 ms), then check both readings.
        let t0 = super::client_secs();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while super::client_secs() < t0 + 0.05 {
            for i in 0..1_000_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
            assert!(start.elapsed().as_secs() < 30, "CPU time never advanced");
        }
        assert!(super::process_secs(&[std::process::id() as i32]) >= 0.05);
        assert!(super::own_time() >= std::time::Duration::from_millis(50));
    }
}
