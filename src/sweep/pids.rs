//! Whether a scan's listings of /proc can be trusted to have shown every process that kept a
//! folder held while the scan looked.
//!
//! A listing walks the pids upwards, and a new process gets a higher pid than every earlier one
//! until the kernel's pid counter comes round to the bottom again. So a process that forks away
//! from its pid is caught up with by the walk (its child's pid is ahead of it), and a pid the
//! scan already read cannot name another process, unless the counter came round while the scan
//! looked. These marks tell whether it could have.

use super::proc::{self, Got};

/// The lowest pid the kernel hands out once its counter comes round (RESERVED_PIDS).
const RESERVED: u64 = 300;

/// The kernel's default pid_max, used when /proc/sys/kernel/pid_max cannot be read: a smaller
/// limit only makes the check stricter.
const DEFAULT_PID_MAX: u64 = 32_768;

/// The pid counter and the number of tasks ever forked, at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    /// The pid given last in our pid namespace (`/proc/loadavg`'s last field).
    last_pid: u64,
    /// Tasks forked since boot, threads included (`/proc/stat`'s `processes`).
    forks: u64,
    /// Tasks that exist now (`/proc/loadavg`'s `running/total`): each holds its pid.
    tasks: u64,
}

impl Mark {
    /// Now; None when /proc does not tell.
    pub fn now() -> Option<Mark> {
        let load = proc::read("loadavg").ok()?;
        let load = std::str::from_utf8(&load).ok()?;
        let mut fields = load.split_ascii_whitespace().skip(3);
        let tasks = fields.next()?.split_once('/')?.1.parse().ok()?;
        let last_pid = fields.next()?.parse().ok()?;
        let stat = proc::read("stat").ok()?;
        let forks = std::str::from_utf8(&stat)
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("processes "))?
            .trim()
            .parse()
            .ok()?;
        Some(Mark {
            last_pid,
            forks,
            tasks,
        })
    }
}

/// The kernel's pid limit now.
pub fn pid_max() -> u64 {
    match proc::read("sys/kernel/pid_max") {
        Got::Text(t) => std::str::from_utf8(&t)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(DEFAULT_PID_MAX),
        _ => DEFAULT_PID_MAX,
    }
}

/// Whether the pid counter may have come round between `before` and `after`: it is lower now, or
/// so many tasks were forked meanwhile that it could have gone all the way round. Going round
/// takes one fork per free pid; the tasks alive hold theirs, and process groups and sessions
/// of exited leaders a few more, which the factor of two leaves room for.
pub fn came_round(before: Mark, after: Mark, pid_max: u64) -> bool {
    if after.last_pid < before.last_pid {
        return true;
    }
    let held = before.tasks.max(after.tasks);
    let free = pid_max.saturating_sub(RESERVED).saturating_sub(held);
    after.forks.saturating_sub(before.forks).saturating_mul(2) >= free
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(last_pid: u64, forks: u64, tasks: u64) -> Mark {
        Mark {
            last_pid,
            forks,
            tasks,
        }
    }

    #[test]
    fn a_counter_that_went_down_came_round() {
        assert!(came_round(
            mark(32_000, 10, 300),
            mark(350, 900, 300),
            32_768
        ));
    }

    #[test]
    fn a_few_forks_upwards_did_not() {
        assert!(!came_round(
            mark(1_000, 10, 300),
            mark(1_400, 410, 300),
            32_768
        ));
        assert!(!came_round(
            mark(1_000, 10, 300),
            mark(1_000, 10, 300),
            32_768
        ));
    }

    #[test]
    fn enough_forks_to_go_all_the_way_round_count_even_when_the_counter_is_higher() {
        // 32768 - 300 - 300 free pids: 16,084 forks could have gone round (with room for the
        // pids that groups and sessions hold).
        assert!(came_round(
            mark(1_000, 0, 300),
            mark(1_200, 16_084, 300),
            32_768
        ));
        assert!(!came_round(
            mark(1_000, 0, 300),
            mark(1_200, 16_083, 300),
            32_768
        ));
        assert!(!came_round(
            mark(1_000, 0, 300),
            mark(1_200, 16_084, 300),
            4_194_304
        ));
    }

    #[test]
    fn this_machine_s_marks_are_readable_and_move_forward() {
        let a = Mark::now().expect("/proc/loadavg and /proc/stat");
        let child = std::process::Command::new("true").status();
        assert!(child.is_ok_and(|s| s.success()));
        let b = Mark::now().expect("/proc/loadavg and /proc/stat");
        assert!(b.forks > a.forks, "{a:?} {b:?}");
        assert!(pid_max() > RESERVED);
    }
}
