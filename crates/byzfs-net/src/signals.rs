//! For the processes that run a node or a client: their runtime ([`runtime`]) and their
//! shutdown triggers ([`shutdown`]): SIGINT (Ctrl-C), SIGTERM, and — for replicas started by
//! `byzfs up` — end of stdin, which happens when the parent dies however it dies, so
//! children never outlive it.

use tokio::io::AsyncReadExt as _;
use tokio::signal::unix::{signal, SignalKind};

/// A single-threaded tokio runtime with I/O and timers (every `byzfs` command uses one; a
/// replica uses exactly one).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// Lets SIGINT and SIGTERM reach this thread and the threads it starts from now on. A
/// signal mask is inherited across `fork` and `exec` (Rust's `Command` does not clear it),
/// and a parent that blocked them in the spawning thread (`byzfs bench`, to leave them to
/// its cleanup thread) left `byzfs mount` deaf to SIGTERM: it was killed 15 s later without
/// giving its directories back or sending what it held (`byzfs bench parallel`'s second
/// mount then waited 30 s for their lease). Called first thing in `main`.
pub fn unblock_shutdown_signals() {
    use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow, Signal};
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    if let Err(e) = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&signals), None) {
        tracing::warn!("cannot unblock SIGINT and SIGTERM: {e}");
    }
}

/// Completes on SIGINT or SIGTERM (and on stdin EOF if `stdin_eof`); returns what happened.
pub async fn shutdown(stdin_eof: bool) -> &'static str {
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        // Without signal handlers, only stdin (or nothing) can stop us.
        return if stdin_eof {
            stdin_closed().await
        } else {
            std::future::pending().await
        };
    };
    let stdin = async {
        if stdin_eof {
            stdin_closed().await
        } else {
            std::future::pending().await
        }
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
        why = stdin => why,
    }
}

async fn stdin_closed() -> &'static str {
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 256];
    while let Ok(n) = stdin.read(&mut buf).await {
        if n == 0 {
            break;
        }
    }
    "parent exited (stdin closed)"
}
