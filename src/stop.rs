//! The stop protocol: polite signal, event-driven grace, SIGKILL rounds with rescans, then proof.

use crate::proctable::{self, Proc, ProcError, Scope};
use crate::signal::Sig;
use crate::sys;
use nix::unistd::Pid;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

/// How often the scope is rescanned when the kernel has no pidfds to wake us.
const FALLBACK_TICK: Duration = Duration::from_millis(20);

/// The knobs of one stop.
#[derive(Clone, Copy, Debug)]
pub struct StopPlan {
    pub scope: Scope,
    pub stop_signal: Sig,
    pub grace: Duration,
    pub kill_timeout: Duration,
    /// In step 1, these processes get this signal instead of `stop_signal` (a forwarded stop signal).
    pub first: Option<(FirstTarget, Sig)>,
}

/// Who already received the signal that started the stop.
#[derive(Clone, Copy, Debug)]
pub enum FirstTarget {
    Group(Pid),
    Process(Pid),
}

impl FirstTarget {
    fn covers(self, p: &Proc) -> bool {
        match self {
            FirstTarget::Group(g) => p.pgid == g,
            FirstTarget::Process(pid) => p.pid == pid,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Only watching for the scope to empty by itself (`--when-child-exits wait`).
    Watch,
    Grace,
    Kill,
    Done,
}

struct Tracked {
    fd: Option<OwnedFd>,
    /// SIGKILL was refused (EPERM): waiting longer will not help.
    unkillable: bool,
}

/// What the stop found at the end.
#[derive(Debug, Default)]
pub struct Outcome {
    pub survivors: Vec<Proc>,
    pub error: Option<String>,
    pub sent: BTreeMap<String, u64>,
    pub elapsed: Duration,
}

/// One stop (or watch) in progress over a scope.
pub struct Stop {
    plan: StopPlan,
    phase: Phase,
    deadline: Option<Instant>,
    tracked: HashMap<Pid, Tracked>,
    sent: BTreeMap<String, u64>,
    errors: Vec<String>,
    started: Instant,
    /// The stop could not be carried out as designed; the verdict must not say true.
    failed: bool,
}


impl Stop {
    /// Steps 1 and the start of 2: signal every live member and start the grace period.
    pub fn begin(plan: StopPlan, now: Instant) -> Stop {
        let mut stop = Stop::new(plan, Phase::Grace, now);
        stop.deadline = Some(now + plan.grace);
        stop.round(now);
        stop
    }

    /// Waits for the scope to empty on its own, sending nothing, until `deadline` if any.
    pub fn watch(plan: StopPlan, now: Instant) -> Stop {
        let mut stop = Stop::new(plan, Phase::Watch, now);
        stop.round(now);
        stop
    }

    fn new(plan: StopPlan, phase: Phase, now: Instant) -> Stop {
        Stop {
            plan,
            phase,
            deadline: None,
            tracked: HashMap::new(),
            sent: BTreeMap::new(),
            errors: Vec::new(),
            started: now,
            failed: false,
        }
    }

    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    pub fn is_watch(&self) -> bool {
        self.phase == Phase::Watch
    }

    /// The next moment the stop needs to act without an event.
    pub fn deadline(&self) -> Option<Instant> {
        if self.phase == Phase::Done {
            return None;
        }
        let tick = (!sys::have_pidfd()).then(|| Instant::now() + FALLBACK_TICK);
        match (self.deadline, tick) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The pidfds to poll, with their pids.
    pub fn pidfds(&self) -> impl Iterator<Item = (Pid, BorrowedFd<'_>)> {
        self.tracked.iter().filter_map(|(pid, t)| t.fd.as_ref().map(|fd| (*pid, fd.as_fd())))
    }

    /// Processes whose pidfd became readable have exited.
    pub fn exited(&mut self, pids: &[Pid], now: Instant) {
        for pid in pids {
            self.tracked.remove(pid);
        }
        self.progress(now);
    }

    /// Something happened (a child was reaped, time passed): move on if we can.
    pub fn progress(&mut self, now: Instant) {
        if self.phase == Phase::Done {
            return;
        }
        if !sys::have_pidfd() {
            // Without pidfds, liveness comes from rescans alone.
            self.tracked.clear();
        }
        if self.deadline.is_some_and(|d| now >= d) {
            match self.phase {
                Phase::Grace => {
                    self.phase = Phase::Kill;
                    self.deadline = Some(now + self.plan.kill_timeout);
                    self.tracked.clear();
                }
                _ => {
                    self.phase = Phase::Done;
                    return;
                }
            }
        }
        let waiting_on_killable = self.tracked.values().any(|t| !t.unkillable);
        if waiting_on_killable {
            return;
        }
        if self.phase == Phase::Kill && !self.tracked.is_empty() {
            // Every process left refused SIGKILL; a rescan for newcomers is all that can help.
            let before: HashSet<Pid> = self.tracked.keys().copied().collect();
            self.round(now);
            let after: HashSet<Pid> = self.tracked.keys().copied().collect();
            if after == before {
                self.phase = Phase::Done;
            }
            return;
        }
        self.round(now);
    }

    /// Rescans the scope and signals every live member not yet tracked; done when none is left.
    fn round(&mut self, now: Instant) {
        let seeds: HashSet<Pid> = self.tracked.keys().copied().collect();
        let members = match proctable::scan(self.plan.scope, &seeds) {
            Ok(m) => m,
            Err(ProcError(e)) => {
                self.errors.push(e);
                self.failed = true;
                self.phase = Phase::Done;
                return;
            }
        };
        let known: HashSet<Pid> = members.iter().map(|p| p.pid).collect();
        for p in members.iter().filter(|p| p.is_live()) {
            if self.tracked.contains_key(&p.pid) {
                continue;
            }
            let sig = match self.phase {
                Phase::Watch => None,
                Phase::Grace => Some(match self.plan.first {
                    Some((target, sig)) if target.covers(p) => sig,
                    _ => self.plan.stop_signal,
                }),
                Phase::Kill => Some(Sig::KILL),
                Phase::Done => return,
            };
            match self.open_and_signal(p, &known, sig) {
                Ok(Some(t)) => {
                    self.tracked.insert(p.pid, t);
                }
                Ok(None) => {}
                Err(e) => {
                    self.errors.push(e);
                    self.failed = true;
                }
            }
        }
        if self.tracked.is_empty() && self.phase != Phase::Done {
            if sys::have_pidfd() || !members.iter().any(Proc::is_live) {
                self.phase = Phase::Done;
            }
        }
        let _ = now;
    }

    /// Opens a pidfd, re-reads the process to prove the pid still names a member, then signals
    /// through the pidfd. `Ok(None)`: it is gone, or no longer a member.
    fn open_and_signal(&mut self, p: &Proc, known: &HashSet<Pid>, sig: Option<Sig>) -> Result<Option<Tracked>, String> {
        let fd = match sys::pidfd_open(p.pid) {
            Ok(fd) => Some(fd),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => None,
            Err(e) => return Err(format!("pidfd_open({}): {e}", p.pid)),
        };
        let fresh = match proctable::read(p.pid) {
            Ok(Some(f)) => f,
            Ok(None) => return Ok(None),
            Err(e) => return Err(e.0),
        };
        if fresh.starttime != p.starttime || !fresh.is_live() || !proctable::belongs(&fresh, self.plan.scope, known) {
            return Ok(None);
        }
        let mut unkillable = false;
        if let Some(sig) = sig {
            let result = match &fd {
                Some(fd) => sys::pidfd_send_signal(fd.as_fd(), sig),
                None => sys::kill(p.pid, sig),
            };
            match result {
                Ok(()) => {
                    *self.sent.entry(sig.name()).or_default() += 1;
                    crate::msg::verbose(format_args!("sent {sig} to {} ({})", p.pid, p.comm));
                    // A stopped process would hold a polite signal pending until continued.
                    if fresh.state == "T" && sig != Sig::KILL && sig != Sig::CONT {
                        let cont = match &fd {
                            Some(fd) => sys::pidfd_send_signal(fd.as_fd(), Sig::CONT),
                            None => sys::kill(p.pid, Sig::CONT),
                        };
                        if cont.is_ok() {
                            *self.sent.entry(Sig::CONT.name()).or_default() += 1;
                        }
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(None),
                Err(e) => {
                    self.errors.push(format!("could not send {sig} to pid {} ({}): {e}", p.pid, p.comm));
                    self.failed = true;
                    unkillable = sig == Sig::KILL;
                }
            }
        }
        Ok(Some(Tracked { fd, unkillable }))
    }

    /// Step 4: confirm from `/proc`. Survivors or any failure along the way mean no proof.
    pub fn finish(self, now: Instant) -> Outcome {
        let mut outcome = Outcome {
            sent: self.sent,
            elapsed: now.saturating_duration_since(self.started),
            ..Outcome::default()
        };
        let mut errors = self.errors;
        let seeds: HashSet<Pid> = self.tracked.keys().copied().collect();
        match proctable::scan(self.plan.scope, &seeds) {
            Ok(members) => outcome.survivors = members.into_iter().filter(Proc::is_live).collect(),
            Err(e) => errors.push(e.0),
        }
        outcome.survivors.sort_by_key(|p| p.pid);
        if !errors.is_empty() {
            errors.dedup();
            outcome.error = Some(errors.join("; "));
        }
        outcome
    }
}
