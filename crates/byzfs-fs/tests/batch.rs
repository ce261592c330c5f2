//! `Op::Batch` (`byzfs_fs::batch`): several operations as one, in order, all or nothing.

use crate::common;

use byzfs_fs::proto::batch::MAX_BATCH;
use byzfs_fs::proto::op::MAX_IO;
use byzfs_fs::{Errno, Op, Reply, SetAttr};
use common::*;

fn mkdir(name: &str) -> Op {
    Op::Mkdir {
        dir: ROOT,
        name: name.into(),
        mode: 0o755,
    }
}

#[test]
fn a_batch_runs_in_order_and_replies_for_each() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f").fh;
    let ops = vec![
        mkdir("d"),
        Op::Write {
            fh: f,
            offset: 0,
            data: b"hello".to_vec(),
        },
        Op::Rename {
            from_dir: ROOT,
            from_name: b"f".to_vec(),
            to_dir: ROOT,
            to_name: b"g".to_vec(),
        },
        Op::SetAttr {
            fh: f,
            set: SetAttr {
                mode: Some(0o600),
                ..SetAttr::default()
            },
        },
    ];
    let replies = match fs.run(Op::Batch(ops)) {
        Ok(Reply::Batch(r)) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(replies.len(), 4);
    assert!(matches!(replies[0], Reply::Made { .. }), "{:?}", replies[0]);
    assert!(
        matches!(replies[1], Reply::Write { count: 5, .. }),
        "{:?}",
        replies[1]
    );
    assert_eq!(fs.names(ROOT), ["d", "g"]);
    assert_eq!(fs.read(f, 0, 100), b"hello");
    assert_eq!(fs.getattr(f).mode & 0o7777, 0o600);
}

#[test]
fn a_failing_member_leaves_nothing_of_the_batch() {
    let mut fs = Fs::new();
    fs.mkdir(ROOT, "taken");
    let before = fs.dump();
    let ops = vec![mkdir("new"), mkdir("taken"), mkdir("after")];
    assert_eq!(fs.run(Op::Batch(ops)), Err(Errno::EEXIST));
    assert_eq!(fs.dump(), before, "nothing applied");
}

#[test]
fn batches_are_bounded_and_hold_only_what_a_mount_sends_early() {
    let mut fs = Fs::new();
    let f = fs.create(ROOT, "f").fh;
    let refused = [
        vec![],
        (0..=MAX_BATCH).map(|i| mkdir(&format!("d{i}"))).collect(),
        vec![Op::GetAttr { fh: f }],
        vec![Op::Batch(vec![mkdir("nested")])],
        vec![Op::SetAttr {
            fh: f,
            set: SetAttr {
                size: Some(0),
                ..SetAttr::default()
            },
        }],
        (0..2)
            .map(|i| Op::Write {
                fh: f,
                offset: i * u64::from(MAX_IO),
                data: vec![1; MAX_IO as usize / 2 + 1],
            })
            .collect(),
    ];
    let before = fs.dump();
    for ops in refused {
        let n = ops.len();
        assert_eq!(fs.run(Op::Batch(ops)), Err(Errno::EINVAL), "{n} ops");
    }
    assert_eq!(fs.dump(), before);
    let full: Vec<Op> = (0..MAX_BATCH).map(|i| mkdir(&format!("d{i}"))).collect();
    assert!(matches!(fs.run(Op::Batch(full)), Ok(Reply::Batch(r)) if r.len() == MAX_BATCH));
}
