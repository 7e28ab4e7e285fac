//! The main child: started, watched, and reported; and the parent watched for `--parent-death`.

use super::*;
use crate::verdict::ChildReport;

/// The main child, from its spawn to the end of the run.
pub(super) enum MainChild {
    NotStarted,
    /// The command could not be started: the status it gives (126 or 127).
    NotRun(i32),
    /// Started and not reaped yet: its pid cannot name another process.
    Running {
        pid: Pid,
        pidfd: Option<OwnedFd>,
    },
    /// Reaped. The pidfd is kept: it still names the child's process group (`ChildGroup`).
    Ended {
        pid: Pid,
        pidfd: Option<OwnedFd>,
        status: ChildState,
    },
}

impl MainChild {
    pub(super) fn pid(&self) -> Option<Pid> {
        match self {
            MainChild::Running { pid, .. } | MainChild::Ended { pid, .. } => Some(*pid),
            MainChild::NotStarted | MainChild::NotRun(_) => None,
        }
    }

    pub(super) fn pidfd(&self) -> Option<&OwnedFd> {
        match self {
            MainChild::Running { pidfd, .. } | MainChild::Ended { pidfd, .. } => pidfd.as_ref(),
            MainChild::NotStarted | MainChild::NotRun(_) => None,
        }
    }

    /// How it ended, once reaped.
    pub(super) fn status(&self) -> Option<ChildState> {
        match self {
            MainChild::Ended { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The status of a command that could not be started (126 or 127).
    pub(super) fn not_run(&self) -> Option<i32> {
        match self {
            MainChild::NotRun(code) => Some(*code),
            _ => None,
        }
    }

    pub(super) fn alive(&self) -> bool {
        matches!(self, MainChild::Running { .. })
    }

    /// It was reaped with `status`.
    pub(super) fn ended(&mut self, status: ChildState) {
        if let MainChild::Running { pid, pidfd } = std::mem::replace(self, MainChild::NotStarted) {
            *self = MainChild::Ended { pid, pidfd, status };
        }
    }

    pub(super) fn report(&self) -> ChildReport {
        ChildReport {
            pid: self.pid().map(Pid::as_raw),
            exit_code: match self {
                MainChild::Ended {
                    status: ChildState::Exited(c),
                    ..
                }
                | MainChild::NotRun(c) => Some(*c),
                _ => None,
            },
            signal: match self.status() {
                Some(ChildState::Signaled(s)) => Some(s.name()),
                _ => None,
            },
        }
    }
}

impl Supervisor {
    pub(super) fn start_child(&mut self) {
        let setup = ChildSetup {
            keep_group: self.terminal.shared_group,
            ..self.child_setup(self.terminal.give_at_start)
        };
        self.started = Instant::now();
        match spawn::spawn_main(&self.config.command, setup) {
            Ok(pid) => {
                msg::verbose(format_args!(
                    "started {} as pid {pid}",
                    exit::command_words(&self.config.command[..1])
                ));
                // The child stays our unreaped child until we wait for it, so its pid is stable.
                self.child = MainChild::Running {
                    pid,
                    pidfd: sys::pidfd_open(pid).ok(),
                };
                crate::proctable::prepare_scans(pid);
                if self.terminal.give_at_start {
                    // Both sides call tcsetpgrp so neither order of scheduling leaves a gap.
                    let _ = sys::tcsetpgrp(0, pid);
                }
            }
            Err(e) => {
                let (SpawnError::NotFound(err) | SpawnError::CannotExecute(err)) = &e;
                msg::error(format_args!(
                    "cannot run {}: {err}",
                    exit::command_words(&self.config.command[..1])
                ));
                self.child = MainChild::NotRun(e.exit_code());
                self.begin_stop(Reason::ChildExited, None);
            }
        }
    }

    pub(super) fn child_setup(&self, foreground: bool) -> ChildSetup {
        ChildSetup {
            new_session: self.config.signals.session,
            keep_group: false,
            controlling_tty: false,
            foreground_tty: foreground.then_some(0),
            parent_death_signal: (!self.config.signals.child_pdeathsig.is_none())
                .then_some(self.config.signals.child_pdeathsig),
            parent: sys::own_pid().as_raw(),
        }
    }

    /// The main child's process group, once it was started: its own, or the one it shares
    /// with vloer-run on the caller's terminal.
    pub(super) fn child_group(&self) -> Option<Pid> {
        let pid = self.child.pid()?;
        Some(match self.terminal.shared_group {
            true => self.terminal.me_pgid,
            false => pid,
        })
    }
}

/// A pidfd on our parent, readable when it exits.
pub(super) fn watch_parent() -> anyhow::Result<Option<OwnedFd>> {
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
