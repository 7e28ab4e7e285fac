//! The one integration-test binary: every test runs the real vloer-run against the real kernel.

mod harness;
// The control socket: stop, status, exec, and a server that survives its clients.
mod control;
// Interactive use through a real pseudo-terminal: Ctrl-C, Ctrl-Z/fg/bg, window size, hand-back.
mod tty;
// What ships: the examples/ script for real, the termination log, --version.
mod ship;
// Faults (issue 7): broken output, recycled pids, fork storms, long runs, repeated and fatal signals.
mod faults;
// Faults: a caller that stops reading stderr holds nothing back.
mod slow_reader;
// Issue 2, the exit-status table: the child's code, 128+N, 124, 126, 127, --preserve-status, --success-exit.
mod exit_status;
// Issue 2, what starts a stop: child_exited, signal, timeout, parent_died.
mod reasons;
// Issue 2, stop signal, event-driven grace, SIGKILL after it.
mod escalation;
// Step 1's one call to the child's process group: each member hears it once.
mod group_call;
// Issue 2, what the stop covers: descendants, setsid() daemons, processes forking during the stop.
mod scope;
// Issue 2, orphaned zombies reaped as subreaper and as PID 1 of a pid namespace.
mod reaping;
// Issue 2, no proof no true: unkillable survivors (300 of them in 4096 bytes), an unreadable /proc.
mod unconfirmed;
// Issue 2, signal mask and dispositions inherited, forwarding, --forward-to, --rewrite.
mod signals;
// Issue 2, VLOER_* variables, flags beating them, and bad input refused with one line and 125.
mod config;
// Issue 2, verdict sinks: file by rename, stdout, FIFO, /dev/fd/N, character device, off.
mod sinks;
// Huge inputs (issue 7): argv near ARG_MAX, 10,000 variables, odd COMMAND paths, control fuzzing.
mod huge;
// Issue 11, no lie, no silence, no hang: hidden and half-dead processes, every signal, no pidfds.
mod truth;
// Issue 12, transparent to its caller: the child first in a stop, ending by the child's signal,
// Ctrl-C in loops, an exec with a terminal.
mod transparent;
// Issue 15, a newcomer's first hour: -v in words, the release tarball.
mod newcomer;
// Issue 15, in a container runtime: PID 1 waits for its answered clients.
mod container;
// Issue 14, what a stop costs vloer-run: nothing is read of what already exited.
mod cost;
// The folder sweep: what holds or names a swept folder, inside the run or not, as status shows it.
mod sweep;
