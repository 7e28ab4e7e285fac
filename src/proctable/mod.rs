//! The process table as `/proc` shows it: who is in the run's scope, and whether they are alive.

pub mod files;
mod handle;
mod walk;
pub use handle::Handle;
pub use walk::*;

use crate::sys::own_pid as me;
use nix::unistd::Pid;
use serde::Serialize;
use std::io;
use std::os::fd::OwnedFd;

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
    /// Why it cannot be told whether this process belongs to the scope (an orphan an exec may
    /// have left): it is neither signalled nor proven gone.
    #[serde(skip)]
    pub origin_unknown: Option<String>,
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

/// Why `/proc` could not prove anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcError(pub String);

impl std::fmt::Display for ProcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn gone(err: &io::Error) -> bool {
    matches!(err.kind(), io::ErrorKind::NotFound) || err.raw_os_error() == Some(libc::ESRCH)
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
        origin_unknown: None,
    })
}

/// Reads one process; `Ok(None)` when it no longer exists.
pub fn read(pid: Pid) -> Result<Option<Proc>, ProcError> {
    let name = || files::ProcFile::Stat.name(pid);
    let bytes = match files::read_of(pid, files::ProcFile::Stat) {
        Ok(b) => b,
        Err(e) if gone(&e) => return Ok(None),
        Err(e) => return Err(ProcError(format!("reading /proc/{}: {e}", name()))),
    };
    parse_stat(&bytes)
        .map(Some)
        .ok_or_else(|| ProcError(format!("parsing /proc/{}: unexpected format", name())))
}

/// The command line of each process, arguments joined by spaces; empty for kernel threads, zombies
/// and a process whose memory could not be read in time.
pub fn cmdlines(pids: &[Pid]) -> Vec<String> {
    let reads = pids.iter().map(|&pid| files::cmdline_reader(pid)).collect();
    crate::slowread::read_all(reads)
        .into_iter()
        .map(|read| {
            read.map(|b| {
                b.split(|c| *c == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default()
        })
        .collect()
}

/// `pid`'s environment, or why it cannot be read (another user's process, one that made itself
/// undumpable, a read blocked on its memory lock): that is not an empty one.
pub fn environ(pid: Pid) -> Result<Vec<u8>, String> {
    let name = format!("{pid}/environ");
    let read = name.clone();
    crate::slowread::read(Box::new(move || files::read_file(&read)))
        .map_err(|e| format!("cannot read /proc/{name}: {e}"))
}

/// Whether `p` is a zombie that a tracer outside the run still holds: the kernel shows its exit to
/// the tracer alone, so vloer-run, its reaper, cannot collect it until the tracer waits for it or
/// lets go. It has ended, yet its pid is not free and the tree cannot be proven empty.
pub fn held_by_tracer(p: &Proc) -> bool {
    if p.state != "Z" {
        return false;
    }
    let Ok(status) = files::read_file(&format!("{}/status", p.pid)) else {
        return false;
    };
    String::from_utf8_lossy(&status).lines().any(|l| {
        l.strip_prefix("TracerPid:")
            .is_some_and(|t| !matches!(t.trim(), "" | "0"))
    })
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
            origin_unknown: None,
        }
    }

    #[test]
    fn parse_stat_agrees_with_procfs() {
        // A real line with a comm that has parentheses, spaces and invalid UTF-8 in it.
        let real = files::read_file("self/stat").unwrap();
        let close = real.iter().rposition(|b| *b == b')').unwrap();
        let mut odd = b"4242 (a) (b \xff)".to_vec();
        odd.extend_from_slice(&real[close + 1..]);
        assert_eq!(parse_stat(&odd).unwrap(), via_procfs(&odd));
        assert_eq!(parse_stat(&odd).unwrap().comm, "a) (b \u{fffd}");
        let mut seen = 0;
        for pid in files::list(".").unwrap() {
            if pid.parse::<i32>().is_err() {
                continue;
            }
            let Ok(bytes) = files::read_file(&format!("{pid}/stat")) else {
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
