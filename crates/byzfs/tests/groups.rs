//! `byzfs identity` and `byzfs group` against four real `--service fs` replicas: an owner
//! creates a group, adds a reader and a writer, removes one; each step is a new key
//! version that exactly the current members open; a stranger cannot change the group; bad
//! identity files and arguments give one-line errors.

use crate::common;

use common::{Procs, BIN};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;

/// Runs `byzfs args…`: (success, stdout, stderr).
fn byzfs(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A new identity at `path`; its member key.
fn identity(path: &Path) -> String {
    let p = path.to_str().unwrap();
    let (ok, out, err) = byzfs(&["identity", "new", p]);
    assert!(ok, "{err}");
    let mode = std::fs::metadata(path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let (ok, shown, err) = byzfs(&["identity", "show", p]);
    assert!(ok, "{err}");
    let key = shown
        .lines()
        .next()
        .unwrap()
        .strip_prefix("member_key ")
        .unwrap()
        .to_string();
    assert_eq!(out, format!("wrote {p}\nmember_key {key}\n"));
    assert_eq!(key.len(), 64);
    key
}

#[test]
fn an_owner_manages_a_group_and_each_version_opens_for_exactly_its_members() {
    let _serial = common::serial();
    let procs = Procs::with("memory", "fs", vec![Vec::new(); 4]);
    let dir = procs.dir.path();
    let config = procs.config();
    let config = config.to_str().unwrap();
    let (alice, bob, carol) = (
        dir.join("alice.id"),
        dir.join("bob.id"),
        dir.join("carol.id"),
    );
    let (alice_key, bob_key, carol_key) = (identity(&alice), identity(&bob), identity(&carol));
    let group = |id: &Path, rest: &[&str]| {
        let mut args = vec![
            "group",
            "--config",
            config,
            "--identity",
            id.to_str().unwrap(),
        ];
        args.extend_from_slice(rest);
        byzfs(&args)
    };
    let (ok, out, err) = group(&alice, &["create", "team"]);
    assert!(ok, "{err}");
    let id = out.trim().strip_prefix("group team ").unwrap().to_string();
    assert_eq!(id.len(), 32);
    let (ok, _, err) = group(&alice, &["create", "team"]);
    assert!(!ok);
    assert_eq!(
        err,
        format!("error: you already have a group named team ({id})\n")
    );
    // Bob reads, Carol writes.
    let (ok, out, err) = group(&alice, &["add", "team", "--member", &bob_key]);
    assert!(ok, "{err}");
    assert_eq!(out, format!("group {id} version 2: 2 members\n"));
    let (ok, out, err) = group(&alice, &["add", &id, "--member", &carol_key, "--writer"]);
    assert!(ok, "{err}");
    assert_eq!(out, format!("group {id} version 3: 3 members\n"));
    // What each sees (members in the order they were added).
    let (ok, out, err) = group(&bob, &["list", &id]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], format!("group    {id}"));
    assert_eq!(lines[1], "name     team");
    assert_eq!(lines[2], "version  3");
    assert_eq!(lines[5], format!("{:<64}  role", "member"));
    assert_eq!(lines[6], format!("{alice_key}  writer"));
    assert_eq!(lines[7], format!("{bob_key}  reader (you)"));
    assert_eq!(lines[8], format!("{carol_key}  writer"));
    assert_eq!(lines[9], "you: reader, key version 3 opens");
    assert_eq!(lines.len(), 10);
    let (_, out, _) = group(&carol, &["list", &id]);
    assert!(out.ends_with("you: writer, key version 3 opens\n"), "{out}");
    // Bob cannot change the group, not even under his own name for it.
    let (ok, _, err) = group(&bob, &["remove", &id, "--member", &carol_key]);
    assert!(!ok);
    assert!(
        err.starts_with("error: group ") && err.contains("is owned by"),
        "{err}"
    );
    // Removing Bob: version 4, which he no longer opens.
    let (ok, out, err) = group(&alice, &["remove", "team", "--member", &bob_key]);
    assert!(ok, "{err}");
    assert_eq!(out, format!("group {id} version 4: 2 members\n"));
    let (ok, out, _) = group(&bob, &["list", &id]);
    assert!(ok);
    assert!(
        out.contains("version  4\n") && out.ends_with("you: not a member\n"),
        "{out}"
    );
    let (ok, _, err) = group(&alice, &["remove", "team", "--member", &bob_key]);
    assert!(!ok);
    assert_eq!(
        err,
        format!("error: {bob_key} is not a member of group team\n")
    );
    // Bad arguments.
    let (ok, _, err) = group(&alice, &["add", "team", "--member", "abc"]);
    assert!(!ok);
    assert!(
        err.starts_with("error: --member must be a member_key"),
        "{err}"
    );
    let (ok, _, err) = group(&alice, &["list", "nothing"]);
    assert!(!ok);
    assert_eq!(err, "error: no group nothing\n");
}

#[test]
fn identity_files_are_private_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("me.id");
    let ps = p.to_str().unwrap();
    identity(&p);
    let (ok, _, err) = byzfs(&["identity", "new", ps]);
    assert!(!ok);
    assert_eq!(
        err,
        format!("error: {ps} exists; pass --force to replace it\n")
    );
    let (ok, _, _) = byzfs(&["identity", "new", "--force", ps]);
    assert!(ok);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (ok, _, err) = byzfs(&["identity", "show", ps]);
    assert!(!ok);
    assert_eq!(
        err,
        format!("error: {ps} can be read by other users; run `chmod 600 {ps}`\n")
    );
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    // A damaged file: a public key that does not match, then not TOML at all.
    let text = std::fs::read_to_string(&p).unwrap();
    let line = text.lines().find(|l| l.starts_with("member_key")).unwrap();
    let damaged = text.replace(line, &format!("member_key = \"{}\"", "00".repeat(32)));
    std::fs::write(&p, damaged).unwrap();
    let (ok, _, err) = byzfs(&["identity", "show", ps]);
    assert!(!ok);
    assert_eq!(
        err,
        format!("error: {ps}: the public keys do not match the secret ones; the file is damaged\n")
    );
    std::fs::write(&p, "nonsense").unwrap();
    let (ok, _, err) = byzfs(&["identity", "show", ps]);
    assert!(!ok);
    assert!(
        err.starts_with(&format!(
            "error: {ps} is not an identity file (make one with `byzfs identity new`)"
        )),
        "{err}"
    );
}
