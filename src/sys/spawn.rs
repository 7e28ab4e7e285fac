//! The child between fork and exec: its group or session, terminal, mask and limits.

use super::*;

/// What the child must do between fork and exec; plain data so the hook can stay allocation-free.
#[derive(Clone, Copy, Debug, Default)]
pub struct ChildSetup {
    pub new_session: bool,
    /// Stay in vloer-run's own process group (a script's foreground job at a terminal).
    pub keep_group: bool,
    /// After `new_session`, make stdin (a terminal) the controlling terminal (an exec with a tty).
    pub controlling_tty: bool,
    pub foreground_tty: Option<RawFd>,
    pub parent_death_signal: Option<Sig>,
    pub parent: i32,
}

/// Makes `cmd` apply `setup` in the child between fork and exec.
pub fn install_child_setup(cmd: &mut std::process::Command, setup: ChildSetup) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook only makes async-signal-safe calls on its own copy of plain data
    // (see child_pre_exec), which is what pre_exec requires after fork.
    unsafe {
        cmd.pre_exec(move || child_pre_exec(&setup));
    }
}

/// Runs in the forked child before exec: only async-signal-safe calls, no allocation.
pub(super) fn child_pre_exec(setup: &ChildSetup) -> io::Result<()> {
    // SAFETY: every call below is async-signal-safe (setsid, ioctl, sigprocmask, tcsetpgrp, signal,
    // close, getrlimit, setrlimit, prctl, getppid, getpid, rt_sigaction) and uses only stack data and the
    // copied `setup`.
    unsafe {
        if setup.new_session && libc::setsid() < 0 {
            return Err(io::Error::last_os_error());
        }
        if setup.controlling_tty && libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
        if let Some(tty) = setup.foreground_tty {
            // std emptied the mask; block everything so tcsetpgrp from a background group does
            // not stop us with SIGTTOU.
            let mut all = MaybeUninit::<libc::sigset_t>::uninit();
            libc::sigfillset(all.as_mut_ptr());
            libc::sigprocmask(libc::SIG_SETMASK, all.as_ptr(), std::ptr::null_mut());
            // Failure is not fatal: the parent makes the same call, and one of them wins.
            libc::tcsetpgrp(tty, libc::getpgrp());
        }
        if START_SIGPIPE_IGNORED.load(Ordering::Relaxed) {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
        for (fd, closed) in START_FD_CLOSED.iter().enumerate() {
            if closed.load(Ordering::Relaxed) {
                libc::close(fd as RawFd);
            }
        }
        let soft = START_NOFILE_SOFT.load(Ordering::Relaxed);
        if soft != u64::MAX {
            let mut lim = MaybeUninit::<libc::rlimit>::zeroed();
            if libc::getrlimit(libc::RLIMIT_NOFILE, lim.as_mut_ptr()) == 0 {
                let lim = libc::rlimit {
                    rlim_cur: soft as libc::rlim_t,
                    rlim_max: lim.assume_init().rlim_max,
                };
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            }
        }
        if let Some(sig) = setup.parent_death_signal {
            libc::prctl(libc::PR_SET_PDEATHSIG, sig.raw() as libc::c_ulong, 0, 0, 0);
            // The parent may have died before prctl took effect.
            if libc::getppid() != setup.parent {
                libc::kill(libc::getpid(), sig.raw());
            }
        }
        restore_libc_signals_in_child();
        // std emptied the mask before this hook runs; the child gets the one we started with.
        let mask = start_mask();
        if libc::sigprocmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Starts `argv` (a null-terminated array of C strings; `argv[0]` is searched in PATH, as
/// execvp does) as our child, the way glibc's posix_spawn does: `clone(CLONE_VM | CLONE_VFORK)`,
/// so the child runs in our memory, on its own stack, while we are suspended until it has
/// exec'd or failed. A fork would copy our page tables and make every later write of ours fault
/// (copy-on-write); on a 2-core VM the fork alone costs more than the rest of vloer-run's start.
/// The child does what std's `Command` does before its `pre_exec` hooks (its own process group
/// unless `setup.new_session`, an empty signal mask, SIGPIPE at default), then `child_pre_exec`,
/// then execvp. An exec failure comes back as the child's errno, and the failed child is reaped
/// here, as std does.
pub fn spawn_vfork(argv: &[*const libc::c_char], setup: ChildSetup) -> io::Result<Pid> {
    struct Shared {
        argv: *const *const libc::c_char,
        setup: ChildSetup,
        errno: libc::c_int,
    }
    extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` points to the parent's `Shared`, which outlives the child's use of it
        // (the parent is suspended until the exec or the exit). Only async-signal-safe calls
        // follow; nothing allocates, takes a lock, or returns into the parent's stack frames.
        unsafe {
            let shared = &mut *arg.cast::<Shared>();
            let fail = |shared: &mut Shared, err: libc::c_int| -> ! {
                shared.errno = if err == 0 { libc::EINVAL } else { err };
                libc::_exit(127)
            };
            if !shared.setup.new_session && !shared.setup.keep_group && libc::setpgid(0, 0) != 0 {
                fail(shared, *libc::__errno_location());
            }
            let empty = empty_set();
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            if let Err(e) = child_pre_exec(&shared.setup) {
                fail(shared, e.raw_os_error().unwrap_or(libc::EINVAL));
            }
            libc::execvp(*shared.argv, shared.argv);
            fail(shared, *libc::__errno_location())
        }
    }
    assert!(
        argv.last().is_some_and(|p| p.is_null()) && argv.len() >= 2,
        "argv must be non-empty and null-terminated"
    );
    // Room for execvp's own stack use (PATH candidates, the script fallback's argv copy). Where
    // pages are larger (16 or 64 KiB on some arm64 kernels), mmap and munmap both round this
    // length up to whole pages, so the same length maps and unmaps the same pages.
    let page = 4096;
    let size = (argv.len() * std::mem::size_of::<usize>() + 256 * 1024).div_ceil(page) * page;
    // SAFETY: a fresh private anonymous mapping; checked below.
    let stack = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut shared = Shared {
        argv: argv.as_ptr(),
        setup,
        errno: 0,
    };
    // SAFETY: `child` runs on the top of the new mapping (stacks grow down on every Linux target
    // vloer-run builds for); CLONE_VFORK keeps us from touching `shared` or the stack until the
    // child no longer uses them.
    let pid = unsafe {
        libc::clone(
            child,
            stack.cast::<u8>().add(size).cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            std::ptr::addr_of_mut!(shared).cast(),
        )
    };
    let clone_err = io::Error::last_os_error();
    // SAFETY: the child has exec'd or exited; nothing uses the mapping any more.
    unsafe { libc::munmap(stack, size) };
    if pid < 0 {
        return Err(clone_err);
    }
    // SAFETY: written by the child before it exited, if at all; read once it cannot change.
    let errno = unsafe { std::ptr::read_volatile(std::ptr::addr_of!(shared.errno)) };
    if errno != 0 {
        let mut status = 0;
        // SAFETY: reaping our own failed child, as std does.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        return Err(io::Error::from_raw_os_error(errno));
    }
    Ok(Pid::from_raw(pid))
}
