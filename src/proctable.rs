//! The process table as `/proc` shows it: who is in the run's scope, and whether they are alive.

use crate::sys::own_pid as me;
use nix::unistd::Pid;
use serde::Serialize;
use std::collections::HashSet;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

/// One process as read from `/proc/PID/stat`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Proc {
    #[serde(serialize_with = "ser_pid")]
    pub pid: Pid,
    #[serde(serialize_with = "ser_pid")]
    pub ppid: Pid,
    #[serde(serialize_with = "ser_pid")]
    pub pgid: Pid,
    #[serde(serialize_with = "ser_pid")]
    pub sid: Pid,
    pub state: String,
    pub comm: String,
    #[serde(skip)]
    pub starttime: u64,
    #[serde(skip)]
    pub threads: i64,
    /// Why it cannot be told whether this process belongs to the scope (an exec's process whose
    /// environment cannot be read): it is neither signalled nor proven gone.
    #[serde(skip)]
    pub doubt: Option<String>,
}

fn ser_pid<S: serde::Serializer>(p: &Pid, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_i32(p.as_raw())
}

impl Proc {
    /// A process is alive while any of its threads is. `/proc/PID/stat` shows the main thread:
    /// `Z` there with other threads still counted means the main thread called `pthread_exit`
    /// and the process runs on, so only a zombie with one thread left, or a dead task, is gone.
    pub fn is_live(&self) -> bool {
        match self.state.as_str() {
            "Z" => self.threads > 1,
            "X" | "x" => false,
            _ => true,
        }
    }
}

/// Which processes a stop covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every descendant of vloer-run.
    Tree,
    /// The members of one process group, wherever they are in the tree, and its leader (the main
    /// child).
    Group(Pid),
    /// An exec started through the control socket: its process, its group, their descendants,
    /// and orphans adopted by vloer-run whose environment carries the exec's marker.
    Exec { root: Pid, id: u64 },
}

/// Why `/proc` could not prove anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcError(pub String);

impl std::fmt::Display for ProcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Reads a small /proc file in as few syscalls as the kernel allows: /proc files report size 0,
/// so std::fs::read would stat them and then grow its buffer from 32 bytes.
pub fn read_proc_file(path: &str) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    // A plain read loop: File::read_to_end would also fstat and lseek the file for a size hint
    // that /proc does not give (two more syscalls per process in every scan).
    loop {
        match file.read(&mut chunk) {
            Ok(0) => return Ok(buf),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn gone(err: &io::Error) -> bool {
    matches!(err.kind(), io::ErrorKind::NotFound) || err.raw_os_error() == Some(libc::ESRCH)
}

/// Reads `/proc/PID/stat`: open, one read, close. The file is a single line, so once its newline
/// has arrived the record is whole and the read that would return EOF can be skipped.
fn read_stat_file(path: &str) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        buf.extend_from_slice(&chunk[..n]);
        if n == 0 || buf.last() == Some(&b'\n') {
            return Ok(buf);
        }
    }
}

/// The fields of `/proc/PID/stat` that vloer-run uses, parsed as procfs' `Stat` parses them (comm
/// is what lies between the first `(` and the last `)`, lossily decoded), without building the
/// other 45 fields: this runs twice for every process of every scan.
fn parse_stat(bytes: &[u8]) -> Option<Proc> {
    let line = String::from_utf8_lossy(bytes);
    let line = line.trim();
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let pid: i32 = line.get(..open)?.trim_end().parse().ok()?;
    let comm = line.get(open + 1..close)?.to_string();
    // After ") ": state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime
    // stime cutime cstime priority nice num_threads itrealvalue starttime ...
    let mut f = line.get(close + 2..)?.split(' ');
    let state = f.next()?.chars().next()?.to_string();
    let ppid: i32 = f.next()?.parse().ok()?;
    let pgid: i32 = f.next()?.parse().ok()?;
    let sid: i32 = f.next()?.parse().ok()?;
    let threads: i64 = f.nth(13)?.parse().ok()?;
    let starttime: u64 = f.nth(1)?.parse().ok()?;
    Some(Proc {
        pid: Pid::from_raw(pid),
        ppid: Pid::from_raw(ppid),
        pgid: Pid::from_raw(pgid),
        sid: Pid::from_raw(sid),
        state,
        comm,
        starttime,
        threads,
        doubt: None,
    })
}

/// Reads one process; `Ok(None)` when it no longer exists.
pub fn read(pid: Pid) -> Result<Option<Proc>, ProcError> {
    let path = format!("/proc/{pid}/stat");
    let bytes = match read_stat_file(&path) {
        Ok(b) => b,
        Err(e) if gone(&e) => return Ok(None),
        Err(e) => return Err(ProcError(format!("reading {path}: {e}"))),
    };
    parse_stat(&bytes)
        .map(Some)
        .ok_or_else(|| ProcError(format!("parsing {path}: unexpected format")))
}

/// The command line of a process, arguments joined by spaces; empty for kernel threads and zombies.
pub fn cmdline(pid: Pid) -> String {
    crate::slowread::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// Proves that `/proc` is a procfs for our own pid namespace; anything else cannot be trusted.
pub fn check_procfs() -> Result<(), ProcError> {
    const PROC_SUPER_MAGIC: i64 = 0x9fa0;
    let fs = nix::sys::statfs::statfs("/proc")
        .map_err(|e| ProcError(format!("cannot read /proc: {e}")))?;
    if fs.filesystem_type().0 as i64 != PROC_SUPER_MAGIC {
        return Err(ProcError(
            "/proc is not a procfs mount, so no process can be proven gone".into(),
        ));
    }
    // /proc/self resolves to our pid only in a procfs of our own pid namespace.
    let me = me();
    match std::fs::read_link("/proc/self") {
        Ok(target) if target.as_os_str().as_encoded_bytes() == me.to_string().as_bytes() => Ok(()),
        Ok(_) => Err(ProcError(format!(
            "/proc does not show vloer-run itself (pid {me}): it belongs to another pid namespace"
        ))),
        Err(e) => Err(ProcError(format!("cannot read /proc/self: {e}"))),
    }
}

/// The `NAME=VALUE` entry every exec's environment carries, unique within this instance.
pub fn exec_marker(id: u64) -> String {
    format!("VLOER_EXEC_ID={}:{id}", me())
}

/// Whether `pid`'s environment holds `entry`; an error when it cannot be read (another user's
/// process, one that made itself undumpable, a read blocked on its memory lock): that is not a no.
fn has_env(pid: Pid, entry: &str) -> Result<bool, String> {
    let path = format!("/proc/{pid}/environ");
    match crate::slowread::read(path.clone()) {
        Ok(env) => Ok(env.split(|b| *b == 0).any(|e| e == entry.as_bytes())),
        Err(e) if gone(&e) => Ok(false),
        Err(e) => Err(format!("cannot read {path}: {e}")),
    }
}

/// The one-time costs of a scan, paid while the child starts rather than after it ends (the stop
/// of a short run is on its critical path): the first lookup of our own /proc entries (about
/// 50 µs here: the kernel builds their inodes), the children-file probe, our pid, and the hash
/// keys the scans' sets ask getrandom(2) for. Every scan still checks /proc itself.
pub fn warm_up() {
    // Probe (and cache) the kernel feature only through a proper /proc: in a container the child
    // itself may mount it later, and the probe then waits for the first scan.
    if check_procfs().is_ok() {
        have_children_files(me());
    }
    let _ = std::collections::hash_map::RandomState::new();
}

/// Whether the kernel lists children in `/proc/PID/task/TID/children`.
fn have_children_files(me: Pid) -> bool {
    // A kernel feature does not come and go during a run; ask once.
    static HAVE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAVE.get_or_init(|| Path::new(&format!("/proc/{me}/task/{me}/children")).exists())
}

fn children_of(pid: Pid, threads: i64, out: &mut Vec<Pid>) -> Result<(), ProcError> {
    let mut read_one = |path: String| -> Result<(), ProcError> {
        match read_proc_file(&path) {
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
            Err(e) => Err(ProcError(format!("reading {path}: {e}"))),
        }
    };
    if threads <= 1 {
        return read_one(format!("/proc/{pid}/task/{pid}/children"));
    }
    // Children belong to the thread that forked them.
    let dir = match std::fs::read_dir(format!("/proc/{pid}/task")) {
        Ok(d) => d,
        Err(e) if gone(&e) => return Ok(()),
        Err(e) => return Err(ProcError(format!("reading /proc/{pid}/task: {e}"))),
    };
    for entry in dir.flatten() {
        if let Some(tid) = entry.file_name().to_str() {
            read_one(format!("/proc/{pid}/task/{tid}/children"))?;
        }
    }
    Ok(())
}

/// The pid a /proc directory entry names; None for the entries that are not processes.
fn pid_entry(entry: &std::fs::DirEntry) -> Option<i32> {
    entry.file_name().to_str()?.parse().ok()
}

/// Every process in /proc (the fallback when children files are missing).
fn all(me: Pid) -> Result<Vec<Proc>, ProcError> {
    let dir = std::fs::read_dir("/proc").map_err(|e| ProcError(format!("reading /proc: {e}")))?;
    let mut out = Vec::new();
    for entry in dir {
        let entry = entry.map_err(|e| ProcError(format!("reading /proc: {e}")))?;
        let Some(pid) = pid_entry(&entry) else {
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

/// Reads the scope afresh: every process in it, zombies included (callers filter with `is_live`).
/// vloer-run itself is never part of it. `seeds` are processes already known to be members
/// (an exec's tracked processes), whose children belong too even after they were reparented.
pub fn scan(scope: Scope, seeds: &HashSet<Pid>) -> Result<Vec<Proc>, ProcError> {
    check_procfs()?;
    let me = me();
    match scope {
        // Only inside the tree: every member of the child's group descends from vloer-run (its
        // reaper), while a process elsewhere with that group id took the number after the group
        // emptied and the child was reaped, and must never be signalled.
        Scope::Group(pgid) => Ok(tree(me)?
            .into_iter()
            .filter(|p| p.pgid == pgid || p.pid == pgid)
            .collect()),
        Scope::Tree => tree(me),
        Scope::Exec { root, id } => {
            let procs = tree(me)?;
            let mut inside: HashSet<Pid> = seeds.clone();
            inside.extend(
                procs
                    .iter()
                    .filter(|p| p.pid == root || p.pgid == root)
                    .map(|p| p.pid),
            );
            // Lineage is lost when an orphan is reparented to us; the marker in its environment
            // (inherited across fork and exec) still says which exec it came from.
            let marker = exec_marker(id);
            let mut procs = procs;
            for p in procs.iter_mut().filter(|p| p.ppid == me && p.is_live()) {
                match has_env(p.pid, &marker) {
                    Ok(true) => {
                        inside.insert(p.pid);
                    }
                    Ok(false) => {}
                    Err(e) => {
                        p.doubt = Some(format!(
                            "cannot tell whether pid {} ({}) belongs to this exec: {e}",
                            p.pid, p.comm
                        ));
                    }
                }
            }
            close_over_children(&procs, &mut inside);
            // A doubtful process is reported, not walked: its children are as doubtful.
            inside.extend(procs.iter().filter(|p| p.doubt.is_some()).map(|p| p.pid));
            Ok(procs
                .into_iter()
                .filter(|p| inside.contains(&p.pid))
                .collect())
        }
    }
}

/// Adds to `inside` every process whose parent is inside, until nothing changes (parents may be
/// listed after their children).
fn close_over_children(procs: &[Proc], inside: &mut HashSet<Pid>) {
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

/// Every descendant of `me`, read through the children files in O(tree), or from a full scan of
/// /proc where the kernel has no children files.
fn tree(me: Pid) -> Result<Vec<Proc>, ProcError> {
    if !have_children_files(me) {
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
fn walk(me: Pid, mut visit: Option<&mut Visit<'_>>) -> Result<Vec<Proc>, ProcError> {
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
fn reparented_since(me: Pid, seen: &HashSet<Pid>, queue: &mut Vec<Pid>) -> Result<bool, ProcError> {
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
    let me = me();
    if !have_children_files(me) || !crate::sys::have_pidfd() {
        return None;
    }
    Some(check_procfs().and_then(|()| walk(me, Some(visit))))
}

/// Whether `p` (freshly read) belongs to `scope`, given the members already known to be inside.
pub fn belongs(p: &Proc, scope: Scope, known: &HashSet<Pid>) -> bool {
    match scope {
        Scope::Group(pgid) => p.pgid == pgid || p.pid == pgid,
        Scope::Tree => p.ppid == me() || known.contains(&p.ppid),
        Scope::Exec { root, id } => {
            p.pid == root
                || p.pgid == root
                || known.contains(&p.ppid)
                || (p.ppid == me() && has_env(p.pid, &exec_marker(id)) == Ok(true))
        }
    }
}

#[cfg(test)]
mod stat_tests {
    use super::*;
    use procfs::FromRead;

    fn via_procfs(bytes: &[u8]) -> Proc {
        let stat = procfs::process::Stat::from_read(bytes).unwrap();
        Proc {
            pid: Pid::from_raw(stat.pid),
            ppid: Pid::from_raw(stat.ppid),
            pgid: Pid::from_raw(stat.pgrp),
            sid: Pid::from_raw(stat.session),
            state: stat.state.to_string(),
            comm: stat.comm,
            starttime: stat.starttime,
            threads: stat.num_threads,
            doubt: None,
        }
    }

    #[test]
    fn parse_stat_agrees_with_procfs() {
        // A real line with a comm that has parentheses, spaces and invalid UTF-8 in it.
        let real = read_stat_file("/proc/self/stat").unwrap();
        let close = real.iter().rposition(|b| *b == b')').unwrap();
        let mut odd = b"4242 (a) (b \xff)".to_vec();
        odd.extend_from_slice(&real[close + 1..]);
        assert_eq!(parse_stat(&odd).unwrap(), via_procfs(&odd));
        assert_eq!(parse_stat(&odd).unwrap().comm, "a) (b \u{fffd}");
        let mut seen = 0;
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = pid_entry(&entry) else {
                continue;
            };
            let Ok(bytes) = read_stat_file(&format!("/proc/{pid}/stat")) else {
                continue;
            };
            assert_eq!(
                parse_stat(&bytes).unwrap(),
                via_procfs(&bytes),
                "{}",
                String::from_utf8_lossy(&bytes)
            );
            seen += 1;
        }
        assert!(seen > 0);
        assert!(parse_stat(b"12 (x) S 1\n").is_none());
    }
}
