//! The one pid-safe way to signal a process found in a scan, for the stop and for forwarding
//! alike: a pidfd is opened first, then the process is read again to prove that the pid still
//! names the process the scan saw (same start time, still meant). Where the kernel has no pidfds,
//! or the stop may open no more of them (a low limit on open descriptors), kill(2) follows that
//! re-read at once, which narrows the pid-recycling window to microseconds.

use super::{read, Proc};
use crate::signal::Sig;
use crate::sys;
use nix::unistd::Pid;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// A process that can be signalled without hitting another one that took its pid.
#[derive(Debug)]
pub struct Handle {
    pub pid: Pid,
    /// With the pid, what names the process: a recycled pid has another start time.
    pub starttime: u64,
    fd: Option<OwnedFd>,
}

impl Handle {
    /// Opens `p` as a scan saw it. `still` decides whether the process, read again after the
    /// pidfd was opened, is still the one meant (a member of the scope, alive). `Ok(None)`: it is
    /// gone, or no longer meant; the re-read process comes back with the handle.
    ///
    /// Without a pidfd, the process is named by its pid and start time, read again here, just
    /// before the caller's kill(2). The race that remains: the process exits, is reaped and its
    /// pid reused between that read and kill(2). For vloer-run's own children it cannot happen
    /// (vloer-run alone reaps them, and not while it signals); for a deeper descendant, its
    /// parent would have to reap it and the kernel hand out the same pid again within those
    /// microseconds, which takes a walk round the whole pid space (pid_max). Accepted where no
    /// pidfd can be had.
    pub fn open(
        p: &Proc,
        still: impl FnOnce(&Proc) -> bool,
    ) -> Result<Option<(Handle, Proc)>, String> {
        let fd = match sys::pidfd_open(p.pid) {
            Ok(fd) => Some(fd),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(None),
            // Out of descriptors (the limit, or the system's table): the stop goes on by pid and
            // start time rather than give up.
            Err(e)
                if e.kind() == io::ErrorKind::Unsupported
                    || matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) =>
            {
                None
            }
            Err(e) => return Err(format!("pidfd_open({}): {e}", p.pid)),
        };
        let fresh = match read(p.pid) {
            Ok(Some(f)) => f,
            Ok(None) => return Ok(None),
            Err(e) => return Err(e.0),
        };
        if fresh.starttime != p.starttime || !still(&fresh) {
            return Ok(None);
        }
        Ok(Some((Handle::of(&fresh, fd), fresh)))
    }

    /// For `p` read after `fd` was opened on its pid (the tree walk does so), so `fd` names it.
    pub fn of(p: &Proc, fd: Option<OwnedFd>) -> Handle {
        Handle {
            pid: p.pid,
            starttime: p.starttime,
            fd,
        }
    }

    pub fn signal(&self, sig: Sig) -> io::Result<()> {
        match &self.fd {
            Some(fd) => sys::pidfd_send_signal(fd.as_fd(), sig),
            None => sys::kill(self.pid, sig),
        }
    }

    /// Whether the process has ended (a zombie has): through its pidfd where it has one, else by
    /// its pid and start time. A read of /proc that fails says it has not.
    pub fn exited(&self) -> bool {
        match &self.fd {
            Some(fd) => sys::pidfd_exited(fd.as_fd()),
            None => match read(self.pid) {
                Ok(Some(p)) => p.starttime != self.starttime || !p.is_live(),
                Ok(None) => true,
                Err(_) => false,
            },
        }
    }

    /// Closes the pidfd of a process already signalled: from now on it is named by its pid and
    /// start time, and its exit is learnt by rescans.
    pub fn release_pidfd(&mut self) {
        self.fd = None;
    }

    /// The pidfd, readable once the process has exited; None without pidfds.
    pub fn pidfd(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(|fd| fd.as_fd())
    }
}
