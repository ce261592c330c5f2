//! Smoke test of `byzfs bench andrew|postmark|largefile`: real processes, small sizes,
//! targets local and passthrough (bindfs), and ByzFS (its replicas and `byzfs mount`) for
//! Andrew. Skipped, with a message, where FUSE, bindfs or postmark are missing (CI installs
//! them: `.ci/run`).

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_byzfs");

/// Why the FUSE targets cannot run here, if they cannot.
fn missing_tools() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is missing".into());
    }
    for (tool, arg) in [("bindfs", "--version"), ("fusermount3", "-V")] {
        if Command::new(tool).arg(arg).output().is_err() {
            return Some(format!(
                "{tool} is not installed (apt-get install -y fuse3 bindfs)"
            ));
        }
    }
    None
}

fn run(args: &[&str]) -> (String, String) {
    let out = Command::new(BIN).arg("bench").args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "byzfs bench {args:?} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (stdout, stderr)
}

/// Checks the `--json` rows: each target × metric (and CPU seconds) present once with sane
/// numbers, and the passthrough/local ratio rows.
fn check_rows(json: &Path, bench: &str, metrics: &[&str]) {
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    assert_eq!(report["bench"], bench);
    assert!(report["command"].as_str().unwrap().contains(bench));
    assert!(report["machine"]["cpus"].as_u64().unwrap() >= 1);
    let rows = report["rows"].as_array().expect("an array of rows");
    for target in ["local", "passthrough", "passthrough/local"] {
        // Every benchmark adds CPU seconds and bytes written to disk; they can be 0 (10 ms
        // ticks; local has no server; /tmp may be tmpfs), so their ratios are not always
        // defined.
        for metric in
            metrics
                .iter()
                .chain(&["client cpu", "server cpu", "mount cpu", "disk written"])
        {
            if target.contains('/') && (metric.ends_with("cpu") || *metric == "disk written") {
                continue;
            }
            let hits: Vec<_> = rows
                .iter()
                .filter(|r| r["target"] == *target && r["metric"] == *metric)
                .collect();
            assert_eq!(hits.len(), 1, "{bench}: one row for {target} {metric}");
            let r = hits[0];
            assert_eq!(r["bench"], bench);
            let median = r["median"].as_f64().expect("median is a number");
            assert!(median.is_finite() && median >= 0.0, "{r}");
            assert!(r["min"].as_f64().unwrap() <= median && median <= r["max"].as_f64().unwrap());
            assert!(!r["runs"].as_array().unwrap().is_empty());
            assert!(r["unit"].is_string() && r["params"].is_object());
        }
    }
}

fn no_mounts_left(work: &Path) {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let w = work.to_string_lossy();
    assert!(
        !info.contains(w.as_ref()),
        "a mount under {w} was left behind"
    );
    // The per-run work directory is removed too.
    assert_eq!(
        std::fs::read_dir(work).unwrap().count(),
        0,
        "{w} not cleaned up"
    );
}

#[test]
fn andrew_postmark_largefile_on_local_and_passthrough() {
    if let Some(why) = missing_tools() {
        eprintln!("SKIPPED fsbench smoke test: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let w = work.to_str().unwrap();

    // A small source tree stands in for Tcl (no download, no compile).
    let src = tmp.path().join("src");
    for d in ["a/b/c", "d"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    for (i, f) in ["a/x.c", "a/b/y.h", "a/b/c/z.c", "d/README", "top.txt"]
        .iter()
        .enumerate()
    {
        std::fs::write(src.join(f), vec![b'a' + i as u8; 1000 * (i + 1)]).unwrap();
    }
    std::os::unix::fs::symlink("top.txt", src.join("link")).unwrap();

    let json = tmp.path().join("andrew.json");
    let svg = tmp.path().join("andrew.svg");
    let (stdout, stderr) = run(&[
        "andrew",
        "--targets",
        "byzfs,local,passthrough",
        "--no-compile",
        "--copies",
        "2",
        "--source-dir",
        src.to_str().unwrap(),
        "--work-dir",
        w,
        "--json",
        json.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    // The real ByzFS (4 replicas and `byzfs mount`) is measured too, on this tiny tree.
    assert!(!stderr.contains("skipping target"), "{stderr}");
    assert!(stdout.contains("byzfs-ro/passthrough"), "{stdout}");
    assert!(stdout.contains("passthrough/local"), "{stdout}");
    check_rows(&json, "andrew", &["mkdir", "copy", "stat", "read", "total"]);
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    no_mounts_left(&work);

    let json = tmp.path().join("largefile.json");
    run(&[
        "largefile",
        "--targets",
        "local,passthrough",
        "--size-mib",
        "2",
        "--work-dir",
        w,
        "--json",
        json.to_str().unwrap(),
    ]);
    check_rows(
        &json,
        "largefile",
        &[
            "read seq",
            "read rand",
            "write seq",
            "write rand",
            "client cpu",
            "server cpu",
        ],
    );
    no_mounts_left(&work);

    if Command::new("postmark")
        .stdin(std::process::Stdio::null())
        .output()
        .is_err()
    {
        eprintln!("SKIPPED fsbench postmark smoke: postmark is not installed (apt-get install -y postmark)");
        return;
    }
    let json = tmp.path().join("postmark.json");
    run(&[
        "postmark",
        "--targets",
        "local,passthrough",
        "--preset",
        "quick",
        "--work-dir",
        w,
        "--json",
        json.to_str().unwrap(),
    ]);
    check_rows(
        &json,
        "postmark",
        &["throughput", "create", "transactions", "delete", "total"],
    );
    no_mounts_left(&work);
}

/// A stand-in for `byzfs mount`: records its arguments; `mount [--strict|--unreplicated]
/// --config C MNT` checks that the cluster file exists and serves MNT with bindfs until
/// SIGTERM.
const FAKE_MOUNT: &str = r#"#!/bin/sh
echo "$@" >> "$FAKE_LOG"
trap 'exit 0' TERM INT
[ "$1" = mount ] || exit 2
case "$2" in --strict|--unreplicated) shift ;; esac
[ -f "$3" ] || exit 3
B="$(dirname "$3")/backing"
mkdir -p "$B" && bindfs "$B" "$4" || exit 1
trap 'fusermount3 -u "$4"; exit 0' TERM INT
while :; do sleep 0.1; done
"#;

/// The ByzFS and NO-REP targets end to end with real servers and a stand-in for `byzfs
/// mount`: the mount's arguments, mount detection, CPU accounting, ratios, what is skipped,
/// stopping on drop.
#[test]
fn cluster_targets_with_a_stand_in_mount() {
    if let Some(why) = missing_tools() {
        eprintln!("SKIPPED fsbench hook test: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    std::fs::write(src.join("d/f.c"), "int main(void) { return 0; }\n").unwrap();
    let fake = tmp.path().join("fake-mount");
    std::fs::write(&fake, FAKE_MOUNT).unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let log = tmp.path().join("args.log");
    let json = tmp.path().join("hook.json");

    let out = Command::new(BIN)
        .env("BYZFS_FSBENCH_MOUNT", &fake)
        .env("FAKE_LOG", &log)
        .args(["bench", "andrew", "--targets", "byzfs,norep,local"])
        .args(["--ro-lookups", "off,on", "--durability", "memory"])
        .args(["--no-compile", "--source-dir"])
        .arg(&src)
        .arg("--work-dir")
        .arg(&work)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // Nothing is skipped.
    assert!(!stderr.contains("skipping target"), "{stderr}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = report["rows"].as_array().unwrap();
    for target in [
        "byzfs",
        "byzfs-ro",
        "norep",
        "local",
        "byzfs-ro/local",
        "byzfs-ro/norep",
    ] {
        assert!(
            rows.iter()
                .any(|r| r["target"] == target && r["metric"] == "total"),
            "no {target} total row:\n{stdout}"
        );
    }
    let server_cpu = rows
        .iter()
        .find(|r| r["target"] == "byzfs-ro" && r["metric"] == "server cpu")
        .unwrap();
    assert!(server_cpu["median"].as_f64().unwrap() >= 0.0);
    // One mount per target, each given its target's cluster file: strict lookups for
    // `byzfs`, the read-only optimisation for `byzfs-ro`, the plain client for NO-REP.
    let args = std::fs::read_to_string(&log).unwrap();
    let mut kinds: Vec<&str> = args
        .lines()
        .map(|l| {
            let rest = l.strip_prefix("mount ").expect(l);
            assert!(rest.contains("/cluster/cluster.toml "), "{args}");
            rest.split(' ').next().unwrap()
        })
        .collect();
    kinds.sort();
    assert_eq!(kinds, ["--config", "--strict", "--unreplicated"], "{args}");
    no_mounts_left(&work);
}
