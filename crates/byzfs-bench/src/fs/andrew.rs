//! The Andrew benchmark over a real C source tree (Tcl 8.6 from Debian: Andrew-Tcl).
//!
//! Five phases, timed separately (PBFT OSDI'99 §7.3; Pangaea's Andrew-Tcl):
//! 1. `mkdir`: create the source tree's directories (93 for Tcl 8.6.13);
//! 2. `copy`: copy every file into them (contents preloaded in memory, so only the target is
//!    measured; written in 128 KiB pieces, and mode and modification time kept, like
//!    `cp -p`, so `make` sees the original timestamps);
//! 3. `stat`: `lstat` every entry of the tree (`ls -lR`), without reading data;
//! 4. `read`: read every byte of every file;
//! 5. `compile`: `./configure && make -jN` in `unix/` (skip with `--no-compile`).
//!
//! Andrew-N (`--copies N`) follows the BFT library paper (§5.1, after Howard et al.): phases
//! 1–2 create N copies of the tree, one after another, and phases 3–5 operate on all copies
//! (so phase 5 configures and compiles each copy in turn). Nothing runs in parallel except
//! `make -jN` itself.
//!
//! The tree is Debian's `tcl8.6` source package, fetched once by `--fetch-source` (or on first
//! use) into `~/.cache/byzfs/andrew/` with `apt-get source --download-only` and a private apt
//! configuration (no change to `/etc/apt`).

use super::report::{run_targets, Bound, Metric};
use super::CommonArgs;
use anyhow::{bail, Context as _};
use indicatif::ProgressBar;
use std::fs;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime};

/// The Debian source package used as the source tree.
const SOURCE_PACKAGE: &str = "tcl8.6";
/// Phase 2 writes files in pieces of this size, like `cp`.
const COPY_CHUNK: usize = 128 * 1024;
/// The keyring that signs Debian's archive (package `debian-archive-keyring`).
const DEBIAN_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// `byzfs bench andrew`
#[derive(clap::Args, Debug)]
pub struct AndrewArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Andrew-N: create N copies of the source tree (phases 1–2) and operate on all of them
    /// (phases 3–5), as the BFT library's Andrew100/Andrew500.
    #[arg(long, default_value_t = 1)]
    copies: u32,
    /// Skip phase 5 (configure and compile), for quick runs.
    #[arg(long)]
    no_compile: bool,
    /// Parallel jobs of `make` in phase 5.
    #[arg(long, default_value_t = 2)]
    make_jobs: u32,
    /// Use this source tree instead of the cached Tcl source (phase 5 then runs
    /// `./configure && make` in its `--build-subdir`).
    #[arg(long)]
    source_dir: Option<PathBuf>,
    /// Directory of the tree where phase 5 runs `./configure && make`.
    #[arg(long, default_value = "unix")]
    build_subdir: String,
    /// Cache directory (default `$XDG_CACHE_HOME/byzfs` or `~/.cache/byzfs`).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Only download and unpack the Tcl source into the cache, then exit.
    #[arg(long)]
    fetch_source: bool,
}

/// One entry of the source tree, relative to its root.
enum Entry {
    Dir(PathBuf),
    File {
        path: PathBuf,
        mode: u32,
        mtime: SystemTime,
        data: Vec<u8>,
    },
    Symlink {
        path: PathBuf,
        target: PathBuf,
    },
}

/// The source tree, in memory.
struct Tree {
    name: String,
    entries: Vec<Entry>,
    dirs: usize,
    files: usize,
    bytes: u64,
}

pub fn run(args: AndrewArgs) -> anyhow::Result<()> {
    let cache = match &args.cache_dir {
        Some(c) => c.clone(),
        None => default_cache_dir()?,
    };
    let source = match &args.source_dir {
        Some(s) => s.clone(),
        None => tcl_source(&cache)?,
    };
    if args.fetch_source {
        println!("{}", source.display());
        return Ok(());
    }
    let tree = load_tree(&source)?;
    eprintln!(
        "source tree {}: {} directories, {} files, {:.1} MB; {} cop{}{}",
        tree.name,
        tree.dirs,
        tree.files,
        tree.bytes as f64 / 1e6,
        args.copies,
        if args.copies == 1 { "y" } else { "ies" },
        if args.no_compile { ", no compile" } else { "" }
    );
    let compile = !args.no_compile;
    if compile && !source.join(&args.build_subdir).join("configure").exists() {
        bail!(
            "{} has no {}/configure to compile; pass --no-compile or --build-subdir",
            source.display(),
            args.build_subdir
        );
    }
    if compile {
        for tool in ["cc", "make"] {
            if Command::new(tool)
                .arg("--version")
                .stdout(Stdio::null())
                .status()
                .is_err()
            {
                bail!("`{tool}` not found: phase 5 needs a C toolchain (`apt-get install -y gcc make`), or pass --no-compile");
            }
        }
    }
    let mut metrics = vec![
        Metric {
            name: "mkdir",
            unit: "s",
        },
        Metric {
            name: "copy",
            unit: "s",
        },
        Metric {
            name: "stat",
            unit: "s",
        },
        Metric {
            name: "read",
            unit: "s",
        },
    ];
    if compile {
        metrics.push(Metric {
            name: "compile",
            unit: "s",
        });
    }
    metrics.push(Metric {
        name: "total",
        unit: "s",
    });
    let params = serde_json::json!({
        "source": tree.name,
        "dirs": tree.dirs,
        "files": tree.files,
        "bytes": tree.bytes,
        "copies": args.copies,
        "compile": compile,
        "make_jobs": args.make_jobs,
        "durability": format!("{:?}", args.common.durability).to_lowercase(),
        "runs": args.common.runs,
    });
    let copies = args.copies.max(1);
    let results = run_targets(
        &args.common,
        "andrew",
        metrics,
        params,
        &mut |_, dir, pb| {
            let mut t = phases(&tree, dir, copies, pb)?;
            if compile {
                t.push(compile_phase(
                    dir,
                    copies,
                    &args.build_subdir,
                    args.make_jobs,
                    pb,
                )?);
            }
            t.push(t.iter().sum());
            Ok(t)
        },
    )?;
    let title = format!(
        "Andrew{} ({}{}): seconds per phase; ratios < 1 mean the first is faster",
        if copies > 1 {
            copies.to_string()
        } else {
            String::new()
        },
        tree.name,
        if compile { "" } else { ", no compile" }
    );
    println!("{}", results.table_metrics_as_rows(&title));
    // Issue #4: Andrew total ByzFS/NO-REP <= 1.10 (one run, 2-core machine).
    print!("{}", results.target_checks("total", Bound::AtMost(1.10)));
    results.write_outputs(&args.common, &title)
}

/// Phases 1–4; returns their times in seconds.
fn phases(tree: &Tree, dir: &Path, copies: u32, pb: &ProgressBar) -> anyhow::Result<Vec<f64>> {
    let root = dir.join("andrew");
    fs::create_dir(&root)?;
    let copy_root = |c: u32| root.join(format!("copy-{c:03}"));
    let mut out = Vec::new();

    // 1. mkdir
    begin(pb, "1 mkdir", (tree.dirs as u64 + 1) * copies as u64);
    let t = Instant::now();
    for c in 0..copies {
        let r = copy_root(c);
        fs::create_dir(&r).with_context(|| format!("mkdir {}", r.display()))?;
        pb.inc(1);
        for e in &tree.entries {
            if let Entry::Dir(p) = e {
                fs::create_dir(r.join(p)).with_context(|| format!("mkdir {}", p.display()))?;
                pb.inc(1);
            }
        }
    }
    out.push(t.elapsed().as_secs_f64());

    // 2. copy
    begin(pb, "2 copy", tree.files as u64 * copies as u64);
    let t = Instant::now();
    for c in 0..copies {
        let r = copy_root(c);
        for e in &tree.entries {
            match e {
                Entry::Dir(_) => {}
                Entry::File {
                    path,
                    mode,
                    mtime,
                    data,
                } => {
                    let p = r.join(path);
                    let mut f = fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(*mode)
                        .open(&p)
                        .with_context(|| format!("creating {}", p.display()))?;
                    // In 128 KiB writes, as `cp` does (coreutils' buffer size).
                    for chunk in data.chunks(COPY_CHUNK) {
                        f.write_all(chunk)
                            .with_context(|| format!("writing {}", p.display()))?;
                    }
                    f.set_modified(*mtime)?;
                    pb.inc(1);
                }
                Entry::Symlink { path, target } => {
                    std::os::unix::fs::symlink(target, r.join(path))?;
                    pb.inc(1);
                }
            }
        }
    }
    out.push(t.elapsed().as_secs_f64());

    // 3. stat
    // Every entry of every copy, each copy's root, and `andrew/` itself.
    let n = (tree.entries.len() as u64 + 1) * copies as u64 + 1;
    begin(pb, "3 stat", n);
    let t = Instant::now();
    let mut seen = 0u64;
    walk(&root, &mut |p, _| {
        fs::symlink_metadata(p).with_context(|| format!("stat {}", p.display()))?;
        seen += 1;
        pb.inc(1);
        Ok(())
    })?;
    out.push(t.elapsed().as_secs_f64());
    if seen != n {
        bail!("phase 3 saw {seen} entries, expected {n}");
    }

    // 4. read
    begin(pb, "4 read", tree.files as u64 * copies as u64);
    let t = Instant::now();
    let mut buf = vec![0u8; 64 * 1024];
    let mut bytes = 0u64;
    walk(&root, &mut |p, is_file| {
        if is_file {
            let mut f = fs::File::open(p).with_context(|| format!("open {}", p.display()))?;
            loop {
                let k = f.read(&mut buf)?;
                if k == 0 {
                    break;
                }
                bytes += k as u64;
            }
            pb.inc(1);
        }
        Ok(())
    })?;
    out.push(t.elapsed().as_secs_f64());
    if bytes != tree.bytes * copies as u64 {
        bail!(
            "phase 4 read {bytes} bytes, expected {}",
            tree.bytes * copies as u64
        );
    }
    Ok(out)
}

/// Phase 5: `./configure && make -jN` in each copy, in turn.
fn compile_phase(
    dir: &Path,
    copies: u32,
    subdir: &str,
    jobs: u32,
    pb: &ProgressBar,
) -> anyhow::Result<f64> {
    begin(pb, "5 compile", copies as u64);
    let t = Instant::now();
    for c in 0..copies {
        let build = dir.join("andrew").join(format!("copy-{c:03}")).join(subdir);
        let log = build.join("andrew-build.log");
        let status = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "./configure > andrew-build.log 2>&1 && make -j{jobs} >> andrew-build.log 2>&1"
            ))
            .current_dir(&build)
            .stdin(Stdio::null())
            .status()
            .with_context(|| format!("running configure/make in {}", build.display()))?;
        if !status.success() {
            bail!(
                "configure/make failed ({status}) in {}: {}",
                build.display(),
                super::target::last_line(&log)
            );
        }
        pb.inc(1);
    }
    Ok(t.elapsed().as_secs_f64())
}

fn begin(pb: &ProgressBar, phase: &'static str, len: u64) {
    pb.set_message(phase);
    pb.set_length(len);
    pb.set_position(0);
}

/// Depth-first walk of `dir` in `read_dir` order: `f(path, is_regular_file)` for every entry
/// below `dir` and for `dir` itself. Uses the entry's file type from `readdir` (no stat).
fn walk(dir: &Path, f: &mut dyn FnMut(&Path, bool) -> anyhow::Result<()>) -> anyhow::Result<()> {
    f(dir, false)?;
    for e in fs::read_dir(dir).with_context(|| format!("readdir {}", dir.display()))? {
        let e = e?;
        let ty = e.file_type()?;
        if ty.is_dir() {
            walk(&e.path(), f)?;
        } else {
            f(&e.path(), ty.is_file())?;
        }
    }
    Ok(())
}

/// Reads the whole tree under `root` into memory (sorted, directories before their contents).
fn load_tree(root: &Path) -> anyhow::Result<Tree> {
    fn rec(root: &Path, rel: &Path, out: &mut Vec<Entry>) -> anyhow::Result<()> {
        let mut names: Vec<_> = fs::read_dir(root.join(rel))
            .with_context(|| format!("reading {}", root.join(rel).display()))?
            .collect::<Result<_, _>>()?;
        names.sort_by_key(|e| e.file_name());
        for e in names {
            let path = rel.join(e.file_name());
            let md = fs::symlink_metadata(e.path())?;
            if md.is_dir() {
                out.push(Entry::Dir(path.clone()));
                rec(root, &path, out)?;
            } else if md.file_type().is_symlink() {
                out.push(Entry::Symlink {
                    target: fs::read_link(e.path())?,
                    path,
                });
            } else if md.is_file() {
                out.push(Entry::File {
                    data: fs::read(e.path())?,
                    mode: md.permissions().mode() & 0o7777,
                    mtime: md.modified()?,
                    path,
                });
            }
        }
        Ok(())
    }
    let mut entries = Vec::new();
    rec(root, Path::new(""), &mut entries)?;
    let dirs = entries
        .iter()
        .filter(|e| matches!(e, Entry::Dir(_)))
        .count();
    let bytes = entries
        .iter()
        .map(|e| match e {
            Entry::File { data, .. } => data.len() as u64,
            _ => 0,
        })
        .sum();
    let name = root.file_name().map_or_else(
        || root.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok(Tree {
        name,
        files: entries.len() - dirs,
        dirs,
        bytes,
        entries,
    })
}

/// `$XDG_CACHE_HOME/byzfs`, else `$HOME/.cache/byzfs`.
fn default_cache_dir() -> anyhow::Result<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        return Ok(PathBuf::from(x).join("byzfs"));
    }
    let home = std::env::var_os("HOME")
        .context("neither XDG_CACHE_HOME nor HOME is set; pass --cache-dir")?;
    Ok(PathBuf::from(home).join(".cache").join("byzfs"))
}

/// The unpacked Tcl source tree in `cache/andrew/`, downloading and unpacking it first if
/// needed (`apt-get source --download-only tcl8.6` with a private apt configuration).
fn tcl_source(cache: &Path) -> anyhow::Result<PathBuf> {
    let dir = cache.join("andrew");
    let tree = dir.join("tree");
    if dir.join("tree.complete").exists() {
        if let Some(t) = single_subdir(&tree)? {
            return Ok(t);
        }
    }
    let dl = dir.join("download");
    fs::create_dir_all(&dl).with_context(|| format!("creating {}", dl.display()))?;
    let tarball = match find_orig_tarball(&dl)? {
        Some(t) => t,
        None => {
            apt_source(&dir, &dl)?;
            find_orig_tarball(&dl)?.with_context(|| {
                format!(
                    "apt-get source left no {SOURCE_PACKAGE}_*.orig.tar.* in {}",
                    dl.display()
                )
            })?
        }
    };
    let _ = fs::remove_dir_all(&tree);
    fs::create_dir_all(&tree)?;
    eprintln!("unpacking {}", tarball.display());
    let st = Command::new("tar")
        .arg("xf")
        .arg(&tarball)
        .arg("-C")
        .arg(&tree)
        .status()
        .context("running tar (install it with `apt-get install -y tar`)")?;
    if !st.success() {
        bail!("tar xf {} failed ({st})", tarball.display());
    }
    let t = single_subdir(&tree)?
        .with_context(|| format!("{} did not unpack into one directory", tarball.display()))?;
    fs::write(dir.join("tree.complete"), b"")?;
    Ok(t)
}

fn single_subdir(d: &Path) -> anyhow::Result<Option<PathBuf>> {
    if !d.exists() {
        return Ok(None);
    }
    let subs: Vec<PathBuf> = fs::read_dir(d)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    Ok(if subs.len() == 1 {
        subs.into_iter().next()
    } else {
        None
    })
}

fn find_orig_tarball(dl: &Path) -> anyhow::Result<Option<PathBuf>> {
    Ok(fs::read_dir(dl)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n.starts_with(&format!("{SOURCE_PACKAGE}_")) && n.contains(".orig.tar.")
            })
        }))
}

/// `apt-get update` and `apt-get source --download-only` against a private sources list
/// (Debian's deb-src for this machine's release), with lists and caches under `dir/apt/`.
fn apt_source(dir: &Path, dl: &Path) -> anyhow::Result<()> {
    let how = format!(
        "or download Debian's {SOURCE_PACKAGE} source (e.g. tcl8.6_8.6.13+dfsg.orig.tar.gz from \
         http://deb.debian.org/debian/pool/main/t/tcl8.6/), unpack it and pass --source-dir"
    );
    if Command::new("apt-get")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        bail!("apt-get not found: the Tcl source tree is fetched with `apt-get source`; run on Debian, {how}");
    }
    if !Path::new(DEBIAN_KEYRING).exists() {
        bail!("{DEBIAN_KEYRING} is missing: `apt-get install -y debian-archive-keyring`, {how}");
    }
    let suite = fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VERSION_CODENAME=")
                    .map(|v| v.trim_matches('"').to_string())
            })
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "bookworm".into());
    let apt = dir.join("apt");
    for d in ["lists/partial", "cache/archives/partial", "parts"] {
        fs::create_dir_all(apt.join(d))?;
    }
    let sources = apt.join("sources.list");
    fs::write(
        &sources,
        format!("deb-src [signed-by={DEBIAN_KEYRING}] http://deb.debian.org/debian {suite} main\n"),
    )?;
    let is_root = {
        use std::os::unix::fs::MetadataExt as _;
        fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
    };
    let opts = |cmd: &mut Command| {
        for (k, v) in [
            ("Dir::Etc::SourceList", sources.clone()),
            ("Dir::Etc::SourceParts", apt.join("parts")),
            ("Dir::State::Lists", apt.join("lists")),
            ("Dir::Cache", apt.join("cache")),
        ] {
            cmd.arg("-o").arg(format!("{k}={}", v.display()));
        }
        cmd.args(["-o", "Debug::NoLocking=1", "-q"]);
        if is_root {
            // The private directories are root's; apt's `_apt` sandbox user cannot write them.
            cmd.args(["-o", "APT::Sandbox::User=root"]);
        }
    };
    eprintln!(
        "fetching the {SOURCE_PACKAGE} source package ({suite}) into {}",
        dl.display()
    );
    let mut update = Command::new("apt-get");
    opts(&mut update);
    let st = update
        .arg("update")
        .status()
        .context("running apt-get update")?;
    if !st.success() {
        bail!("apt-get update (private deb-src list for {suite}) failed ({st}); {how}");
    }
    let mut src = Command::new("apt-get");
    opts(&mut src);
    let st = src
        .args(["source", "--download-only", SOURCE_PACKAGE])
        .current_dir(dl)
        .status()
        .context("running apt-get source")?;
    if !st.success() {
        bail!("apt-get source --download-only {SOURCE_PACKAGE} failed ({st}); {how}");
    }
    Ok(())
}
