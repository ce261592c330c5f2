//! Random namespace and data operations (as root) against a simple model of a POSIX file
//! system: every result (success or errno) and the final tree must match.

use crate::common;

use byzfs_fs::{Errno, FileHandle, FileType, FsResult, Op, Reply, SetAttr};
use common::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// A model inode.
#[derive(Clone, Debug)]
enum Node {
    Dir {
        parent: usize,
        entries: BTreeMap<Vec<u8>, usize>,
    },
    File {
        data: Vec<u8>,
        nlink: u32,
    },
}

/// The model: inodes by id (id 0 = root); removed ids stay in `handles` to test ESTALE.
struct Model {
    nodes: BTreeMap<usize, Node>,
    /// The service's handle of each model id ever created.
    handles: Vec<FileHandle>,
}

impl Model {
    fn new() -> Model {
        Model {
            nodes: BTreeMap::from([(
                0,
                Node::Dir {
                    parent: 0,
                    entries: BTreeMap::new(),
                },
            )]),
            handles: vec![ROOT],
        }
    }

    fn is_dir(&self, id: usize) -> bool {
        matches!(self.nodes.get(&id), Some(Node::Dir { .. }))
    }

    fn entries(&self, id: usize) -> &BTreeMap<Vec<u8>, usize> {
        match &self.nodes[&id] {
            Node::Dir { entries, .. } => entries,
            Node::File { .. } => unreachable!("not a directory"),
        }
    }

    fn entries_mut(&mut self, id: usize) -> &mut BTreeMap<Vec<u8>, usize> {
        match self.nodes.get_mut(&id) {
            Some(Node::Dir { entries, .. }) => entries,
            _ => unreachable!("not a directory"),
        }
    }

    /// A live directory: `ESTALE` if gone, `ENOTDIR` if not a directory.
    fn dir(&self, id: usize) -> Result<(), Errno> {
        match self.nodes.get(&id) {
            None => Err(Errno::ESTALE),
            Some(Node::File { .. }) => Err(Errno::ENOTDIR),
            Some(Node::Dir { .. }) => Ok(()),
        }
    }

    /// Two live directories (a rename's or an exchange's): `ESTALE` if either is gone, then
    /// `ENOTDIR` if either is not a directory.
    fn two_dirs(&self, a: usize, b: usize) -> Result<(), Errno> {
        if !self.nodes.contains_key(&a) || !self.nodes.contains_key(&b) {
            return Err(Errno::ESTALE);
        }
        self.dir(a)?;
        self.dir(b)
    }

    fn unlink(&mut self, id: usize) {
        if let Some(Node::File { nlink, .. }) = self.nodes.get_mut(&id) {
            *nlink -= 1;
            if *nlink == 0 {
                self.nodes.remove(&id);
            }
        }
    }

    /// Whether `anc` is `id` or an ancestor of it.
    fn is_ancestor(&self, anc: usize, mut id: usize) -> bool {
        loop {
            if id == anc {
                return true;
            }
            if id == 0 {
                return false;
            }
            id = match &self.nodes[&id] {
                Node::Dir { parent, .. } => *parent,
                Node::File { .. } => return false,
            };
        }
    }

    fn new_node(&mut self, node: Node, fh: FileHandle) -> usize {
        let id = self.handles.len();
        self.handles.push(fh);
        self.nodes.insert(id, node);
        id
    }
}

#[derive(Clone, Debug)]
enum MOp {
    Create(u8, u8, bool),
    Mkdir(u8, u8),
    Remove(u8, u8),
    Rmdir(u8, u8),
    Rename(u8, u8, u8, u8),
    RenameNoReplace(u8, u8, u8, u8),
    Exchange(u8, u8, u8, u8),
    Link(u8, u8, u8),
    Write(u8, u16, u16, u8),
    Truncate(u8, u16),
}

fn mop() -> impl Strategy<Value = MOp> {
    let id = 0u8..24;
    let n = 0u8..3;
    prop_oneof![
        3 => (id.clone(), n.clone(), any::<bool>()).prop_map(|(d, n, x)| MOp::Create(d, n, x)),
        3 => (id.clone(), n.clone()).prop_map(|(d, n)| MOp::Mkdir(d, n)),
        2 => (id.clone(), n.clone()).prop_map(|(d, n)| MOp::Remove(d, n)),
        2 => (id.clone(), n.clone()).prop_map(|(d, n)| MOp::Rmdir(d, n)),
        4 => (id.clone(), n.clone(), id.clone(), n.clone()).prop_map(|(a, b, c, d)| MOp::Rename(a, b, c, d)),
        1 => (id.clone(), n.clone(), id.clone(), n.clone()).prop_map(|(a, b, c, d)| MOp::RenameNoReplace(a, b, c, d)),
        2 => (id.clone(), n.clone(), id.clone(), n.clone()).prop_map(|(a, b, c, d)| MOp::Exchange(a, b, c, d)),
        1 => (id.clone(), id.clone(), n.clone()).prop_map(|(f, d, n)| MOp::Link(f, d, n)),
        2 => (id.clone(), 0u16..40_000, 0u16..20_000, any::<u8>()).prop_map(|(f, o, l, b)| MOp::Write(f, o, l, b)),
        1 => (id.clone(), 0u16..40_000).prop_map(|(f, s)| MOp::Truncate(f, s)),
    ]
}

fn name(n: u8) -> Vec<u8> {
    vec![b'a' + n]
}

/// Applies `op` to the model and returns its expected outcome (`Ok(Some(entry attr kind))`
/// for ops that create a model inode the caller must register).
fn expect(m: &mut Model, op: &MOp, ids: impl Fn(u8) -> usize) -> Result<(), Errno> {
    match *op {
        MOp::Create(d, n, excl) => {
            let d = ids(d);
            m.dir(d)?;
            match m.entries(d).get(&name(n)) {
                Some(_) if excl => Err(Errno::EEXIST),
                Some(&t) if m.is_dir(t) => Err(Errno::EISDIR),
                _ => Ok(()),
            }
        }
        MOp::Mkdir(d, n) => {
            let d = ids(d);
            m.dir(d)?;
            if m.entries(d).contains_key(&name(n)) {
                return Err(Errno::EEXIST);
            }
            Ok(())
        }
        MOp::Remove(d, n) => {
            let d = ids(d);
            m.dir(d)?;
            let &t = m.entries(d).get(&name(n)).ok_or(Errno::ENOENT)?;
            if m.is_dir(t) {
                return Err(Errno::EISDIR);
            }
            m.entries_mut(d).remove(&name(n));
            m.unlink(t);
            Ok(())
        }
        MOp::Rmdir(d, n) => {
            let d = ids(d);
            m.dir(d)?;
            let &t = m.entries(d).get(&name(n)).ok_or(Errno::ENOENT)?;
            if !m.is_dir(t) {
                return Err(Errno::ENOTDIR);
            }
            if !m.entries(t).is_empty() {
                return Err(Errno::ENOTEMPTY);
            }
            m.entries_mut(d).remove(&name(n));
            m.nodes.remove(&t);
            Ok(())
        }
        MOp::Rename(a, b, c, e) | MOp::RenameNoReplace(a, b, c, e) => {
            let (fd, td) = (ids(a), ids(c));
            m.two_dirs(fd, td)?;
            let (fname, tname) = (name(b), name(e));
            let &s = m.entries(fd).get(&fname).ok_or(Errno::ENOENT)?;
            let dst = m.entries(td).get(&tname).copied();
            // RENAME_NOREPLACE: any existing target, even another link of the source.
            if matches!(op, MOp::RenameNoReplace(..)) && dst.is_some() {
                return Err(Errno::EEXIST);
            }
            if dst == Some(s) {
                return Ok(());
            }
            let sdir = m.is_dir(s);
            if sdir && m.is_ancestor(s, td) {
                return Err(Errno::EINVAL);
            }
            if let Some(t) = dst {
                match (sdir, m.is_dir(t)) {
                    (true, false) => return Err(Errno::ENOTDIR),
                    (false, true) => return Err(Errno::EISDIR),
                    (true, true) if !m.entries(t).is_empty() => return Err(Errno::ENOTEMPTY),
                    _ => {}
                }
                m.entries_mut(td).remove(&tname);
                if m.is_dir(t) {
                    m.nodes.remove(&t);
                } else {
                    m.unlink(t);
                }
            }
            m.entries_mut(fd).remove(&fname);
            m.entries_mut(td).insert(tname, s);
            if let Some(Node::Dir { parent, .. }) = m.nodes.get_mut(&s) {
                *parent = td;
            }
            Ok(())
        }
        MOp::Exchange(a, b, c, e) => {
            let (ad, bd) = (ids(a), ids(c));
            m.two_dirs(ad, bd)?;
            let (an, bn) = (name(b), name(e));
            let &x = m.entries(ad).get(&an).ok_or(Errno::ENOENT)?;
            let &y = m.entries(bd).get(&bn).ok_or(Errno::ENOENT)?;
            if x == y {
                return Ok(());
            }
            // A directory that changes parent must not go into its own subtree.
            if ad != bd
                && ((m.is_dir(x) && m.is_ancestor(x, bd)) || (m.is_dir(y) && m.is_ancestor(y, ad)))
            {
                return Err(Errno::EINVAL);
            }
            m.entries_mut(ad).insert(an, y);
            m.entries_mut(bd).insert(bn, x);
            for (moved, to) in [(x, bd), (y, ad)] {
                if let Some(Node::Dir { parent, .. }) = m.nodes.get_mut(&moved) {
                    *parent = to;
                }
            }
            Ok(())
        }
        MOp::Link(f, d, n) => {
            let (f, d) = (ids(f), ids(d));
            match m.nodes.get(&f) {
                None => return Err(Errno::ESTALE),
                Some(Node::Dir { .. }) => return Err(Errno::EPERM),
                Some(Node::File { .. }) => {}
            }
            m.dir(d)?;
            if m.entries(d).contains_key(&name(n)) {
                return Err(Errno::EEXIST);
            }
            m.entries_mut(d).insert(name(n), f);
            if let Some(Node::File { nlink, .. }) = m.nodes.get_mut(&f) {
                *nlink += 1;
            }
            Ok(())
        }
        MOp::Write(f, o, l, b) => match m.nodes.get_mut(&ids(f)) {
            None => Err(Errno::ESTALE),
            Some(Node::Dir { .. }) => Err(Errno::EISDIR),
            Some(Node::File { data, .. }) => {
                let (o, l) = (usize::from(o), usize::from(l));
                if l > 0 {
                    if data.len() < o + l {
                        data.resize(o + l, 0);
                    }
                    data[o..o + l].fill(b);
                }
                Ok(())
            }
        },
        MOp::Truncate(f, s) => match m.nodes.get_mut(&ids(f)) {
            None => Err(Errno::ESTALE),
            Some(Node::Dir { .. }) => Err(Errno::EISDIR),
            Some(Node::File { data, .. }) => {
                data.resize(usize::from(s), 0);
                Ok(())
            }
        },
    }
}

fn to_op(op: &MOp, fh: impl Fn(u8) -> FileHandle) -> Op {
    match *op {
        MOp::Create(d, n, exclusive) => Op::Create {
            dir: fh(d),
            name: name(n),
            mode: 0o644,
            exclusive,
        },
        MOp::Mkdir(d, n) => Op::Mkdir {
            dir: fh(d),
            name: name(n),
            mode: 0o755,
        },
        MOp::Remove(d, n) => Op::Remove {
            dir: fh(d),
            name: name(n),
        },
        MOp::Rmdir(d, n) => Op::Rmdir {
            dir: fh(d),
            name: name(n),
        },
        MOp::Rename(a, b, c, d) => Op::Rename {
            from_dir: fh(a),
            from_name: name(b),
            to_dir: fh(c),
            to_name: name(d),
        },
        MOp::RenameNoReplace(a, b, c, d) => Op::RenameNoReplace {
            from_dir: fh(a),
            from_name: name(b),
            to_dir: fh(c),
            to_name: name(d),
        },
        MOp::Exchange(a, b, c, d) => Op::Exchange {
            a_dir: fh(a),
            a_name: name(b),
            b_dir: fh(c),
            b_name: name(d),
        },
        MOp::Link(f, d, n) => Op::Link {
            fh: fh(f),
            dir: fh(d),
            name: name(n),
        },
        MOp::Write(f, o, l, b) => Op::Write {
            fh: fh(f),
            offset: u64::from(o),
            data: vec![b; usize::from(l)],
        },
        MOp::Truncate(f, s) => Op::SetAttr {
            fh: fh(f),
            set: SetAttr {
                size: Some(u64::from(s)),
                ..SetAttr::default()
            },
        },
    }
}

/// The tree below model directory `id` as sorted lines.
fn model_tree(m: &Model, id: usize, path: &str, out: &mut Vec<String>) {
    for (n, &c) in m.entries(id) {
        let p = format!("{path}/{}", String::from_utf8_lossy(n));
        match &m.nodes[&c] {
            Node::Dir { .. } => {
                out.push(format!("{p} dir"));
                model_tree(m, c, &p, out);
            }
            Node::File { data, nlink } => {
                out.push(format!("{p} file nlink={nlink} {:?}", blake3::hash(data)))
            }
        }
    }
}

fn fs_tree(fs: &mut Fs, dir: FileHandle, path: &str, out: &mut Vec<String>) {
    let mut entries = fs.list(dir, 5);
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for e in entries {
        let p = format!("{path}/{}", String::from_utf8_lossy(&e.name));
        if e.kind == FileType::Directory {
            out.push(format!("{p} dir"));
            fs_tree(fs, e.fh, &p, out);
        } else {
            let a = fs.getattr(e.fh);
            let data = fs.read(e.fh, 0, u32::MAX);
            assert_eq!(data.len() as u64, a.size);
            out.push(format!(
                "{p} file nlink={} {:?}",
                a.nlink,
                blake3::hash(&data)
            ));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn namespace_and_data_match_the_model(ops in proptest::collection::vec(mop(), 1..80)) {
        let mut fs = Fs::new();
        let mut m = Model::new();
        for op in &ops {
            let n = m.handles.len();
            let ids = |i: u8| usize::from(i) % n;
            let handles = m.handles.clone();
            let want = expect(&mut m, op, ids);
            let got: FsResult = fs.run(to_op(op, |i| handles[ids(i)]));
            prop_assert_eq!(got.as_ref().err().copied(), want.err(), "{:?}", op);
            // Register inodes the operation created.
            if let Some(a) = got.as_ref().ok().and_then(Reply::entry) {
                if !m.handles.contains(&a.fh) {
                    let (d, nm) = match *op {
                        MOp::Create(d, n, _) | MOp::Mkdir(d, n) => (ids(d), name(n)),
                        _ => unreachable!("only create and mkdir make inodes"),
                    };
                    let node = if a.kind == FileType::Directory {
                        Node::Dir { parent: d, entries: BTreeMap::new() }
                    } else {
                        Node::File { data: Vec::new(), nlink: 1 }
                    };
                    let id = m.new_node(node, a.fh);
                    m.entries_mut(d).insert(nm, id);
                }
            }
        }
        let mut want = Vec::new();
        model_tree(&m, 0, "", &mut want);
        let mut got = Vec::new();
        fs_tree(&mut fs, ROOT, "", &mut got);
        prop_assert_eq!(got, want);
    }
}
