//! When a scan waits for the reaper: a scan reads every live member from /proc, while a zombie
//! reaped costs far less and a member that dies first need not be read at all.

use super::*;

/// The most turns in a row a scan waits for a full reap batch: a tree that makes zombies faster
/// than they are reaped must still be scanned, and its forks signalled.
const MOST_TURNS_DEFERRED: u32 = 8;

/// A group call that has ended at least this many processes met a tree whose scan would cost
/// more than the wait for it. Below this (and `LONG_CALL`), the scan goes at once, and a member
/// outside the group hears the signal as early as it can.
const LARGE: usize = 256;

/// A group call that took this much CPU time reached a large group, even before any member died
/// of it: the kernel signals and wakes each member in the call. Measured here: 77–600 µs for 200
/// members, 0.5–1.5 ms for 1000, 1.6–9 ms for 5000 (CPU time: wall time also counts the members
/// that ran before the call returned, 4.9 ms once for 200).
const LONG_CALL: Duration = Duration::from_millis(1);

/// How long the first scan after a group call waits after the last child reaped: a dying group
/// reaps far more often than this, while a group that has stopped dying, or ignores the signal,
/// does not. Tens of milliseconds, as the members still running hold the CPUs of a small machine
/// between exits (20 ms measured here, two groups of 1000 stopping side by side).
const QUIET: Duration = Duration::from_millis(50);

/// What one turn's reap did, as a stop needs to know it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Reaped {
    /// Children that ended and were reaped.
    pub ended: usize,
    /// The batch was full: more zombies may be queued.
    pub more_waiting: bool,
    /// The kernel said vloer-run has no child left at all.
    pub none_left: bool,
}

impl Reaped {
    /// `later` after this: the counts add up, and the state is the later one's.
    pub fn then(self, later: Reaped) -> Reaped {
        Reaped {
            ended: self.ended + later.ended,
            ..later
        }
    }
}

/// The reaper as a stop has seen it.
#[derive(Default)]
pub(super) struct Pace {
    /// Turns in a row whose scan waited for a full reap batch.
    deferred: u32,
    /// Children reaped since the stop began.
    ended: usize,
    /// The last turn that reaped one.
    last_ended: Option<Instant>,
}

impl Pace {
    pub(super) fn note(&mut self, now: Instant, r: Reaped) {
        if r.ended > 0 {
            self.ended += r.ended;
            self.last_ended = Some(now);
        }
    }

    /// Whether the group the call reached is large: the call took `call_cpu`, or `LARGE` of
    /// its members have died.
    fn large(&self, call_cpu: Duration) -> bool {
        self.ended >= LARGE || call_cpu >= LONG_CALL
    }

    /// Until when a scan waits for a large group to die, if it does (see `Stop::group_dying`):
    /// `QUIET` after the last exit, or `bound` before the first one.
    fn group_wait(&self, call_cpu: Duration, bound: Instant, now: Instant) -> Option<Instant> {
        if !self.large(call_cpu) {
            return None;
        }
        let until = match self.last_ended {
            Some(last) => (last + QUIET).min(bound),
            // Before the first exit: every member the call woke may have to run first (a group
            // of 3000 held two CPUs for over 95 ms before one of them exited), so the scan waits
            // for that exit, or the bound if none comes.
            None => bound,
        };
        (now < until).then_some(until)
    }
}

impl Stop {
    /// Whether this turn's scan waits for the reaper: while zombies are queued (for a few turns
    /// at most), and after a group call while a large group is still dying of it (see
    /// `group_dying`). Never once no child is left: the scan then costs nothing and ends the stop.
    pub(super) fn waits_for_reaper(&mut self, now: Instant, r: Reaped) -> bool {
        if r.none_left {
            self.pace.deferred = 0;
            return false;
        }
        if r.more_waiting && self.pace.deferred < MOST_TURNS_DEFERRED {
            self.pace.deferred += 1;
            return true;
        }
        self.pace.deferred = 0;
        if self.group_dying(now).is_some() {
            return true;
        }
        // No reap for a while, but the run may have been off the CPU while the group went on
        // dying: zombies waiting (their SIGCHLD not read yet) still say it is.
        self.waits_for_group(now) && matches!(sys::children_left(), Ok(sys::Children::Zombies))
    }

    /// Until when the first scan after the group call waits, if it does: while the group dies of
    /// the call, each member a scan reads is one the reaper would have collected a moment later,
    /// and a scan in the middle of a 5000-process group read 600 to 4600 of them (vloer-run's
    /// CPU for the stop went from about 30 ms to 150 and more). Until `QUIET` after the last reap.
    pub(super) fn group_dying(&self, now: Instant) -> Option<Instant> {
        if !self.scan_due() {
            return None;
        }
        self.pace
            .group_wait(self.call_cpu(), self.wait_bound(), now)
    }

    /// The first scan after a call that reached a large group, before the bound: a quarter of
    /// the grace, so that a member outside the group keeps three quarters of it however long
    /// the group takes to die.
    fn waits_for_group(&self, now: Instant) -> bool {
        self.scan_due() && self.pace.large(self.call_cpu()) && now < self.wait_bound()
    }

    fn call_cpu(&self) -> Duration {
        self.group.as_ref().map_or(Duration::ZERO, |g| g.call_cpu)
    }

    fn wait_bound(&self) -> Instant {
        self.started + self.plan.grace / 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reaped(ended: usize) -> Reaped {
        Reaped {
            ended,
            ..Reaped::default()
        }
    }

    #[test]
    fn only_turns_that_reaped_count_as_the_reaper_at_work() {
        let t0 = Instant::now();
        let mut pace = Pace::default();
        pace.note(t0, Reaped::default());
        assert_eq!((pace.ended, pace.last_ended), (0, None));
        let t1 = t0 + Duration::from_millis(1);
        pace.note(t1, reaped(3));
        pace.note(t1 + QUIET, Reaped::default());
        assert_eq!((pace.ended, pace.last_ended), (3, Some(t1)));
    }

    #[test]
    fn a_reap_adds_up_and_its_state_is_the_latest() {
        let first = Reaped {
            ended: 1024,
            more_waiting: true,
            none_left: false,
        };
        let r = first.then(Reaped {
            ended: 5,
            more_waiting: false,
            none_left: true,
        });
        assert_eq!((r.ended, r.more_waiting, r.none_left), (1029, false, true));
    }

    #[test]
    fn a_small_group_is_scanned_at_once() {
        let t0 = Instant::now();
        let bound = t0 + Duration::from_secs(1);
        let mut pace = Pace::default();
        assert_eq!(pace.group_wait(Duration::from_micros(150), bound, t0), None);
        pace.note(t0, reaped(LARGE - 1));
        assert_eq!(pace.group_wait(Duration::from_micros(150), bound, t0), None);
    }

    #[test]
    fn a_large_group_is_waited_for_until_it_stops_dying_or_the_bound() {
        let t0 = Instant::now();
        let bound = t0 + Duration::from_secs(1);
        let long = LONG_CALL;
        let mut pace = Pace::default();
        // Before its first exit: up to the bound, and no longer.
        assert_eq!(pace.group_wait(long, bound, t0), Some(bound));
        assert_eq!(pace.group_wait(long, bound, bound), None);
        // Dying: until QUIET after the last exit.
        let t1 = t0 + Duration::from_millis(10);
        pace.note(t1, reaped(40));
        assert_eq!(pace.group_wait(long, bound, t1), Some(t1 + QUIET));
        assert_eq!(pace.group_wait(long, bound, t1 + QUIET), None);
        // Large by its dead alone, whatever the call took; still capped by the bound.
        let mut pace = Pace::default();
        let late = bound - Duration::from_millis(1);
        pace.note(late, reaped(LARGE));
        assert_eq!(pace.group_wait(Duration::ZERO, bound, late), Some(bound));
    }
}
