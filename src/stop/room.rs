//! How many pidfds a stop may hold. Under a low limit on open descriptors (a hard RLIMIT_NOFILE
//! below the tree's size) one pidfd per process would leave none to read /proc with, and the stop
//! would give up half-way. Past its room, a stop tracks processes by pid and start time instead,
//! rescanning for their exits, and carries on.

use crate::proctable::files;
use crate::sys;

/// Descriptors left free for /proc reads, control clients and the stop of an exec.
const RESERVE: usize = 16;

/// A limit this high leaves room for any tree a pid space holds; the open ones are not counted.
const AMPLE: u64 = 1 << 16;

/// What a stop's pidfds use of the descriptor limit.
#[derive(Default)]
pub(super) struct Room {
    /// How many pidfds the stop may hold, measured when first asked.
    room: Option<usize>,
    /// How many it holds.
    pub held: usize,
    /// Some tracked process has no pidfd (on a kernel that has them): its exit wakes nobody, so
    /// the stop rescans on a tick, as without pidfds.
    pub plain: bool,
}

impl Room {
    /// Whether one more pidfd fits.
    pub fn may_open(&mut self) -> bool {
        self.held < *self.room.get_or_insert_with(measure)
    }

    /// Counts afresh from what is tracked now (`true`: with a pidfd).
    pub fn recount(&mut self, pidfds: impl Iterator<Item = bool>) {
        let (mut held, mut plain) = (0, false);
        for has in pidfds {
            if has {
                held += 1;
            } else {
                plain = true;
            }
        }
        self.held = held;
        self.plain = plain && sys::have_pidfd();
    }

    /// A process is tracked, with a pidfd or without.
    pub fn note(&mut self, with_pidfd: bool) {
        if with_pidfd {
            self.held += 1;
        } else if sys::have_pidfd() {
            self.plain = true;
        }
    }
}

fn measure() -> usize {
    let Some(limit) = sys::nofile_limit() else {
        return usize::MAX;
    };
    if limit >= AMPLE {
        return usize::try_from(limit).unwrap_or(usize::MAX) - 1024;
    }
    // Cannot count what is open: leave the pidfds half the limit.
    let open = files::open_descriptors().unwrap_or(limit as usize / 2);
    (limit as usize).saturating_sub(open + RESERVE)
}
