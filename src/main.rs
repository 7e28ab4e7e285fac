//! vloer-run: a mini-init that stops the whole process tree and proves it.
#![deny(unsafe_code)]
// The entry point is `main` below, without std's runtime set-up (see there).
#![cfg_attr(not(test), no_main)]

mod cli;
mod cli_error;
mod cli_plain;
mod client;
mod config;
mod control;
#[cfg(test)]
mod docs;
mod duration;
mod exec;
mod exec_tty;
mod exit;
mod forward;
mod msg;
mod proctable;
mod reactor;
mod scope;
mod signal;
mod slowread;
mod spawn;
mod stop;
mod supervisor;
mod sweep;
mod sys;
mod terminal;
mod verdict;

use clap::Parser;

/// The version `--version` prints: the package version and, when built from a git checkout, the
/// commit (`0.1.0 (git 1a2b3c4)`); see build.rs.
pub const VERSION: &str = env!("VLOER_VERSION");

/// The process entry point, in place of the one std generates (`#![no_main]`). std's runtime
/// set-up was a fifth of the instructions of a whole `vloer-run -- true` and a quarter of its
/// syscalls before the child starts: it finds the main thread's stack guard by reading and
/// sscanf-parsing /proc/self/maps, and puts SIGSEGV/SIGBUS handlers on an alternate signal stack,
/// only to print a message on a stack overflow (which now ends vloer-run with a plain SIGSEGV).
/// What vloer-run needs of it is `sys::prepare_process`, and the arguments, read here (std reads
/// them from glibc's .init_array call, which musl does not make). The environment reaches std
/// through libc's `environ` either way.
#[cfg(not(test))]
// `no_mangle` alone: this is the C `main` glibc calls; no unsafe code runs here.
#[allow(unsafe_code)]
#[no_mangle]
extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    sys::prepare_process();
    // SAFETY: argc and argv are what the C runtime called `main` with.
    let args = unsafe { sys::args_from_main(argc, argv) };
    libc::c_int::from(vloer_main(args))
}

/// Everything vloer-run does; the value is its exit status.
#[cfg_attr(test, allow(dead_code))]
fn vloer_main(args: Vec<std::ffi::OsString>) -> u8 {
    let parsed = cli_plain::parse(&args).map_or_else(|| cli::Cli::try_parse_from(&args), Ok);
    let cli = match parsed {
        Ok(c) => c,
        Err(e) if e.exit_code() == 0 => {
            let _ = e.print();
            let _ = std::io::Write::flush(&mut std::io::stdout());
            return 0;
        }
        Err(e) => {
            msg::error(format_args!("{}", cli_error::one_line(&e, &args)));
            return 125;
        }
    };
    match cli.client {
        None => run(cli.run),
        Some(c) => client::main(c),
    }
}

fn run(args: cli::RunArgs) -> u8 {
    msg::set_level(if args.output.quiet {
        msg::Level::Quiet
    } else if args.output.verbose {
        msg::Level::Verbose
    } else {
        msg::Level::Normal
    });
    let config = match config::RunConfig::new(args) {
        Ok(c) => c,
        Err(e) => {
            msg::error(format_args!("{e:#}"));
            return 125;
        }
    };
    let sup = match supervisor::Supervisor::new(config) {
        Ok(s) => s,
        Err(e) => {
            msg::error(format_args!("{e:#}"));
            return 125;
        }
    };
    let exit = sup.run();
    if let Some(sig) = exit.by_signal {
        sys::end_by_signal(sig);
    }
    exit.code.clamp(0, 255) as u8
}
