//! The command line: one clap definition for the run, its environment variables, and the clients.

use crate::duration;
pub use crate::scope::Kind as ScopeKind;
use crate::signal::{Rewrite, Sig};
use crate::verdict::Sink;
use clap::builder::BoolishValueParser;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

const ABOUT: &str =
    "A mini-init that stops the whole process tree and proves it with a JSON verdict";

const LONG_ABOUT: &str = "\
vloer-run runs COMMAND as its child in a new process group, reaps every zombie, forwards every \
signal to the child's group, and, when the run ends, stops the whole process tree: --stop-signal, \
up to --grace, then SIGKILL until nothing is left or --kill-timeout passes. It then confirms from \
/proc that no live process of the run remains and writes one JSON verdict line. \
\"stopped\":true is only written with that proof.

A command named stop, status or exec is run as 'vloer-run -- stop ...'. Every run option can also \
be set by the environment variable shown with it; a flag beats the variable.";

const AFTER_HELP: &str = "\
Durations: 500ms, 5s, 1m30s, or a plain number of seconds (2.5).
Signals: TERM, SIGTERM, sigterm, RTMIN+2, or a number.

Exit status: the child's; 128+N when the child was killed by signal N; 124 when --timeout stopped \
the run; 125 when vloer-run failed or the stop was not confirmed; 126 when COMMAND cannot be \
executed; 127 when COMMAND is not found.";

/// The whole command line.
#[derive(Parser, Debug)]
#[command(
    name = "vloer-run",
    version = crate::VERSION,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    disable_help_subcommand = true,
    disable_help_flag = true,
    disable_version_flag = true,
    override_usage = "vloer-run [OPTIONS] [--] COMMAND [ARG]...",
    max_term_width = 100
)]
pub struct Cli {
    #[command(subcommand)]
    pub client: Option<Client>,
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub about: AboutArgs,
}

/// The headings `--help` and the manual group the run's options under, shown in the order of
/// their first option. An option joins one with `help_heading = heading::STOPPING`; a new group
/// is a new constant here.
pub mod heading {
    pub const RUNNING: &str = "Running";
    pub const STOPPING: &str = "Stopping";
    pub const VERDICT: &str = "The verdict and exit status";
    pub const CONTROL: &str = "Control";
    pub const OUTPUT: &str = "Output";
}

/// `-h` and `-V`, declared here only to be listed under Output rather than in a group of their
/// own. `-h` is global because disabling clap's own `-h` disables it in the clients too.
#[derive(Args, Debug, Default)]
pub struct AboutArgs {
    /// Print help (--help: with a longer description).
    #[arg(short = 'h', long, action = clap::ArgAction::Help, help_heading = heading::OUTPUT, global = true)]
    help: Option<bool>,
    /// Print the version.
    #[arg(short = 'V', long, action = clap::ArgAction::Version, help_heading = heading::OUTPUT)]
    version: Option<bool>,
}

/// How the child is stopped when it exits on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WhenChildExits {
    /// Stop the rest of the tree at once.
    Stop,
    /// Wait for every descendant to exit on its own (still bounded by --timeout).
    Wait,
}

/// Who hears the stop signal first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StopOrder {
    /// The child's process group first; the rest of the scope once the child has exited.
    Child,
    /// Every process in the scope at once.
    All,
}

/// Where forwarded signals go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ForwardTo {
    /// The child's whole process group.
    Group,
    /// The main child alone.
    Child,
}

/// Options of a run.
#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub signals: SignalArgs,
    #[command(flatten)]
    pub stop: StopArgs,
    /// Serve stop, status and exec requests on a Unix socket at PATH (mode 0600).
    #[arg(long, env = "VLOER_CONTROL", help_heading = heading::CONTROL, value_name = "PATH", value_parser = parse_socket_path)]
    pub control: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,

    /// The command to run, and its arguments.
    #[arg(value_name = "COMMAND", trailing_var_arg = true, required = true, num_args = 1.., value_hint = clap::ValueHint::CommandWithArguments)]
    pub command: Vec<OsString>,
}

/// How signals reach the child.
#[derive(Args, Debug)]
pub struct SignalArgs {
    /// Start the child in a new session (setsid) instead of a new process group; the terminal is
    /// then not handed to it.
    #[arg(help_heading = heading::RUNNING, long, env = "VLOER_SESSION", value_parser = BoolishValueParser::new(), action = clap::ArgAction::SetTrue)]
    pub session: bool,

    /// Where received signals are forwarded.
    #[arg(help_heading = heading::RUNNING, long, env = "VLOER_FORWARD_TO", value_enum, default_value_t = ForwardTo::Group, value_name = "WHO")]
    pub forward_to: ForwardTo,

    /// Forward TO instead of FROM, e.g. TERM:QUIT; TO = 0 drops FROM (repeatable, or
    /// comma-separated: TERM:QUIT,WINCH:0).
    #[arg(help_heading = heading::RUNNING, long, env = "VLOER_REWRITE", value_name = "FROM:TO", value_parser = Rewrite::parse, value_delimiter = ',', action = clap::ArgAction::Append)]
    pub rewrite: Vec<Rewrite>,

    /// Stop the run (reason parent_died) when vloer-run's parent process exits.
    #[arg(help_heading = heading::RUNNING, long, env = "VLOER_PARENT_DEATH", value_parser = BoolishValueParser::new(), action = clap::ArgAction::SetTrue)]
    pub parent_death: bool,

    /// Signal the main child gets from the kernel if vloer-run itself dies (0: none).
    #[arg(help_heading = heading::RUNNING, long, env = "VLOER_CHILD_PDEATHSIG", value_name = "SIG", default_value = "KILL", value_parser = SignalParser { allow_zero: true }, hide_possible_values = true)]
    pub child_pdeathsig: Sig,
}

/// When the run stops, and how.
#[derive(Args, Debug)]
pub struct StopArgs {
    /// What the child's exit does to the rest of the tree.
    #[arg(help_heading = heading::STOPPING, long, env = "VLOER_WHEN_CHILD_EXITS", value_enum, default_value_t = WhenChildExits::Stop, value_name = "WHAT")]
    pub when_child_exits: WhenChildExits,

    /// The signal a stop sends to every process in the scope (see --stop-order); SIGKILL follows
    /// after --grace.
    #[arg(help_heading = heading::STOPPING, long, env = "VLOER_STOP_SIGNAL", value_name = "SIG", default_value = "TERM", value_parser = SignalParser { allow_zero: false }, hide_possible_values = true)]
    pub stop_signal: Sig,

    /// Who gets --stop-signal first: the child's group, then the rest once the child has exited
    /// (child), or the whole scope at once (all).
    #[arg(help_heading = heading::STOPPING, long, env = "VLOER_STOP_ORDER", value_enum, default_value_t = StopOrder::Child, value_name = "ORDER")]
    pub stop_order: StopOrder,

    /// How long a stop waits after --stop-signal before SIGKILL; it moves on the moment the scope is
    /// empty. Keep it below docker stop's -t and terminationGracePeriodSeconds so the verdict is written.
    #[arg(help_heading = heading::STOPPING, long, env = "VLOER_GRACE", value_name = "DURATION", default_value = "5s", value_parser = duration::parse, allow_hyphen_values = true, value_hint = clap::ValueHint::Other)]
    pub grace: Duration,

    /// How long SIGKILL rounds (each after a fresh scan) go on before the stop gives up and reports
    /// the survivors ("stopped":false, exit 125).
    #[arg(help_heading = heading::STOPPING, long, env = "VLOER_KILL_TIMEOUT", value_name = "DURATION", default_value = "2s", value_parser = duration::parse, allow_hyphen_values = true, value_hint = clap::ValueHint::Other)]
    pub kill_timeout: Duration,

    /// Signals that, received by vloer-run, start a stop after being forwarded (repeatable, or
    /// comma-separated; giving any replaces the default TERM). Other signals are only forwarded.
    #[arg(help_heading = heading::STOPPING, long, env = "VLOER_STOP_ON", value_name = "SIG", default_value = "TERM", value_parser = SignalParser { allow_zero: false }, hide_possible_values = true, value_delimiter = ',', action = clap::ArgAction::Append)]
    pub stop_on: Vec<Sig>,

    /// Stop the run this long after the child started (0: never); exit 124.
    #[arg(help_heading = heading::STOPPING, long, env = "VLOER_TIMEOUT", value_name = "DURATION", value_parser = duration::parse, allow_hyphen_values = true, value_hint = clap::ValueHint::Other)]
    pub timeout: Option<Duration>,

    /// Which processes the stop covers and checks.
    #[arg(help_heading = heading::STOPPING, long, env = "VLOER_SCOPE", value_enum, default_value_t = ScopeKind::Tree, value_name = "SCOPE")]
    pub scope: ScopeKind,

    /// Also stop every process that holds or names DIR (working directory, root, executable, open
    /// file, memory map, argument), inside the tree or not, and prove none is left (repeatable).
    #[arg(help_heading = heading::STOPPING, long, env = "VLOER_SWEEP", value_name = "DIR", action = clap::ArgAction::Append, value_hint = clap::ValueHint::DirPath)]
    pub sweep: Vec<PathBuf>,

    /// With --sweep: a process that could not be looked at fails the proof even when it started
    /// before the run.
    #[arg(help_heading = heading::STOPPING, long, env = "VLOER_SWEEP_STRICT", value_parser = BoolishValueParser::new(), action = clap::ArgAction::SetTrue)]
    pub sweep_strict: bool,
}

/// What the run reports: the verdict, the exit status, messages.
#[derive(Args, Debug)]
pub struct OutputArgs {
    /// Where the verdict goes: a file path, - (stdout), stderr, or off. A regular file is replaced
    /// atomically (a symlink's target, never the link); a FIFO, a device such as
    /// /dev/termination-log, or a descriptor (/dev/fd/N, /dev/stdout) gets one write.
    #[arg(help_heading = heading::VERDICT, long, env = "VLOER_VERDICT", value_name = "PATH", default_value = "stderr", value_parser = Sink::parse, value_hint = clap::ValueHint::FilePath)]
    pub verdict: Sink,

    /// After --timeout, exit with the child's status instead of 124.
    #[arg(help_heading = heading::VERDICT, long, env = "VLOER_PRESERVE_STATUS", value_parser = BoolishValueParser::new(), action = clap::ArgAction::SetTrue)]
    pub preserve_status: bool,

    /// Map this exit code of the child to 0 (repeatable), e.g. 143 for a JVM.
    #[arg(help_heading = heading::VERDICT, long, env = "VLOER_SUCCESS_EXIT", value_name = "CODE", value_delimiter = ',', action = clap::ArgAction::Append)]
    pub success_exit: Vec<u8>,

    /// Print each forwarded signal, reap and stop step on stderr. On a pipe or socket, lines its
    /// reader is too slow for are left out and counted, never waited for.
    #[arg(help_heading = heading::OUTPUT, short, long, env = "VLOER_VERBOSE", value_parser = BoolishValueParser::new(), action = clap::ArgAction::SetTrue, conflicts_with = "quiet")]
    pub verbose: bool,

    /// Print nothing but errors; the verdict is still written where --verdict says (it is the
    /// run's output, not a message: --verdict off leaves it out).
    #[arg(help_heading = heading::OUTPUT, short, long, env = "VLOER_QUIET", value_parser = BoolishValueParser::new(), action = clap::ArgAction::SetTrue)]
    pub quiet: bool,
}

/// Talk to a running instance through its control socket.
#[derive(Subcommand, Debug)]
pub enum Client {
    /// Stop the run, wait for it, print its verdict; exit 0 when stopped is true, 1 when false.
    Stop {
        /// The instance's control socket.
        #[arg(long, value_name = "PATH")]
        control: PathBuf,
        /// Use this grace period instead of the instance's own.
        #[arg(long, value_name = "DURATION", value_parser = duration::parse, allow_hyphen_values = true)]
        grace: Option<Duration>,
    },
    /// Print the run as JSON: vloer-run, the child, every live process, the running execs.
    Status {
        /// The instance's control socket.
        #[arg(long, value_name = "PATH")]
        control: PathBuf,
    },
    /// Run COMMAND inside the run, as the instance's own child, with this terminal's stdio.
    Exec {
        /// The instance's control socket.
        #[arg(long, value_name = "PATH")]
        control: PathBuf,
        /// Stop the command after this long; exit 124.
        #[arg(long, value_name = "DURATION", value_parser = duration::parse, allow_hyphen_values = true)]
        timeout: Option<Duration>,
        /// Do not give the command a terminal of its own, even when stdin and stdout are one.
        #[arg(short = 'T', long)]
        no_tty: bool,
        /// The command to run, and its arguments.
        #[arg(value_name = "COMMAND", trailing_var_arg = true, value_hint = clap::ValueHint::CommandWithArguments, required = true, num_args = 1..)]
        command: Vec<OsString>,
    },
}

fn parse_signal(s: &str) -> Result<Sig, String> {
    Sig::parse(s, false)
}

fn parse_signal_or_zero(s: &str) -> Result<Sig, String> {
    Sig::parse(s, true)
}

/// The names shell completions offer for a SIG argument (numbers, SIG-prefixed, lower-case and
/// RTMIN+N forms are accepted too, they are just not listed).
pub const SIGNAL_NAMES: &[&str] = &[
    "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV", "USR2",
    "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "URG",
    "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS", "RTMIN", "RTMAX",
];

/// Parses a SIG argument exactly as `Sig::parse` does, and tells clap's completion generators
/// the signal names. The names are only candidates: clap checks values through `parse_ref`
/// alone, so `15` and `RTMIN+2` still parse (and `hide_possible_values` keeps them out of --help).
#[derive(Clone, Copy, Debug)]
struct SignalParser {
    allow_zero: bool,
}

impl clap::builder::TypedValueParser for SignalParser {
    type Value = Sig;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Sig, clap::Error> {
        let parse: fn(&str) -> Result<Sig, String> = if self.allow_zero {
            parse_signal_or_zero
        } else {
            parse_signal
        };
        clap::builder::TypedValueParser::parse_ref(&parse, cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        let zero = self
            .allow_zero
            .then(|| clap::builder::PossibleValue::new("0").help("no signal"));
        let names = SIGNAL_NAMES.iter().map(|name| {
            let n = Sig::parse(name, false).map(Sig::raw).unwrap_or(0);
            clap::builder::PossibleValue::new(*name).help(format!("signal {n}"))
        });
        Some(Box::new(zero.into_iter().chain(names)))
    }
}

fn parse_socket_path(s: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(s);
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if s.is_empty() {
        return Err("empty path; expected a socket path in an existing folder".into());
    }
    if !parent.is_dir() {
        return Err(format!(
            "folder '{}' does not exist; expected a socket path in an existing folder",
            parent.display()
        ));
    }
    // sockaddr_un holds 108 bytes including the terminating NUL.
    if s.len() > 107 {
        return Err(format!(
            "'{s}' is {} bytes long; a Unix socket path holds at most 107",
            s.len()
        ));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn synopsis_forms_parse() {
        let c = Cli::try_parse_from(["vloer-run", "sleep", "-v"]).unwrap();
        assert_eq!(c.run.command, ["sleep", "-v"]);
        assert!(!c.run.output.verbose);
        let c = Cli::try_parse_from(["vloer-run", "--grace", "2s", "sleep", "1"]).unwrap();
        assert_eq!(c.run.stop.grace, Duration::from_secs(2));
        let c = Cli::try_parse_from(["vloer-run", "--", "stop"]).unwrap();
        assert!(c.client.is_none());
        assert_eq!(c.run.command, ["stop"]);
        let c = Cli::try_parse_from(["vloer-run", "stop", "--control", "/tmp/x"]).unwrap();
        assert!(matches!(c.client, Some(Client::Stop { .. })));
        let c = Cli::try_parse_from(["vloer-run", "exec", "--control", "/tmp/x", "--", "ls", "-l"])
            .unwrap();
        assert!(
            matches!(c.client, Some(Client::Exec { ref command, .. }) if command == &["ls", "-l"])
        );
        let c = Cli::try_parse_from([
            "vloer-run",
            "--rewrite",
            "TERM:QUIT",
            "--rewrite",
            "INT:0",
            "x",
        ])
        .unwrap();
        assert_eq!(c.run.signals.rewrite.len(), 2);
    }
}
