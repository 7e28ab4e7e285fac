//! The one place vloer-run sleeps: poll(2) over its descriptors until an event or a deadline.

use nix::poll::{PollFd, PollFlags, PollTimeout};
use std::io;
use std::os::fd::BorrowedFd;
use std::time::Instant;

/// What to wait for, with the caller's token for it.
pub struct Interest<'fd, T> {
    pub token: T,
    pub fd: BorrowedFd<'fd>,
    pub events: PollFlags,
}

/// Sleeps in the kernel until one of `interests` is ready or `deadline` passes (no deadline: no
/// wake-up at all). Returns the ready tokens with what happened to them.
pub fn wait<T: Copy>(
    interests: &[Interest<'_, T>],
    deadline: Option<Instant>,
) -> io::Result<Vec<(T, PollFlags)>> {
    let mut fds: Vec<PollFd<'_>> = interests
        .iter()
        .map(|i| PollFd::new(i.fd, i.events))
        .collect();
    let timeout = match deadline {
        None => PollTimeout::NONE,
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now());
            // Round up so we never wake just before the deadline and spin.
            let ms = left
                .as_nanos()
                .div_ceil(1_000_000)
                .min(i32::MAX as u128 - 1) as i32;
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
        }
    };
    match nix::poll::poll(&mut fds, timeout) {
        Ok(_) => {}
        Err(nix::errno::Errno::EINTR) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    }
    Ok(interests
        .iter()
        .zip(&fds)
        .filter_map(|(i, f)| f.revents().filter(|r| !r.is_empty()).map(|r| (i.token, r)))
        .collect())
}
