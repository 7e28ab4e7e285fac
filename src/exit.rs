//! How the run ends for its caller: the exit status, and whether vloer-run ends by the child's
//! signal instead (pure logic; `sys::end_by_signal` carries it out).

use crate::signal::Sig;
use crate::sys::ChildState;
use crate::verdict::Reason;

/// What decides the status, gathered once at the end of the run.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    pub stopped: bool,
    pub reason: Reason,
    pub child: Option<ChildState>,
    /// The child died of a signal the stop sent on its own account (its `--stop-signal`, or the
    /// SIGKILL after the grace), not of one from outside that the run passed on.
    pub killed_by_stop: bool,
    /// 126 or 127 when the command could not be started.
    pub spawn_error: Option<i32>,
    pub preserve_status: bool,
    pub success_exit: &'a [u8],
    pub pid1: bool,
}

/// vloer-run's exit status and, when it should end as the child did, the signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit {
    pub code: i32,
    pub by_signal: Option<Sig>,
}

impl Exit {
    pub fn of(f: Facts<'_>) -> Exit {
        let plain = |code| Exit {
            code,
            by_signal: None,
        };
        if !f.stopped {
            return plain(125);
        }
        let timed_out = f.reason == Reason::Timeout;
        if timed_out && !f.preserve_status {
            return plain(124);
        }
        match (f.child, f.spawn_error) {
            (Some(ChildState::Exited(c)), _) if f.success_exit.contains(&(c as u8)) => plain(0),
            (Some(ChildState::Exited(c)), _) => plain(c),
            // As PID 1 the kernel would not deliver the signal to us; after a timeout the status
            // is a plain exit, as GNU timeout's --preserve-status gives. A signal the stop sent
            // itself is not passed on either: vloer-run ended the child, as timeout does after it
            // killed, and its caller's shell must not report vloer-run as `Killed`.
            (Some(ChildState::Signaled(s)), _) => Exit {
                code: 128 + s.raw(),
                by_signal: (!f.pid1 && !timed_out && !f.killed_by_stop).then_some(s),
            },
            (_, Some(code)) => plain(code),
            // Confirmed, yet the child's status was never collected: that is not a proof.
            _ => plain(125),
        }
    }
}

impl std::fmt::Display for ChildState {
    /// How a process changed state, in words: "exited with status 0", "killed by SIGKILL".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChildState::Exited(c) => write!(f, "exited with status {c}"),
            ChildState::Signaled(s) => write!(f, "killed by {s}"),
            ChildState::Stopped(s) => write!(f, "stopped by {s}"),
            ChildState::Continued => write!(f, "continued"),
        }
    }
}

/// A command's argv in words for a message: its words joined by spaces, quoted as a whole.
pub fn command_words(argv: &[std::ffi::OsString]) -> String {
    let words: Vec<String> = argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    format!("'{}'", words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(child: ChildState) -> Facts<'static> {
        Facts {
            stopped: true,
            reason: Reason::ChildExited,
            child: Some(child),
            killed_by_stop: false,
            spawn_error: None,
            preserve_status: false,
            success_exit: &[],
            pid1: false,
        }
    }

    #[test]
    fn a_child_killed_by_a_signal_is_ended_by_the_same_signal() {
        let e = Exit::of(facts(ChildState::Signaled(Sig::INT)));
        assert_eq!(e.code, 130);
        assert_eq!(e.by_signal, Some(Sig::INT));
    }

    #[test]
    fn a_child_the_stop_killed_gives_a_plain_status() {
        let e = Exit::of(Facts {
            reason: Reason::Control,
            killed_by_stop: true,
            ..facts(ChildState::Signaled(Sig::KILL))
        });
        assert_eq!(
            e,
            Exit {
                code: 137,
                by_signal: None
            }
        );
    }

    #[test]
    fn as_pid_1_after_a_timeout_or_unconfirmed_it_is_a_plain_status() {
        let signaled = facts(ChildState::Signaled(Sig::TERM));
        let pid1 = Exit::of(Facts {
            pid1: true,
            ..signaled
        });
        assert_eq!(
            pid1,
            Exit {
                code: 143,
                by_signal: None
            }
        );
        let timeout = Facts {
            reason: Reason::Timeout,
            ..signaled
        };
        assert_eq!(Exit::of(timeout).code, 124);
        let preserved = Exit::of(Facts {
            preserve_status: true,
            ..timeout
        });
        assert_eq!(
            preserved,
            Exit {
                code: 143,
                by_signal: None
            }
        );
        let unconfirmed = Exit::of(Facts {
            stopped: false,
            ..signaled
        });
        assert_eq!(
            unconfirmed,
            Exit {
                code: 125,
                by_signal: None
            }
        );
    }

    #[test]
    fn states_read_as_words() {
        assert_eq!(ChildState::Exited(0).to_string(), "exited with status 0");
        assert_eq!(
            ChildState::Signaled(Sig::KILL).to_string(),
            "killed by SIGKILL"
        );
        assert_eq!(
            ChildState::Stopped(Sig::TSTP).to_string(),
            "stopped by SIGTSTP"
        );
    }

    #[test]
    fn exits_map_as_documented() {
        assert_eq!(Exit::of(facts(ChildState::Exited(3))).code, 3);
        let jvm = Facts {
            success_exit: &[143],
            ..facts(ChildState::Exited(143))
        };
        assert_eq!(Exit::of(jvm).code, 0);
        let not_found = Facts {
            child: None,
            spawn_error: Some(127),
            ..facts(ChildState::Exited(0))
        };
        assert_eq!(Exit::of(not_found).code, 127);
        let never_collected = Facts {
            child: None,
            ..facts(ChildState::Exited(0))
        };
        assert_eq!(Exit::of(never_collected).code, 125);
    }
}
