//! Process-wide settings, terminals and descriptors.

use super::*;

/// Makes vloer-run the reaper of every orphaned descendant.
pub fn set_child_subreaper() -> io::Result<()> {
    nix::sys::prctl::set_child_subreaper(true).map_err(io::Error::from)
}

/// The window size of the terminal at `fd`, or None when it is not a terminal.
pub fn window_size(fd: BorrowedFd<'_>) -> Option<libc::winsize> {
    let mut ws = MaybeUninit::<libc::winsize>::zeroed();
    // SAFETY: TIOCGWINSZ writes one `struct winsize` into valid, writable memory, or fails.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, ws.as_mut_ptr()) };
    // SAFETY: written by the kernel on success; zeroed is a valid winsize anyway.
    (rc == 0).then(|| unsafe { ws.assume_init() })
}

/// Sets the window size of the terminal at `fd`; the kernel tells its foreground group (SIGWINCH).
pub fn set_window_size(fd: BorrowedFd<'_>, ws: &libc::winsize) -> io::Result<()> {
    // SAFETY: TIOCSWINSZ reads one `struct winsize` from a valid reference.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, ws as *const libc::winsize) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The terminal's foreground process group, or None when `fd` is not a terminal.
pub fn tcgetpgrp(fd: RawFd) -> Option<Pid> {
    // SAFETY: tcgetpgrp on any descriptor number is harmless; errors are returned as -1.
    let pg = unsafe { libc::tcgetpgrp(fd) };
    (pg > 0).then(|| Pid::from_raw(pg))
}

/// Makes `pgid` the terminal's foreground group; SIGTTOU is blocked in vloer-run, so this works
/// from the background.
pub fn tcsetpgrp(fd: RawFd, pgid: Pid) -> io::Result<()> {
    // SAFETY: plain integers; errors are returned as -1.
    if unsafe { libc::tcsetpgrp(fd, pgid.as_raw()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// vloer-run's own pid. It never changes (vloer-run does not fork without exec), and getpid(2)
/// is a real syscall on glibc, asked for every process of every scan.
pub fn own_pid() -> Pid {
    static ME: std::sync::OnceLock<Pid> = std::sync::OnceLock::new();
    *ME.get_or_init(nix::unistd::getpid)
}

/// Accepts one connection, already non-blocking and close-on-exec (std's accept would need a
/// second syscall to make it non-blocking, on every request).
pub fn accept_nonblocking(listener: BorrowedFd<'_>) -> io::Result<std::os::unix::net::UnixStream> {
    // SAFETY: accept4 with null address pointers writes nothing into our memory; it returns a new
    // descriptor or -1, which is checked before the descriptor is owned.
    let fd = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) })
}

/// Takes ownership of a descriptor the kernel just installed through SCM_RIGHTS.
pub fn own_received_fd(raw: RawFd) -> OwnedFd {
    // SAFETY: recvmsg created this descriptor in our table a moment ago and nothing else holds
    // it, so exactly one owner closes it.
    unsafe { OwnedFd::from_raw_fd(raw) }
}

/// Borrows one of the standard descriptors 0-2 for a query such as `fcntl(F_GETFD)`.
pub fn borrow_std_fd(fd: RawFd) -> BorrowedFd<'static> {
    assert!(
        (0..3).contains(&fd),
        "only the standard descriptors are borrowed this way"
    );
    // SAFETY: 0-2 are never closed by vloer-run, and the borrow is only used for queries that
    // fail harmlessly (EBADF) when the descriptor is not open.
    unsafe { BorrowedFd::borrow_raw(fd) }
}

/// Blocks `sigs` and returns a signalfd that reports them (the exec client's interrupt path).
pub fn signalfd_for(sigs: &[Sig]) -> io::Result<OwnedFd> {
    block_into_signalfd(sigs.iter().fold(0, |m, s| m | kernel_bit(*s)))
}

/// Now, in the unit of `/proc/PID/stat`'s start time: clock ticks since boot. A process whose
/// start time is greater started after this moment. None if the clock cannot be read.
pub fn boot_ticks() -> Option<u64> {
    let now = clock(libc::CLOCK_BOOTTIME)?;
    // SAFETY: sysconf takes a plain integer.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        return None;
    }
    // The kernel's own rounding (nsec_to_clock_t): down.
    let hz = hz as u64;
    Some(now.as_secs() * hz + u64::from(now.subsec_nanos()) / (1_000_000_000 / hz))
}

/// The CPU time the calling thread has used: unlike the wall clock, it does not count the time
/// other tasks held the CPU. Zero if the clock cannot be read.
pub fn thread_cpu_time() -> std::time::Duration {
    clock(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or_default()
}

/// The time on clock `id`; None if it cannot be read.
fn clock(id: libc::clockid_t) -> Option<std::time::Duration> {
    let mut ts = MaybeUninit::<libc::timespec>::zeroed();
    // SAFETY: clock_gettime writes one timespec into valid, writable memory, or fails.
    let rc = unsafe { libc::clock_gettime(id, ts.as_mut_ptr()) };
    // SAFETY: written by the kernel on success; zeroed is a valid timespec anyway.
    let ts = unsafe { ts.assume_init() };
    (rc == 0).then(|| std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// The CPU the calling thread runs on now; None where the kernel cannot say.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no arguments; it returns a CPU number or -1.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

/// Keeps `thread` on `cpu` alone (fails when `cpu` is outside the allowed set).
pub fn pin_thread(thread: &std::thread::JoinHandle<()>, cpu: usize) -> io::Result<()> {
    use std::os::unix::thread::JoinHandleExt;
    if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: an all-zero cpu_set_t is the empty set, a valid value of this plain bit array.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes one bit inside `set`, `cpu` being checked against its size above;
    // the handle is borrowed, so its thread is neither joined nor detached and its pthread_t is
    // valid; pthread_setaffinity_np only reads `set`, of the size given.
    let rc = unsafe {
        libc::CPU_SET(cpu, &mut set);
        libc::pthread_setaffinity_np(
            // std's RawPthread is an integer; musl's pthread_t is a pointer, glibc's the same
            // integer.
            thread.as_pthread_t() as _,
            std::mem::size_of::<libc::cpu_set_t>(),
            &set,
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}
