//! vloer-run's own messages: stderr only, always prefixed `vloer-run:`, filtered by -v/-q.

use crate::sys::{self, NoWait};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::fmt::Arguments;
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How much vloer-run says on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Errors only (-q).
    Quiet = 0,
    /// Errors and warnings.
    Normal = 1,
    /// Also the story of the run and its stop: each signal, each reap (-v).
    Verbose = 2,
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Normal as u8);

/// When the run began: every -v line says how long after it happened.
static START: OnceLock<Instant> = OnceLock::new();

/// -v lines left out because stderr's reader was behind, not yet reported.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Whether -v lines may be left out: stderr is a pipe or a socket (asked once). A terminal or a
/// file takes every line, as the others.
static DROPPABLE: OnceLock<bool> = OnceLock::new();

/// A terminal's reader is a person, and a file's a disk: only a pipe's or a socket's reader can
/// fall behind for good.
fn droppable(fd: BorrowedFd<'_>) -> bool {
    *DROPPABLE.get_or_init(|| {
        nix::sys::stat::fstat(fd).is_ok_and(|st| {
            let kind = st.st_mode & libc::S_IFMT;
            kind == libc::S_IFIFO || kind == libc::S_IFSOCK
        })
    })
}

/// Sets how much is said from now on; -v lines count their time from this call.
pub fn set_level(level: Level) {
    START.get_or_init(Instant::now);
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Whether -v lines are written: detail that costs work to gather is gathered only then.
pub fn is_verbose() -> bool {
    LEVEL.load(Ordering::Relaxed) >= Level::Verbose as u8
}

/// A -v line's time: seconds since the run began, to the millisecond (`+1.503s`).
fn offset(now: Instant) -> String {
    let since = now.saturating_duration_since(*START.get_or_init(Instant::now));
    format!("+{}.{:03}s", since.as_secs(), since.subsec_millis())
}

/// What to say of `n` -v lines left out (empty if none).
fn notice(n: u64) -> String {
    match n {
        0 => String::new(),
        n => format!("vloer-run: {n} -v messages left out: stderr was not read fast enough\n"),
    }
}

/// The line for `args`, after the notice of the `dropped` -v lines left out before it.
fn line(dropped: u64, args: Arguments<'_>) -> String {
    format!("{}vloer-run: {args}\n", notice(dropped))
}

/// Writes `text`, waiting for stderr's reader as long as it takes.
fn write_waiting(text: &str) {
    // A closed or broken stderr must not kill or stop vloer-run: the child still needs stopping.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

fn emit(args: Arguments<'_>) {
    write_waiting(&line(DROPPED.swap(0, Ordering::Relaxed), args));
}

/// Writes `text` unless stderr's reader is behind; false when it was left out.
fn emit_nowait(text: &str) -> bool {
    let stderr = std::io::stderr();
    let mut lock = stderr.lock();
    if droppable(lock.as_fd()) {
        match sys::write_nowait(lock.as_fd(), text.as_bytes()) {
            NoWait::Wrote(n) if n < text.len() => {
                let _ = lock.write_all(&text.as_bytes()[n..]);
                return true;
            }
            NoWait::Wrote(_) | NoWait::Failed => return true,
            NoWait::Full => return false,
            // An older kernel: written as before.
            NoWait::Unsupported => {}
        }
    }
    let _ = lock.write_all(text.as_bytes());
    true
}

/// An error: always printed.
pub fn error(args: Arguments<'_>) {
    emit(args);
}

/// A warning: silenced by -q.
pub fn warn(args: Arguments<'_>) {
    if LEVEL.load(Ordering::Relaxed) >= Level::Normal as u8 {
        emit(args);
    }
}

/// Detail: only with -v, after the time since the run began. Left out (and counted) when
/// stderr's reader is behind: a line per reaped process, written at the reader's pace, held the
/// reaper back while a forking tree filled the pid space with zombies.
pub fn verbose(args: Arguments<'_>) {
    if !is_verbose() {
        return;
    }
    let dropped = DROPPED.swap(0, Ordering::Relaxed);
    let text = line(dropped, format_args!("{} {args}", offset(Instant::now())));
    if !emit_nowait(&text) {
        DROPPED.fetch_add(dropped + 1, Ordering::Relaxed);
    }
}

/// Says how many -v lines were left out, if any: waiting for stderr's reader as every other
/// line does (`None`), or at most `wait` for it to make room.
pub fn report_dropped(wait: Option<Duration>) {
    let text = notice(DROPPED.swap(0, Ordering::Relaxed));
    if text.is_empty() {
        return;
    }
    match wait {
        None => write_waiting(&text),
        Some(wait) => {
            let stderr = std::io::stderr();
            let mut fds = [PollFd::new(stderr.as_fd(), PollFlags::POLLOUT)];
            let ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
            if matches!(poll(&mut fds, PollTimeout::from(ms)), Ok(n) if n > 0) {
                emit_nowait(&text);
            }
        }
    }
}
