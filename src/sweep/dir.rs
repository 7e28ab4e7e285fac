//! What a swept folder is: the path given, resolved once at start, and its filesystem identity,
//! which follows the folder when it is renamed, and stays its last when it is deleted.

use super::mounts::{self, Ident, Table};
use super::proc;
use super::target::Target;
use anyhow::{anyhow, Context};
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One `--sweep DIR`.
#[derive(Clone, Debug)]
pub struct Dir {
    /// The path as it resolved at start (symlinks followed), for the verdict.
    pub path: PathBuf,
    /// Its identity at start.
    pub ident: Ident,
    /// The folder itself, held (O_PATH) from the start: the kernel keeps its name current when
    /// it is renamed, so a scan matches the folder, not whatever now has its old name.
    held: Arc<OwnedFd>,
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
        Ok(Dir {
            path,
            ident,
            held: Arc::new(fd),
        })
    }

    /// The folder now, in our mount `table`: where it is after a rename (a deleted one keeps
    /// its last name, and says it was deleted), or its identity at start where that cannot be
    /// read.
    pub fn current(&self, table: &Table) -> Target {
        let fd = self.held.as_raw_fd();
        let link = proc::link(&format!("self/fd/{fd}"))
            .ok()
            .and_then(|text| mounts::link_path(&text));
        let info = proc::fdinfo(&format!("self/fdinfo/{fd}"));
        let now = link.as_ref().and_then(|l| table.ident(l, info.mnt_id));
        Target {
            ident: now.unwrap_or_else(|| self.ident.clone()),
            deleted: link.is_some_and(|l| l.deleted),
            ino: info.ino,
        }
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
