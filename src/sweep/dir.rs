//! What a swept folder is: the path given, resolved once at start, and its filesystem identity,
//! which stays what is matched even when the folder is renamed away or deleted during the run.

use super::mounts::{self, Ident, Table};
use super::proc;
use anyhow::{anyhow, Context};
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// One `--sweep DIR`.
#[derive(Clone, Debug)]
pub struct Dir {
    /// The path as it resolved at start (symlinks followed), for the verdict.
    pub path: PathBuf,
    pub ident: Ident,
}

impl Dir {
    /// Resolves `given` against our own mount table; an error names the path.
    pub fn resolve(given: &Path, table: &Table) -> anyhow::Result<Dir> {
        let named = || format!("--sweep {}", given.display());
        let path =
            std::fs::canonicalize(given).map_err(|e| anyhow!("{}: {}", named(), plain(&e)))?;
        if !path.is_dir() {
            return Err(anyhow!("{}: not a folder", named()));
        }
        // The descriptor names the mount the folder is reached through, which its path alone
        // does not when something is mounted over part of the way.
        let fd = nix::fcntl::open(
            &path,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .with_context(named)?;
        let mnt_id = proc::mnt_id(&format!("self/fdinfo/{}", fd.as_raw_fd()));
        let ident = table
            .ident(&mounts::normalize(&path), mnt_id)
            .ok_or_else(|| anyhow!("{}: no mount of ours holds it", named()))?;
        Ok(Dir { path, ident })
    }
}

/// An error in words, without std's "(os error N)".
fn plain(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::NotFound => "does not exist".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => {
            let text = err.to_string();
            match text.find(" (os error") {
                Some(i) => text[..i].to_string(),
                None => text,
            }
        }
    }
}
