//! The run: start the child, reap, forward, and turn every way the run can end into one stop and
//! one verdict.

use crate::cli::{ForwardTo, RunArgs, ScopeArg, StopOrder, WhenChildExits};
use crate::control::proto::{self, ErrorCode};
use crate::control::{self, ConnId, Request};
use crate::event_loop::{self, Interest};
use crate::exec::{Exec, ExecEnd};
use crate::exit::{self, Exit};
use crate::forward;
use crate::msg;
use crate::proctable::Scope;
use crate::signal::Sig;
use crate::spawn::{self, SpawnError};
use crate::stop::{FirstTarget, FirstWord, Outcome, Stop, StopPlan};
use crate::sys::{self, ChildSetup, ChildState};
use crate::terminal::Terminal;
use crate::verdict::{ChildReport, Reason, Verdict};
use anyhow::Context;
use nix::poll::PollFlags;
use nix::unistd::Pid;
use std::collections::BTreeMap;
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
    Control(control::Token),
    ExecMember(ConnId, Pid),
}

/// Everything the run loop owns.
pub struct Supervisor {
    args: RunArgs,
    pid1: bool,
    terminal: Terminal,
    signals: OwnedFd,
    parent: Option<OwnedFd>,
    child: MainChild,
    started: Instant,
    reaped: u64,
    state: State,
    reason: Option<Reason>,
    trigger: Option<Sig>,
    errors: Vec<String>,
    control: Option<control::Server>,
    execs: BTreeMap<ConnId, Exec>,
    /// Control clients waiting for the verdict of a stop they asked for.
    stop_waiters: Vec<ConnId>,
    grace_override: Option<Duration>,
    /// A stop (of the run or of an exec) was not confirmed: no new execs.
    unconfirmed: bool,
    /// What finished execs' stops sent and left behind, for the run's verdict.
    exec_sent: BTreeMap<String, u64>,
    exec_survivors: Vec<crate::proctable::Proc>,
}

/// What the run hands back to main: the verdict and the clients still owed it.
pub struct Ended {
    pub verdict: Verdict,
    pub control: Option<control::Server>,
    pub stop_waiters: Vec<ConnId>,
    /// End by this signal once the verdict is written, as the child ended (see `exit`).
    pub by_signal: Option<Sig>,
}

impl Supervisor {
    /// Sets up signals, the reaper role and the parent watch; nothing is started yet.
    pub fn new(args: RunArgs) -> anyhow::Result<Supervisor> {
        sys::raise_nofile_limit();
        let pid1 = sys::own_pid().as_raw() == 1;
        let signals = sys::signalfd_for_all().context("setting up signal handling (signalfd)")?;
        if !pid1 {
            sys::set_child_subreaper()
                .context("becoming the child subreaper (PR_SET_CHILD_SUBREAPER)")?;
        }
        let parent = if args.parent_death {
            watch_parent()?
        } else {
            None
        };
        let control = match &args.control {
            Some(path) => Some(control::Server::bind(path)?),
            None => None,
        };
        Ok(Supervisor {
            control,
            execs: BTreeMap::new(),
            stop_waiters: Vec::new(),
            grace_override: None,
            unconfirmed: false,
            exec_sent: BTreeMap::new(),
            exec_survivors: Vec::new(),
            pid1,
            terminal: Terminal::decide(
                args.session,
                args.scope == ScopeArg::Group
                    || args
                        .rewrite
                        .iter()
                        .any(|r| Terminal::rewrites_terminal_signal(r.from)),
            ),
            signals,
            parent,
            child: MainChild {
                pid: None,
                pidfd: None,
                status: None,
                spawn_error: None,
            },
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
    pub fn run(mut self) -> Ended {
        self.start_child();
        // The run no longer needs the caller's working directory, and holding it would keep its
        // mount busy for as long as the run lasts (`umount`: busy), as dumb-init knows.
        if let Err(e) = std::env::set_current_dir("/") {
            msg::verbose(format_args!("could not leave the working directory: {e}"));
        }
        // A failure inside vloer-run still ends in the stop and the verdict, driven by the same
        // loop: the stop starts (the run's own reason stays if one was under way) and the loop
        // goes on. A second failure leaves the stop where it is: the verdict then says false.
        for attempt in 0..2 {
            match self.event_loop() {
                Ok(()) => break,
                Err(e) => {
                    msg::error(format_args!("{e:#}"));
                    self.errors.push(format!("{e:#}"));
                    if attempt == 0 {
                        self.begin_stop(Reason::Error, None);
                    }
                }
            }
        }
        self.conclude()
    }

    fn start_child(&mut self) {
        let setup = ChildSetup {
            keep_group: self.terminal.shared_group,
            ..self.child_setup(self.terminal.give_at_start)
        };
        self.started = Instant::now();
        match spawn::spawn_main(&self.args.command, setup) {
            Ok(pid) => {
                msg::verbose(format_args!(
                    "started {} as pid {pid}",
                    exit::command_words(&self.args.command[..1])
                ));
                self.child.pid = Some(pid);
                // The child stays our unreaped child until we wait for it, so its pid is stable.
                self.child.pidfd = sys::pidfd_open(pid).ok();
                crate::proctable::warm_up();
                if self.terminal.give_at_start {
                    // Both sides call tcsetpgrp so neither order of scheduling leaves a gap.
                    let _ = sys::tcsetpgrp(0, pid);
                }
            }
            Err(e) => {
                let (SpawnError::NotFound(err) | SpawnError::CannotExecute(err)) = &e;
                msg::error(format_args!(
                    "cannot run {}: {err}",
                    exit::command_words(&self.args.command[..1])
                ));
                self.child.spawn_error = Some(e.exit_code());
                self.begin_stop(Reason::ChildExited, None);
            }
        }
    }

    fn child_setup(&self, foreground: bool) -> ChildSetup {
        ChildSetup {
            new_session: self.args.session,
            keep_group: false,
            controlling_tty: false,
            foreground_tty: foreground.then_some(0),
            parent_death_signal: (!self.args.child_pdeathsig.is_none())
                .then_some(self.args.child_pdeathsig),
            parent: sys::own_pid().as_raw(),
        }
    }

    /// The main child's process group.
    fn child_group(&self) -> Pid {
        if self.terminal.shared_group {
            return self.terminal.me_pgid;
        }
        self.child.pid.unwrap_or(Pid::from_raw(0))
    }

    fn timeout_deadline(&self) -> Option<Instant> {
        self.args
            .timeout
            .filter(|t| !t.is_zero())
            .map(|t| self.started + t)
    }

    fn main_done(&self) -> bool {
        matches!(&self.state, State::Stopping(s) | State::Watching(s) if s.is_done())
    }

    fn event_loop(&mut self) -> anyhow::Result<()> {
        loop {
            let now = Instant::now();
            if let State::Stopping(stop) | State::Watching(stop) = &mut self.state {
                stop.progress(now);
            }
            self.progress_execs(now);
            // Under `--scope tree` the run's own stop covered every exec's processes, so an exec
            // that only watches them does not hold the run; `conclude` reports it.
            if self.main_done() && self.execs.values().all(|e| e.watch_only()) {
                return Ok(());
            }
            let mut deadline = match &self.state {
                State::Running => self.timeout_deadline(),
                State::Watching(s) => earliest(self.timeout_deadline(), s.deadline()),
                State::Stopping(s) => s.deadline(),
            };
            for e in self.execs.values() {
                deadline = earliest(deadline, e.deadline());
            }
            if let Some(c) = &self.control {
                deadline = earliest(deadline, c.deadline());
            }
            let ready = {
                let mut interests = vec![Interest {
                    token: Token::Signals,
                    fd: self.signals.as_fd(),
                    events: PollFlags::POLLIN,
                }];
                if let (Some(fd), State::Running | State::Watching(_)) = (&self.parent, &self.state)
                {
                    interests.push(Interest {
                        token: Token::Parent,
                        fd: fd.as_fd(),
                        events: PollFlags::POLLIN,
                    });
                }
                if let State::Stopping(s) | State::Watching(s) = &self.state {
                    interests.extend(s.pidfds().map(|(pid, fd)| Interest {
                        token: Token::Member(pid),
                        fd,
                        events: PollFlags::POLLIN,
                    }));
                }
                for (id, e) in &self.execs {
                    if let Some(s) = &e.stop {
                        interests.extend(s.pidfds().map(|(pid, fd)| Interest {
                            token: Token::ExecMember(*id, pid),
                            fd,
                            events: PollFlags::POLLIN,
                        }));
                    }
                }
                if let Some(c) = &self.control {
                    interests.extend(c.interests().into_iter().map(|(t, fd, events)| Interest {
                        token: Token::Control(t),
                        fd,
                        events,
                    }));
                }
                event_loop::wait(&interests, deadline).context("waiting for events (poll)")?
            };
            let now = Instant::now();
            let mut exited = Vec::new();
            let mut exec_exited: BTreeMap<ConnId, Vec<Pid>> = BTreeMap::new();
            let mut got_signals = false;
            let mut control_events = Vec::new();
            for (token, revents) in &ready {
                match token {
                    Token::Signals => got_signals = true,
                    Token::Parent => {
                        msg::verbose(format_args!("parent process exited"));
                        self.parent = None;
                        self.begin_stop(Reason::ParentDied, None);
                    }
                    Token::Member(pid) => exited.push(*pid),
                    Token::ExecMember(id, pid) => exec_exited.entry(*id).or_default().push(*pid),
                    Token::Control(t) => {
                        if let Some(c) = &mut self.control {
                            control_events.extend(c.on_ready(*t, *revents, now));
                        }
                    }
                }
            }
            if got_signals {
                let infos = sys::read_signals(self.signals.as_fd())
                    .context("reading signals (signalfd)")?;
                let mut chld = false;
                // Signals first: a SIGCONT must be forwarded before a stale stop report is read.
                for info in infos {
                    if info.sig == Sig::CHLD {
                        chld = true;
                    } else if info.is_own_write_error() {
                        // Not even a -v line: stderr may be the closed pipe, and the line would
                        // raise the next one.
                    } else {
                        msg::verbose(format_args!(
                            "received {} from pid {}",
                            info.sig, info.sender
                        ));
                        self.on_signal(info);
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
            for (id, pids) in exec_exited {
                if let Some(stop) = self.execs.get_mut(&id).and_then(|e| e.stop.as_mut()) {
                    stop.exited(&pids, now);
                }
            }
            for event in control_events {
                self.on_control(event);
            }
            if let Some(c) = &mut self.control {
                c.expire(now);
            }
            let plan = self.plan(None);
            for e in self.execs.values_mut() {
                if e.stop.is_none() && e.deadline().is_some_and(|d| now >= d) {
                    msg::verbose(format_args!("exec {} timed out", e.pid));
                    e.begin_stop(ExecEnd::Timeout, plan, false);
                }
            }
            if let Some(d) = self.timeout_deadline() {
                if now >= d && matches!(self.state, State::Running | State::Watching(_)) {
                    msg::verbose(format_args!(
                        "timeout after {}",
                        humantime::format_duration(self.args.timeout.unwrap_or_default())
                    ));
                    self.begin_stop(Reason::Timeout, None);
                }
            }
        }
    }

    /// Moves exec stops on, and reports every finished exec to its client.
    fn progress_execs(&mut self, now: Instant) {
        let mut finished = Vec::new();
        for (id, e) in self.execs.iter_mut() {
            if let Some(s) = &mut e.stop {
                s.progress(now);
                if s.is_done() {
                    finished.push(*id);
                }
            }
        }
        if !finished.is_empty() {
            // A pidfd can report an exit a moment before the SIGCHLD for it is queued; the
            // zombie is already there, so collect its status before reporting.
            self.reap();
        }
        for id in finished {
            self.finish_exec(id, now);
        }
    }

    fn finish_exec(&mut self, id: ConnId, now: Instant) {
        let Some(mut e) = self.execs.remove(&id) else {
            return;
        };
        let Some(stop) = e.stop.take() else { return };
        let outcome = stop.finish(now, false);
        let report = e.report(&outcome);
        msg::verbose(format_args!(
            "exec {} ended: status {} ({})",
            e.pid, report.status, report.reason
        ));
        for (k, v) in &outcome.sent {
            *self.exec_sent.entry(k.clone()).or_default() += v;
        }
        if !report.stopped {
            self.unconfirmed = true;
            self.exec_survivors.extend(outcome.survivors);
            if let Some(err) = &outcome.error {
                self.errors.push(format!("exec {}: {err}", e.pid));
            }
        }
        if let Some(c) = &mut self.control {
            let line = serde_json::json!({ "exit": report }).to_string() + "\n";
            c.send(id, &line, true);
        }
    }

    fn on_control(&mut self, event: control::Event) {
        match event {
            control::Event::Request(id, Request::Stop { grace }) => {
                self.stop_waiters.push(id);
                if !matches!(self.state, State::Stopping(_)) {
                    self.grace_override = grace;
                    msg::verbose(format_args!("stop requested on the control socket"));
                    self.begin_stop(Reason::Control, None);
                }
            }
            control::Event::Request(id, Request::Status) => {
                let line = self.status_json().to_string() + "\n";
                if let Some(c) = &mut self.control {
                    c.send(id, &line, true);
                }
            }
            control::Event::Request(id, Request::Exec(req)) => {
                let refusal = if self.unconfirmed {
                    Some((
                        ErrorCode::StopUnconfirmed,
                        "a stop in this run was not confirmed; no new execs".to_string(),
                    ))
                } else if !matches!(self.state, State::Running) {
                    Some((
                        ErrorCode::Stopping,
                        "the run is stopping; no new execs".to_string(),
                    ))
                } else {
                    None
                };
                // An exec gets its own process group even when the main child has a session.
                let setup = ChildSetup {
                    new_session: false,
                    ..self.child_setup(false)
                };
                let reply = match refusal {
                    Some((code, text)) => Err(proto::error_line(code, &text)),
                    None => match Exec::start(id, req, setup) {
                        Ok(e) => {
                            msg::verbose(format_args!(
                                "exec {} started as pid {}",
                                exit::command_words(&e.argv),
                                e.pid
                            ));
                            let line = serde_json::json!({ "exec": { "pid": e.pid.as_raw() } })
                                .to_string()
                                + "\n";
                            self.execs.insert(id, e);
                            Ok(line)
                        }
                        Err(err) => {
                            let (SpawnError::NotFound(io) | SpawnError::CannotExecute(io)) = &err;
                            Err(proto::error_reply(
                                ErrorCode::SpawnFailed,
                                &format!("cannot run: {io}"),
                                Some(err.exit_code()),
                            ))
                        }
                    },
                };
                if let Some(c) = &mut self.control {
                    match reply {
                        Ok(line) => c.send(id, &line, false),
                        Err(line) => c.send(id, &line, true),
                    }
                }
            }
            control::Event::Cancel(id) => {
                let plan = self.plan(None);
                if let Some(e) = self.execs.get_mut(&id) {
                    msg::verbose(format_args!("exec {} cancelled by its client", e.pid));
                    e.begin_stop(ExecEnd::Client, plan, false);
                }
            }
        }
    }

    fn status_json(&self) -> serde_json::Value {
        let processes: Vec<serde_json::Value> = match crate::proctable::scan(self.scope(), &Default::default()) {
            Ok(procs) => procs
                .into_iter()
                .filter(crate::proctable::Proc::is_live)
                .map(|p| {
                    serde_json::json!({
                        "pid": p.pid.as_raw(), "ppid": p.ppid.as_raw(), "pgid": p.pgid.as_raw(),
                        "state": p.state, "comm": p.comm, "cmdline": crate::proctable::cmdline(p.pid),
                    })
                })
                .collect(),
            Err(e) => return serde_json::json!({ "error": e.0, "code": "proc_unreadable" }),
        };
        let execs: Vec<serde_json::Value> = self
            .execs
            .values()
            .map(|e| {
                serde_json::json!({
                    "pid": e.pid.as_raw(),
                    "argv": e.argv.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>(),
                    "elapsed_ms": e.started.elapsed().as_millis() as u64,
                    "state": if e.stop.is_some() { "stopping" } else { "running" },
                })
            })
            .collect();
        serde_json::json!({
            "pid": sys::own_pid().as_raw(),
            "state": match self.state { State::Running => "running", State::Watching(_) => "waiting", State::Stopping(_) => "stopping" },
            "scope": match self.args.scope { ScopeArg::Tree => "tree", ScopeArg::Group => "group" },
            "child": {
                "pid": self.child.pid.map(Pid::as_raw),
                "alive": self.child.alive(),
                "exit_code": self.child.report().exit_code,
                "signal": self.child.report().signal,
            },
            "uptime_ms": self.started.elapsed().as_millis() as u64,
            "processes": processes,
            "execs": execs,
            "schema": 1,
        })
    }

    fn on_signal(&mut self, info: sys::SigInfo) {
        let sig = info.sig;
        let view = forward::View {
            ignored_at_start: sys::ignored_at_start(sig),
            from_terminal_to_shared_group: self.terminal.shared_group && info.from_kernel,
            stopping: matches!(self.state, State::Stopping(_)),
            stops_the_run: self.args.stop_on.contains(&sig),
            rewrite: &self.args.rewrite,
            session: self.args.session,
            pid1: self.pid1,
        };
        match forward::decide(sig, view) {
            // The caller started us with it ignored (nohup, a background job's SIGINT): it asked
            // for the signal to be ignored. Being blocked for the signalfd, it still reaches us,
            // where a SIG_IGN alone would drop it.
            forward::Action::Ignore => msg::verbose(format_args!(
                "{sig} was ignored when vloer-run started; not forwarded"
            )),
            forward::Action::BeginStop {
                forwarded,
                delivered,
            } => {
                self.trigger = Some(sig);
                let first = (!forwarded.is_none() || delivered)
                    .then(|| (self.forward_target(), forwarded, sig));
                self.begin_stop(Reason::Signal, first);
            }
            forward::Action::Forward {
                sig: out,
                stop_self,
            } => {
                if sig == Sig::CONT {
                    // `fg`: the shell gave the terminal to our group; it belongs to the child's.
                    self.give_terminal_to(self.child_group());
                }
                if let Some(target) = self.delivery_target() {
                    forward::deliver(target, out);
                }
                if stop_self {
                    msg::verbose(format_args!("stopping vloer-run itself for {sig}"));
                    sys::stop_self(sig);
                }
            }
        }
    }

    fn forward_target(&self) -> FirstTarget {
        match self.args.forward_to {
            ForwardTo::Group => FirstTarget::Group(self.child_group()),
            ForwardTo::Child => FirstTarget::Process(self.child.pid.unwrap_or(Pid::from_raw(0))),
        }
    }

    /// Where a forwarded signal goes now; None when there is nobody to send it to.
    fn delivery_target(&self) -> Option<forward::Target<'_>> {
        let pid = self.child.pid?;
        Some(match self.args.forward_to {
            // The group is also the caller's: only the run's own members get it.
            ForwardTo::Group if self.terminal.shared_group => {
                forward::Target::GroupInTree(self.terminal.me_pgid)
            }
            ForwardTo::Group if self.child.alive() => forward::Target::ChildGroup(pid),
            // Reaped, the number is free and may already name someone else's group.
            ForwardTo::Group => forward::Target::GroupInTree(pid),
            ForwardTo::Child if self.child.alive() => {
                forward::Target::Child(pid, self.child.pidfd.as_ref().map(|fd| fd.as_fd()))
            }
            ForwardTo::Child => return None,
        })
    }

    /// Reaps every child that has changed state; the main child's end may start the stop.
    fn reap(&mut self) {
        // Stop reports are only acted on for the main child; one ask per batch is enough, since
        // a report queued after it comes with its own SIGCHLD.
        let mut job = self.child.pid.filter(|_| self.child.status.is_none());
        loop {
            let (pid, state) = match sys::wait_any(job.take()) {
                Ok(Some(x)) => x,
                Ok(None) => break,
                Err(e) => {
                    self.errors.push(format!("waitpid: {e}"));
                    break;
                }
            };
            let is_main = Some(pid) == self.child.pid;
            let plan = self.plan(None);
            if let Some(e) = self.execs.values_mut().find(|e| e.pid == pid) {
                if matches!(state, ChildState::Exited(_) | ChildState::Signaled(_)) {
                    self.reaped += 1;
                    e.status = Some(state);
                    msg::verbose(format_args!("exec {pid} ended: {state}"));
                    e.begin_stop(ExecEnd::Exited, plan, false);
                }
                continue;
            }
            match state {
                ChildState::Exited(_) | ChildState::Signaled(_) if is_main => {
                    msg::verbose(format_args!("child {pid} ended: {state}"));
                    self.child.status = Some(state);
                    self.child.pidfd = None;
                    if let State::Stopping(s) = &mut self.state {
                        s.release(Instant::now());
                    }
                    // A reason means a stop already ran: `conclude` puts the state back to Running
                    // and reaps once more, and a child whose exit is only collected then (its
                    // pidfd told the stop before SIGCHLD was read) must not start a second stop
                    // that renames the first one's reason (timeout or signal became child_exited).
                    if matches!(self.state, State::Running) && self.reason.is_none() {
                        match self.args.when_child_exits {
                            WhenChildExits::Stop => self.begin_stop(Reason::ChildExited, None),
                            WhenChildExits::Wait => {
                                self.reason = Some(Reason::ChildExited);
                                self.state =
                                    State::Watching(Stop::watch(self.plan(None), Instant::now()));
                                self.stop_execs();
                            }
                        }
                    }
                }
                ChildState::Exited(_) | ChildState::Signaled(_) => {
                    self.reaped += 1;
                    msg::verbose(format_args!("reaped {pid}: {state}"));
                }
                ChildState::Stopped(sig) if is_main && sig.is_job_control() && !self.pid1 => {
                    // Only stop along if the child is still stopped: a SIGCONT may have been
                    // forwarded since this report was queued.
                    let still = crate::proctable::read(pid)
                        .ok()
                        .flatten()
                        .filter(|p| p.state == "T");
                    if let (Some(p), State::Running) = (still, &self.state) {
                        // Stopped for reading or setting the terminal while our group has it: a
                        // job brought to the front by `fg` while it ran (no SIGCONT then). It only
                        // lacked the terminal, so hand it over and continue its group (the kernel
                        // stopped all of it) instead of stopping the job.
                        if sig != Sig::TSTP && self.give_terminal_to(p.pgid) {
                            msg::verbose(format_args!("child stopped by {sig} while vloer-run has the terminal; handing it over"));
                            let _ = sys::killpg(p.pgid, Sig::CONT);
                            continue;
                        }
                        msg::verbose(format_args!(
                            "child stopped by {sig}; stopping vloer-run too"
                        ));
                        sys::stop_self(sig);
                    }
                }
                ChildState::Stopped(sig)
                    if is_main && sig.is_job_control() && self.pid1 && self.terminal.handing() =>
                {
                    // As PID 1 there is no shell to `fg` the job: a Ctrl-Z would hang the
                    // terminal for good (dumb-init#184), so the child is continued at once.
                    msg::verbose(format_args!(
                        "child stopped by {sig}; as PID 1 nobody could resume it, so continuing it"
                    ));
                    if let Some(pgid) = crate::proctable::read(pid).ok().flatten().map(|p| p.pgid) {
                        let _ = sys::killpg(pgid, Sig::CONT);
                    }
                }
                ChildState::Stopped(_) | ChildState::Continued => {}
            }
        }
    }

    fn plan(&self, first: Option<(FirstTarget, Sig, Sig)>) -> StopPlan {
        StopPlan {
            scope: self.scope(),
            stop_signal: self.args.stop_signal,
            grace: self.grace_override.unwrap_or(self.args.grace),
            kill_timeout: self.args.kill_timeout,
            first,
            first_word: match (self.args.stop_order, self.child.pid) {
                (StopOrder::Child, Some(child)) if self.child.alive() => Some(FirstWord {
                    child,
                    group: self.child_group(),
                }),
                _ => None,
            },
        }
    }

    /// Starts the stop unless one is under way: the first reason wins.
    fn begin_stop(&mut self, reason: Reason, first: Option<(FirstTarget, Sig, Sig)>) {
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
        msg::verbose(format_args!("stopping: {}", reason.words()));
        self.state = State::Stopping(Stop::begin(self.plan(first), Instant::now()));
        self.stop_execs();
    }

    /// The run is ending: every exec stops too. Under `--scope tree` the run's own stop already
    /// signals them, so their stops only watch.
    fn stop_execs(&mut self) {
        let plan = self.plan(None);
        let watch = self.args.scope == ScopeArg::Tree && matches!(self.state, State::Stopping(_));
        for e in self.execs.values_mut() {
            e.begin_stop(ExecEnd::RunEnded, plan, watch);
        }
    }

    /// Step 4 and the verdict: confirm, reap what is left, hand the terminal back.
    fn conclude(mut self) -> Ended {
        // Execs still stopping when the run ends are confirmed and reported now.
        let ids: Vec<ConnId> = self.execs.keys().copied().collect();
        // Only a watch (no signal, no wait) for those that have none yet: the run is over.
        let plan = StopPlan {
            grace: Duration::ZERO,
            kill_timeout: Duration::ZERO,
            ..self.plan(None)
        };
        for id in ids {
            if let Some(e) = self.execs.get_mut(&id) {
                e.begin_stop(ExecEnd::RunEnded, plan, true);
            }
            self.finish_exec(id, Instant::now());
        }
        let state = std::mem::replace(&mut self.state, State::Running);
        // The main child and other dead children are zombies now; collect their status. Then the
        // kernel's own word, where it has one, is the proof; /proc only names survivors.
        let empty = self.args.scope == ScopeArg::Tree && self.tree_is_empty();
        let outcome = match state {
            State::Stopping(s) | State::Watching(s) => s.finish(Instant::now(), empty),
            State::Running => Outcome {
                error: Some("the run ended without a stop".into()),
                ..Outcome::default()
            },
        };
        self.terminal.hand_back(self.child.pid);
        let mut errors = self.errors.clone();
        errors.extend(outcome.error.clone());
        let error = (!errors.is_empty()).then(|| errors.join("; "));
        let mut survivors = outcome.survivors;
        for p in std::mem::take(&mut self.exec_survivors) {
            if !survivors.iter().any(|q| q.pid == p.pid)
                && crate::proctable::read(p.pid)
                    .ok()
                    .flatten()
                    .is_some_and(|q| q.is_live() && q.starttime == p.starttime)
            {
                survivors.push(p);
            }
        }
        let mut sent = outcome.sent;
        for (k, v) in std::mem::take(&mut self.exec_sent) {
            *sent.entry(k).or_default() += v;
        }
        let stopped = survivors.is_empty() && error.is_none();
        let reason = self.reason.unwrap_or(Reason::ChildExited);
        let exit = self.exit(stopped, reason);
        let verdict = Verdict {
            stopped,
            survivors,
            survivors_omitted: 0,
            reason,
            signal: (reason == Reason::Signal)
                .then(|| self.trigger.map(Sig::name))
                .flatten(),
            child: self.child.report(),
            exit_code: exit.code,
            scope: match self.args.scope {
                ScopeArg::Tree => "tree",
                ScopeArg::Group => "group",
            },
            sent,
            reaped: self.reaped,
            elapsed_ms: outcome.elapsed.as_millis() as u64,
            error,
            schema: 1,
        };
        Ended {
            verdict,
            control: self.control.take(),
            stop_waiters: std::mem::take(&mut self.stop_waiters),
            by_signal: exit.by_signal,
        }
    }

    /// Step 4 for `--scope tree`: reaps every zombie, then asks the kernel whether vloer-run has
    /// any child left. None means no descendant exists (each would be a child of vloer-run or of
    /// one of its children), an O(1) proof that no /proc listing can get wrong.
    fn tree_is_empty(&mut self) -> bool {
        // Bounded: each turn reaps what the kernel showed; a tree still making zombies is alive.
        for _ in 0..64 {
            self.reap();
            match sys::children_left() {
                Ok(sys::Children::None) => return true,
                Ok(sys::Children::Zombies) => continue,
                Ok(sys::Children::Live) => return false,
                Err(e) => {
                    self.errors
                        .push(format!("asking the kernel for children (waitid): {e}"));
                    return false;
                }
            }
        }
        false
    }

    fn exit(&self, stopped: bool, reason: Reason) -> Exit {
        Exit::of(exit::Facts {
            stopped,
            reason,
            child: self.child.status,
            spawn_error: self.child.spawn_error,
            preserve_status: self.args.preserve_status,
            success_exit: &self.args.success_exit,
            pid1: self.pid1,
        })
    }

    /// Makes `pgid` (the main child's group) the terminal's foreground group if ours is and the
    /// child lives; true when it now is.
    fn give_terminal_to(&self, pgid: Pid) -> bool {
        self.child.alive() && self.terminal.give_to(pgid)
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
        msg::warn(format_args!(
            "--parent-death: the parent is already gone or is init; nothing to watch"
        ));
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
