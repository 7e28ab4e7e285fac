//! The one integration-test binary: every test runs the real vloer-run against the real kernel.

mod harness;
// The control socket: stop, status and exec, and a server that survives its clients.
mod control;
// Interactive use through a real pseudo-terminal: Ctrl-C, Ctrl-Z/fg/bg, window size, hand-back.
mod tty;
// Help that fits an 80-column terminal, grouped under headings.
mod help;
// What ships: the examples/ script for real, the termination log, --version.
mod ship;
// The README's commands run as shown; the files and options it names exist.
mod readme;
// Faults: broken output, recycled pids, fork storms, long runs, repeated and fatal signals.
mod faults;
// Faults: a caller that stops reading stderr holds nothing back.
mod slow_reader;
// The exit-status table: the child's code, 128+N, 124, 126, 127, --preserve-status, --success-exit.
mod exit_status;
// What starts a stop: child_exited, signal, timeout, parent_died.
mod reasons;
// The stop signal, a grace that ends when the scope is empty, SIGKILL after it.
mod escalation;
// Step 1's one call to the child's process group: each member hears it once.
mod group_call;
// What the stop covers: descendants, setsid() daemons, processes forking during the stop.
mod scope;
// The folder sweep within the stop: workers outside the tree, every exit path, old holders.
mod sweep_stop;
// Orphaned zombies reaped as subreaper and as PID 1 of a pid namespace.
mod reaping;
// No proof, no true: unkillable survivors (300 of them in 4096 bytes), an unreadable /proc.
mod unconfirmed;
// Signal mask and dispositions inherited, forwarding, --forward-to, --rewrite.
mod signals;
// VLOER_* variables, flags beating them, and bad input refused with one line in the user's terms.
mod config;
// Verdict sinks: file by rename, stdout, FIFO, /dev/fd/N, character device, off.
mod sinks;
// Huge inputs: argv near ARG_MAX, 10,000 variables, odd COMMAND paths, control fuzzing.
mod huge;
// No lie, no silence, no hang: hidden and half-dead processes, every signal, no pidfds.
mod truth;
// Transparent to its caller: the child first in a stop, ending by the child's signal, Ctrl-C in
// loops, an exec with a terminal.
mod transparent;
// A newcomer's first hour: -v in words, the release tarball.
mod newcomer;
// In a container runtime: PID 1 waits for its answered clients.
mod container;
// What a stop costs vloer-run: nothing is read of what already exited.
mod cost;
// The folder sweep: what holds or names a swept folder, inside the run or not, as status shows it.
mod sweep;
// The folder sweep against holders that move where a scan already looked: threads, reused pids.
mod sweep_hop;
