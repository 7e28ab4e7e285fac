//! The verdict delivered, once: to its sink, then to the control clients waiting for it; and
//! the status the run ends with.

use super::*;
use crate::verdict::Sink;

impl Ended {
    /// Writes the verdict to `sink` and answers the clients that asked for it. A verdict that
    /// cannot be written makes the status 125 (and goes to stderr instead, with the error).
    pub(super) fn deliver(self, sink: &Sink, pid1: bool) -> Exit {
        let Ended {
            mut verdict,
            control,
            stop_waiters,
            by_signal,
        } = self;
        // Serialising costs a run around `true` about a tenth of its time; `off` needs no line.
        let written = if *sink == Sink::Off {
            Ok(())
        } else {
            sink.write(&verdict.to_line())
        };
        if let Err(e) = written {
            msg::error(format_args!("{e}"));
            verdict.exit_code = 125;
            verdict.error = Some(match verdict.error.take() {
                Some(prev) => format!("{prev}; {e}"),
                None => e,
            });
            if *sink != Sink::Stderr {
                let _ = Sink::Stderr.write(&verdict.to_line());
            }
        }
        if let Some(mut control) = control {
            if pid1 {
                control.linger();
            }
            let line = verdict.to_line();
            for id in stop_waiters {
                control.send(id, &line, true);
            }
            // Give slow clients a moment to take their replies; as PID 1, up to a second to
            // exit (see `linger`). The socket is removed on drop.
            control.drain(Duration::from_millis(if pid1 { 1000 } else { 500 }));
        }
        Exit {
            code: verdict.exit_code,
            // Only while the status still says so: a verdict that could not be written made it
            // 125.
            by_signal: by_signal.filter(|s| verdict.exit_code == 128 + s.raw()),
        }
    }
}
