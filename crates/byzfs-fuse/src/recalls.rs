//! Directories and files given back (`dirs.rs`, `held_files.rs`): one another mount asked
//! for (seen by the recall poll, `delegations.rs`, or by an operation of this mount that met
//! another's delegation, `calls.rs` `invoke`), those idle for [`IDLE`], and all of them at
//! unmount. What this mount holds there (early answers, writes of files made there, a held
//! file's writes) reaches the replicas first: the mount that asked will look at it next.

use crate::dirs::IDLE;
use crate::link::Link;
use crate::sender::{call, run};
use crate::writeback::{self, Wait};
use byzfs_fs::proto::batch::MAX_BATCH;
use byzfs_fs::{Credentials, Errno, FileHandle, Op, Reply};
use std::time::Instant;

/// Gives back the directories and files the replicas asked this mount for (an operation
/// of this mount met another's delegation meanwhile: `calls.rs` `invoke`).
pub(crate) fn give_back_recalled(link: &mut Link, cred: &Credentials) {
    if !link.dirs.any_held() && !link.files.any() {
        return;
    }
    if let Ok(Reply::Recalls(inos)) = call(link, cred, Op::Recalls, false) {
        for ino in inos {
            if link.files.holds(ino) || link.files.given_back_lately(ino).is_some() {
                give_back_file(link, cred, ino, true);
            }
            if link.dirs.holds(ino) {
                give_back(link, cred, ino);
            }
        }
    }
}

/// Gives file `ino`'s delegation back (`contended`: another mount asked for it). The
/// file's held writes, and the write-back in flight that writes it, reach the replicas
/// first (`Op::ReturnFile` needs them: `gather::needs`, `InFlight::must_precede`).
pub(crate) fn give_back_file(link: &mut Link, cred: &Credentials, ino: u64, contended: bool) {
    let Some(file) = link
        .files
        .take(ino, contended, Instant::now())
        .or_else(|| link.files.given_back_lately(ino))
    else {
        return;
    };
    // Its bytes kept here (`mine.rs`) may be old once another mount writes it.
    link.dirs.contents_changed(ino);
    match call(link, cred, Op::ReturnFile { file }, false) {
        Ok(_) | Err(Errno::ENOLCK | Errno::ESTALE) => {}
        Err(e) => tracing::debug!(ino, %e, "cannot give a file back; it lapses"),
    }
}

/// Gives `files` back in batches, each after their held writes (as [`give_back_file`]).
fn give_back_files(link: &mut Link, cred: &Credentials, files: Vec<FileHandle>) {
    for f in &files {
        link.dirs.contents_changed(f.ino);
    }
    for chunk in files.chunks(MAX_BATCH) {
        let ops = chunk.iter().map(|&file| Op::ReturnFile { file }).collect();
        // A file removed meanwhile fails the batch (`ESTALE`): then one by one.
        if call(link, cred, Op::Batch(ops), false).is_err() {
            for &file in chunk {
                match call(link, cred, Op::ReturnFile { file }, false) {
                    Ok(_) | Err(Errno::ENOLCK | Errno::ESTALE) => {}
                    Err(e) => tracing::debug!(ino = file.ino, %e, "cannot give a file back"),
                }
            }
        }
    }
}

/// Sends the queue and gives `ino` back (asked for by another mount, or too big to hold).
pub(crate) fn give_back(link: &mut Link, cred: &Credentials, ino: u64) {
    link.dirs.mine.retain_dirs(|d| d != ino);
    let fh = match link.dirs.held.remove(&ino) {
        Some(h) => h.fh,
        // Forgotten after a failed batch, but the replicas may still count it as held.
        None => FileHandle { ino, generation: 0 },
    };
    // Files written and closed here under write-back (`filesystem.rs` `flush`) too: the
    // mount that asked will open them next.
    let plan = writeback::everything(link, Wait::Yes);
    run(link, plan);
    if fh.generation == 0 {
        // The handle is not known any more: let the lease lapse.
        return;
    }
    link.dirs.contended.insert(ino, Instant::now());
    match call(link, cred, Op::ReturnDir { dir: fh }, false) {
        Ok(_) | Err(Errno::ENOLCK | Errno::ESTALE) => {}
        Err(e) => tracing::debug!(ino, %e, "cannot give a directory back; it lapses"),
    }
}

/// Gives back up to one batch of the directories idle for [`IDLE`] (from the background
/// thread, which polls for recalls only while some are held).
pub(crate) fn give_back_idle(link: &mut Link, cred: &Credentials) {
    let now = Instant::now();
    let files = link.files.take_idle(now, MAX_BATCH);
    if !files.is_empty() {
        give_back_files(link, cred, files);
    }
    let idle: Vec<FileHandle> = link
        .dirs
        .held
        .values()
        .filter(|h| now.saturating_duration_since(h.used) >= IDLE && !link.dirs.touches(h.fh.ino))
        .map(|h| h.fh)
        .take(MAX_BATCH)
        .collect();
    if idle.is_empty() {
        return;
    }
    // Writes held for files made there (write-back) reach the replicas before another
    // mount can look the files up.
    let held_mine = link.gather.inos().any(|i| {
        link.dirs
            .mine
            .dir_of(i)
            .is_some_and(|d| idle.iter().any(|x| x.ino == d))
    });
    if held_mine {
        let plan = writeback::everything(link, Wait::Yes);
        run(link, plan);
    }
    for d in &idle {
        link.dirs.held.remove(&d.ino);
    }
    link.dirs
        .mine
        .retain_dirs(|d| !idle.iter().any(|i| i.ino == d));
    let ops = idle.iter().map(|&dir| Op::ReturnDir { dir }).collect();
    if let Err(e) = call(link, cred, Op::Batch(ops), false) {
        tracing::debug!(%e, "cannot give idle directories back; they lapse");
    }
}

/// Sends the queue and gives every held directory and file back (at unmount), in batches.
pub(crate) fn give_back_all(link: &mut Link, cred: &Credentials) {
    let plan = writeback::everything(link, Wait::Yes);
    run(link, plan);
    let files = link.files.take_all();
    give_back_files(link, cred, files);
    link.dirs.mine.clear();
    let all: Vec<FileHandle> = link.dirs.held.drain().map(|(_, h)| h.fh).collect();
    for chunk in all.chunks(MAX_BATCH) {
        let ops = chunk.iter().map(|&dir| Op::ReturnDir { dir }).collect();
        if let Err(e) = call(link, cred, Op::Batch(ops), false) {
            tracing::debug!(%e, "cannot give directories back; they lapse");
        }
    }
}
