//! vloer-run's own messages: stderr only, always prefixed `vloer-run:`, filtered by -v/-q.

use std::fmt::Arguments;
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};

static LEVEL: AtomicU8 = AtomicU8::new(1);

/// 0: errors only (-q), 1: errors and warnings, 2: also each signal and reap (-v).
pub fn set_level(level: u8) {
    LEVEL.store(level, Ordering::Relaxed);
}

fn emit(args: Arguments<'_>) {
    // A closed or broken stderr must not kill or stop vloer-run: the child still needs stopping.
    let _ = writeln!(std::io::stderr().lock(), "vloer-run: {args}");
}

/// An error: always printed.
pub fn error(args: Arguments<'_>) {
    emit(args);
}

/// A warning: silenced by -q.
pub fn warn(args: Arguments<'_>) {
    if LEVEL.load(Ordering::Relaxed) >= 1 {
        emit(args);
    }
}

/// Detail: only with -v.
pub fn verbose(args: Arguments<'_>) {
    if LEVEL.load(Ordering::Relaxed) >= 2 {
        emit(args);
    }
}
