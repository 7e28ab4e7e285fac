//! The controlling terminal: who gets it at start, on `fg` and when the child stops for it, and
//! handing it back when the run ends.

use crate::signal::Sig;
use crate::{msg, sys};
use nix::unistd::Pid;

/// The signals a terminal sends its foreground group itself.
const FROM_THE_TERMINAL: [Sig; 4] = [Sig::INT, Sig::QUIT, Sig::TSTP, Sig::WINCH];

/// What vloer-run does with its terminal, decided once before the child starts.
#[derive(Clone, Copy, Debug)]
pub struct Terminal {
    /// vloer-run's own process group.
    pub me_pgid: Pid,
    /// stdin is vloer-run's controlling terminal and the child has a group of its own: the
    /// child's group gets the terminal whenever vloer-run's group has it (at start, on SIGCONT,
    /// when the child stops for want of it), and it is handed back at the end.
    handing: bool,
    /// The child shares vloer-run's group: vloer-run runs in a script's foreground job, where a
    /// group of its own would keep Ctrl-C from the script's shell (SPEC, "Running a command", 1
    /// and 5). Forwarding and the stop then reach only the run's members of that group.
    pub shared_group: bool,
    /// The child's group gets the terminal now, before it runs.
    pub give_at_start: bool,
}

impl Terminal {
    /// `own_group_needed`: `--scope group`, or a `--rewrite` of a signal the terminal sends
    /// (which could not apply to what the terminal delivers itself).
    pub fn decide(session: bool, own_group_needed: bool) -> Terminal {
        let me_pgid = nix::unistd::getpgrp();
        // tcgetpgrp fails (ENOTTY) for anything but our controlling terminal, so it also answers
        // isatty (whose `std::io::stdin()` would set up an 8 KiB buffer vloer-run never reads).
        let fg = if session { None } else { sys::tcgetpgrp(0) };
        let foreground = fg == Some(me_pgid);
        // A job of an interactive shell is led by its first process; a group that vloer-run
        // does not lead is its caller's (a script run from the prompt). A non-interactive shell
        // ends its loop on Ctrl-C only if it got the SIGINT too, so the child stays with it.
        let shared_group = foreground && me_pgid != sys::own_pid() && !own_group_needed;
        Terminal {
            me_pgid,
            // Started in the background (`vloer-run … &`), the child gets the terminal when a
            // shell's `fg` brings vloer-run to the front.
            handing: fg.is_some() && !shared_group,
            shared_group,
            give_at_start: foreground && !shared_group,
        }
    }

    /// Whether a `--rewrite` of `from` needs the child in a group of its own.
    pub fn rewrites_terminal_signal(from: Sig) -> bool {
        FROM_THE_TERMINAL.contains(&from)
    }

    /// Whether the terminal is handed to the child at all (the caller's `Ctrl-Z` logic needs it).
    pub fn handing(&self) -> bool {
        self.handing
    }

    /// Makes `pgid` (the live main child's group) the terminal's foreground group if ours is;
    /// true when it now is.
    pub fn give_to(&self, pgid: Pid) -> bool {
        if !self.handing || sys::tcgetpgrp(0) != Some(self.me_pgid) {
            return false;
        }
        match sys::tcsetpgrp(0, pgid) {
            Ok(()) => true,
            Err(e) => {
                msg::verbose(format_args!(
                    "could not give the terminal to the child's group: {e}"
                ));
                false
            }
        }
    }

    /// Takes the terminal back for vloer-run's group when the child's group (`child`) has it or
    /// whatever group has it is gone.
    pub fn hand_back(&self, child: Option<Pid>) {
        if !self.handing {
            return;
        }
        let Some(fg) = sys::tcgetpgrp(0) else { return };
        let group_gone =
            sys::killpg(fg, Sig::NONE).is_err_and(|e| e.raw_os_error() == Some(libc::ESRCH));
        if Some(fg) == child || group_gone {
            if let Err(e) = sys::tcsetpgrp(0, self.me_pgid) {
                msg::verbose(format_args!("could not take the terminal back: {e}"));
            }
        }
    }
}

/// Whether vloer-run's own process group is orphaned, as the kernel decides it: no member has
/// its parent in another group of the same session. Then the kernel discards SIGTSTP, SIGTTIN
/// and SIGTTOU for it, and no job-control shell could continue it. Read from /proc only on a
/// job-control event; when /proc cannot tell, the group is taken as not orphaned (the behaviour
/// of a run in an interactive shell).
pub fn own_group_orphaned() -> bool {
    use crate::proctable;
    if sys::parent_in_other_group_of_session() {
        return false;
    }
    let pgrp = nix::unistd::getpgrp();
    let Ok(sid) = nix::unistd::getsid(None) else {
        return false;
    };
    let Ok(names) = proctable::files::list(".") else {
        return false;
    };
    for pid in names
        .iter()
        .filter_map(|n| n.parse().ok())
        .map(Pid::from_raw)
    {
        let Ok(Some(member)) = proctable::read(pid) else {
            continue;
        };
        if member.pgid != pgrp {
            continue;
        }
        match proctable::read(member.ppid) {
            Ok(Some(parent)) if parent.pgid != pgrp && parent.sid == sid => return false,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    true
}
