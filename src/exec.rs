//! Commands started inside the run through the control socket: each in its own process group,
//! with the client's stdio, its own deadline and its own stop.

use crate::control::proto::ExitReport;
use crate::control::{ConnId, ExecRequest};
use crate::exit::{self, Exit};
use crate::reactor::Reactor;
use crate::scope::{ExecScope, Scope};
use crate::signal::Sig;
use crate::spawn::{self, SpawnError};
use crate::stop::{Outcome, Stop, StopPlan, Wake};
use crate::sys::{ChildSetup, ChildState};
use crate::verdict::Reason;
use nix::unistd::Pid;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Why an exec is being stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecEnd {
    /// Its process exited; the rest of its group and descendants are stopped.
    Exited,
    /// Its `--timeout` passed (the client exits 124).
    Timeout,
    /// The client was interrupted or went away.
    Client,
    /// The main child exited or the run is stopping.
    RunEnded,
}

impl ExecEnd {
    fn name(self) -> &'static str {
        match self {
            ExecEnd::Exited => "exited",
            ExecEnd::Timeout => "timeout",
            ExecEnd::Client => "client",
            ExecEnd::RunEnded => "run_ended",
        }
    }
}

/// Where an exec is. Once its stop is done, the run reports it and drops it (`finish`).
enum Phase {
    Running,
    Stopping(ExecEnd, Box<Stop>),
}

/// One running exec.
pub struct Exec {
    pub conn: ConnId,
    pub pid: Pid,
    pub argv: Vec<OsString>,
    pub started: Instant,
    /// Its start time in /proc (see `ExecScope::root_start`).
    start_time: u64,
    timeout: Option<Duration>,
    pub status: Option<ChildState>,
    phase: Phase,
}

impl Exec {
    /// Starts the command as vloer-run's own child in a new process group.
    pub fn start(conn: ConnId, req: ExecRequest, setup: ChildSetup) -> Result<Exec, SpawnError> {
        let ExecRequest {
            argv,
            cwd,
            env,
            timeout,
            stdio,
            tty,
        } = req;
        // With a terminal: a session of its own, the terminal its controlling one, as the main
        // child's group has vloer-run's.
        let setup = ChildSetup {
            new_session: tty,
            controlling_tty: tty,
            ..setup
        };
        let mut stdio = stdio.into_iter();
        let (stdin, stdout, stderr) = (stdio.next(), stdio.next(), stdio.next());
        let marker = crate::scope::marker(conn);
        let (key, value) = marker.split_once('=').expect("NAME=VALUE");
        let pid = spawn::spawn(&argv, setup, |cmd| {
            if let Some(env) = &env {
                cmd.env_clear();
                cmd.envs(env.iter().map(|(k, v)| (k, v)));
            }
            cmd.env(key, value);
            if let Some(cwd) = &cwd {
                cmd.current_dir(cwd);
            }
            // Without the client's descriptors the exec must not write into vloer-run's own.
            // Copies: a script without #! is started a second time (spawn::script_fallback).
            let stdio = |fd: &Option<OwnedFd>| -> std::io::Result<Stdio> {
                Ok(fd
                    .as_ref()
                    .map(OwnedFd::try_clone)
                    .transpose()?
                    .map_or_else(Stdio::null, Stdio::from))
            };
            cmd.stdin(stdio(&stdin)?);
            cmd.stdout(stdio(&stdout)?);
            cmd.stderr(stdio(&stderr)?);
            Ok(())
        })?;
        // Read while it is our unreaped child, so the pid can only name it. Unreadable (no /proc
        // yet): 0, and the exec's stop, which reads /proc too, then proves nothing.
        let start_time = crate::proctable::read(pid)
            .ok()
            .flatten()
            .map_or(0, |p| p.starttime);
        Ok(Exec {
            conn,
            pid,
            start_time,
            argv,
            started: Instant::now(),
            timeout,
            status: None,
            phase: Phase::Running,
        })
    }

    /// When the exec's own `--timeout` runs out, while it has not begun to stop.
    pub fn deadline(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Stopping(_, s) => s.deadline(),
            Phase::Running => self.timeout.map(|t| self.started + t),
        }
    }

    pub fn scope(&self) -> Scope {
        Scope::Exec(ExecScope {
            root: self.pid,
            root_start: self.start_time,
            id: self.conn,
        })
    }

    /// Begins the exec's stop unless one is under way; `watch` only waits (the run's own stop
    /// already signals these processes). `plan.forwarded` may name a signal its group gets first.
    pub fn begin_stop(&mut self, end: ExecEnd, plan: StopPlan, reactor: &Reactor, watch: bool) {
        if self.is_stopping() {
            return;
        }
        let plan = StopPlan {
            scope: self.scope(),
            child_first: None,
            main_child: None,
            ..plan
        };
        let now = Instant::now();
        let wake = Wake {
            reactor: reactor.clone(),
            owner: self.conn,
        };
        let stop = if watch {
            Stop::watch(plan, wake, now)
        } else {
            Stop::begin(plan, wake, now, None)
        };
        self.phase = Phase::Stopping(end, Box::new(stop));
    }

    pub fn is_stopping(&self) -> bool {
        matches!(self.phase, Phase::Stopping(..))
    }

    /// Its stop, once one has begun.
    pub fn stop_mut(&mut self) -> Option<&mut Stop> {
        match &mut self.phase {
            Phase::Stopping(_, s) => Some(s),
            Phase::Running => None,
        }
    }

    /// Ends a finished stop: the outcome, and the final line for the client.
    pub fn finish(self, now: Instant) -> Option<(Outcome, ExitReport)> {
        let Phase::Stopping(end, stop) = self.phase else {
            return None;
        };
        let outcome = stop.finish(now, false);
        let report = report(end, self.status, &outcome);
        Some((outcome, report))
    }

    /// Its stop only watches processes that the run's own stop signals.
    pub fn watch_only(&self) -> bool {
        matches!(&self.phase, Phase::Stopping(_, s) if s.is_watch())
    }
}

/// The final line for the client, from how the exec ended and its stop's outcome.
fn report(end: ExecEnd, status: Option<ChildState>, outcome: &Outcome) -> ExitReport {
    let stopped = outcome.survivors.is_empty() && outcome.error.is_none();
    let (exit_code, signal) = match status {
        Some(ChildState::Exited(c)) => (Some(c), None),
        Some(ChildState::Signaled(s)) => (None, Some(s)),
        _ => (None, None),
    };
    // The same mapping as the run's own status (an exec has no --success-exit and is never
    // PID 1); its client ends by the signal itself (see client.rs).
    let status = Exit::of(exit::Facts {
        stopped,
        reason: if end == ExecEnd::Timeout {
            Reason::Timeout
        } else {
            Reason::ChildExited
        },
        child: status,
        // The client ends by the exec's signal either way (see client.rs).
        killed_by_stop: false,
        spawn_error: None,
        preserve_status: false,
        success_exit: &[],
        pid1: false,
    })
    .code;
    ExitReport {
        status,
        exit_code,
        signal: signal.map(Sig::name),
        reason: end.name().to_string(),
        stopped,
        error: outcome.error.clone(),
    }
}
