//! The stop protocol: polite signal, event-driven grace, SIGKILL rounds with rescans, then proof.

mod callers;
mod confirm;
mod deliver;
mod group;
mod pace;
mod plan;
mod room;
mod sweep;
mod tell;

pub use group::ChildGroup;
use group::Group;
use pace::Pace;
pub use pace::Reaped;
pub use plan::{ChildFirst, Forwarded, ForwardedTo, StopPlan};
use plan::{Phase, Signals};
use room::Room;
pub use sweep::{SweepOutcome, SweepStop};

use crate::proctable::{self, Handle, Proc, ProcError};
use crate::reactor::{Key, Reactor, Registration};
use crate::scope::{Known, Settled};
use crate::signal::Sig;
use crate::sys;
use nix::sys::epoll::EpollFlags;
use nix::unistd::Pid;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

/// How often the scope is rescanned when nothing will wake us: the kernel has no pidfds, or it
/// shows a member that /proc did not.
const FALLBACK_TICK: Duration = Duration::from_millis(20);

struct Tracked {
    /// Declared before `handle`, so it leaves the reactor while the pidfd is still open.
    wake: Option<Registration>,
    handle: Handle,
    /// SIGKILL was refused (EPERM): waiting longer will not help.
    unkillable: bool,
}

/// What the stop found at the end.
#[derive(Debug, Default)]
pub struct Outcome {
    pub survivors: Vec<Proc>,
    pub error: Option<String>,
    pub sent: BTreeMap<Sig, u64>,
    /// The signals the stop sent the main child on its own account (not one it passed on from
    /// outside): a child that died of one of these was ended by the stop.
    pub sent_to_child: Vec<Sig>,
    pub elapsed: Duration,
}

/// Where a stop's members wake the run: its reactor, under the stop's owner (0: the run, n: exec
/// n; see `reactor::Key::Member`).
#[derive(Clone)]
pub struct Wake {
    pub reactor: Reactor,
    pub owner: u64,
}

/// One stop (or watch) in progress over a scope.
pub struct Stop {
    plan: StopPlan,
    wake: Wake,
    phase: Phase,
    deadline: Option<Instant>,
    tracked: HashMap<Pid, Tracked>,
    sent: BTreeMap<Sig, u64>,
    sent_to_child: Vec<Sig>,
    errors: Vec<String>,
    started: Instant,
    last: LastScan,
    /// The main child's process group, while the stop can reach it in one call.
    group: Option<Group>,
    /// The main child has exited, and the processes left waiting for it are due a scan that
    /// signals them.
    signal_the_rest: bool,
    /// What the run's reaper did during the stop (see `pace`).
    pace: Pace,
    /// The pidfds it holds, against the limit on open descriptors.
    room: Room,
}

/// What the last scan left for the next one.
#[derive(Default)]
struct LastScan {
    /// A scan has read the scope from /proc.
    read: bool,
    /// It left a process unsignalled until the main child's exit (see `main_child_exited`).
    left_waiting: bool,
    /// Every live member it saw was gone before it could be signalled: the scope is scanned
    /// again on the run's next turn, after the run has reaped (see `scan_and_signal`).
    vanished: Option<Vec<Pid>>,
    /// It found no live member, yet the kernel shows one (see `Settled::Unseen`): the scope is
    /// scanned again at the next tick.
    unseen: bool,
}

impl Stop {
    /// Steps 1 and the start of 2: signal every live member and start the grace period.
    /// `group`: the main child's process group (see `ChildGroup`). When one call reached the
    /// group, the scan waits for the run's next turn (see `scan_due`).
    pub fn begin(plan: StopPlan, wake: Wake, now: Instant, group: Option<ChildGroup>) -> Stop {
        let mut stop = Stop::new(plan, wake, Phase::Grace, now);
        stop.group = group.map(Group::new);
        stop.deadline = Some(now + plan.grace);
        stop.call_group();
        if !stop.scan_due() {
            stop.round();
        }
        stop
    }

    /// Waits for the scope to empty on its own, sending nothing, until `deadline` if any.
    pub fn watch(plan: StopPlan, wake: Wake, now: Instant) -> Stop {
        let mut stop = Stop::new(plan, wake, Phase::Watch, now);
        stop.round();
        stop
    }

    fn new(plan: StopPlan, wake: Wake, phase: Phase, now: Instant) -> Stop {
        Stop {
            plan,
            wake,
            phase,
            deadline: None,
            tracked: HashMap::new(),
            sent: BTreeMap::new(),
            sent_to_child: Vec::new(),
            errors: Vec::new(),
            started: now,
            last: LastScan::default(),
            group: None,
            signal_the_rest: false,
            pace: Pace::default(),
            room: Room::default(),
        }
    }

    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Only watching: it sends nothing and has no deadline of its own.
    pub fn is_watch(&self) -> bool {
        self.phase == Phase::Watch
    }

    /// The next moment the stop needs to act without an event.
    pub fn deadline(&self) -> Option<Instant> {
        if self.phase == Phase::Done {
            return None;
        }
        if self.last.vanished.is_some() || self.signal_the_rest {
            return Some(Instant::now());
        }
        if self.scan_due() {
            let now = Instant::now();
            return Some(self.group_dying(now).unwrap_or(now));
        }
        let tick = (self.polls() || self.last.unseen).then(|| Instant::now() + FALLBACK_TICK);
        match (self.deadline, tick) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Processes whose pidfd became readable have exited; the next `progress` moves on.
    pub fn exited(&mut self, pids: &[Pid]) {
        for pid in pids {
            self.tracked.remove(pid);
        }
    }

    /// The main child has exited: the rest of the scope now gets the stop signal too, at the
    /// next `progress`.
    pub fn main_child_exited(&mut self) {
        // Nobody left waiting: what the scans found already has the stop signal, and whatever
        // appeared since is found when the tracked processes are gone.
        if self.plan.child_first.take().is_some()
            && self.phase == Phase::Grace
            && self.last.left_waiting
        {
            self.signal_the_rest = true;
        }
    }

    /// Whether `p` must wait for the main child's exit before the stop signals it.
    fn waits_for_child(&self, p: &Proc) -> bool {
        self.plan.waits_for_child(self.phase, p)
    }

    /// Something happened (a child was reaped, time passed): move on if we can. `reaped`: what
    /// the run's last reap did. A scan waits for the reaper (see `waits_for_reaper`) unless a
    /// phase just ended: a scan would open a pidfd on each zombie only to learn it exited, and
    /// read each member that is about to die, while reaping costs less, and once none is left
    /// the kernel's "no child" (see `round`) ends the stop without a scan at all.
    pub fn progress(&mut self, now: Instant, reaped: Reaped) {
        self.pace.note(now, reaped);
        if self.phase == Phase::Done {
            return;
        }
        let mut phase_ended = false;
        if self.deadline.is_some_and(|d| now >= d) {
            match self.phase {
                Phase::Grace => {
                    tell::grace_ran_out(self.plan.grace, self.tracked.len());
                    self.phase = Phase::Kill;
                    self.deadline = Some(now + self.plan.kill_timeout);
                    self.tracked.clear();
                    phase_ended = true;
                }
                _ => {
                    if self.phase == Phase::Kill {
                        tell::kill_timeout_ran_out(self.plan.kill_timeout, self.tracked.len());
                    }
                    self.phase = Phase::Done;
                    return;
                }
            }
        }
        if !phase_ended && self.waits_for_reaper(now, reaped) {
            return;
        }
        if std::mem::take(&mut self.signal_the_rest) {
            self.round();
            return;
        }
        if self.polls() {
            // Without pidfds, liveness comes from rescans alone; each drops what it no longer
            // sees alive and signals only processes that were not signalled in this phase.
            self.round();
            return;
        }
        let waiting_on_killable = self.tracked.values().any(|t| !t.unkillable);
        if waiting_on_killable {
            return;
        }
        if self.phase == Phase::Kill && !self.tracked.is_empty() {
            // Every process left refused SIGKILL; a rescan for newcomers is all that can help.
            let before: HashSet<Pid> = self.tracked.keys().copied().collect();
            self.round();
            let after: HashSet<Pid> = self.tracked.keys().copied().collect();
            if after == before {
                tell::all_refused_sigkill(after.len());
                self.phase = Phase::Done;
            }
            return;
        }
        self.round();
    }

    /// Rescans the scope and signals every live member not yet tracked; done when none is left.
    fn round(&mut self) {
        if self.tracked.is_empty() && self.last.read && self.plan.scope.kernel_proves_empty() {
            // The kernel's own word that the scope is empty (for the tree: vloer-run, the reaper
            // of every descendant, has no child at all): once a scan has read the scope (and so
            // shown that /proc can be read for survivors), no second scan is needed to know it.
            // Not before: a stop whose group call ended everything still reads /proc once, so
            // that an unreadable /proc gives the same answer however fast the scope died.
            self.phase = Phase::Done;
            return;
        }
        let previous = self.last.vanished.take();
        if let Some(live) = self.scan_and_signal() {
            if previous.as_ref() == Some(&live) {
                // The same live processes twice, none of them a member when re-read: a rescan
                // cannot change that. Finish, and let the confirmation judge them.
                self.phase = Phase::Done;
                return;
            }
            self.last.vanished = Some(live);
        }
    }

    /// One pass of `round`. `Some(live pids)` when the scope must be scanned again at once.
    fn scan_and_signal(&mut self) -> Option<Vec<Pid>> {
        self.last.unseen = false;
        self.room
            .recount(self.tracked.values().map(|t| t.handle.pidfd().is_some()));
        // The fast path signals as it reads; the loop below then only sees what it left.
        let scanned = self
            .walk_and_signal()
            .unwrap_or_else(|| self.plan.scope.scan(&self.known()));
        let members = match scanned {
            Ok(m) => {
                self.last.read = true;
                m
            }
            Err(ProcError(e)) => {
                self.errors.push(e);
                self.phase = Phase::Done;
                return None;
            }
        };
        let known: HashSet<Pid> = members.iter().map(|p| p.pid).collect();
        let mut left_waiting = false;
        if self.polls() {
            // No pidfd tells us of an exit: what this scan does not show alive, with the same
            // start time, is gone (or its pid now names another process).
            let live: HashMap<Pid, u64> = members
                .iter()
                .filter(|p| p.is_live())
                .map(|p| (p.pid, p.starttime))
                .collect();
            self.tracked
                .retain(|pid, t| live.get(pid) == Some(&t.handle.starttime));
        }
        for p in members.iter().filter(|p| p.is_live()) {
            if self.tracked.contains_key(&p.pid) {
                continue;
            }
            if self.waits_for_child(p) {
                left_waiting = true;
                continue;
            }
            if let Some(why) = &p.origin_unknown {
                // Cannot tell: not signalled (it may not be ours), and never proven gone.
                if !self.errors.contains(why) {
                    self.errors.push(why.clone());
                }
                continue;
            }
            if self.phase == Phase::Done {
                return None;
            }
            let sigs = self.signals_for(p);
            let result = self.open_and_signal(p, &known, sigs);
            self.record(p.pid, result);
        }
        self.close_call();
        self.last.left_waiting = left_waiting;
        if self.tracked.is_empty() && self.phase != Phase::Done && !left_waiting {
            if !members.iter().any(Proc::is_live) {
                // /proc's children lists may miss a process while its siblings exit, and a
                // process that keeps forking away from its pid may be between two of them: the
                // kernel's own answer decides (a zombie that waits to be reaped is not alive).
                // For the tree, a child still there wakes the stop again when it exits; for the
                // group, a member the scan missed is looked for again at the next tick; either
                // way the deadline moves the stop on.
                match self.plan.scope.settled() {
                    Ok(Settled::Empty) => self.phase = Phase::Done,
                    Ok(Settled::Wait) | Err(_) => {}
                    Ok(Settled::Unseen) => self.last.unseen = true,
                }
            } else if !self.polls() && !self.deadline.is_some_and(|d| Instant::now() >= d) {
                // The scan saw live members, yet each was gone by the time it was to be
                // signalled: a process that keeps forking away from its pid leaves its child,
                // forked after the scan, alive. Only a scan without live members proves the scope
                // empty, so scan again at once, but on the run's next turn: a chain that forks
                // faster than a scan leaves a zombie per pid, and rescanning without reaping them
                // made every scan longer, until the pid space ran out. (Without pidfds the
                // fallback tick rescans; past the deadline, `progress` moves to the next phase
                // and rescans there.)
                let mut live: Vec<Pid> = members
                    .iter()
                    .filter(|p| p.is_live())
                    .map(|p| p.pid)
                    .collect();
                live.sort();
                return Some(live);
            }
        }
        None
    }

    /// The scan of `--scope tree` where the kernel allows it (see `proctable::walk_tree`): each
    /// member is read once, after its pidfd was opened, and signalled right away, so the tree
    /// starts to exit while the rest of it is still being read. The general path reads every
    /// process twice and signals only after the whole scan. Whatever this leaves untracked (not
    /// a member when read, no pidfd) goes through the general path in `scan_and_signal`.
    fn walk_and_signal(&mut self) -> Option<Result<Vec<Proc>, ProcError>> {
        if !self.plan.scope.walks() || self.phase == Phase::Done || !self.room.may_open() {
            return None;
        }
        let scope = self.plan.scope;
        let walked = proctable::walk_tree(&mut |p, fd, known| {
            if self.tracked.contains_key(&p.pid)
                || self.waits_for_child(p)
                || !scope.belongs(p, known)
                || !self.room.may_open()
            {
                // Past the room, the general path signals it without a pidfd.
                return;
            }
            let sigs = self.signals_for(p);
            let result = self.deliver(p, Handle::of(p, Some(fd)), sigs);
            self.record(p.pid, result);
        })?;
        // The walk read the whole tree; the scope is the part of it that belongs.
        Some(walked.map(|tree| scope.members_of(tree)))
    }

    /// The processes this stop tracks, by identity: what an exec's scope builds on.
    fn known(&self) -> Known {
        self.tracked
            .iter()
            .map(|(pid, t)| (*pid, t.handle.starttime))
            .collect()
    }

    /// Whether exits are learnt by rescanning: no pidfds here, or not for every tracked process.
    fn polls(&self) -> bool {
        !sys::have_pidfd() || self.room.plain
    }

    /// What this phase sends to `p`; nothing while it waits for the main child (see
    /// `waits_for_child`).
    fn signals_for(&self, p: &Proc) -> Signals {
        self.plan.signals_for(self.phase, p)
    }
}
