//! `vloer-run -- COMMAND...` with no option given, read without clap. Building clap's parser is
//! about two thirds of the instructions of a short run (callgrind: 251 k of 349 k for
//! `vloer-run -- true`); an entrypoint with no options need not pay for it. Anything else goes
//! through clap, and a test holds the two to the same result.

use crate::cli::*;
use crate::signal::Sig;
use crate::verdict::Sink;
use std::ffi::OsString;
use std::time::Duration;

/// Every environment variable a run option reads (see `--help`): one that is set sends the
/// command line through clap.
pub const OPTION_ENV: &[&str] = &[
    "VLOER_CONTROL",
    "VLOER_SESSION",
    "VLOER_FORWARD_TO",
    "VLOER_REWRITE",
    "VLOER_PARENT_DEATH",
    "VLOER_CHILD_PDEATHSIG",
    "VLOER_WHEN_CHILD_EXITS",
    "VLOER_STOP_SIGNAL",
    "VLOER_STOP_ORDER",
    "VLOER_GRACE",
    "VLOER_KILL_TIMEOUT",
    "VLOER_STOP_ON",
    "VLOER_TIMEOUT",
    "VLOER_SCOPE",
    "VLOER_SWEEP",
    "VLOER_SWEEP_STRICT",
    "VLOER_VERDICT",
    "VLOER_PRESERVE_STATUS",
    "VLOER_SUCCESS_EXIT",
    "VLOER_VERBOSE",
    "VLOER_QUIET",
];

/// The run of `argv` when it is `vloer-run -- COMMAND...` and no option variable is set; None
/// for any other command line.
pub fn parse(argv: &[OsString]) -> Option<Cli> {
    let command = match argv {
        [_, dashes, command @ ..] if dashes == "--" => command.to_vec(),
        _ => return None,
    };
    if command.is_empty() || OPTION_ENV.iter().any(|k| std::env::var_os(k).is_some()) {
        return None;
    }
    Some(Cli {
        client: None,
        run: defaults(command),
        about: AboutArgs::default(),
    })
}

/// Every run option at the default its clap definition gives.
fn defaults(command: Vec<OsString>) -> RunArgs {
    RunArgs {
        signals: SignalArgs {
            session: false,
            forward_to: ForwardTo::Group,
            rewrite: Vec::new(),
            parent_death: false,
            child_pdeathsig: Sig::KILL,
        },
        stop: StopArgs {
            when_child_exits: WhenChildExits::Stop,
            stop_signal: Sig::TERM,
            stop_order: StopOrder::Child,
            grace: Duration::from_secs(5),
            kill_timeout: Duration::from_secs(2),
            stop_on: vec![Sig::TERM],
            timeout: None,
            scope: crate::scope::Kind::Tree,
            sweep: Vec::new(),
            sweep_strict: false,
        },
        output: OutputArgs {
            verdict: Sink::Stderr,
            preserve_status: false,
            success_exit: Vec::new(),
            verbose: false,
            quiet: false,
        },
        control: None,
        command,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    fn argv(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn an_option_free_command_line_reads_as_clap_reads_it() {
        for words in [
            &["vloer-run", "--", "true"][..],
            &["vloer-run", "--", "sh", "-c", "exit 3"],
            &["vloer-run", "--", "--help"],
            &["vloer-run", "--", "stop", "--control", "x"],
        ] {
            let plain = parse(&argv(words)).expect("read without clap");
            let clap = Cli::try_parse_from(argv(words)).expect("read by clap");
            assert_eq!(format!("{plain:?}"), format!("{clap:?}"), "{words:?}");
        }
    }

    #[test]
    fn anything_else_is_left_to_clap() {
        for words in [
            &["vloer-run"][..],
            &["vloer-run", "--"],
            &["vloer-run", "true"],
            &["vloer-run", "-v", "--", "true"],
            &["vloer-run", "status", "--control", "x"],
        ] {
            assert!(parse(&argv(words)).is_none(), "{words:?}");
        }
    }

    #[test]
    fn every_option_variable_is_known() {
        let cmd = Cli::command();
        let mut read: Vec<String> = cmd
            .get_arguments()
            .filter_map(|a| a.get_env())
            .map(|e| e.to_string_lossy().into_owned())
            .collect();
        read.sort();
        let mut known: Vec<String> = OPTION_ENV.iter().map(|s| s.to_string()).collect();
        known.sort();
        assert_eq!(read, known);
    }
}
