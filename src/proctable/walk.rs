//! Reading the tree from /proc: by its children files, or all of /proc where the kernel has none.

use super::*;
use std::collections::HashSet;
use std::io;
use std::os::fd::AsFd;

/// The one-time costs of a scan, paid while the child starts rather than after it ends (the stop
/// of a short run is on its critical path): the proof of /proc, our own children list, the main
/// child's files (`child`, our unreaped child), and the hash keys the scans' sets ask
/// getrandom(2) for.
pub fn prepare_scans(child: Pid) {
    // Only through a proper /proc: in a container the child itself may mount it later, and the
    // proof then waits for the first scan.
    if files::root().is_ok() {
        files::own_children();
        files::pin(child);
    }
    let _ = std::collections::hash_map::RandomState::new();
}

/// Whether the kernel lists children in `/proc/PID/task/TID/children`.
pub(super) fn have_children_files() -> bool {
    files::own_children().is_some()
}

pub(super) fn children_of(pid: Pid, threads: i64, out: &mut Vec<Pid>) -> Result<(), ProcError> {
    // The list of thread `tid` of `pid`, as read.
    let mut read_one =
        |tid: &dyn std::fmt::Display, got: io::Result<Vec<u8>>| -> Result<(), ProcError> {
            match got {
                Ok(s) => {
                    let s = String::from_utf8_lossy(&s);
                    out.extend(
                        s.split_ascii_whitespace()
                            .filter_map(|t| t.parse().ok())
                            .map(Pid::from_raw),
                    );
                    Ok(())
                }
                Err(e) if gone(&e) => Ok(()),
                Err(e) => Err(ProcError(format!(
                    "reading /proc/{pid}/task/{tid}/children: {e}"
                ))),
            }
        };
    if threads <= 1 {
        let got = match (pid == me()).then(files::own_children).flatten() {
            Some(own) => files::read_kept(own),
            None => files::read_of(pid, files::ProcFile::Children),
        };
        return read_one(&pid, got);
    }
    // Children belong to the thread that forked them.
    let tids = match files::list(&format!("{pid}/task")) {
        Ok(d) => d,
        Err(e) if gone(&e) => return Ok(()),
        Err(e) => return Err(ProcError(format!("reading /proc/{pid}/task: {e}"))),
    };
    for tid in tids {
        let got = files::read_file(&format!("{pid}/task/{tid}/children"));
        read_one(&tid, got)?;
    }
    Ok(())
}

/// Every process in /proc (the fallback when children files are missing).
pub fn all(me: Pid) -> Result<Vec<Proc>, ProcError> {
    let names = files::list(".").map_err(|e| ProcError(format!("reading /proc: {e}")))?;
    let mut out = Vec::new();
    for name in names {
        // The entries that are not processes (self, sys, meminfo...) have no number.
        let Ok(pid) = name.parse::<i32>() else {
            continue;
        };
        if pid == me.as_raw() {
            continue;
        }
        if let Some(p) = read(Pid::from_raw(pid))? {
            out.push(p);
        }
    }
    Ok(out)
}

/// Adds to `inside` every process whose parent is inside, until nothing changes (parents may be
/// listed after their children).
pub fn close_over_children(procs: &[Proc], inside: &mut HashSet<Pid>) {
    loop {
        let before = inside.len();
        for p in procs {
            if inside.contains(&p.ppid) {
                inside.insert(p.pid);
            }
        }
        if inside.len() == before {
            break;
        }
    }
}

/// Every descendant of vloer-run, zombies included, read through the children files in O(tree),
/// or from a full scan of /proc where the kernel has no children files.
pub fn tree() -> Result<Vec<Proc>, ProcError> {
    files::root()?;
    let me = me();
    if !have_children_files() {
        let procs = all(me)?;
        let mut inside: HashSet<Pid> = HashSet::from([me]);
        close_over_children(&procs, &mut inside);
        return Ok(procs
            .into_iter()
            .filter(|p| inside.contains(&p.pid))
            .collect());
    }
    walk(me, None)
}

/// What `walk` calls with each live process, its pidfd and the pids seen so far.
type Visit<'a> = dyn FnMut(&Proc, OwnedFd, &HashSet<Pid>) + 'a;

/// Every descendant of `me`, read through the children files. With a visitor, it also opens a
/// pidfd on each process and passes each live one to the visitor once its children are queued.
pub(super) fn walk(me: Pid, mut visit: Option<&mut Visit<'_>>) -> Result<Vec<Proc>, ProcError> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut queue = Vec::new();
    children_of(me, 1, &mut queue)?;
    loop {
        while let Some(pid) = queue.pop() {
            if !seen.insert(pid) {
                continue;
            }
            // Open the pidfd before reading the stat, so one read both describes the process and
            // proves what the pidfd names. If the pid was recycled in between, the read shows
            // another process or none, and a signal through the pidfd reaches no one. A failed
            // open only means no visit: the caller's general path retries the process.
            let fd = match visit {
                Some(_) => crate::sys::pidfd_open(pid).ok(),
                None => None,
            };
            if fd
                .as_ref()
                .is_some_and(|fd| crate::sys::pidfd_exited(fd.as_fd()))
            {
                // Exited: nothing to signal, and its children, if it had any, are ours already
                // (`reparented_since` finds them). Asking the pidfd spares a read of /proc, and
                // the kernel the /proc entries it would otherwise build, then tear down when the
                // zombie is reaped: in a dying tree, most of what a stop's walk meets.
                continue;
            }
            if let Some(p) = read(pid)? {
                if p.is_live() {
                    children_of(pid, p.threads, &mut queue)?;
                    if let (Some(visit), Some(fd)) = (visit.as_deref_mut(), fd) {
                        visit(&p, fd, &seen);
                    }
                }
                out.push(p);
            }
        }
        if !reparented_since(me, &seen, &mut queue)? {
            return Ok(out);
        }
    }
}

/// Re-reads our own children: a process that exited during the walk after its parent's children
/// were read, but before its own were, handed them to us (the reaper). Queues those not seen yet;
/// `false` when there are none, so the walk is complete.
pub(super) fn reparented_since(
    me: Pid,
    seen: &HashSet<Pid>,
    queue: &mut Vec<Pid>,
) -> Result<bool, ProcError> {
    if seen.is_empty() {
        // We had no children: nothing of the scope was alive to hand us any.
        return Ok(false);
    }
    let mut now = Vec::new();
    children_of(me, 1, &mut now)?;
    queue.extend(now.into_iter().filter(|p| !seen.contains(p)));
    Ok(!queue.is_empty())
}

/// `--scope tree` read for a stop: the walk of `tree`, with each live process, its pidfd and the
/// pids seen so far passed to `visit` (see `walk`). `None` without children files or pidfds.
pub fn walk_tree(
    visit: &mut dyn FnMut(&Proc, OwnedFd, &HashSet<Pid>),
) -> Option<Result<Vec<Proc>, ProcError>> {
    if let Err(e) = files::root() {
        return Some(Err(e));
    }
    if !have_children_files() || !crate::sys::have_pidfd() {
        return None;
    }
    Some(walk(me(), Some(visit)))
}
