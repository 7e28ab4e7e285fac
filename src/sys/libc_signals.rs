//! The signals a libc keeps for itself, and the one thread vloer-run starts.
//!
//! musl numbers 32 to 34 as its own (cancellation, timers, `__synccall`), and its first
//! `pthread_create` unblocks 33 and 34 in the calling thread, where the new thread inherits
//! them. Unblocked, they bypass the signalfd and end the process by their default action: one
//! `kill -34` after a `status` (which starts the /proc reader thread) would end vloer-run without
//! a verdict. So under musl they are ignored from the start, which makes any moment they are
//! unblocked harmless, and every thread blocks them again (a blocked signal is never discarded
//! as ignored: it still reaches the signalfd). glibc blocks nothing behind our back. With 34
//! blocked in every thread, nothing may use musl's `__synccall`, which waits for each thread to
//! take it: its setuid family does (vloer-run never calls it), its setrlimit only on kernels
//! without prlimit64 (before 2.6.36).

use super::*;

/// The signals musl keeps for itself.
#[cfg(target_env = "musl")]
const OWN: [i32; 3] = [32, 33, 34];
#[cfg(not(target_env = "musl"))]
const OWN: [i32; 0] = [];

const SIG_IGN: u64 = 1;

/// Which of them were ignored when vloer-run started (bit n-1 for signal n): glibc's
/// posix_spawn leaves its own 32 and 33 ignored in every program it starts. They are forwarded
/// all the same, as before (libc's sigaction cannot even read them); this is only so that the
/// child gets them as vloer-run did.
static IGNORED_AT_START: AtomicU64 = AtomicU64::new(0);

/// Ignores the libc's own signals; they stay blocked, and so still reach the signalfd.
pub(super) fn ignore_libc_signals() {
    for sig in OWN {
        if set_kernel_action(sig, SIG_IGN) == Some(SIG_IGN) {
            IGNORED_AT_START.fetch_or(1 << (sig - 1), Ordering::Relaxed);
        }
    }
}

/// In the child before exec: the libc's own signals as vloer-run got them. Async-signal-safe:
/// raw syscalls and an atomic load only.
pub(super) fn restore_libc_signals_in_child() {
    let ignored = IGNORED_AT_START.load(Ordering::Relaxed);
    for sig in OWN {
        if ignored & (1 << (sig - 1)) == 0 {
            set_kernel_action(sig, 0);
        }
    }
}

/// Starts a thread that, like vloer-run's main thread, blocks every signal the signalfd reports,
/// and blocks them again in the caller (musl's first thread unblocks two of them there).
pub fn spawn_thread(
    builder: std::thread::Builder,
    f: impl FnOnce() + Send + 'static,
) -> io::Result<std::thread::JoinHandle<()>> {
    let handle = builder.spawn(move || {
        let _ = change_mask(libc::SIG_BLOCK, signalfd_mask());
        f()
    });
    let _ = change_mask(libc::SIG_BLOCK, signalfd_mask());
    handle
}
