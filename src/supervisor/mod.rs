//! The run: start the child, reap, forward, and turn every way the run can end into one stop and
//! one verdict.

mod child;
mod conclude;
mod deliver;
mod events;
mod reap;
mod requests;
mod signals;

use crate::cli::{ForwardTo, StopOrder, WhenChildExits};
use crate::config::RunConfig;
use crate::control::proto::{self, ErrorCode};
use crate::control::{self, ConnId, Request};
use crate::exec::{Exec, ExecEnd};
use crate::exit::{self, Exit};
use crate::forward;
use crate::msg;
use crate::reactor::{Key, Reactor, Watched};
use crate::scope::{self, Scope};
use crate::signal::Sig;
use crate::spawn::{self, SpawnError};
use crate::stop::ChildGroup;
use crate::stop::{
    ChildFirst, Forwarded, ForwardedTo, Outcome, Reaped, Stop, StopPlan, SweepOutcome, SweepStop,
    Wake,
};
use crate::sys::{self, ChildSetup, ChildState, Waited};
use crate::terminal::Terminal;
use crate::verdict::{Reason, Sink, Verdict};
use anyhow::Context;
use child::{watch_parent, MainChild};
use nix::sys::epoll::EpollFlags;
use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

enum State {
    Running,
    /// The child exited under `--when-child-exits wait`: waiting for the rest to leave on its
    /// own (a stop that only watches).
    Waiting(Stop),
    Stopping(Stop),
}

/// The owner of the run's own stop in `Key::Member` (execs are owners 1 and up, their ids).
const RUN: u64 = 0;

/// Everything the run loop owns.
pub struct Supervisor {
    config: RunConfig,
    pid1: bool,
    terminal: Terminal,
    sources: Sources,
    child: MainChild,
    started: Instant,
    state: State,
    record: Record,
    requests: Requests,
    execs: Execs,
    /// What the reaps since the loop's turn began did, for the stops (see `Stop::progress`).
    turn_reaped: Reaped,
    /// With `--sweep`: the folder sweep, from the stop's step 1 (or the end of a watch) on.
    sweep: Option<SweepStop>,
}

/// The reactor, and what wakes the run besides its members and clients: signals, and the
/// parent's exit (`--parent-death`).
struct Sources {
    reactor: Reactor,
    signals: Watched,
    parent: Option<Watched>,
}

/// What the verdict reports beyond the stop's own outcome.
#[derive(Default)]
struct Record {
    /// Why the stop began: the first reason wins (see `begin_stop`).
    reason: Option<Reason>,
    trigger: Option<Sig>,
    errors: Vec<String>,
    reaped: u64,
}

/// The control socket and the clients it owes an answer.
#[derive(Default)]
struct Requests {
    server: Option<control::Server>,
    /// Control clients waiting for the verdict of a stop they asked for.
    stop_waiters: Vec<ConnId>,
    grace: Option<Duration>,
}

/// The running execs, and what finished ones left for the run's verdict.
#[derive(Default)]
struct Execs {
    running: BTreeMap<ConnId, Exec>,
    /// A stop (of the run or of an exec) was not confirmed: no new execs.
    unconfirmed: bool,
    sent: BTreeMap<Sig, u64>,
    survivors: Vec<crate::proctable::Proc>,
}

/// What the end of the run leaves to deliver: the verdict and the clients still owed it.
struct Ended {
    verdict: Verdict,
    control: Option<control::Server>,
    stop_waiters: Vec<ConnId>,
    /// End by this signal once the verdict is written, as the child ended (see `exit`).
    by_signal: Option<Sig>,
}

impl Supervisor {
    /// Sets up signals, the reaper role and the parent watch; nothing is started yet.
    pub fn new(config: RunConfig) -> anyhow::Result<Supervisor> {
        sys::raise_nofile_limit();
        let pid1 = sys::own_pid().as_raw() == 1;
        let reactor = Reactor::new().context("setting up the event loop (epoll)")?;
        let signals = sys::signalfd_for_all().context("setting up signal handling (signalfd)")?;
        let signals = reactor
            .watch(signals, Key::Signals, EpollFlags::EPOLLIN)
            .context("watching signals (epoll)")?;
        if !pid1 {
            sys::set_child_subreaper()
                .context("becoming the child subreaper (PR_SET_CHILD_SUBREAPER)")?;
        }
        let parent = match config.signals.parent_death {
            true => match watch_parent()? {
                Some(fd) => Some(
                    reactor
                        .watch(fd, Key::Parent, EpollFlags::EPOLLIN)
                        .context("watching the parent (epoll)")?,
                ),
                None => None,
            },
            false => None,
        };
        let control = match &config.control {
            Some(path) => Some(control::Server::bind(path, &reactor)?),
            None => None,
        };
        Ok(Supervisor {
            pid1,
            terminal: Terminal::decide(
                config.signals.session,
                config.stop.scope == scope::Kind::Group
                    || config
                        .signals
                        .rewrite
                        .iter()
                        .any(|r| Terminal::rewrites_terminal_signal(r.from)),
            ),
            sources: Sources {
                reactor,
                signals,
                parent,
            },
            child: MainChild::NotStarted,
            started: Instant::now(),
            state: State::Running,
            record: Record::default(),
            requests: Requests {
                server: control,
                ..Requests::default()
            },
            execs: Execs::default(),
            turn_reaped: Reaped::default(),
            sweep: None,
            config,
        })
    }

    fn scope(&self) -> Scope {
        Scope::of_run(self.config.stop.scope, self.child.pid())
    }

    /// Runs the command to the end, delivers the verdict, and returns how vloer-run ends.
    ///
    /// The run's life, file by file:
    /// 1. `new` (above): signals into a signalfd, the subreaper role, the parent watch and the
    ///    control socket, all on one reactor;
    /// 2. `child.rs`: the child starts, in its own process group;
    /// 3. `events.rs`: the one loop. Each wake-up goes to `signals.rs` (forward a signal, or
    ///    begin the stop), `reap.rs` (collect children: the main child's exit begins the stop),
    ///    `requests.rs` (control clients and execs), or a deadline (`--timeout`);
    /// 4. `begin_stop` (below): whatever the reason, one `Stop`, which the loop moves on until
    ///    it is done;
    /// 5. `conclude.rs`: the proof, the verdict and the exit status;
    /// 6. `deliver.rs`: the verdict written once, and the clients that asked for it answered.
    ///
    /// `main` then ends vloer-run with the status, or by the child's signal.
    pub fn run(mut self) -> Exit {
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
                    self.record.errors.push(format!("{e:#}"));
                    if attempt == 0 {
                        self.begin_stop(Reason::Error, None);
                    }
                }
            }
        }
        let sink = self.config.sink.clone();
        let pid1 = self.pid1;
        let ended = self.conclude();
        // Whether any -v lines were left out: on stderr before the verdict, which stays its last
        // line (and waits for the reader like it); elsewhere after it, which must not wait.
        if sink == Sink::Stderr {
            msg::report_dropped(None);
        }
        let exit = ended.deliver(&sink, pid1);
        if sink != Sink::Stderr {
            msg::report_dropped(Some(Duration::from_secs(1)));
        }
        exit
    }

    fn timeout_deadline(&self) -> Option<Instant> {
        self.config
            .stop
            .timeout
            .filter(|t| !t.is_zero())
            .map(|t| self.started + t)
    }

    fn main_done(&self) -> bool {
        matches!(&self.state, State::Stopping(s) | State::Waiting(s) if s.is_done())
            && (self.config.sweep.is_none() || self.sweep.as_ref().is_some_and(SweepStop::is_done))
    }

    /// Starts the folder sweep (`--sweep`) unless it is under way: at the stop's step 1, or when
    /// a watch found the tree empty.
    fn begin_sweep(&mut self) {
        let Some(sweep) = self.config.sweep.clone().filter(|_| self.sweep.is_none()) else {
            return;
        };
        msg::verbose(format_args!(
            "sweeping the folders for processes that work in them"
        ));
        self.sweep = Some(SweepStop::begin(
            sweep,
            self.scope(),
            self.config.stop.stop_signal,
            (
                self.requests.grace.unwrap_or(self.config.stop.grace),
                self.config.stop.kill_timeout,
            ),
            self.clients(),
            Instant::now(),
        ));
    }

    /// The control clients connected now (see `SweepStop::set_clients`).
    fn clients(&self) -> Vec<Pid> {
        self.requests
            .server
            .as_ref()
            .map(control::Server::peers)
            .unwrap_or_default()
    }

    fn plan(&self, forwarded: Option<Forwarded>) -> StopPlan {
        let main_child = self.child.pid().filter(|_| self.child.alive());
        StopPlan {
            scope: self.scope(),
            stop_signal: self.config.stop.stop_signal,
            grace: self.requests.grace.unwrap_or(self.config.stop.grace),
            kill_timeout: self.config.stop.kill_timeout,
            forwarded,
            child_first: match (self.config.stop.stop_order, main_child, self.child_group()) {
                (StopOrder::Child, Some(child), Some(group)) => Some(ChildFirst { child, group }),
                _ => None,
            },
            main_child,
        }
    }

    /// Starts the stop unless one is under way: the first reason wins.
    fn begin_stop(&mut self, reason: Reason, forwarded: Option<Forwarded>) {
        if matches!(self.state, State::Stopping(_)) {
            return;
        }
        self.record.reason = Some(Reason::of_stop(self.record.reason, reason));
        match (reason, self.record.trigger) {
            (Reason::Signal, Some(sig)) => {
                msg::verbose(format_args!("stopping: {} ({sig})", reason.words()))
            }
            _ => msg::verbose(format_args!("stopping: {}", reason.words())),
        }
        // The child's own group (never the caller's, which a child under a shared terminal
        // stays in): the stop signal goes to it while the child is unreaped, and `--scope
        // group`'s SIGKILL through the pidfd even after.
        let leader_unreaped = self.child.alive();
        let wanted = leader_unreaped || matches!(self.scope(), Scope::Group(_));
        let group = match self.child_group() {
            Some(pgid) if wanted && !self.terminal.shared_group => Some(ChildGroup {
                pgid,
                pidfd: self.child.pidfd().and_then(|fd| fd.try_clone().ok()),
                leader_unreaped,
            }),
            _ => None,
        };
        self.state = State::Stopping(Stop::begin(
            self.plan(forwarded),
            self.wake(),
            Instant::now(),
            group,
        ));
        if matches!(&self.state, State::Stopping(s) if s.scan_due()) {
            // What the group's signal ended goes before the scan, which then need not read it.
            self.reap();
        }
        self.begin_sweep();
        self.stop_execs();
    }

    /// The run is ending: every exec stops too. Under `--scope tree` the run's own stop already
    /// signals them, so their stops only watch.
    fn stop_execs(&mut self) {
        let plan = self.plan(None);
        let watch =
            self.config.stop.scope == scope::Kind::Tree && matches!(self.state, State::Stopping(_));
        for e in self.execs.running.values_mut() {
            e.begin_stop(ExecEnd::RunEnded, plan, &self.sources.reactor, watch);
        }
    }

    /// Where the run's own stop members wake the loop.
    fn wake(&self) -> Wake {
        Wake {
            reactor: self.sources.reactor.clone(),
            owner: RUN,
        }
    }
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
