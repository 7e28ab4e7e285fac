//! Starting a command as vloer-run's child: its own group or session, the start signal state.

use crate::sys::{self, ChildSetup};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Why a command could not be started; each maps to the exit status a shell would give.
#[derive(Debug)]
pub enum SpawnError {
    /// 127: no such program.
    NotFound(io::Error),
    /// 126: found but not executable (permissions, format, a failed set-up step).
    CannotExecute(io::Error),
}

impl SpawnError {
    pub fn exit_code(&self) -> i32 {
        match self {
            SpawnError::NotFound(_) => 127,
            SpawnError::CannotExecute(_) => 126,
        }
    }
}

/// Starts `argv` with the caller's stdio, in a new process group (or session), with the signal
/// mask and dispositions vloer-run was started with.
pub fn spawn(
    argv: &[OsString],
    setup: ChildSetup,
    configure: impl FnOnce(&mut Command),
) -> Result<Pid, SpawnError> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    if !setup.new_session && !setup.keep_group {
        cmd.process_group(0);
    }
    configure(&mut cmd);
    sys::install_child_setup(&mut cmd, setup);
    match cmd.spawn() {
        // Dropping std's Child neither waits nor kills: the reaper owns the pid from here on.
        Ok(child) => Ok(Pid::from_raw(child.id() as i32)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(SpawnError::NotFound(e)),
        Err(e) => Err(SpawnError::CannotExecute(e)),
    }
}

/// `spawn` for the main child, which needs no `configure`: started without a fork (see
/// `sys::spawn_vfork`), with the same result and the same errors.
pub fn spawn_main(argv: &[OsString], setup: ChildSetup) -> Result<Pid, SpawnError> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(cstrings) = argv
        .iter()
        .map(|a| std::ffi::CString::new(a.as_bytes()))
        .collect::<Result<Vec<_>, _>>()
    else {
        // What std's Command reports for the same argument.
        return Err(SpawnError::CannotExecute(io::Error::new(
            io::ErrorKind::InvalidInput,
            "nul byte found in provided data",
        )));
    };
    let mut ptrs: Vec<*const libc::c_char> = cstrings.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    match sys::spawn_vfork(&ptrs, setup) {
        Ok(pid) => Ok(pid),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(SpawnError::NotFound(e)),
        Err(e) => Err(SpawnError::CannotExecute(e)),
    }
}
