//! Golden files for the new-view decision (`replica::new_view::decide`, docs/PROTOCOL.md §3.4):
//! each file under `tests/golden/new_view/` lists a VIEW-CHANGE set and the decision it must
//! give, so a corner case reads as data (as raft-rs keeps its test data). The test decides
//! every file and compares the whole result line with the file's `expect` line.
//!
//! Format, one item per line (`#` starts a comment):
//!
//! ```text
//! f 1                      faults tolerated
//! window 16                the log window L
//! rule walk                the fast path's walk (§4.7) instead of PBFT's rule (§3.4)
//! vc R stable=H:D [checkpoints=S:D,…] [prepared=S@V:D,…] [preprepared=S@V:D,…]
//! expect min=H:D picks=D,…  or  expect wait
//! ```
//!
//! A digest `D` is a number `x` (the digest of 32 bytes `x`) or `null` (the null batch).
//! `BYZFS_BLESS=1 cargo test -p byzfs-bft --test new_view_golden` rewrites the `expect` lines
//! from the code: review the diff before committing it.

use byzfs_bft::batch::null_digest;
use byzfs_bft::message::{PrePreparedEntry, PreparedEntry, ViewChange};
use byzfs_bft::replica::new_view::{decide, Broken, Decision};
use byzfs_bft::{Digest, Seq, View, ViewChangeRule};
use std::path::Path;

fn digest(s: &str) -> Digest {
    if s == "null" {
        return null_digest();
    }
    Digest([s.parse().unwrap_or_else(|_| panic!("bad digest {s:?}")); 32])
}

fn show(d: &Digest) -> String {
    if *d == null_digest() {
        return "null".into();
    }
    assert!(d.0.iter().all(|b| *b == d.0[0]), "not a test digest");
    d.0[0].to_string()
}

/// `S:D`.
fn seq_digest(s: &str) -> (Seq, Digest) {
    let (seq, d) = s.split_once(':').expect("S:D");
    (seq.parse().expect("seq"), digest(d))
}

/// `S@V:D`.
fn entry(s: &str) -> (Seq, View, Digest) {
    let (seq, rest) = s.split_once('@').expect("S@V:D");
    let (view, d) = rest.split_once(':').expect("S@V:D");
    (
        seq.parse().expect("seq"),
        view.parse().expect("view"),
        digest(d),
    )
}

fn list<T>(v: &str, f: impl Fn(&str) -> T) -> Vec<T> {
    v.split(',').filter(|s| !s.is_empty()).map(f).collect()
}

fn view_change(line: &str) -> ViewChange {
    let mut words = line.split_whitespace();
    let replica = words.next().expect("replica").parse().expect("replica id");
    let mut vc = ViewChange {
        view: 9,
        replica,
        last_stable: 0,
        checkpoints: Vec::new(),
        prepared: Vec::new(),
        pre_prepared: Vec::new(),
    };
    for w in words {
        let (key, value) = w.split_once('=').expect("key=value");
        match key {
            "stable" => {
                let (h, d) = seq_digest(value);
                vc.last_stable = h;
                vc.checkpoints.insert(0, (h, d));
            }
            "checkpoints" => vc.checkpoints.extend(list(value, seq_digest)),
            "prepared" => {
                vc.prepared = list(value, entry)
                    .into_iter()
                    .map(|(seq, view, digest)| PreparedEntry { seq, view, digest })
                    .collect()
            }
            "preprepared" => {
                vc.pre_prepared = list(value, entry)
                    .into_iter()
                    .map(|(seq, view, digest)| PrePreparedEntry { seq, view, digest })
                    .collect()
            }
            other => panic!("unknown key {other:?}"),
        }
    }
    vc
}

fn expect_line(d: &Option<Decision>) -> String {
    match d {
        None => "expect wait".into(),
        Some(d) => format!(
            "expect min={}:{} picks={}",
            d.min,
            show(&d.min_digest),
            d.picks.iter().map(show).collect::<Vec<_>>().join(",")
        ),
    }
}

/// Decides `text`'s set; returns (the file's expect line, the decision's).
fn run(text: &str) -> (String, String) {
    let (mut f, mut window, mut vcs, mut expect) = (1usize, 16u64, Vec::new(), String::new());
    let mut rule = ViewChangeRule::Pbft;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "f" => f = rest.parse().expect("f"),
            "window" => window = rest.parse().expect("window"),
            "rule" if rest == "walk" => rule = ViewChangeRule::Walk,
            "rule" if rest == "pbft" => rule = ViewChangeRule::Pbft,
            "vc" => vcs.push(view_change(rest)),
            "expect" => expect = line.to_string(),
            other => panic!("unknown line {other:?}"),
        }
    }
    let refs: Vec<&ViewChange> = vcs.iter().collect();
    (
        expect,
        expect_line(&decide(&refs, f, window, Broken::default(), rule)),
    )
}

#[test]
fn new_view_decisions_match_their_golden_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/new_view");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("golden directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 6,
        "golden files missing in {}",
        dir.display()
    );
    let bless = std::env::var_os("BYZFS_BLESS").is_some();
    let mut wrong = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("read");
        let (want, got) = run(&text);
        if want != got {
            if bless {
                let new: String = text
                    .lines()
                    .map(|l| {
                        if l.starts_with("expect") {
                            got.as_str()
                        } else {
                            l
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                std::fs::write(&path, new + "\n").expect("write");
            } else {
                wrong.push(format!(
                    "{}: file says `{want}`, code says `{got}`",
                    path.display()
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
