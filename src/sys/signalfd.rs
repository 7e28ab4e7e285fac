//! Signals in (a signalfd over every catchable signal) and vloer-run's own stops and end.

use super::*;

/// Blocks every signal vloer-run handles and returns a signalfd that reports them: 1 to 64 but
/// SIGKILL and SIGSTOP. glibc's sigfillset and sigaddset leave out 32 and 33 (its own), musl's 32
/// to 34, and a `kill -34` would then end vloer-run with the tree orphaned, so the set is built and
/// blocked here with the kernel's calls (and kept blocked: `libc_signals.rs`). SIGPIPE is in it
/// too: a sent one is forwarded, and the one the kernel raises for our own write to a closed pipe
/// is told apart by its sender (`SigInfo`).
pub fn signalfd_for_all() -> io::Result<OwnedFd> {
    // An inherited SIG_IGN for SIGCHLD would make the kernel reap children behind our back.
    // SAFETY: setting SIG_DFL installs no handler, so no code of ours runs asynchronously.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
    }
    ignore_libc_signals();
    block_into_signalfd(signalfd_mask())
}

/// Every signal the signalfd reports: all but SIGKILL and SIGSTOP.
pub(super) fn signalfd_mask() -> KernelSigset {
    !(kernel_bit(Sig::KILL) | kernel_bit(Sig::STOP))
}

/// The kernel's own signal set: one bit per signal, 1 to 64.
pub(super) type KernelSigset = u64;

/// `sig`'s bit in a `KernelSigset`.
pub(super) fn kernel_bit(sig: Sig) -> KernelSigset {
    1 << (sig.raw() - 1)
}

/// Blocks the signals of `mask` (the kernel's layout) and returns a non-blocking signalfd over
/// them, through the raw syscalls, which take every signal number glibc's wrappers refuse.
pub(super) fn block_into_signalfd(mask: KernelSigset) -> io::Result<OwnedFd> {
    let size = std::mem::size_of::<KernelSigset>();
    change_mask(libc::SIG_BLOCK, mask)?;
    // SAFETY: signalfd4 reads one 8-byte set from valid memory; -1 asks for a new descriptor,
    // checked before it is owned.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_signalfd4,
            -1,
            &mask as *const KernelSigset,
            size,
            libc::SFD_NONBLOCK | libc::SFD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Blocks (`SIG_BLOCK`) or unblocks (`SIG_UNBLOCK`) `mask` in the calling thread, through the
/// kernel's call, which takes every signal number glibc's and musl's wrappers refuse.
pub(super) fn change_mask(how: libc::c_int, mask: KernelSigset) -> io::Result<()> {
    // SAFETY: rt_sigprocmask reads one 8-byte set (the size passed) from valid memory and writes
    // nothing (null old set).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            how,
            &mask as *const KernelSigset,
            std::ptr::null_mut::<KernelSigset>(),
            std::mem::size_of::<KernelSigset>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// One signal read from the signalfd.
#[derive(Clone, Copy, Debug)]
pub struct SigInfo {
    pub sig: Sig,
    pub sender: Pid,
    /// Sent by the kernel itself (SI_KERNEL): a terminal's Ctrl-C, Ctrl-\\, Ctrl-Z, window
    /// change or hangup, which the kernel sends to the terminal's whole foreground group.
    pub from_kernel: bool,
}

impl SigInfo {
    /// A SIGPIPE the kernel raised for one of vloer-run's own writes to a closed pipe: it names
    /// vloer-run as its sender, which no other process can. That is an EPIPE error already
    /// handled where the write failed, never a signal to forward.
    pub fn is_own_write_error(&self) -> bool {
        self.sig == Sig::PIPE && self.sender == own_pid()
    }
}

/// Reads every pending signal from the signalfd without blocking.
pub fn read_signals(fd: BorrowedFd<'_>) -> io::Result<Vec<SigInfo>> {
    const BATCH: usize = 16;
    let size = std::mem::size_of::<libc::signalfd_siginfo>();
    let mut out = Vec::new();
    loop {
        let mut infos = [MaybeUninit::<libc::signalfd_siginfo>::zeroed(); BATCH];
        // SAFETY: the buffer is BATCH writable records; the kernel writes whole records only.
        let n = unsafe { libc::read(fd.as_raw_fd(), infos.as_mut_ptr().cast(), size * BATCH) };
        if n < 0 {
            let err = io::Error::last_os_error();
            return match err.kind() {
                io::ErrorKind::WouldBlock => Ok(out),
                io::ErrorKind::Interrupted => continue,
                _ => Err(err),
            };
        }
        let records = n as usize / size;
        for info in &infos[..records] {
            // SAFETY: the kernel wrote `records` whole records.
            let info = unsafe { info.assume_init_ref() };
            if let Some(sig) = Sig::from_raw(info.ssi_signo as i32) {
                out.push(SigInfo {
                    sig,
                    sender: Pid::from_raw(info.ssi_pid as i32),
                    from_kernel: info.ssi_code == libc::SI_KERNEL,
                });
            }
        }
        // A read that did not fill the buffer took every signal pending; one sent since keeps the
        // descriptor readable for the next poll. This spares every wake a read that says EAGAIN.
        if records < BATCH {
            return Ok(out);
        }
    }
}

/// Stops vloer-run itself (job control), as a shell expects of a stopped job, and returns on
/// SIGCONT. It stops with `sig` itself where the kernel lets that stop it, so the shell reports
/// the job as it would the child alone (`jobs -l`: "Stopped (tty input)"; zsh: "suspended", not
/// "suspended (signal)"); otherwise (ignored at start, an orphaned group) with SIGSTOP.
pub fn stop_self(sig: Sig) {
    if sig.is_job_control() && !ignored_at_start(sig) && parent_in_other_group_of_session() {
        let mut set = empty_set();
        // SAFETY: `set` is initialised and the calls take plain values. `sig` is blocked here (it
        // is in the signalfd set), so kill only makes it pending; unblocking delivers it before
        // sigprocmask returns, with its default action (we install no handlers): the process stops
        // until SIGCONT. Then it is blocked again, as the signalfd needs.
        unsafe {
            libc::sigaddset(&mut set, sig.raw());
            if libc::kill(libc::getpid(), sig.raw()) == 0
                && libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) == 0
            {
                libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                return;
            }
        }
    }
    // SAFETY: raise with SIGSTOP cannot be caught or blocked; execution resumes on SIGCONT.
    unsafe {
        libc::raise(libc::SIGSTOP);
    }
}

/// Whether vloer-run's parent is in another process group of the same session. That keeps
/// vloer-run's group from being orphaned, and only then does the kernel let SIGTSTP, SIGTTIN and
/// SIGTTOU stop it (it discards them for an orphaned group).
pub fn parent_in_other_group_of_session() -> bool {
    // SAFETY: plain queries by pid; each returns -1 on error, which is checked.
    unsafe {
        let ppid = libc::getppid();
        let (pgid, sid) = (libc::getpgid(ppid), libc::getsid(ppid));
        pgid > 0 && sid > 0 && pgid != libc::getpgrp() && sid == libc::getsid(0)
    }
}

/// Ends vloer-run by `sig`, as the child ended, so its caller sees what the bare command would
/// have given (GNU timeout does the same): default action, no core file. Returns only if `sig`
/// did not end the process (it cannot: the child died of it, so its default action is fatal).
pub fn end_by_signal(sig: Sig) {
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // The raw call also takes 32 and 33, whose glibc handlers must not run here.
    set_kernel_action(sig.raw(), 0);
    // SAFETY: setrlimit reads one valid rlimit. kill only queues `sig`, which is blocked (the
    // signalfd set); unblocking it delivers it with its default action.
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::kill(libc::getpid(), sig.raw());
    }
    let _ = change_mask(libc::SIG_UNBLOCK, kernel_bit(sig));
}

/// Sets signal `sig`'s handler (0: SIG_DFL, 1: SIG_IGN; never a function) through the kernel,
/// which takes the numbers libc refuses, with no flags and an empty mask; returns the old one.
pub(super) fn set_kernel_action(sig: i32, handler: u64) -> Option<u64> {
    // The kernel's struct sigaction: handler, flags, restorer, mask. It is 24 or 32 bytes
    // depending on the architecture; four words cover both.
    let new = [handler, 0, 0, 0];
    let mut old = [0u64; 4];
    // SAFETY: rt_sigaction reads one action and writes one, each in four words of valid memory
    // (at least the kernel's size), with the 8-byte mask size it expects; neither handler value
    // is code, so nothing of ours runs asynchronously.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            new.as_ptr(),
            old.as_mut_ptr(),
            std::mem::size_of::<KernelSigset>(),
        )
    };
    (rc == 0).then_some(old[0])
}

/// The kernel's signal calls above pass their sets and actions in the kernel's own layout, with
/// numbers from `libc` for the machine built for; these hold on every machine vloer-run is built
/// for (`scripts/cross-check.sh` runs them for aarch64 under qemu-user).
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_set_has_one_bit_for_each_signal_of_this_machine() {
        let bits = std::mem::size_of::<KernelSigset>() * 8;
        assert_eq!(bits, Sig::RT_MAX as usize);
        assert_eq!(libc::SIGRTMAX(), Sig::RT_MAX);
    }

    #[test]
    fn a_mask_changed_through_the_kernel_is_the_one_libc_reads() {
        // The mask is the calling thread's: this test's own.
        let sig = Sig::from_raw(libc::SIGUSR2).unwrap();
        let blocked_by_libc = || {
            let mut set = empty_set();
            // SAFETY: a null new set only reads the mask into `set`, which is initialised.
            unsafe {
                libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set);
                libc::sigismember(&set, sig.raw()) == 1
            }
        };
        change_mask(libc::SIG_BLOCK, kernel_bit(sig)).expect("rt_sigprocmask, blocking");
        let blocked = blocked_by_libc();
        change_mask(libc::SIG_UNBLOCK, kernel_bit(sig)).expect("rt_sigprocmask, unblocking");
        assert!(blocked, "blocked through the kernel, not in libc's view");
        let unblocked = !blocked_by_libc();
        assert!(
            unblocked,
            "unblocked through the kernel, not in libc's view"
        );
    }

    #[test]
    fn an_action_set_through_the_kernel_is_the_one_libc_reads() {
        // No other test and no code of vloer-run's touches this signal's action.
        let sig = Sig::RT_MAX - 1;
        let handler_by_libc = || {
            let mut old = MaybeUninit::<libc::sigaction>::zeroed();
            // SAFETY: a null new action only reads the current one into valid memory.
            let rc = unsafe { libc::sigaction(sig, std::ptr::null(), old.as_mut_ptr()) };
            assert_eq!(rc, 0, "sigaction({sig})");
            // SAFETY: written by sigaction, which returned 0.
            unsafe { old.assume_init() }.sa_sigaction
        };
        let before = set_kernel_action(sig, 1);
        let ignored = handler_by_libc();
        let was_ignored = set_kernel_action(sig, 0);
        let default = handler_by_libc();
        assert_eq!(before, Some(0), "rt_sigaction read the default action");
        assert_eq!(ignored, libc::SIG_IGN, "set SIG_IGN through the kernel");
        assert_eq!(was_ignored, Some(1), "rt_sigaction read SIG_IGN back");
        assert_eq!(default, libc::SIG_DFL, "set SIG_DFL through the kernel");
    }
}
