//! Every raw syscall and `unsafe` block of vloer-run, each with the reason it is sound.
//!
//! Everything above this module speaks in `Pid`, `Sig` and `OwnedFd`.
#![allow(unsafe_code)]

use crate::signal::Sig;
use nix::unistd::Pid;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

// ---------------------------------------------------------------------------------------------
// The state vloer-run was started with, captured before Rust's runtime touches it.

static mut START_MASK: MaybeUninit<libc::sigset_t> = MaybeUninit::uninit();
static START_CAPTURED: AtomicBool = AtomicBool::new(false);
static START_SIGPIPE_IGNORED: AtomicBool = AtomicBool::new(false);
static START_FD_CLOSED: [AtomicBool; 3] = [
    AtomicBool::new(false),
    AtomicBool::new(false),
    AtomicBool::new(false),
];

extern "C" fn capture_start_state() {
    // SAFETY: this runs from .init_array, before main and before any other thread exists, so the
    // single write to START_MASK cannot race a reader. The libc calls only query state, into
    // valid, writable memory.
    unsafe {
        let mut mask = MaybeUninit::<libc::sigset_t>::uninit();
        if libc::sigprocmask(libc::SIG_SETMASK, std::ptr::null(), mask.as_mut_ptr()) == 0 {
            std::ptr::addr_of_mut!(START_MASK).write(mask);
            START_CAPTURED.store(true, Ordering::SeqCst);
        }
        let mut old = MaybeUninit::<libc::sigaction>::zeroed();
        if libc::sigaction(libc::SIGPIPE, std::ptr::null(), old.as_mut_ptr()) == 0 {
            START_SIGPIPE_IGNORED.store(
                old.assume_init().sa_sigaction == libc::SIG_IGN,
                Ordering::SeqCst,
            );
        }
        for (fd, closed) in START_FD_CLOSED.iter().enumerate() {
            closed.store(
                libc::fcntl(fd as RawFd, libc::F_GETFD) == -1,
                Ordering::SeqCst,
            );
        }
    }
}

// Rust's runtime sets SIGPIPE to SIG_IGN before main; this hook sees it as the caller left it.
#[used]
#[link_section = ".init_array"]
static CAPTURE_START_STATE: extern "C" fn() = capture_start_state;

/// The signal mask vloer-run was started with.
fn start_mask() -> libc::sigset_t {
    if START_CAPTURED.load(Ordering::SeqCst) {
        // SAFETY: START_MASK was fully written before START_CAPTURED was set, and is never
        // written again.
        unsafe { std::ptr::addr_of!(START_MASK).read().assume_init() }
    } else {
        // The hook did not run (it always does on Linux); an empty mask is the documented default.
        empty_set()
    }
}

fn empty_set() -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the whole set it is given.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        set.assume_init()
    }
}

/// Whether `sig` was ignored (SIG_IGN) when vloer-run started.
pub fn ignored_at_start(sig: Sig) -> bool {
    if sig == Sig::PIPE {
        return START_SIGPIPE_IGNORED.load(Ordering::SeqCst);
    }
    let mut old = MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: a query only (null new action) into zeroed, writable memory.
    let rc = unsafe { libc::sigaction(sig.raw(), std::ptr::null(), old.as_mut_ptr()) };
    // SAFETY: sigaction filled the struct when it returned 0; zeroed is a valid sigaction too.
    rc == 0 && unsafe { old.assume_init() }.sa_sigaction == libc::SIG_IGN
}

/// The soft RLIMIT_NOFILE vloer-run was started with, when it raised its own (u64::MAX: not raised).
static START_NOFILE_SOFT: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(u64::MAX);

/// Raises vloer-run's own soft limit on open descriptors to the hard limit: a stop holds one pidfd
/// per process, and the common soft limit of 1024 would turn a stop of a larger tree into EMFILE
/// and an unconfirmed verdict. The child gets the limit vloer-run was started with.
pub fn raise_nofile_limit() {
    let mut lim = MaybeUninit::<libc::rlimit>::zeroed();
    // SAFETY: getrlimit writes one rlimit into valid memory; a zeroed rlimit is valid too.
    let lim = unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, lim.as_mut_ptr()) != 0 {
            return;
        }
        lim.assume_init()
    };
    if lim.rlim_cur >= lim.rlim_max {
        return;
    }
    let raised = libc::rlimit {
        rlim_cur: lim.rlim_max,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: setrlimit reads one valid rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
        START_NOFILE_SOFT.store(lim.rlim_cur as u64, Ordering::SeqCst);
    }
}

/// Fills fds 0-2 that were closed at start with /dev/null, so that no descriptor vloer-run opens
/// later (a socket, the signalfd) can be mistaken for stdout or stderr. The child gets them closed.
#[cfg_attr(test, allow(dead_code))]
pub fn occupy_closed_std_fds() {
    for (fd, closed) in START_FD_CLOSED.iter().enumerate() {
        if closed.load(Ordering::SeqCst) {
            // SAFETY: plain open with a static NUL-terminated path; the result is checked.
            let got = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
            if got >= 0 && got != fd as RawFd {
                // SAFETY: both descriptors are valid; dup3 gives `fd` the CLOEXEC copy we want.
                unsafe {
                    libc::dup3(got, fd as RawFd, libc::O_CLOEXEC);
                    libc::close(got);
                }
            } else if got == fd as RawFd {
                // Already at the right number, with CLOEXEC set by open.
            }
        }
    }
}

/// Whether the standard descriptor `fd` (0-2) was closed when vloer-run started. It holds
/// /dev/null now, so a write to it "succeeds" without reaching anyone: the verdict sink must
/// treat it as missing.
pub fn closed_at_start(fd: RawFd) -> bool {
    usize::try_from(fd)
        .ok()
        .and_then(|i| START_FD_CLOSED.get(i))
        .is_some_and(|c| c.load(Ordering::SeqCst))
}

// ---------------------------------------------------------------------------------------------
// Signals in: a signalfd over every catchable signal.

/// Blocks every signal vloer-run handles and returns a signalfd that reports them: 1 to 64 but
/// SIGKILL and SIGSTOP. glibc's sigfillset and sigprocmask leave out 32 and 33 (its own), and a
/// `kill -33` would then end vloer-run with the tree orphaned, so the set is built and blocked
/// here with the kernel's calls. SIGPIPE is in it too: a sent one is forwarded, and the one the
/// kernel raises for our own write to a closed pipe is told apart by its sender (`SigInfo`).
pub fn signalfd_for_all() -> io::Result<OwnedFd> {
    // An inherited SIG_IGN for SIGCHLD would make the kernel reap children behind our back.
    // SAFETY: setting SIG_DFL installs no handler, so no code of ours runs asynchronously.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
    }
    block_into_signalfd(!(kernel_bit(Sig::KILL) | kernel_bit(Sig::STOP)))
}

/// The kernel's own signal set: one bit per signal, 1 to 64.
type KernelSigset = u64;

/// `sig`'s bit in a `KernelSigset`.
fn kernel_bit(sig: Sig) -> KernelSigset {
    1 << (sig.raw() - 1)
}

/// Blocks the signals of `mask` (the kernel's layout) and returns a non-blocking signalfd over
/// them, through the raw syscalls, which take every signal number glibc's wrappers refuse.
fn block_into_signalfd(mask: KernelSigset) -> io::Result<OwnedFd> {
    let size = std::mem::size_of::<KernelSigset>();
    // SAFETY: rt_sigprocmask reads one 8-byte set (the size passed) from valid memory and writes
    // nothing (null old set); vloer-run has a single thread at this point.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK,
            &mask as *const KernelSigset,
            std::ptr::null_mut::<KernelSigset>(),
            size,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
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

// ---------------------------------------------------------------------------------------------
// The child between fork and exec.

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
fn child_pre_exec(setup: &ChildSetup) -> io::Result<()> {
    // SAFETY: every call below is async-signal-safe (setsid, ioctl, sigprocmask, tcsetpgrp, signal,
    // close, getrlimit, setrlimit, prctl, getppid, getpid) and uses only stack data and the
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
    // Room for execvp's own stack use (PATH candidates, the script fallback's argv copy).
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

// ---------------------------------------------------------------------------------------------
// Reaping.

/// What `waitpid` reported for one child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildState {
    Exited(i32),
    Signaled(Sig),
    Stopped(Sig),
    Continued,
}

/// Reaps one child without blocking; `None` when no child has changed state. Stop and continue
/// reports are asked of `job` alone (the main child, the only one whose are acted on): with
/// WUNTRACED | WCONTINUED, each waitpid(-1) also checks the signal state of every live child it
/// passes on its way to a zombie, which made reaping 5000 orphans as PID 1 slower than tini's.
pub fn wait_any(job: Option<Pid>) -> io::Result<Option<(Pid, ChildState)>> {
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
            Some(libc::ECHILD) => Ok(None),
            _ => Err(err),
        };
    }
    if pid == 0 {
        return Ok(None);
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
    Ok(Some((Pid::from_raw(pid), state)))
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
    let mut info = MaybeUninit::<libc::siginfo_t>::zeroed();
    // SAFETY: waitid writes one siginfo into valid, zeroed memory. WNOWAIT leaves a zombie to be
    // reaped by `wait_any`; WNOHANG makes the call non-blocking.
    let rc = unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            info.as_mut_ptr(),
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT | libc::__WALL,
        )
    };
    if rc < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::ECHILD) => Ok(Children::None),
            _ => Err(err),
        };
    }
    // SAFETY: waitid returned 0, so the struct is initialised (zeroed where no child was ready).
    let pid = unsafe { info.assume_init().si_pid() };
    Ok(if pid == 0 {
        Children::Live
    } else {
        Children::Zombies
    })
}

// ---------------------------------------------------------------------------------------------
// Signals out, pid-safe where the kernel has pidfds.

static NO_PIDFD: AtomicBool = AtomicBool::new(false);

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

/// Sends `sig` through a pidfd, so a recycled pid can never be hit.
pub fn pidfd_send_signal(fd: BorrowedFd<'_>, sig: Sig) -> io::Result<()> {
    // SAFETY: the descriptor is a live pidfd we own; info is NULL as the syscall allows.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            sig.raw(),
            std::ptr::null::<libc::siginfo_t>(),
            0 as libc::c_uint,
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
fn parent_in_other_group_of_session() -> bool {
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
    // The kernel's struct sigaction, zeroed: SIG_DFL, no flags, no restorer, an empty mask. It
    // is 24 or 32 bytes depending on the architecture; four words cover both.
    let default_action = [0u64; 4];
    let bit = kernel_bit(sig);
    // SAFETY: setrlimit reads one valid rlimit. rt_sigaction reads the zeroed action from valid
    // memory of at least the kernel's size and writes nothing (null old action); the raw call
    // also takes 32 and 33, whose glibc handlers must not run here. kill only queues `sig`,
    // which is blocked (the signalfd set); unblocking it delivers it with its default action.
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig.raw(),
            default_action.as_ptr(),
            std::ptr::null_mut::<u64>(),
            std::mem::size_of::<KernelSigset>(),
        );
        libc::kill(libc::getpid(), sig.raw());
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_UNBLOCK,
            &bit as *const KernelSigset,
            std::ptr::null_mut::<KernelSigset>(),
            std::mem::size_of::<KernelSigset>(),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Process-wide settings.

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

// ---------------------------------------------------------------------------------------------
// The entry point.

/// The process entry point, in place of the one std generates (`#![no_main]` in main.rs). std's
/// runtime set-up was a fifth of the instructions of a whole `vloer-run -- true` and a quarter of
/// its syscalls before the child starts: it finds the main thread's stack guard by reading and
/// sscanf-parsing /proc/self/maps, and puts SIGSEGV/SIGBUS handlers on an alternate signal stack,
/// only to print a message on a stack overflow (which now ends vloer-run with a plain SIGSEGV).
/// What vloer-run needs of that set-up is done here: SIGPIPE ignored, so a write to a closed
/// pipe is an EPIPE error (the child still gets the disposition vloer-run started with, see
/// `child_pre_exec`), and closed standard descriptors filled with /dev/null before anything can
/// be opened in their place (std left them without close-on-exec; see `occupy_closed_std_fds`).
/// Arguments and environment reach std as before, through glibc's .init_array call.
#[cfg(not(test))]
#[no_mangle]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    // SAFETY: setting SIG_IGN installs no handler; the start disposition was captured earlier.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    occupy_closed_std_fds();
    libc::c_int::from(crate::vloer_main())
}
