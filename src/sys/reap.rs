//! Reaping: waitpid, and the kernel's own answer to "is any child left".

use super::*;

/// What `waitpid` reported for one child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildState {
    Exited(i32),
    Signaled(Sig),
    Stopped(Sig),
    Continued,
}

/// What one `wait_any` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    Child(Pid, ChildState),
    /// Children exist, but none has changed state.
    NoneReady,
    /// vloer-run has no child at all.
    NoChildren,
}

/// Reaps one child without blocking. Stop and continue reports are asked of `job` alone (the
/// main child, the only one whose are acted on): with WUNTRACED | WCONTINUED, each waitpid(-1)
/// also checks the signal state of every live child it passes on its way to a zombie, which made
/// reaping 5000 orphans as PID 1 slower than tini's.
pub fn wait_any(job: Option<Pid>) -> io::Result<Waited> {
    let mut status: libc::c_int = 0;
    let mut pid = 0;
    if let Some(job) = job {
        // SAFETY: as below; one specific child, so no walk over the others. An error (it was
        // already reaped) only means there is nothing to report for it.
        pid = unsafe {
            libc::waitpid(
                job.as_raw(),
                &mut status,
                libc::WNOHANG | libc::WUNTRACED | libc::WCONTINUED,
            )
        }
        .max(0);
    }
    if pid == 0 {
        // SAFETY: `status` is a valid out-pointer; WNOHANG makes the call non-blocking. The raw
        // status is decoded here because nix loses children killed by real-time signals.
        // __WALL: a child cloned with another exit signal than SIGCHLD is a child all the same.
        pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG | libc::__WALL) };
    }
    if pid < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::ECHILD) => Ok(Waited::NoChildren),
            _ => Err(err),
        };
    }
    if pid == 0 {
        return Ok(Waited::NoneReady);
    }
    let state = if libc::WIFEXITED(status) {
        ChildState::Exited(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        ChildState::Signaled(Sig::from_raw(libc::WTERMSIG(status)).unwrap_or(Sig::KILL))
    } else if libc::WIFSTOPPED(status) {
        ChildState::Stopped(Sig::from_raw(libc::WSTOPSIG(status)).unwrap_or(Sig::STOP))
    } else {
        ChildState::Continued
    };
    Ok(Waited::Child(Pid::from_raw(pid), state))
}

/// What `children_left` found among vloer-run's own children.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Children {
    /// None at all, live or zombie: since vloer-run is the reaper of every descendant, none of
    /// those exists either.
    None,
    /// Only zombies waiting to be reaped (or nothing the kernel could name).
    Zombies,
    /// At least one child that has not ended.
    Live,
}

/// Asks the kernel, without reaping anything, whether vloer-run still has children. This is
/// the exact proof for `--scope tree`: every descendant is a child of vloer-run or of one of its
/// children, because orphans are handed to the reaper before their parent becomes a zombie.
pub fn children_left() -> io::Result<Children> {
    match first_ended(None) {
        Ok(Some(_)) => Ok(Children::Zombies),
        Ok(None) => Ok(Children::Live),
        Err(e) if e.raw_os_error() == Some(libc::ECHILD) => Ok(Children::None),
        Err(e) => Err(e),
    }
}

/// The child the next `wait_any(job)` reaps, if one has ended: it is still a zombie, so /proc
/// still names it. `job` first, as `wait_any` asks it first.
pub fn next_to_reap(job: Option<Pid>) -> Option<Pid> {
    if let Some(Ok(Some(pid))) = job.map(|job| first_ended(Some(job))) {
        return Some(pid);
    }
    first_ended(None).ok().flatten()
}

/// The first child that has ended (`only` that one, if given), left unreaped; `Ok(None)` when
/// children exist but none has ended, ECHILD when there are none.
fn first_ended(only: Option<Pid>) -> io::Result<Option<Pid>> {
    let (idtype, id) = match only {
        Some(pid) => (libc::P_PID, pid.as_raw() as libc::id_t),
        None => (libc::P_ALL, 0),
    };
    let mut info = MaybeUninit::<libc::siginfo_t>::zeroed();
    // SAFETY: waitid writes one siginfo into valid, zeroed memory. WNOWAIT leaves a zombie to be
    // reaped by `wait_any`; WNOHANG makes the call non-blocking.
    let rc = unsafe {
        libc::waitid(
            idtype,
            id,
            info.as_mut_ptr(),
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT | libc::__WALL,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: waitid returned 0, so the struct is initialised (zeroed where no child was ready).
    let pid = unsafe { info.assume_init().si_pid() };
    Ok((pid != 0).then(|| Pid::from_raw(pid)))
}
