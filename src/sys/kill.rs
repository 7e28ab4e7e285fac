//! Signals out, pid-safe where the kernel has pidfds.

use super::*;

pub(super) static NO_PIDFD: AtomicBool = AtomicBool::new(false);

/// Opens a pidfd for `pid`; `Unsupported` when the kernel has none (cached after the first try).
pub fn pidfd_open(pid: Pid) -> io::Result<OwnedFd> {
    if NO_PIDFD.load(Ordering::Relaxed) {
        return Err(io::ErrorKind::Unsupported.into());
    }
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0 as libc::c_uint) };
    if fd < 0 {
        let err = io::Error::last_os_error();
        // ENOSYS: a kernel before 5.3. EPERM is no error pidfd_open has of its own: it is what a
        // seccomp profile that refuses the call answers (Docker's before 20.10).
        if matches!(err.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) {
            NO_PIDFD.store(true, Ordering::Relaxed);
            return Err(io::ErrorKind::Unsupported.into());
        }
        return Err(err);
    }
    // SAFETY: a fresh descriptor (pidfds are created close-on-exec) that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Whether this kernel gives pidfds (known after the first `pidfd_open`).
pub fn have_pidfd() -> bool {
    !NO_PIDFD.load(Ordering::Relaxed)
}

/// Whether the process of a pidfd has exited (it is a zombie, or reaped): the kernel makes the
/// pidfd readable once its last thread has ended, after its children were handed to the reaper.
pub fn pidfd_exited(fd: BorrowedFd<'_>) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
}

/// Sends `sig` through a pidfd, so a recycled pid can never be hit.
pub fn pidfd_send_signal(fd: BorrowedFd<'_>, sig: Sig) -> io::Result<()> {
    pidfd_signal(fd, sig, 0)
}

static NO_GROUP_SIGNAL: AtomicBool = AtomicBool::new(false);

/// Sends `sig` to the process group the pidfd's process leads (or led): PIDFD_SIGNAL_PROCESS_GROUP,
/// Linux 6.9. The pidfd holds on to that group's id, so even after the leader was reaped and its
/// number reused, no other group can be hit. `Unsupported` on older kernels.
pub fn pidfd_signal_group(fd: BorrowedFd<'_>, sig: Sig) -> io::Result<()> {
    const PIDFD_SIGNAL_PROCESS_GROUP: libc::c_uint = 1 << 2;
    if NO_GROUP_SIGNAL.load(Ordering::Relaxed) {
        return Err(io::ErrorKind::Unsupported.into());
    }
    let result = pidfd_signal(fd, sig, PIDFD_SIGNAL_PROCESS_GROUP);
    if matches!(&result, Err(e) if e.raw_os_error() == Some(libc::EINVAL)) {
        // An unknown flag: the signal itself is valid.
        NO_GROUP_SIGNAL.store(true, Ordering::Relaxed);
        return Err(io::ErrorKind::Unsupported.into());
    }
    result
}

fn pidfd_signal(fd: BorrowedFd<'_>, sig: Sig, flags: libc::c_uint) -> io::Result<()> {
    // SAFETY: the descriptor is a live pidfd we own; info is NULL as the syscall allows.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            sig.raw(),
            std::ptr::null::<libc::siginfo_t>(),
            flags,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `kill(2)` with any signal number, real-time ones included.
pub fn kill(pid: Pid, sig: Sig) -> io::Result<()> {
    // SAFETY: kill takes plain integers.
    if unsafe { libc::kill(pid.as_raw(), sig.raw()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `killpg(2)` with any signal number.
pub fn killpg(pgid: Pid, sig: Sig) -> io::Result<()> {
    // SAFETY: killpg takes plain integers.
    if unsafe { libc::killpg(pgid.as_raw(), sig.raw()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_pidfd_reads_as_exited_once_the_process_is_a_zombie_and_not_before() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("sleep");
        let pid = Pid::from_raw(child.id() as i32);
        let fd = pidfd_open(pid);
        let exited_while_asleep = fd.as_ref().ok().map(|fd| pidfd_exited(fd.as_fd()));
        // Ended before any assertion, so that a failing one leaves nothing running.
        kill(pid, Sig::KILL).unwrap();
        let fd = fd.expect("pidfd_open");
        assert_eq!(exited_while_asleep, Some(false), "a sleeping process");
        // Exited, not yet reaped (WNOWAIT): a zombie.
        use nix::sys::wait::{waitid, Id, WaitPidFlag};
        waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT).unwrap();
        assert!(pidfd_exited(fd.as_fd()), "a zombie");
        child.wait().unwrap();
        assert!(pidfd_exited(fd.as_fd()), "reaped");
    }
}
