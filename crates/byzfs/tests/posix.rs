//! An independent POSIX conformance suite over a mounted ByzFS: `posixtest` of go-fuse
//! (`github.com/hanwen/go-fuse/v2/posixtest`, the suite go-fuse runs against its own file
//! systems, with ports of xfstests cases), pinned by `tests/posix-suite/go.mod` and `go.sum`.
//!
//! The test builds the suite with `go test -c` (the Go module proxy serves it; `scripts/deps.sh`
//! installs Go if it is missing), runs every case over `byzfs up --mount` and requires each to
//! pass, except the ones listed in [`EXPECTED_SKIPS`], which skip themselves for features
//! ByzFS does not have (see docs/CONFORMANCE.md). Skipped, with a message, only where FUSE or
//! Go is unavailable.

use crate::common;

use common::{skip_without_fuse, Up};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Cases the suite may skip by itself here, each for a documented reason
/// (docs/CONFORMANCE.md): none (`Tmpfile` needed `FUSE_TMPFILE`, which the
/// vendored fuser now parses).
const EXPECTED_SKIPS: [&str; 0] = [];

/// The suite's cases minus the two its own `TestAll` leaves out (`FcntlFlockLocksFile`,
/// `OpenSymlinkRace`): fewer results than this means the suite changed under us.
const CASES: usize = 30;

fn go() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("go"));
    on_path
        .chain([PathBuf::from("/usr/local/go/bin/go")])
        .find(|p| p.is_file())
}

/// Builds the suite's test binary into `out`.
fn build_suite(go: &Path, out: &Path) {
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/posix-suite");
    let built = Command::new(go)
        .args(["test", "-c", "-o"])
        .arg(out)
        .arg("github.com/hanwen/go-fuse/v2/posixtest")
        .current_dir(&suite)
        .output()
        .expect("run go");
    assert!(
        built.status.success(),
        "building go-fuse's posixtest failed (it needs the Go module proxy once): {}",
        String::from_utf8_lossy(&built.stderr)
    );
}

/// `(case, outcome)` of every `--- PASS|FAIL|SKIP: TestAll/<case>` line.
fn outcomes(log: &str) -> Vec<(String, String)> {
    log.lines()
        .filter_map(|l| {
            let l = l.trim_start().strip_prefix("--- ")?;
            let (outcome, rest) = l.split_once(": TestAll/")?;
            let case = rest.split_whitespace().next()?;
            Some((case.to_string(), outcome.to_string()))
        })
        .collect()
}

#[test]
fn go_fuse_posixtest_passes_over_the_mount() {
    run_suite_over(&["--durability", "memory"]);
}

/// The same over an encrypted mount (`byzfs up --encrypt`, issue #28): every name, byte,
/// link target and attribute goes through the crypto layer.
#[test]
fn go_fuse_posixtest_passes_over_an_encrypted_mount() {
    run_suite_over(&["--durability", "memory", "--encrypt"]);
}

/// Builds the suite and runs it over `byzfs up --mount` with `args`.
fn run_suite_over(args: &[&str]) {
    if skip_without_fuse() {
        return;
    }
    let Some(go) = go() else {
        eprintln!("skipped: no Go toolchain (scripts/deps.sh installs golang-go)");
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let bin = work.path().join("posixtest.test");
    build_suite(&go, &bin);

    let up = Up::start_mounted(args);
    let dir = up.mountpoint.as_ref().unwrap().join("posix");
    std::fs::create_dir(&dir).unwrap();
    let run = Command::new(&bin)
        .args(["-test.run", "^TestAll$", "-test.v", "-test.timeout", "300s"])
        .arg("-posixdir")
        .arg(&dir)
        .output()
        .expect("run posixtest");
    let log = String::from_utf8_lossy(&run.stdout).into_owned();
    eprintln!("{log}");
    let results = outcomes(&log);
    let failed: Vec<_> = results.iter().filter(|(_, o)| o == "FAIL").collect();
    assert!(failed.is_empty(), "cases failed: {failed:?}");
    assert!(run.status.success(), "posixtest exited with {}", run.status);
    assert!(
        results.len() >= CASES,
        "only {} results, wanted {CASES}",
        results.len()
    );
    let skipped: BTreeSet<&str> = results
        .iter()
        .filter(|(_, o)| o == "SKIP")
        .map(|(c, _)| c.as_str())
        .collect();
    let expected = BTreeSet::from(EXPECTED_SKIPS);
    assert!(
        skipped.is_subset(&expected),
        "unexpected skips: {:?}",
        skipped.difference(&expected).collect::<Vec<_>>()
    );
    let passed = results.iter().filter(|(_, o)| o == "PASS").count();
    assert_eq!(passed + skipped.len(), results.len());
}

#[test]
fn outcome_lines_are_parsed() {
    let log = "=== RUN   TestAll\n    --- PASS: TestAll/Link (0.01s)\n    --- SKIP: TestAll/XAttr \
               (0.00s)\n    --- FAIL: TestAll/NlinkZero (0.01s)\n--- FAIL: TestAll (1.41s)\n";
    assert_eq!(
        outcomes(log),
        [
            ("Link".into(), "PASS".into()),
            ("XAttr".into(), "SKIP".into()),
            ("NlinkZero".into(), "FAIL".into())
        ]
    );
}
