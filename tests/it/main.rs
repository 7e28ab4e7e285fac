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
