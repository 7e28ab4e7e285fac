//! vloer-run: a mini-init that stops the whole process tree and proves it.
#![deny(unsafe_code)]

mod cli;
#[cfg(test)]
mod docs;
mod client;
mod control;
mod duration;
mod event_loop;
mod exec;
mod msg;
mod proctable;
mod signal;
mod spawn;
mod stop;
mod supervisor;
mod sys;
mod verdict;

use clap::Parser;
use std::process::ExitCode;

/// The version `--version` prints: the package version and, when built from a git checkout, the
/// commit (`0.1.0 (git 1a2b3c4)`); see build.rs.
pub const VERSION: &str = env!("VLOER_VERSION");

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(c) => c,
        Err(e) if e.exit_code() == 0 => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            msg::error(format_args!("{}", cli::one_line_error(&e)));
            return ExitCode::from(125);
        }
    };
    match cli.client {
        None => run(cli.run),
        Some(c) => ExitCode::from(client::main(c)),
    }
}

fn run(args: cli::RunArgs) -> ExitCode {
    msg::set_level(if args.quiet { 0 } else if args.verbose { 2 } else { 1 });
    let sink = args.verdict.clone();
    let sup = match supervisor::Supervisor::new(args) {
        Ok(s) => s,
        Err(e) => {
            msg::error(format_args!("{e:#}"));
            return ExitCode::from(125);
        }
    };
    let supervisor::Ended { mut verdict, control, stop_waiters } = sup.run();
    if let Err(e) = sink.write(&verdict.to_line()) {
        msg::error(format_args!("{e}"));
        verdict.exit_code = 125;
        verdict.error = Some(match verdict.error.take() {
            Some(prev) => format!("{prev}; {e}"),
            None => e,
        });
        if sink != verdict::Sink::Stderr {
            let _ = verdict::Sink::Stderr.write(&verdict.to_line());
        }
    }
    if let Some(mut control) = control {
        let line = verdict.to_line();
        for id in stop_waiters {
            control.send(id, &line, true);
        }
        // Give slow clients a moment to take their replies; the socket is removed on drop.
        control.drain(std::time::Duration::from_millis(500));
    }
    ExitCode::from(verdict.exit_code.clamp(0, 255) as u8)
}
