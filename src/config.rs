//! What a run is asked to do, resolved from its command line: the options the run acts on, and
//! the verdict's sink ready to write (see `cli` for how they are given).

use crate::cli::{RunArgs, SignalArgs, StopArgs};
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
}

impl From<RunArgs> for RunConfig {
    fn from(args: RunArgs) -> RunConfig {
        RunConfig {
            command: args.command,
            control: args.control,
            signals: args.signals,
            stop: args.stop,
            sink: args.output.verdict,
            preserve_status: args.output.preserve_status,
            success_exit: args.output.success_exit,
        }
    }
}
