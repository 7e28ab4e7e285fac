//! The state vloer-run was started with, captured before Rust's runtime touches it, and the
//! process set-up that replaces std's.

use super::*;

pub(super) static mut START_MASK: MaybeUninit<libc::sigset_t> = MaybeUninit::uninit();
pub(super) static START_CAPTURED: AtomicBool = AtomicBool::new(false);
pub(super) static START_SIGPIPE_IGNORED: AtomicBool = AtomicBool::new(false);
pub(super) static START_FD_CLOSED: [AtomicBool; 3] = [
    AtomicBool::new(false),
    AtomicBool::new(false),
    AtomicBool::new(false),
];

pub(super) extern "C" fn capture_start_state() {
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
pub(super) static CAPTURE_START_STATE: extern "C" fn() = capture_start_state;

/// The signal mask vloer-run was started with.
pub(super) fn start_mask() -> libc::sigset_t {
    if START_CAPTURED.load(Ordering::SeqCst) {
        // SAFETY: START_MASK was fully written before START_CAPTURED was set, and is never
        // written again.
        unsafe { std::ptr::addr_of!(START_MASK).read().assume_init() }
    } else {
        // The hook did not run (it always does on Linux); an empty mask is the documented default.
        empty_set()
    }
}

pub(super) fn empty_set() -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the whole set it is given.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        set.assume_init()
    }
}

/// Signals whose start-up disposition `ignored_at_start` has asked the kernel for, and which of
/// them were ignored (bit n-1 for signal n). vloer-run installs no handler while it runs, so the
/// first answer stays true, and a forwarded signal costs one syscall less from the second on.
static DISPOSITION_KNOWN: AtomicU64 = AtomicU64::new(0);
static DISPOSITION_IGNORED: AtomicU64 = AtomicU64::new(0);

/// Whether `sig` was ignored (SIG_IGN) when vloer-run started.
pub fn ignored_at_start(sig: Sig) -> bool {
    if sig == Sig::PIPE {
        return START_SIGPIPE_IGNORED.load(Ordering::SeqCst);
    }
    let bit = 1u64.checked_shl(sig.raw() as u32 - 1).unwrap_or(0);
    if DISPOSITION_KNOWN.load(Ordering::Relaxed) & bit != 0 {
        return DISPOSITION_IGNORED.load(Ordering::Relaxed) & bit != 0;
    }
    let mut old = MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: a query only (null new action) into zeroed, writable memory.
    let rc = unsafe { libc::sigaction(sig.raw(), std::ptr::null(), old.as_mut_ptr()) };
    // SAFETY: sigaction filled the struct when it returned 0; zeroed is a valid sigaction too.
    let ignored = rc == 0 && unsafe { old.assume_init() }.sa_sigaction == libc::SIG_IGN;
    if rc == 0 {
        if ignored {
            DISPOSITION_IGNORED.fetch_or(bit, Ordering::Relaxed);
        }
        DISPOSITION_KNOWN.fetch_or(bit, Ordering::Relaxed);
    }
    ignored
}

/// The soft RLIMIT_NOFILE vloer-run was started with, when it raised its own (u64::MAX: not raised).
pub(super) static START_NOFILE_SOFT: AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);

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

/// vloer-run's own soft limit on open descriptors now (after `raise_nofile_limit`).
pub fn nofile_limit() -> Option<u64> {
    let mut lim = MaybeUninit::<libc::rlimit>::zeroed();
    // SAFETY: getrlimit writes one rlimit into valid memory; a zeroed rlimit is valid too.
    let lim = unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, lim.as_mut_ptr()) != 0 {
            return None;
        }
        lim.assume_init()
    };
    // rlim_t is narrower than u64 on some 32-bit targets.
    #[allow(clippy::unnecessary_cast)]
    Some(lim.rlim_cur as u64)
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

/// The command line `main` was given, as owned strings. std's own `args_os` is empty where std's
/// runtime set-up is skipped on musl (only glibc hands argv to .init_array functions).
///
/// # Safety
/// `argc` and `argv` must be exactly what the C runtime passed to `main`.
#[cfg_attr(test, allow(dead_code))]
pub unsafe fn args_from_main(
    argc: libc::c_int,
    argv: *const *const libc::c_char,
) -> Vec<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    let n = usize::try_from(argc).unwrap_or(0);
    (0..n)
        .map(|i| {
            // SAFETY: the C runtime gives `main` argc valid pointers to NUL-terminated strings
            // that live as long as the process, which the caller vouches for.
            let arg = unsafe { std::ffi::CStr::from_ptr(*argv.add(i)) };
            std::ffi::OsStr::from_bytes(arg.to_bytes()).to_os_string()
        })
        .collect()
}

/// What vloer-run needs of std's runtime set-up, which it skips (see `main` in main.rs): SIGPIPE
/// ignored, so a write to a closed pipe is an EPIPE error (the child still gets the disposition
/// vloer-run started with, see `child_pre_exec`), and closed standard descriptors filled with
/// /dev/null before anything can be opened in their place.
#[cfg_attr(test, allow(dead_code))]
pub fn prepare_process() {
    // SAFETY: setting SIG_IGN installs no handler; the start disposition was captured earlier.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    occupy_closed_std_fds();
}
