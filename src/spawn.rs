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
    fn of(e: io::Error) -> SpawnError {
        if e.kind() == io::ErrorKind::NotFound {
            SpawnError::NotFound(e)
        } else {
            SpawnError::CannotExecute(e)
        }
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            SpawnError::NotFound(_) => 127,
            SpawnError::CannotExecute(_) => 126,
        }
    }
}

/// Starts `argv` with the caller's stdio, in a new process group (or session), with the signal
/// mask and dispositions vloer-run was started with. `configure` may run twice (see
/// `script_fallback`).
pub fn spawn(
    argv: &[OsString],
    setup: ChildSetup,
    configure: impl Fn(&mut Command) -> io::Result<()>,
) -> Result<Pid, SpawnError> {
    // The spawn's result, and the command it was made from (whose PATH its exec searched).
    let start = |argv: &[OsString]| -> (io::Result<Pid>, Command) {
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        if !setup.new_session && !setup.keep_group {
            cmd.process_group(0);
        }
        if let Err(e) = configure(&mut cmd) {
            return (Err(e), cmd);
        }
        sys::install_child_setup(&mut cmd, setup);
        // Dropping std's Child neither waits nor kills: the reaper owns the pid from here on.
        let spawned = cmd.spawn().map(|child| Pid::from_raw(child.id() as i32));
        (spawned, cmd)
    };
    let (first, cmd) = start(argv);
    or_script(argv, first, || path_of(&cmd), |sh| start(sh).0)
}

/// `spawn` for the main child, which needs no `configure`: started without a fork (see
/// `sys::spawn_vfork`), with the same result and the same errors.
pub fn spawn_main(argv: &[OsString], setup: ChildSetup) -> Result<Pid, SpawnError> {
    or_script(
        argv,
        vfork_argv(argv, setup),
        || std::env::var_os("PATH"),
        |sh| vfork_argv(sh, setup),
    )
}

/// `first`, the result of starting `argv`, unless the kernel would not execute the file
/// (ENOEXEC): then the result of `start` with its `script_fallback` (`path` is the PATH searched).
fn or_script(
    argv: &[OsString],
    first: io::Result<Pid>,
    path: impl FnOnce() -> Option<OsString>,
    start: impl FnOnce(&[OsString]) -> io::Result<Pid>,
) -> Result<Pid, SpawnError> {
    let started = match first {
        Err(e) if e.raw_os_error() == Some(libc::ENOEXEC) => {
            match script_fallback(argv, path().as_deref()) {
                Some(sh) => start(&sh),
                None => Err(e),
            }
        }
        other => other,
    };
    let pid = started.map_err(SpawnError::of)?;
    crate::scope::spawned(pid);
    Ok(pid)
}

fn vfork_argv(argv: &[OsString], setup: ChildSetup) -> io::Result<Pid> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(cstrings) = argv
        .iter()
        .map(|a| std::ffi::CString::new(a.as_bytes()))
        .collect::<Result<Vec<_>, _>>()
    else {
        // What std's Command reports for the same argument.
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "nul byte found in provided data",
        ));
    };
    let mut ptrs: Vec<*const libc::c_char> = cstrings.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    sys::spawn_vfork(&ptrs, setup)
}

/// The PATH `cmd` will search: its own if set, none if removed, else vloer-run's.
fn path_of(cmd: &Command) -> Option<OsString> {
    match cmd.get_envs().find(|(k, _)| *k == "PATH") {
        Some((_, v)) => v.map(OsString::from),
        None => std::env::var_os("PATH"),
    }
}

/// The command line that runs a file the kernel would not execute (ENOEXEC: a script without
/// `#!`) with /bin/sh, as POSIX execvp and glibc's do: `/bin/sh FILE ARGS...`, FILE being the one
/// a PATH search finds. musl's execvp reports the error instead, so vloer-run does it itself.
fn script_fallback(argv: &[OsString], path: Option<&std::ffi::OsStr>) -> Option<Vec<OsString>> {
    let file = find_in_path(&argv[0], path)?;
    let mut sh = vec![OsString::from("/bin/sh"), file];
    sh.extend_from_slice(&argv[1..]);
    Some(sh)
}

/// The file execvp runs for `program`: itself when it names a path, else the first executable
/// regular file in PATH (musl's default PATH when unset; an empty entry is the current directory).
fn find_in_path(program: &std::ffi::OsStr, path: Option<&std::ffi::OsStr>) -> Option<OsString> {
    use std::os::unix::ffi::OsStrExt;
    let executable = |p: &std::path::Path| {
        p.is_file() && nix::unistd::access(p, nix::unistd::AccessFlags::X_OK).is_ok()
    };
    if program.as_bytes().contains(&b'/') {
        return Some(program.to_os_string());
    }
    let path = path.map_or(&b"/usr/local/bin:/bin:/usr/bin"[..], |p| p.as_bytes());
    path.split(|b| *b == b':')
        .map(|dir| {
            let dir = if dir.is_empty() { &b"."[..] } else { dir };
            std::path::Path::new(std::ffi::OsStr::from_bytes(dir)).join(program)
        })
        .find(|candidate| executable(candidate))
        .map(std::path::PathBuf::into_os_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_falls_back_to_sh_with_the_file_a_path_search_finds() {
        let os = |s: &str| OsString::from(s);
        assert_eq!(
            script_fallback(&[os("./x"), os("a")], None),
            Some(vec![os("/bin/sh"), os("./x"), os("a")])
        );
        assert_eq!(
            script_fallback(
                &[os("sh"), os("-c"), os(":")],
                Some("/nonexistent:/bin".as_ref())
            ),
            Some(vec![os("/bin/sh"), os("/bin/sh"), os("-c"), os(":")])
        );
        assert_eq!(
            script_fallback(&[os("no-such-program-here")], Some("/bin".as_ref())),
            None
        );
    }
}
