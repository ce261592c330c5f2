//! Bytes written to storage, from `/proc/PID/io` (`write_bytes`: what a process caused to
//! be written to the block layer, page-cache write-back included), so that tables can put
//! each target's write amplification beside its time: the replicas' (or the server's, or
//! bindfs's) bytes against what the workload wrote.

use std::fs;

/// `write_bytes` of process `pid` (`self` for this one); 0 if unreadable (it exited, or
/// the kernel lacks task I/O accounting).
fn write_bytes(pid: &str) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/io"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("write_bytes: "))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Bytes written to storage so far by this process and the live processes `pids`.
pub fn written(pids: &[i32]) -> u64 {
    write_bytes("self")
        + pids
            .iter()
            .map(|p| write_bytes(&p.to_string()))
            .sum::<u64>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn counts_this_process_writing_a_synced_file() {
        let dir = tempfile::tempdir().unwrap();
        let before = written(&[]);
        let mut f = fs::File::create(dir.path().join("x")).unwrap();
        f.write_all(&vec![1u8; 1 << 20]).unwrap();
        f.sync_all().unwrap();
        let after = written(&[]);
        // tmpfs writes no block, so only where /tmp is a disk does the count move.
        assert!(after >= before);
    }
}
