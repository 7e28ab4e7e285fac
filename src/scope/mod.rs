//! The scope of a stop: which processes it covers, how they are read from /proc, and what proves
//! that none of them is left. Every "is it the tree?" of the stop and the verdict is asked here.

mod exec;
mod group;

pub use exec::{marker, reaped, spawned, ExecScope};

use crate::proctable::{self, Proc, ProcError};
use crate::sys;
use clap::ValueEnum;
use nix::unistd::Pid;
use std::collections::{HashMap, HashSet};

/// The scope of the run's stop as the user names it (`--scope`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// Every descendant of vloer-run, setsid() and daemonized ones included.
    Tree,
    /// The run's processes in the child's process group (processes that leave it are neither
    /// signalled nor checked).
    Group,
}

impl Kind {
    /// The name the verdict and `status` report.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Tree => "tree",
            Kind::Group => "group",
        }
    }
}

/// Processes already known to be members, by identity (pid and start time): an exec's tracked
/// processes, whose children belong too after they were reparented.
pub type Known = HashMap<Pid, u64>;

/// Which processes one stop covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every descendant of vloer-run.
    Tree,
    /// The run's processes (vloer-run's descendants) in the main child's process group.
    Group(Pid),
    /// An exec started through the control socket (see `ExecScope`).
    Exec(ExecScope),
}

/// What the kernel says of a scope that a scan found without live members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Settled {
    /// Nothing of the scope is left.
    Empty,
    /// A member is still there (the tree: a child not yet exited); its exit will wake the run.
    Wait,
    /// The kernel shows a member that /proc did not: scan again shortly.
    Unseen,
}

impl Scope {
    /// The run's own scope: the group one only once there is a child to name it.
    pub fn of_run(kind: Kind, child: Option<Pid>) -> Scope {
        match (kind, child) {
            (Kind::Group, Some(pid)) => Scope::Group(pid),
            _ => Scope::Tree,
        }
    }

    /// Whether the stop's fast path (a walk that signals as it reads, see
    /// `proctable::walk_tree`) reads this scope: the tree and its groups.
    pub fn walks(&self) -> bool {
        !matches!(self, Scope::Exec(_))
    }

    /// Whether `p`, found in the tree by a walk and freshly read, belongs to the scope, given
    /// the members already seen.
    pub fn belongs(&self, p: &Proc, seen: &HashSet<Pid>) -> bool {
        match self {
            Scope::Tree => p.ppid == sys::own_pid() || seen.contains(&p.ppid),
            // The main child is a member even when it left its own group.
            Scope::Group(pgid) => p.pgid == *pgid || p.pid == *pgid,
            Scope::Exec(e) => e.claims(p, seen),
        }
    }

    /// Reads the scope afresh: every process in it, zombies included (callers filter with
    /// `is_live`). vloer-run itself is never part of it.
    pub fn scan(&self, known: &Known) -> Result<Vec<Proc>, ProcError> {
        if !matches!(self, Scope::Tree) {
            // The tree's emptiness is the kernel's word (see `settled`); a listing that hides
            // processes would make any other scope look empty.
            if let Some(why) = proctable::files::hides_processes() {
                return Err(ProcError(why));
            }
        }
        let tree = proctable::tree()?;
        Ok(match self {
            Scope::Exec(e) => e.members(tree, known),
            _ => self.members_of(tree),
        })
    }

    /// The tree's or the group's members among every descendant of vloer-run.
    pub fn members_of(&self, tree: Vec<Proc>) -> Vec<Proc> {
        match self {
            // Only inside the tree: a process elsewhere with that group id joined it from
            // outside the run, or took the number after the group emptied, and is never
            // signalled.
            Scope::Group(pgid) => tree
                .into_iter()
                .filter(|p| p.pgid == *pgid || p.pid == *pgid)
                .collect(),
            _ => tree,
        }
    }

    /// The kernel's own word once a scan found no live member: whether the scope is empty, or
    /// the stop must wait or look again. Only the tree and the group have one.
    pub fn settled(&self) -> Result<Settled, String> {
        match self {
            Scope::Tree => match sys::children_left() {
                Ok(sys::Children::Live) => Ok(Settled::Wait),
                Ok(_) => Ok(Settled::Empty),
                Err(e) => Err(format!("asking the kernel for children (waitid): {e}")),
            },
            Scope::Group(pgid) => group::settled(*pgid),
            Scope::Exec(_) => Ok(Settled::Empty),
        }
    }

    /// Whether the kernel alone proves the scope empty, with no /proc read at all.
    pub fn kernel_proves_empty(&self) -> bool {
        match self {
            Scope::Tree => matches!(sys::children_left(), Ok(sys::Children::None)),
            Scope::Group(pgid) => group::none_of_ours(*pgid),
            Scope::Exec(_) => false,
        }
    }

    /// Step 4 after a scan that listed no live member (`ended`: the members it found ended): the
    /// members the kernel still shows, or why the stop cannot be proven.
    pub fn confirm_none_left(&self, ended: Vec<Proc>) -> Result<Vec<Proc>, String> {
        match self {
            // What keeps the kernel's answer from being "no child": a zombie that a tracer
            // outside the run has not collected is named, in state Z; otherwise a child /proc
            // does not list at all.
            Scope::Tree => {
                let traced: Vec<Proc> = ended
                    .into_iter()
                    .filter(proctable::held_by_tracer)
                    .collect();
                if traced.is_empty() {
                    Err(
                        "vloer-run still has a child process that /proc does not list, so the \
                         stop cannot be proven"
                            .into(),
                    )
                } else {
                    Ok(traced)
                }
            }
            Scope::Group(pgid) => group::confirm_none_left(*pgid),
            Scope::Exec(_) => Ok(Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_is_a_group_only_once_there_is_a_child() {
        let child = Pid::from_raw(42);
        assert_eq!(Scope::of_run(Kind::Group, Some(child)), Scope::Group(child));
        assert_eq!(Scope::of_run(Kind::Group, None), Scope::Tree);
        assert_eq!(Scope::of_run(Kind::Tree, Some(child)), Scope::Tree);
        assert_eq!(Kind::Tree.name(), "tree");
        assert_eq!(Kind::Group.name(), "group");
    }

    #[test]
    fn a_group_member_is_told_by_its_group_and_a_tree_member_by_its_parent() {
        let mut p = proctable::read(nix::unistd::getpid()).unwrap().unwrap();
        p.pgid = Pid::from_raw(7);
        let none: HashSet<Pid> = HashSet::new();
        let parent: HashSet<Pid> = HashSet::from([p.ppid]);
        assert!(Scope::Group(Pid::from_raw(7)).belongs(&p, &none));
        assert!(!Scope::Group(Pid::from_raw(8)).belongs(&p, &parent));
        assert!(Scope::Tree.belongs(&p, &parent));
        assert!(!Scope::Tree.belongs(&p, &none));
    }
}
