//! The run: start the child, reap, forward, and turn every way the run can end into one stop and
//! one verdict.

use crate::cli::{ForwardTo, RunArgs, ScopeArg, WhenChildExits};
use crate::event_loop::{self, Interest};
use crate::msg;
use crate::proctable::Scope;
use crate::signal::Sig;
use crate::spawn::{self, SpawnError};
use crate::stop::{FirstTarget, Outcome, Stop, StopPlan};
use crate::sys::{self, ChildSetup, ChildState};
use crate::verdict::{ChildReport, Reason, Verdict};
use anyhow::Context;
use nix::poll::PollFlags;
use nix::unistd::Pid;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

/// The main child, from spawn to reap.
struct MainChild {
    pid: Option<Pid>,
    pidfd: Option<OwnedFd>,
    status: Option<ChildState>,
    spawn_error: Option<i32>,
}

impl MainChild {
    fn alive(&self) -> bool {
        self.pid.is_some() && self.status.is_none()
    }

    fn report(&self) -> ChildReport {
        ChildReport {
            pid: self.pid.map(Pid::as_raw),
            exit_code: match self.status {
                Some(ChildState::Exited(c)) => Some(c),
                _ => self.spawn_error,
            },
            signal: match self.status {
                Some(ChildState::Signaled(s)) => Some(s.name()),
                _ => None,
            },
        }
    }
}

enum State {
    Running,
    /// The child exited under `--when-child-exits wait`: watching the rest leave on its own.
    Watching(Stop),
    Stopping(Stop),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Token {
    Signals,
    Parent,
    Member(Pid),
}

/// Everything the run loop owns.
pub struct Supervisor {
    args: RunArgs,
    pid1: bool,
    me_pgid: Pid,
    signals: OwnedFd,
    parent: Option<OwnedFd>,
    child: MainChild,
    /// The terminal (fd 0) was handed to the child's group and must be handed back.
    tty: bool,
    started: Instant,
    reaped: u64,
    state: State,
    reason: Option<Reason>,
    trigger: Option<Sig>,
    errors: Vec<String>,
}

impl Supervisor {
    /// Sets up signals, the reaper role and the parent watch; nothing is started yet.
    pub fn new(args: RunArgs) -> anyhow::Result<Supervisor> {
        sys::occupy_closed_std_fds();
        let me = nix::unistd::getpid();
        let pid1 = me.as_raw() == 1;
        let signals = sys::signalfd_for_all().context("setting up signal handling (signalfd)")?;
        if !pid1 {
            sys::set_child_subreaper().context("becoming the child subreaper (PR_SET_CHILD_SUBREAPER)")?;
        }
        let parent = if args.parent_death { watch_parent()? } else { None };
        Ok(Supervisor {
            pid1,
            me_pgid: nix::unistd::getpgrp(),
            signals,
            parent,
            child: MainChild { pid: None, pidfd: None, status: None, spawn_error: None },
            tty: false,
            started: Instant::now(),
            reaped: 0,
            state: State::Running,
            reason: None,
            trigger: None,
            errors: Vec::new(),
            args,
        })
    }

    fn scope(&self) -> Scope {
        match (self.args.scope, self.child.pid) {
            (ScopeArg::Group, Some(pid)) => Scope::Group(pid),
            _ => Scope::Tree,
        }
    }

    /// Runs the command to the end and returns the verdict (not yet written).
    pub fn run(mut self) -> Verdict {
        self.start_child();
        if let Err(e) = self.event_loop() {
            // A failure inside vloer-run still ends in the stop and the verdict.
            msg::error(format_args!("{e:#}"));
            self.errors.push(format!("{e:#}"));
            self.begin_stop(Reason::ChildExited, None);
            while let Err(e) = self.finish_stop_blocking() {
                self.errors.push(format!("{e:#}"));
                break;
            }
        }
        self.conclude()
    }

    fn start_child(&mut self) {
        let foreground = !self.args.session
            && nix::unistd::isatty(std::io::stdin()).unwrap_or(false)
            && sys::tcgetpgrp(0) == Some(self.me_pgid);
        let setup = ChildSetup {
            new_session: self.args.session,
            foreground_tty: foreground.then_some(0),
            parent_death_signal: (!self.args.child_pdeathsig.is_none()).then_some(self.args.child_pdeathsig),
            parent: nix::unistd::getpid().as_raw(),
        };
        self.started = Instant::now();
        match spawn::spawn(&self.args.command, setup, |_| {}) {
            Ok(pid) => {
                msg::verbose(format_args!("started {:?} as pid {pid}", self.args.command[0]));
                self.child.pid = Some(pid);
                // The child stays our unreaped child until we wait for it, so its pid is stable.
                self.child.pidfd = sys::pidfd_open(pid).ok();
                if foreground {
                    // Both sides call tcsetpgrp so neither order of scheduling leaves a gap.
                    let _ = sys::tcsetpgrp(0, pid);
                    self.tty = true;
                }
            }
            Err(e) => {
                let (SpawnError::NotFound(err) | SpawnError::CannotExecute(err)) = &e;
                msg::error(format_args!("cannot run {:?}: {err}", self.args.command[0]));
                self.child.spawn_error = Some(e.exit_code());
                self.begin_stop(Reason::ChildExited, None);
            }
        }
    }

    fn timeout_deadline(&self) -> Option<Instant> {
        self.args.timeout.filter(|t| !t.is_zero()).map(|t| self.started + t)
    }

    fn event_loop(&mut self) -> anyhow::Result<()> {
        loop {
            let now = Instant::now();
            if let State::Stopping(stop) = &mut self.state {
                stop.progress(now);
                if stop.is_done() {
                    return Ok(());
                }
            }
            if let State::Watching(stop) = &mut self.state {
                stop.progress(now);
                if stop.is_done() {
                    return Ok(());
                }
            }
            let deadline = match &self.state {
                State::Running => self.timeout_deadline(),
                State::Watching(s) => earliest(self.timeout_deadline(), s.deadline()),
                State::Stopping(s) => s.deadline(),
            };
            let ready = {
                let mut interests = vec![Interest { token: Token::Signals, fd: self.signals.as_fd(), events: PollFlags::POLLIN }];
                if let (Some(fd), State::Running | State::Watching(_)) = (&self.parent, &self.state) {
                    interests.push(Interest { token: Token::Parent, fd: fd.as_fd(), events: PollFlags::POLLIN });
                }
                if let State::Stopping(s) | State::Watching(s) = &self.state {
                    interests.extend(s.pidfds().map(|(pid, fd)| Interest { token: Token::Member(pid), fd, events: PollFlags::POLLIN }));
                }
                event_loop::wait(&interests, deadline).context("waiting for events (poll)")?
            };
            let now = Instant::now();
            let mut exited = Vec::new();
            let mut got_signals = false;
            for (token, _) in &ready {
                match token {
                    Token::Signals => got_signals = true,
                    Token::Parent => {
                        msg::verbose(format_args!("parent process exited"));
                        self.parent = None;
                        self.begin_stop(Reason::ParentDied, None);
                    }
                    Token::Member(pid) => exited.push(*pid),
                }
            }
            if got_signals {
                let infos = sys::read_signals(self.signals.as_fd()).context("reading signals (signalfd)")?;
                let mut chld = false;
                // Signals first: a SIGCONT must be forwarded before a stale stop report is read.
                for info in infos {
                    if info.sig == Sig::CHLD {
                        chld = true;
                    } else {
                        self.on_signal(info.sig);
                    }
                }
                if chld {
                    self.reap();
                }
            }
            if let State::Stopping(s) | State::Watching(s) = &mut self.state {
                if !exited.is_empty() {
                    s.exited(&exited, now);
                }
            }
            if let Some(d) = self.timeout_deadline() {
                if now >= d && matches!(self.state, State::Running | State::Watching(_)) {
                    msg::verbose(format_args!("timeout after {:?}", self.args.timeout.unwrap_or_default()));
                    self.begin_stop(Reason::Timeout, None);
                }
            }
        }
    }

    fn on_signal(&mut self, sig: Sig) {
        msg::verbose(format_args!("received {sig}"));
        let out = self.translate(sig);
        let stopping = matches!(self.state, State::Stopping(_));
        if !stopping && self.args.stop_on.contains(&sig) {
            self.trigger = Some(sig);
            let first = (!out.is_none()).then(|| (self.forward_target(), out));
            self.begin_stop(Reason::Signal, first);
            return;
        }
        if sig == Sig::CONT && self.tty && sys::tcgetpgrp(0) == Some(self.me_pgid) {
            if let Some(pid) = self.child.pid {
                let _ = sys::tcsetpgrp(0, pid);
            }
        }
        self.deliver(out);
        if sig.is_job_control() && !self.pid1 {
            msg::verbose(format_args!("stopping vloer-run itself for {sig}"));
            sys::stop_self();
        }
    }

    /// Applies `--rewrite`; in a new session the job-control signals become SIGSTOP, since the
    /// kernel discards them for an orphaned process group.
    fn translate(&self, sig: Sig) -> Sig {
        if let Some(r) = self.args.rewrite.iter().find(|r| r.from == sig) {
            return r.to;
        }
        if self.args.session && sig.is_job_control() {
            return Sig::STOP;
        }
        sig
    }

    fn forward_target(&self) -> FirstTarget {
        let pid = self.child.pid.unwrap_or(Pid::from_raw(0));
        match self.args.forward_to {
            ForwardTo::Group => FirstTarget::Group(pid),
            ForwardTo::Child => FirstTarget::Process(pid),
        }
    }

    fn deliver(&self, sig: Sig) {
        let Some(pid) = self.child.pid else { return };
        if sig.is_none() {
            msg::verbose(format_args!("dropped (rewritten to 0)"));
            return;
        }
        let result = match self.args.forward_to {
            ForwardTo::Group => sys::killpg(pid, sig),
            ForwardTo::Child if self.child.alive() => match &self.child.pidfd {
                Some(fd) => sys::pidfd_send_signal(fd.as_fd(), sig),
                None => sys::kill(pid, sig),
            },
            ForwardTo::Child => return,
        };
        match result {
            Ok(()) => msg::verbose(format_args!("forwarded {sig} to {} {pid}", if self.args.forward_to == ForwardTo::Group { "group" } else { "pid" })),
            Err(e) => msg::verbose(format_args!("could not forward {sig}: {e}")),
        }
    }

    /// Reaps every child that has changed state; the main child's end may start the stop.
    fn reap(&mut self) {
        loop {
            let (pid, state) = match sys::wait_any() {
                Ok(Some(x)) => x,
                Ok(None) => break,
                Err(e) => {
                    self.errors.push(format!("waitpid: {e}"));
                    break;
                }
            };
            let is_main = Some(pid) == self.child.pid;
            match state {
                ChildState::Exited(_) | ChildState::Signaled(_) if is_main => {
                    msg::verbose(format_args!("child {pid} ended: {state:?}"));
                    self.child.status = Some(state);
                    self.child.pidfd = None;
                    if matches!(self.state, State::Running) {
                        match self.args.when_child_exits {
                            WhenChildExits::Stop => self.begin_stop(Reason::ChildExited, None),
                            WhenChildExits::Wait => {
                                self.reason = Some(Reason::ChildExited);
                                self.state = State::Watching(Stop::watch(self.plan(None), Instant::now()));
                            }
                        }
                    }
                }
                ChildState::Exited(_) | ChildState::Signaled(_) => {
                    self.reaped += 1;
                    msg::verbose(format_args!("reaped {pid}: {state:?}"));
                }
                ChildState::Stopped(sig) if is_main && sig.is_job_control() && !self.pid1 => {
                    // Only stop along if the child is still stopped: a SIGCONT may have been
                    // forwarded since this report was queued.
                    let still = crate::proctable::read(pid).ok().flatten().is_some_and(|p| p.state == "T");
                    if still && matches!(self.state, State::Running) {
                        msg::verbose(format_args!("child stopped by {sig}; stopping vloer-run too"));
                        sys::stop_self();
                    }
                }
                ChildState::Stopped(_) | ChildState::Continued => {}
            }
        }
    }

    fn plan(&self, first: Option<(FirstTarget, Sig)>) -> StopPlan {
        StopPlan {
            scope: self.scope(),
            stop_signal: self.args.stop_signal,
            grace: self.args.grace,
            kill_timeout: self.args.kill_timeout,
            first,
        }
    }

    /// Starts the stop unless one is under way: the first reason wins.
    fn begin_stop(&mut self, reason: Reason, first: Option<(FirstTarget, Sig)>) {
        if matches!(self.state, State::Stopping(_)) {
            return;
        }
        // A watch after the child's exit keeps its reason unless something else ends it first.
        if !(matches!(self.state, State::Watching(_)) && reason == Reason::ChildExited) {
            self.reason = Some(reason);
        }
        if self.reason.is_none() {
            self.reason = Some(reason);
        }
        msg::verbose(format_args!("stopping ({reason:?})"));
        self.state = State::Stopping(Stop::begin(self.plan(first), Instant::now()));
    }

    /// Drives a stop to its end without the event loop (used after an internal failure).
    fn finish_stop_blocking(&mut self) -> anyhow::Result<()> {
        loop {
            let State::Stopping(stop) = &mut self.state else { return Ok(()) };
            stop.progress(Instant::now());
            if stop.is_done() {
                return Ok(());
            }
            let wait = stop.deadline().map(|d| d.saturating_duration_since(Instant::now())).unwrap_or(Duration::ZERO);
            std::thread::sleep(wait.min(Duration::from_millis(20)));
            self.reap();
        }
    }

    /// Step 4 and the verdict: confirm, reap what is left, hand the terminal back.
    fn conclude(mut self) -> Verdict {
        let state = std::mem::replace(&mut self.state, State::Running);
        let outcome = match state {
            State::Stopping(s) | State::Watching(s) => s.finish(Instant::now()),
            State::Running => Outcome { error: Some("the run ended without a stop".into()), ..Outcome::default() },
        };
        // The main child and other dead children are zombies now; collect their status.
        self.reap();
        self.hand_back_tty();
        let mut errors = self.errors.clone();
        errors.extend(outcome.error.clone());
        let error = (!errors.is_empty()).then(|| errors.join("; "));
        let stopped = outcome.survivors.is_empty() && error.is_none();
        let reason = self.reason.unwrap_or(Reason::ChildExited);
        let exit_code = self.exit_code(stopped, reason);
        Verdict {
            stopped,
            survivors: outcome.survivors,
            survivors_omitted: 0,
            reason,
            signal: (reason == Reason::Signal).then(|| self.trigger.map(Sig::name)).flatten(),
            child: self.child.report(),
            exit_code,
            scope: match self.args.scope {
                ScopeArg::Tree => "tree",
                ScopeArg::Group => "group",
            },
            sent: outcome.sent,
            reaped: self.reaped,
            elapsed_ms: outcome.elapsed.as_millis() as u64,
            error,
            schema: 1,
        }
    }

    fn exit_code(&self, stopped: bool, reason: Reason) -> i32 {
        if !stopped {
            return 125;
        }
        if reason == Reason::Timeout && !self.args.preserve_status {
            return 124;
        }
        match (self.child.status, self.child.spawn_error) {
            (Some(ChildState::Exited(c)), _) if self.args.success_exit.contains(&(c as u8)) => 0,
            (Some(ChildState::Exited(c)), _) => c,
            (Some(ChildState::Signaled(s)), _) => 128 + s.raw(),
            (_, Some(code)) => code,
            // Confirmed, yet the child's status was never collected: that is not a proof.
            _ => 125,
        }
    }

    fn hand_back_tty(&self) {
        if !self.tty {
            return;
        }
        let Some(fg) = sys::tcgetpgrp(0) else { return };
        let group_gone = sys::killpg(fg, Sig::NONE).is_err_and(|e| e.raw_os_error() == Some(libc::ESRCH));
        if Some(fg) == self.child.pid || group_gone {
            if let Err(e) = sys::tcsetpgrp(0, self.me_pgid) {
                msg::verbose(format_args!("could not take the terminal back: {e}"));
            }
        }
    }
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A pidfd on our parent, readable when it exits.
fn watch_parent() -> anyhow::Result<Option<OwnedFd>> {
    let ppid = nix::unistd::getppid();
    if ppid.as_raw() <= 1 {
        msg::warn(format_args!("--parent-death: the parent is already gone or is init; nothing to watch"));
        return Ok(None);
    }
    match sys::pidfd_open(ppid) {
        Ok(fd) => {
            if nix::unistd::getppid() != ppid {
                anyhow::bail!("--parent-death: the parent exited before vloer-run started");
            }
            Ok(Some(fd))
        }
        Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
            msg::warn(format_args!("--parent-death needs pidfd_open (Linux 5.3); this kernel has none, so the parent is not watched"));
            Ok(None)
        }
        Err(e) => Err(e).context("--parent-death: watching the parent process"),
    }
}
