//! An exec's scope: its own process by identity, its process group and session while the number
//! still names them, their descendants, and the orphans vloer-run adopted that carry its marker.
//! A process whose origin cannot be told is never signalled and never proven gone.

use super::Known;
use crate::proctable::{self, Proc};
use crate::sys;
use nix::unistd::Pid;
use std::collections::HashSet;
use std::sync::Mutex;

/// Every process vloer-run started itself (the main child, each exec's) and has not reaped yet,
/// by identity: vloer-run's own children are never taken for orphans it adopted, and once one is
/// reaped, no process is it any more, even one that took its pid within the same clock tick
/// (where the start time, in ticks, is the same).
static SPAWNED: Mutex<Vec<(Pid, u64)>> = Mutex::new(Vec::new());

/// Records a process vloer-run just started, while it is its unreaped child (so the pid names
/// it). Without /proc to read its start time, nothing is recorded.
pub fn spawned(pid: Pid) {
    if let Ok(Some(p)) = proctable::read(pid) {
        SPAWNED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((pid, p.starttime));
    }
}

/// vloer-run reaped `pid`: if it started it, that process is gone for good.
pub fn reaped(pid: Pid) {
    SPAWNED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|(p, _)| *p != pid);
}

/// Whether `p` is a process vloer-run started and has not reaped.
pub(super) fn was_spawned(p: &Proc) -> bool {
    SPAWNED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(&(p.pid, p.starttime))
}

/// Who an exec's stop covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecScope {
    /// The exec's own process: its pid with its start time, since once it is reaped the number
    /// may name an unrelated process.
    pub root: Pid,
    pub root_start: u64,
    /// The exec's number within this instance, in its marker (see `marker`).
    pub id: u64,
}

/// The `NAME=VALUE` entry every exec's environment carries. A hint only: a process that drops it
/// is not thereby outside the exec (see `ExecScope::members`).
pub fn marker(id: u64) -> String {
    format!("{}{id}", marker_prefix())
}

fn marker_prefix() -> String {
    format!("VLOER_EXEC_ID={}:", sys::own_pid())
}

/// What a process's environment says of the exec it came from.
enum Origin {
    This,
    Unknown(String),
}

impl ExecScope {
    /// The exec's own process: until it is reaped, its pid can name nothing else.
    fn is_root(&self, p: &Proc) -> bool {
        p.pid == self.root && p.starttime == self.root_start && was_spawned(p)
    }

    /// In the exec's group or session by number, and not older than the exec.
    fn in_group(&self, p: &Proc) -> bool {
        (p.pgid == self.root || p.sid == self.root) && p.starttime >= self.root_start
    }

    /// Whether the number still names the exec's group: a group id is never reused while the
    /// group has members, so it does unless a new process took the pid (after the exec's process
    /// was reaped and its group emptied) and leads a group of its own.
    fn group_is_ours(&self) -> bool {
        match proctable::read(self.root) {
            Ok(Some(p)) => self.is_root(&p),
            Ok(None) => true,
            // Unreadable: its group is not taken as the exec's.
            Err(_) => false,
        }
    }

    /// For a process re-read after the scan that found it (same start time, so the same
    /// process): whether it is still a member.
    pub(super) fn claims(&self, p: &Proc, seen: &HashSet<Pid>) -> bool {
        seen.contains(&p.pid) || seen.contains(&p.ppid) || self.is_root(p) || self.in_group(p)
    }

    /// The exec's members within `tree` (every descendant of vloer-run), zombies included, and
    /// the processes whose origin cannot be told, each with why (`origin_unknown`).
    pub(super) fn members(&self, mut tree: Vec<Proc>, known: &Known) -> Vec<Proc> {
        let me = sys::own_pid();
        let group = self.group_is_ours();
        let mut inside: HashSet<Pid> = tree
            .iter()
            .filter(|p| {
                self.is_root(p)
                    || known.get(&p.pid) == Some(&p.starttime)
                    || (group && self.in_group(p))
            })
            .map(|p| p.pid)
            .collect();
        proctable::close_over_children(&tree, &mut inside);
        // Lineage is lost when an orphan is reparented to vloer-run. One that started before the
        // exec is not its; a later one is the exec's when its environment carries the exec's
        // marker, and otherwise undecided: a process can drop or change its environment, so a
        // missing or another marker proves nothing.
        let mut undecided = HashSet::new();
        let mut adopted = HashSet::new();
        for p in tree.iter_mut().filter(|p| {
            p.ppid == me
                && p.is_live()
                && !inside.contains(&p.pid)
                && p.starttime >= self.root_start
                && !was_spawned(p)
        }) {
            match self.origin(p.pid) {
                Origin::This => {
                    adopted.insert(p.pid);
                }
                Origin::Unknown(why) => {
                    // Gone by now: nothing left to tell.
                    if proctable::read(p.pid)
                        .ok()
                        .flatten()
                        .is_some_and(|q| q.is_live() && q.starttime == p.starttime)
                    {
                        p.origin_unknown = Some(format!(
                            "cannot tell whether pid {} ({}) belongs to this exec: {why}",
                            p.pid, p.comm
                        ));
                        undecided.insert(p.pid);
                    }
                }
            }
        }
        inside.extend(adopted);
        proctable::close_over_children(&tree, &mut inside);
        // A undecided process is reported, not walked: its children are as undecided.
        inside.extend(undecided);
        tree.retain(|p| inside.contains(&p.pid));
        tree
    }

    fn origin(&self, pid: Pid) -> Origin {
        let env = match proctable::environ(pid) {
            Ok(env) => env,
            Err(e) => return Origin::Unknown(e),
        };
        let this = marker(self.id);
        if env.split(|b| *b == 0).any(|entry| entry == this.as_bytes()) {
            return Origin::This;
        }
        // Another exec's marker proves no more than none: a process can set it as easily as
        // drop it.
        Origin::Unknown(
            "vloer-run adopted it after its parent exited, and nothing it cannot shed tells where \
             it came from"
                .into(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No process has this pid (above the kernel's largest pid_max).
    const NOBODY: i32 = 1 << 23;

    fn proc(pid: i32, ppid: Pid, pgid: i32, starttime: u64) -> Proc {
        let mut p = proctable::read(nix::unistd::getpid()).unwrap().unwrap();
        p.pid = Pid::from_raw(pid);
        p.ppid = ppid;
        p.pgid = Pid::from_raw(pgid);
        p.sid = Pid::from_raw(pgid);
        p.state = "S".into();
        p.threads = 1;
        p.starttime = starttime;
        p
    }

    fn pids(procs: &[Proc]) -> Vec<i32> {
        let mut v: Vec<i32> = procs.iter().map(|p| p.pid.as_raw()).collect();
        v.sort();
        v
    }

    #[test]
    fn the_group_and_its_descendants_belong_and_older_orphans_do_not() {
        let me = sys::own_pid();
        let scope = ExecScope {
            root: Pid::from_raw(NOBODY),
            root_start: 100,
            id: 1,
        };
        let tree = vec![
            // In the exec's group, orphaned to vloer-run.
            proc(NOBODY + 1, me, NOBODY, 150),
            // Its child, in a session of its own.
            proc(NOBODY + 2, Pid::from_raw(NOBODY + 1), NOBODY + 2, 160),
            // An orphan older than the exec: not its.
            proc(NOBODY + 3, me, NOBODY + 3, 50),
        ];
        let members = scope.members(tree, &Known::new());
        assert_eq!(pids(&members), [NOBODY + 1, NOBODY + 2]);
        assert!(members.iter().all(|p| p.origin_unknown.is_none()));
    }

    #[test]
    fn a_process_that_took_the_execs_pid_is_neither_the_exec_nor_its_group() {
        // The exec's pid now names a live process (this test itself) that vloer-run did not
        // start, even with the same start time: a pid recycled within one clock tick.
        let me = proctable::read(nix::unistd::getpid()).unwrap().unwrap();
        let scope = ExecScope {
            root: me.pid,
            root_start: me.starttime,
            id: 1,
        };
        // A child of the main child's shell, say, which took the number.
        let usurper = proc(
            me.pid.as_raw(),
            Pid::from_raw(NOBODY + 5),
            NOBODY,
            me.starttime,
        );
        // In the group the number now names, started after the exec.
        let in_its_group = proc(
            NOBODY + 1,
            Pid::from_raw(NOBODY + 2),
            me.pid.as_raw(),
            me.starttime,
        );
        let members = scope.members(vec![usurper, in_its_group], &Known::new());
        assert_eq!(pids(&members), Vec::<i32>::new());
        // Known by identity, a process stays a member whatever its pid is now.
        let known = Known::from([(Pid::from_raw(NOBODY + 1), me.starttime)]);
        let in_its_group = proc(
            NOBODY + 1,
            Pid::from_raw(NOBODY + 2),
            me.pid.as_raw(),
            me.starttime,
        );
        assert_eq!(
            pids(&scope.members(vec![in_its_group], &known)),
            [NOBODY + 1]
        );
    }
}
