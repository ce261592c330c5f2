//! Network namespaces that cannot outlive the harness.
//!
//! `ip netns add` namespaces are bind-mounted under `/run/netns` and stay after a crash.
//! Here each namespace is instead held by a child process (`cat`, reading a pipe from the
//! harness) that entered a new namespace before it started: when the harness ends, however
//! it ends (even SIGKILL), the pipe closes, `cat` exits, and the kernel frees the namespace
//! with its links as soon as the nodes in it (started with `--exit-with-parent`) are gone.
//! Commands run inside a namespace by joining it (`setns`) between `fork` and `exec`, so a
//! mount started inside one stays visible to the harness (only the network is private).

use anyhow::{bail, Context as _};
use std::fs::File;
use std::os::fd::{AsRawFd as _, RawFd};
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};

/// A network namespace, alive while this value and its holder process are.
pub struct Netns {
    /// For messages: what the namespace is for.
    pub label: String,
    holder: Child,
    /// `/proc/<holder>/ns/net`, opened: the handle every command joins.
    file: File,
}

impl Netns {
    /// A new, empty network namespace (with its loopback up).
    pub fn new(label: &str) -> anyhow::Result<Netns> {
        let mut cmd = Command::new("cat");
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        // SAFETY: `unshare` is a system call, async-signal-safe; nothing else runs between
        // fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::unshare(libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let holder = cmd.spawn().map_err(|e| {
            if e.raw_os_error() == Some(libc::EPERM) {
                anyhow::anyhow!(
                    "cannot create a network namespace ({e}): the site harness (--sites) needs \
                     root (CAP_SYS_ADMIN and CAP_NET_ADMIN); run it as root, or leave out --sites"
                )
            } else {
                anyhow::Error::new(e).context("cannot start the namespace holder `cat`")
            }
        })?;
        let path = format!("/proc/{}/ns/net", holder.id());
        let file = File::open(&path).with_context(|| format!("cannot open {path}"))?;
        let ns = Netns {
            label: label.to_string(),
            holder,
            file,
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// The raw handle to join (valid while `self` lives).
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// The holder's pid (`ip link … netns PID` moves a link here).
    pub fn pid(&self) -> u32 {
        self.holder.id()
    }

    /// Makes `cmd` start inside this namespace.
    pub fn enter(&self, cmd: &mut Command) {
        let fd = self.fd();
        // SAFETY: `setns` is a system call, async-signal-safe; `fd` stays open in the
        // parent until the child has exec'd (the caller holds `self`).
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// Runs `program args` inside this namespace; an error carries its stderr.
    pub fn run(&self, program: &str, args: &[&str]) -> anyhow::Result<()> {
        let mut cmd = Command::new(program);
        cmd.args(args).stdin(Stdio::null());
        self.enter(&mut cmd);
        let out = cmd.output().map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                anyhow::anyhow!(
                    "`{program}` is not installed; the site harness needs iproute2 \
                     (`apt-get install iproute2`)"
                )
            } else {
                anyhow::Error::new(e).context(format!("cannot run {program}"))
            }
        })?;
        if !out.status.success() {
            bail!(
                "in the namespace of {}: `{program} {}` failed ({}): {}",
                self.label,
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    /// `ip ARGS` inside this namespace.
    pub fn ip(&self, args: &[&str]) -> anyhow::Result<()> {
        self.run("ip", args)
    }

    /// `tc ARGS` inside this namespace.
    pub fn tc(&self, args: &[&str]) -> anyhow::Result<()> {
        self.run("tc", args)
    }

    /// Sets a sysctl of this namespace (`net.ipv4.ip_forward`, …) through its `/proc/sys`
    /// view, read by a thread that joined it.
    pub fn sysctl(&self, key: &str, value: &str) -> anyhow::Result<()> {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        let value = value.to_string();
        self.in_ns(move || {
            std::fs::write(&path, &value).with_context(|| format!("cannot write {path}"))
        })?
    }

    /// Runs `f` on a thread of its own that joined this namespace (sockets it opens live
    /// there); returns what `f` returned.
    pub fn in_ns<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> anyhow::Result<T> {
        let fd = self
            .file
            .try_clone()
            .context("cannot duplicate a namespace handle")?;
        let label = self.label.clone();
        std::thread::spawn(move || -> anyhow::Result<T> {
            join(&fd).with_context(|| format!("cannot join the namespace of {label}"))?;
            Ok(f())
        })
        .join()
        .map_err(|_| anyhow::anyhow!("a thread in the namespace of {} panicked", self.label))?
    }

    /// A handle another thread can [`join`].
    pub fn handle(&self) -> anyhow::Result<File> {
        self.file
            .try_clone()
            .context("cannot duplicate a namespace handle")
    }
}

/// Moves the calling thread into the namespace `ns` (a handle from [`Netns::handle`]).
pub fn join(ns: &File) -> std::io::Result<()> {
    // SAFETY: a plain system call on an open descriptor.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Closing its stdin ends `cat`; kill it anyway in case it is stuck.
        drop(self.holder.stdin.take());
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}
