//! What a run is asked to do, resolved from its command line: the options the run acts on, and
//! the verdict's sink ready to write (see `cli` for how they are given).

use crate::cli::{RunArgs, SignalArgs, StopArgs};
use crate::sweep::Sweep;
use crate::verdict::Sink;
use std::ffi::OsString;
use std::path::PathBuf;

/// The run's settings; messages (`-v`, `-q`) are set up before it.
pub struct RunConfig {
    pub command: Vec<OsString>,
    pub control: Option<PathBuf>,
    pub signals: SignalArgs,
    pub stop: StopArgs,
    pub sink: Sink,
    pub preserve_status: bool,
    pub success_exit: Vec<u8>,
    /// `--sweep`: the folders, resolved at start; None without the option.
    pub sweep: Option<Sweep>,
}

impl RunConfig {
    /// Resolves what must be resolved before anything starts (the swept folders).
    pub fn new(args: RunArgs) -> anyhow::Result<RunConfig> {
        let sweep = match args.stop.sweep.is_empty() {
            true => None,
            false => Some(
                Sweep::resolve(&args.stop.sweep, args.stop.sweep_strict).map_err(|e| {
                    // Named as the user gave it: a Dockerfile author has no --sweep anywhere.
                    match sweep_from_environment(&args.stop.sweep) {
                        true => anyhow::anyhow!(
                            "{}",
                            format!("{e:#}").replacen("--sweep", "VLOER_SWEEP", 1)
                        ),
                        false => e,
                    }
                })?,
            ),
        };
        Ok(RunConfig {
            command: args.command,
            control: args.control,
            signals: args.signals,
            stop: args.stop,
            sink: args.output.verdict,
            preserve_status: args.output.preserve_status,
            success_exit: args.output.success_exit,
            sweep,
        })
    }
}

/// Whether the swept folder came from `VLOER_SWEEP`: one folder, the variable's own value (a
/// flag beats the variable, so the same value from both is named either way).
fn sweep_from_environment(dirs: &[std::path::PathBuf]) -> bool {
    match (dirs, std::env::var_os("VLOER_SWEEP")) {
        ([dir], Some(var)) => dir.as_os_str() == var,
        _ => false,
    }
}
