//! The listings a scan follows until they show nothing new: /proc's processes, and each
//! process's threads.
//!
//! An entry is known by its number and the inode number the listing gave it, not by its number
//! alone: a number the scan passed may name another process (or thread) by the next listing, when
//! the kernel hands it out again (its pid counter came round, or root set `ns_last_pid`). /proc
//! gives a number's folder an inode when it first looks the name up (`proc_fill_cache` in the
//! kernel's fs/proc/base.c), with a fresh inode number from `get_next_ino` (`proc_pid_make_inode`),
//! and reports that number in its listing; the folders of a task are dropped when the task is
//! released (`proc_flush_pid` in `release_task`), which recent kernels do before its number is
//! free again (`free_pids` after it; older ones freed the number just before, and a new task made
//! in the microseconds between could list once with its predecessor's inode). So a new process on
//! a used number lists as a new entry and is read.
//! The same process may list under a new inode when its folder left the kernel's cache: that only
//! costs one more read. Where /proc gave no inode (it could not make one, and says 1), the
//! number alone is all a listing tells, as before.

use super::pids::{self, Mark};
use super::proc::{self, Got, Stat};
use nix::unistd::Pid;
use std::collections::HashSet;

/// A listed process or thread: its number, and the inode number its listing gave it.
pub type Entry = (Pid, u64);

/// How many times a scan lists /proc again for processes that appeared while it looked before it
/// gives up on seeing them all at one moment.
pub const RELISTS: usize = 16;

/// The same for one process's threads.
pub const TASK_RELISTS: usize = 16;

/// Every process /proc lists now.
pub fn pids() -> Result<Vec<Entry>, String> {
    match proc::numbered(".") {
        Got::Text(n) => Ok(n),
        Got::Gone | Got::Denied(_) => Err("cannot list /proc".into()),
    }
}

/// The entries listed so far.
#[derive(Default)]
pub struct Seen(HashSet<Entry>);

impl Seen {
    /// The numbers of the entries of `listing` not listed before, now counted as listed.
    pub fn news(&mut self, listing: Vec<Entry>) -> Vec<Pid> {
        listing
            .into_iter()
            .filter(|e| self.0.insert(*e))
            .map(|(p, _)| p)
            .collect()
    }
}

/// The stat of each of `pids` still there.
pub fn stats_of(pids: &[Pid]) -> Vec<Stat> {
    pids.iter()
        .filter_map(|p| proc::read(&format!("{p}/stat")).ok())
        .filter_map(|b| proc::stat(&b))
        .collect()
}

/// Why a scan's listings may have missed a process that held a folder all along, if they may.
pub fn unsettled(settled: bool, before: Option<Mark>, after: Option<Mark>) -> Option<String> {
    if !settled {
        return Some(format!(
            "new processes kept appearing while a scan looked ({RELISTS} listings of /proc in a \
             row showed new ones), so no scan saw every process"
        ));
    }
    let (Some(before), Some(after)) = (before, after) else {
        return Some("cannot read the kernel's pid counter (/proc/loadavg, /proc/stat)".into());
    };
    pids::came_round(before, after, pids::pid_max()).then(|| {
        "the kernel's pid numbers came round to the bottom while a scan looked, so a new \
         process may have taken a number the scan had passed"
            .into()
    })
}

/// Why a look at process `pid` may have missed one of its threads: new ones kept appearing.
pub fn threads_unsettled(pid: Pid) -> String {
    format!(
        "new threads kept appearing in process {pid} while a scan looked at it \
         ({TASK_RELISTS} listings of its threads in a row showed new ones), so no scan saw \
         all of them"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_listed_again_with_another_inode_is_new() {
        let mut seen = Seen::default();
        let p = Pid::from_raw;
        assert_eq!(seen.news(vec![(p(10), 1), (p(11), 2)]), [p(10), p(11)]);
        assert_eq!(seen.news(vec![(p(10), 1), (p(11), 2)]), []);
        assert_eq!(seen.news(vec![(p(10), 7), (p(11), 2)]), [p(10)]);
    }

    #[test]
    fn this_process_lists_with_an_inode() {
        let me = crate::sys::own_pid();
        let listed = pids().expect("a listing of /proc");
        assert!(listed.iter().any(|(p, ino)| *p == me && *ino > 1));
    }
}
