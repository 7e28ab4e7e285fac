//! The stop's turns told under -v, in words: why SIGKILL followed, and why the stop gave up.

use crate::msg;
use std::time::Duration;

/// The grace is over with `left` signalled processes still alive: SIGKILL follows.
pub(super) fn grace_ran_out(grace: Duration, left: usize) {
    msg::verbose(format_args!(
        "the grace of {} ran out{}: SIGKILL",
        humantime::format_duration(grace),
        with_left(left)
    ));
}

/// The SIGKILL rounds are over with `left` processes still alive.
pub(super) fn kill_timeout_ran_out(kill_timeout: Duration, left: usize) {
    msg::verbose(format_args!(
        "the kill timeout of {} ran out{}",
        humantime::format_duration(kill_timeout),
        with_left(left)
    ));
}

/// Every process left refused SIGKILL, and a rescan found no other.
pub(super) fn all_refused_sigkill(left: usize) {
    msg::verbose(format_args!(
        "{} left refused SIGKILL; waiting longer cannot help",
        processes(left)
    ));
}

/// " with 1 process left", " with 3 processes left"; empty for none.
fn with_left(n: usize) -> String {
    match n {
        0 => String::new(),
        n => format!(" with {} left", processes(n)),
    }
}

/// "1 process", "3 processes".
fn processes(n: usize) -> String {
    match n {
        1 => "1 process".into(),
        n => format!("{n} processes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_as_words() {
        assert_eq!(with_left(0), "");
        assert_eq!(with_left(1), " with 1 process left");
        assert_eq!(with_left(3), " with 3 processes left");
    }
}
