//! vloer-run: a mini-init that stops the whole process tree and proves it.
#![deny(unsafe_code)]

mod cli;
mod duration;
mod event_loop;
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

/// The version `--version` prints.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

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
        Some(_) => {
            msg::error(format_args!("the control socket is not available in this build"));
            ExitCode::from(125)
        }
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
    let mut verdict = sup.run();
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
    ExitCode::from(verdict.exit_code.clamp(0, 255) as u8)
}
