//! The main child: started, watched, and reported; and the parent watched for `--parent-death`.

use super::*;
use crate::verdict::ChildReport;

/// The main child, from its spawn to the end of the run.
pub(super) struct MainChild {
    pub(super) pid: Option<Pid>,
    /// Kept after the reap: it still names the child's process group (`ChildGroup`).
    pub(super) pidfd: Option<OwnedFd>,
    pub(super) status: Option<ChildState>,
    pub(super) spawn_error: Option<i32>,
}

impl MainChild {
    pub(super) fn alive(&self) -> bool {
        self.pid.is_some() && self.status.is_none()
    }

    pub(super) fn report(&self) -> ChildReport {
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
                self.child.pid = Some(pid);
                // The child stays our unreaped child until we wait for it, so its pid is stable.
                self.child.pidfd = sys::pidfd_open(pid).ok();
                crate::proctable::warm_up(pid);
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
                self.child.spawn_error = Some(e.exit_code());
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

    /// The main child's process group.
    pub(super) fn child_group(&self) -> Pid {
        if self.terminal.shared_group {
            return self.terminal.me_pgid;
        }
        self.child.pid.unwrap_or(Pid::from_raw(0))
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
