//! Keys and configuration: keygen round trip, pairwise key agreement, and the one-line
//! errors a node gives for every bad config or key file.

use byzfs_net::cluster::ClusterConfig;
use byzfs_net::kdf;
use byzfs_net::keygen::{keygen, KeygenOptions};
use byzfs_net::{AdminSecret, ClientCredential, ReplicaSecret, SetupError};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

fn generate(dir: &Path) -> byzfs_net::keygen::Generated {
    let opts = KeygenOptions::local(4, "127.0.0.1", 7100).unwrap();
    keygen(dir, &opts).unwrap()
}

/// Every error must be one line that names the file.
fn one_line(e: &SetupError, names: &str) -> String {
    let s = e.to_string();
    assert!(!s.contains('\n'), "multi-line error: {s}");
    assert!(s.contains(names), "{s:?} does not name {names}");
    s
}

#[test]
fn keygen_config_parses_and_derived_keys_agree_pairwise() {
    let dir = tempfile::tempdir().unwrap();
    let g = generate(dir.path());
    let cluster = ClusterConfig::load(&g.config).unwrap();
    assert_eq!(cluster.n(), 4);
    assert_eq!(cluster.bft.f, 1);
    assert_eq!(cluster.replicas[2].address, "127.0.0.1:7102");
    let text = std::fs::read_to_string(&g.config).unwrap();
    assert!(text.contains("view_change_timeout_ms = 5000"), "{text}");
    for p in g
        .replica_keys
        .iter()
        .chain([&g.admin_key])
        .chain(&g.client_keys)
    {
        let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", p.display());
    }
    let keys: Vec<_> = (0..4)
        .map(|i| {
            let s = ReplicaSecret::load(&g.replica_keys[i], &cluster, i as u32).unwrap();
            kdf::replica_keys(&cluster, &s).unwrap()
        })
        .collect();
    for i in 0..4 {
        for j in 0..4 {
            assert_eq!(keys[i].to_replica[j], keys[j].from_replica[i], "{i}->{j}");
            if i != j {
                assert_ne!(keys[i].to_replica[j], keys[i].from_replica[j]);
            }
        }
    }
    // Client keys: what the client derives equals what each replica derives from the
    // certificate's public key.
    let cred = ClientCredential::load(&g.client_keys[0], &cluster).unwrap();
    let session_id = byzfs_net::cert::session_client_id(cred.cert.client, 42).unwrap();
    let ck = kdf::client_keys(&cluster, &cred, session_id).unwrap();
    let salt = kdf::salt(&cluster.cluster_id, cluster.bft.epoch);
    let client_pk = x25519_dalek::PublicKey::from(cred.cert.x25519_public_key.0);
    for j in 0..4u32 {
        let s = ReplicaSecret::load(&g.replica_keys[j as usize], &cluster, j).unwrap();
        let shared = kdf::shared_secret(&s.x25519, &client_pk).unwrap();
        let (to_replica, to_client) = kdf::client_mac_keys(&shared, &salt, session_id, j);
        assert_eq!(ck.to_replica[j as usize], to_replica);
        assert_eq!(ck.from_replica[j as usize], to_client);
        assert_ne!(to_replica, to_client);
    }
    // Requests are signed with the key the certificate vouches for (docs/PROTOCOL.md §5.3).
    let signing = ck
        .signing
        .as_ref()
        .expect("network clients sign their requests");
    assert_eq!(
        cred.cert.verifying_key(),
        Some(signing.verifying_key()),
        "the certificate carries the client's Ed25519 key"
    );
    AdminSecret::load(&g.admin_key, &cluster).unwrap();
    // Keygen never overwrites.
    let e = keygen(
        dir.path(),
        &KeygenOptions::local(4, "127.0.0.1", 7100).unwrap(),
    )
    .unwrap_err();
    one_line(&e, "cluster.toml");
}

#[test]
fn keygen_rejects_bad_replica_counts() {
    let e = KeygenOptions::local(3, "127.0.0.1", 7000).unwrap_err();
    assert!(one_line(&e, "--replicas 3").contains("3f+1"));
    assert!(KeygenOptions::local(7, "127.0.0.1", 0).is_ok());
}

fn edit_config(g: &byzfs_net::keygen::Generated, f: impl FnOnce(String) -> String) -> PathBuf {
    let text = std::fs::read_to_string(&g.config).unwrap();
    let path = g.config.with_file_name("edited.toml");
    std::fs::write(&path, f(text)).unwrap();
    path
}

#[test]
fn bad_configs_give_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let g = generate(dir.path());

    let e = ClusterConfig::load(&dir.path().join("nope.toml")).unwrap_err();
    assert!(one_line(&e, "nope.toml").contains("byzfs keygen"));

    let p = edit_config(&g, |t| t.replace("epoch = 0", "epoch = \"zero\""));
    let e = ClusterConfig::load(&p).unwrap_err();
    assert!(
        matches!(e, SetupError::Parse { line, .. } if line > 0),
        "{e}"
    );
    one_line(&e, "edited.toml");

    let p = edit_config(&g, |t| t.replace("f = 1", "f = 2"));
    let e = ClusterConfig::load(&p).unwrap_err();
    assert!(one_line(&e, "edited.toml").contains("3f+1 = 7"), "{e}");

    let p = edit_config(&g, |t| t.replace("id = 3", "id = 1"));
    let e = ClusterConfig::load(&p).unwrap_err();
    assert!(
        one_line(&e, "edited.toml").contains("id 1 appears twice"),
        "{e}"
    );

    let p = edit_config(&g, |t| t.replace("127.0.0.1:7103", "127.0.0.1:7101"));
    let e = ClusterConfig::load(&p).unwrap_err();
    assert!(
        one_line(&e, "edited.toml").contains("both have address"),
        "{e}"
    );

    let p = edit_config(&g, |t| t.replace("127.0.0.1:7103", "localhost"));
    let e = ClusterConfig::load(&p).unwrap_err();
    assert!(one_line(&e, "edited.toml").contains("host:port"), "{e}");

    // Local cluster: each replica has a Unix socket in the cluster directory.
    let text = std::fs::read_to_string(&g.config).unwrap();
    assert_eq!(text.matches("local_socket = ").count(), 4, "{text}");
    let p = edit_config(&g, |t| t.replace("replica-3.sock", "replica-1.sock"));
    let e = ClusterConfig::load(&p).unwrap_err();
    assert!(
        one_line(&e, "edited.toml").contains("both have local_socket"),
        "{e}"
    );
    let p = edit_config(&g, |t| {
        t.replace("local_socket = \"/", "local_socket = \"rel/")
    });
    let e = ClusterConfig::load(&p).unwrap_err();
    assert!(one_line(&e, "edited.toml").contains("absolute"), "{e}");
    let long = format!("/{}", "d".repeat(120));
    let p = edit_config(&g, |t| {
        t.replace("local_socket = \"/", &format!("local_socket = \"{long}/"))
    });
    let e = ClusterConfig::load(&p).unwrap_err();
    assert!(one_line(&e, "edited.toml").contains("107 bytes"), "{e}");

    let p = edit_config(&g, |t| t.replace("log_window = 256", "log_window = 100"));
    let e = ClusterConfig::load(&p).unwrap_err();
    assert!(one_line(&e, "edited.toml").contains("log_window"), "{e}");

    let p = edit_config(&g, |t| t.replace("batch_window = 1", "batch_windw = 1"));
    let e = ClusterConfig::load(&p).unwrap_err();
    assert!(one_line(&e, "edited.toml").contains("batch_windw"), "{e}");

    let cluster = ClusterConfig::load(&g.config).unwrap();
    let e = cluster.replica(9).unwrap_err();
    assert!(one_line(&e, "cluster.toml").contains("--id"), "{e}");
}

#[test]
fn bad_key_files_give_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let g = generate(dir.path());
    let cluster = ClusterConfig::load(&g.config).unwrap();
    let k2 = &g.replica_keys[2];

    // Missing.
    let missing = dir.path().join("replica-9.key");
    let e = ReplicaSecret::load(&missing, &cluster, 2).unwrap_err();
    assert!(
        one_line(&e, "replica-9.key").contains("does not exist"),
        "{e}"
    );

    // Readable by others.
    std::fs::set_permissions(k2, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = ReplicaSecret::load(k2, &cluster, 2).unwrap_err();
    let s = one_line(&e, "replica-2.key");
    assert!(s.contains("readable by others (mode 0644)"), "{s}");
    assert!(
        s.contains(&format!("run: chmod 600 {}", k2.display())),
        "{s}"
    );
    std::fs::set_permissions(k2, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert!(matches!(
        ReplicaSecret::load(k2, &cluster, 2),
        Err(SetupError::KeyPermissions { mode: 0o640, .. })
    ));
    std::fs::set_permissions(k2, std::fs::Permissions::from_mode(0o600)).unwrap();
    ReplicaSecret::load(k2, &cluster, 2).unwrap();

    // Unreadable (a directory where the key should be; permission bits do not stop root).
    let d = dir.path().join("replica-dir.key");
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    let e = ReplicaSecret::load(&d, &cluster, 2).unwrap_err();
    assert!(
        one_line(&e, "replica-dir.key").starts_with("cannot read"),
        "{e}"
    );

    // Another replica's key.
    let e = ReplicaSecret::load(&g.replica_keys[1], &cluster, 2).unwrap_err();
    assert!(
        one_line(&e, "replica-1.key").contains("not of replica 2"),
        "{e}"
    );

    // Another kind of key.
    let e = ReplicaSecret::load(&g.admin_key, &cluster, 2).unwrap_err();
    assert!(
        one_line(&e, "admin.key").contains("admin key, not a replica key"),
        "{e}"
    );

    // A key from another cluster: does not match the public keys.
    let other = tempfile::tempdir().unwrap();
    let g2 = generate(other.path());
    let e = ReplicaSecret::load(&g2.replica_keys[2], &cluster, 2).unwrap_err();
    assert!(
        one_line(&e, "replica-2.key").contains("does not match replica 2's public keys"),
        "{e}"
    );
    let e = ClientCredential::load(&g2.client_keys[0], &cluster).unwrap_err();
    one_line(&e, "client-1.key");
    let e = AdminSecret::load(&g2.admin_key, &cluster).unwrap_err();
    one_line(&e, "admin.key");

    // A client file whose signing key is not the one its certificate vouches for.
    let text = std::fs::read_to_string(&g.client_keys[0]).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("ed25519_secret_key"))
        .unwrap();
    let swapped = dir.path().join("client-swapped.key");
    std::fs::write(
        &swapped,
        text.replace(
            line,
            &format!("ed25519_secret_key = \"{}\"", "11".repeat(32)),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&swapped, std::fs::Permissions::from_mode(0o600)).unwrap();
    let e = ClientCredential::load(&swapped, &cluster).unwrap_err();
    assert!(
        one_line(&e, "client-swapped.key").contains("signing key does not match"),
        "{e}"
    );

    // Garbage.
    let junk = dir.path().join("junk.key");
    std::fs::write(
        &junk,
        "kind = \"replica\"\nid = 2\nx25519_secret_key = \"12\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&junk, std::fs::Permissions::from_mode(0o600)).unwrap();
    let e = ReplicaSecret::load(&junk, &cluster, 2).unwrap_err();
    assert!(matches!(e, SetupError::Parse { .. }), "{e}");
    one_line(&e, "junk.key");
}

#[test]
fn the_file_systems_limits_are_fitted_to_the_disk_set_or_defaulted() {
    use byzfs_net::cluster::FsLimits;
    let dir = tempfile::tempdir().unwrap();
    // Fitted: the four loopback replicas share the output directory's disk.
    let g = generate(dir.path());
    let fitted = ClusterConfig::load(&g.config).unwrap().fs;
    let free = byzfs_net::keygen::free_disk(dir.path());
    let want = FsLimits::fitting(free, 4);
    // The disk's free space moved a little between the two looks at it.
    let close = |a: u64, b: u64| a.abs_diff(b) <= b / 100 + (64 << 20);
    assert!(
        close(fitted.capacity_bytes, want.capacity_bytes),
        "{fitted:?} against {want:?}"
    );
    assert!(fitted.disk_needed() * 4 <= free + (256 << 20));
    // Set.
    let dir2 = tempfile::tempdir().unwrap();
    let mut opts = KeygenOptions::local(4, "127.0.0.1", 7100).unwrap();
    let set = FsLimits {
        capacity_bytes: 5 << 30,
        max_inodes: 1000,
        ..FsLimits::default()
    };
    opts.fs = Some(set);
    let g2 = keygen(dir2.path(), &opts).unwrap();
    let text = std::fs::read_to_string(&g2.config).unwrap();
    assert!(
        text.contains("[fs]\ncapacity_bytes = 5368709120\nmax_inodes = 1000\n"),
        "{text}"
    );
    assert_eq!(ClusterConfig::load(&g2.config).unwrap().fs, set);
    // A file written before the section existed: the old fixed limits.
    let p = edit_config(&g2, |t| {
        t.replace("[fs]\ncapacity_bytes = 5368709120\nmax_inodes = 1000\n", "")
    });
    assert_eq!(ClusterConfig::load(&p).unwrap().fs, FsLimits::default());
    // Zero is refused, in one line.
    let p = edit_config(&g2, |t| t.replace("max_inodes = 1000", "max_inodes = 0"));
    let e = ClusterConfig::load(&p).unwrap_err();
    assert!(one_line(&e, "edited.toml").contains("[fs]"), "{e}");
    // The clock-lag tolerance: raised for slow links, bounded.
    let lag = |ms: &str| {
        edit_config(&g2, |t| {
            t.replace(
                "max_inodes = 1000\n",
                &format!("max_inodes = 1000\nclock_lag_tolerance_ms = {ms}\n"),
            )
        })
    };
    assert_eq!(
        ClusterConfig::load(&lag("60000")).unwrap().fs,
        FsLimits {
            clock_lag_tolerance_ms: 60_000,
            ..set
        }
    );
    let e = ClusterConfig::load(&lag("999")).unwrap_err();
    assert!(
        one_line(&e, "edited.toml").contains(
            "[fs] clock_lag_tolerance_ms = 999 is out of range: give 1000 to 600000 (10000 if unset)"
        ),
        "{e}"
    );
}

#[test]
fn free_ports_are_distinct_bindable_and_below_the_ephemeral_range() {
    let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let ports = byzfs_net::keygen::free_ports(7).unwrap();
    let mut sorted = ports.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 7, "{ports:?}");
    for p in &ports {
        if low > 21024 {
            assert!((20000..low).contains(p), "{p} not in 20000..{low}");
        }
        std::net::TcpListener::bind(("127.0.0.1", *p)).unwrap();
    }
}

#[test]
fn protocol_parameters_are_set_by_name_with_errors_that_say_why() {
    use byzfs_net::cluster::ProtocolParams;
    let mut p = ProtocolParams::default();
    p.set("monitor_period_ms = 10000").unwrap();
    p.set("monitor_enabled=false").unwrap();
    let expected = ProtocolParams {
        monitor_period_ms: 10_000,
        monitor_enabled: false,
        ..ProtocolParams::default()
    };
    assert_eq!(p, expected);
    let errors: Vec<String> = [
        "monitor_period_ms",
        "monitor_period_ms=ten",
        "monitor_period_ms=-1",
        "monitor_enabled=1",
    ]
    .iter()
    .map(|kv| p.set(kv).unwrap_err())
    .collect();
    assert_eq!(
        errors,
        vec![
            "`monitor_period_ms`: expected KEY=VALUE, e.g. monitor_period_ms=5000".to_string(),
            "`monitor_period_ms=ten`: `ten` is not a TOML value".to_string(),
            "`monitor_period_ms=-1`: invalid value: integer `-1`, expected u64".to_string(),
            "`monitor_enabled=1`: invalid type: integer `1`, expected a boolean".to_string(),
        ]
    );
    assert_eq!(p, expected, "a failed assignment changes nothing");
}
