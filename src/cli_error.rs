//! A command-line error told as one line in the user's own terms: a bad value read from a
//! `VLOER_*` variable names the variable and never a flag the user did not write, and clap's
//! "a similar argument exists" tips are kept. The line is built from clap's error kind and
//! context, not cut out of clap's text.

use crate::cli::Cli;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, ArgAction, CommandFactory};
use std::ffi::OsString;

/// What a switch read from a variable accepts (clap's BoolishValueParser).
const SWITCH_WORDS: &str = "expected true or false (also 1/0, yes/no, on/off)";

/// `err` as the one line after `vloer-run: ` (the contract wants one line and exit 125); `argv`
/// is the command line clap was given, to tell a variable's value from a flag's.
pub fn one_line(err: &clap::Error, argv: &[OsString]) -> String {
    let client = client_name(argv);
    let names = Names { err, argv, client };
    let mut line = match err.kind() {
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => bad_value(err, &names),
        ErrorKind::ArgumentConflict => conflict(err, &names),
        ErrorKind::UnknownArgument => match text(err, ContextKind::InvalidArg) {
            Some(arg) => format!("unexpected argument '{arg}' found"),
            None => fallback(err),
        },
        ErrorKind::MissingRequiredArgument => missing(err, client),
        _ => fallback(err),
    };
    for tip in tips(err) {
        line += "; tip: ";
        line += &tip;
    }
    let help = match client {
        Some(name) => format!("vloer-run {name} --help"),
        None => "vloer-run --help".into(),
    };
    format!("{line} (see {help})")
}

/// The client (stop, status, exec) `argv` runs, if any: clap reads a client's name only as the
/// first word, anything after a run option is the COMMAND.
fn client_name(argv: &[OsString]) -> Option<&'static str> {
    let first = argv.get(1)?;
    ["stop", "status", "exec"].into_iter().find(|c| first == c)
}

/// How the error's arguments are named: by their variable when the value came from it.
struct Names<'a> {
    err: &'a clap::Error,
    argv: &'a [OsString],
    client: Option<&'static str>,
}

impl Names<'_> {
    /// The run option clap's `shown` ("--grace <DURATION>", "-v") stands for.
    fn arg(&self, shown: &str) -> Option<Arg> {
        if self.client.is_some() {
            return None;
        }
        let word = shown.split(' ').next().unwrap_or(shown);
        Cli::command()
            .get_arguments()
            .find(|a| {
                word.strip_prefix("--")
                    .is_some_and(|long| a.get_long() == Some(long))
                    || word
                        .strip_prefix('-')
                        .and_then(|s| s.chars().next())
                        .is_some_and(|short| a.get_short() == Some(short))
            })
            .cloned()
    }

    /// The variable that set `shown`'s value, when it was the variable and not the flag.
    fn variable(&self, shown: &str) -> Option<String> {
        let arg = self.arg(shown)?;
        let env = arg.get_env()?.to_string_lossy().into_owned();
        std::env::var_os(&env)?;
        self.read_from_variable(&arg).then_some(env)
    }

    /// Whether `arg`'s value came from its variable. clap does not say, so the command line is
    /// read again with that variable ignored: a flag on the command line fails the same way
    /// again; a value from the variable does not.
    fn read_from_variable(&self, arg: &Arg) -> bool {
        let cmd = Cli::command().mut_arg(arg.get_id().clone(), |a| a.env(None));
        match cmd.try_get_matches_from(self.argv) {
            Ok(_) => true,
            Err(again) => {
                again.kind() != self.err.kind() || again.to_string() != self.err.to_string()
            }
        }
    }

    /// `shown` as the user gave it: `VLOER_GRACE` or `'--grace <DURATION>'`.
    fn name(&self, shown: &str) -> String {
        self.variable(shown).unwrap_or_else(|| format!("'{shown}'"))
    }
}

/// A value that does not parse, with what the option accepts.
fn bad_value(err: &clap::Error, names: &Names<'_>) -> String {
    let (Some(shown), Some(value)) = (
        text(err, ContextKind::InvalidArg),
        text(err, ContextKind::InvalidValue),
    ) else {
        return fallback(err);
    };
    let mut line = match names.variable(shown) {
        Some(var) if value.is_empty() => format!("{var} is empty"),
        Some(var) => format!("invalid value '{value}' in {var}"),
        None if value.is_empty() => format!("a value is required for '{shown}' but none was given"),
        None => format!("invalid value '{value}' for '{shown}'"),
    };
    let switch = names
        .arg(shown)
        .is_some_and(|a| matches!(a.get_action(), ArgAction::SetTrue));
    if switch {
        line += ": ";
        line += SWITCH_WORDS;
    } else if let Some(valid) = strings(err, ContextKind::ValidValue).filter(|v| !v.is_empty()) {
        line += &format!(": expected {}", either(&valid));
    } else if let Some(source) = std::error::Error::source(err) {
        line += &format!(": {source}");
    }
    line
}

/// Two options that cannot be used together, each named as the user gave it.
fn conflict(err: &clap::Error, names: &Names<'_>) -> String {
    let Some(first) = text(err, ContextKind::InvalidArg) else {
        return fallback(err);
    };
    let others: Vec<String> = match err.get(ContextKind::PriorArg) {
        Some(ContextValue::String(s)) if s == first => {
            return format!("{} cannot be used more than once", names.name(first));
        }
        Some(ContextValue::String(s)) => vec![names.name(s)],
        Some(ContextValue::Strings(v)) => v.iter().map(|s| names.name(s)).collect(),
        _ => vec!["another option given".into()],
    };
    format!(
        "{} cannot be used with {}",
        names.name(first),
        others.join(", ")
    )
}

/// A missing COMMAND gets the synopsis of what was run (a run or `exec`); other missing
/// arguments are listed.
fn missing(err: &clap::Error, client: Option<&str>) -> String {
    let absent = strings(err, ContextKind::InvalidArg).unwrap_or_default();
    if absent.iter().any(|a| a.starts_with("<COMMAND>")) {
        let usage = match client {
            Some("exec") => "vloer-run exec --control PATH [OPTIONS] [--] COMMAND [ARG]...",
            _ => "vloer-run [OPTIONS] [--] COMMAND [ARG]...",
        };
        return format!("no COMMAND given; usage: {usage}");
    }
    if absent.is_empty() {
        return fallback(err);
    }
    format!("missing {}", absent.join(", "))
}

/// clap's "a similar ... exists" and "to pass ... as a value" tips.
fn tips(err: &clap::Error) -> Vec<String> {
    let mut tips = Vec::new();
    for (kind, what) in [
        (ContextKind::SuggestedSubcommand, "subcommand"),
        (ContextKind::SuggestedArg, "argument"),
        (ContextKind::SuggestedValue, "value"),
    ] {
        match err.get(kind) {
            Some(ContextValue::String(s)) => tips.push(format!("a similar {what} exists: '{s}'")),
            Some(ContextValue::Strings(v)) if !v.is_empty() => {
                let quoted: Vec<String> = v.iter().map(|s| format!("'{s}'")).collect();
                tips.push(format!("similar {what}s exist: {}", quoted.join(", ")));
            }
            _ => {}
        }
    }
    if let Some(ContextValue::StyledStrs(more)) = err.get(ContextKind::Suggested) {
        tips.extend(more.iter().map(|s| s.to_string()));
    }
    tips
}

/// clap's own first line, for the kinds not told above.
fn fallback(err: &clap::Error) -> String {
    let rendered = err.to_string();
    let first = rendered
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    first
        .trim()
        .strip_prefix("error: ")
        .unwrap_or(first.trim())
        .to_string()
}

/// `a`, `a or b`, `a, b or c`.
fn either(words: &[String]) -> String {
    match words {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

fn text(err: &clap::Error, kind: ContextKind) -> Option<&str> {
    match err.get(kind) {
        Some(ContextValue::String(s)) => Some(s),
        _ => None,
    }
}

fn strings(err: &clap::Error, kind: ContextKind) -> Option<Vec<String>> {
    match err.get(kind) {
        Some(ContextValue::Strings(v)) => Some(v.clone()),
        Some(ContextValue::String(s)) => Some(vec![s.clone()]),
        _ => None,
    }
}
