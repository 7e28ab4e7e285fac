//! What a swept folder is: the path given, resolved once at start, and its filesystem identity,
//! which follows the folder when it is renamed, and stays its last when it is deleted.

use super::mounts::{self, Ident, Link, Table};
use super::proc;
use super::target::Target;
use anyhow::{anyhow, Context};
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
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
    /// The mount `held` was opened through (its id, device and root), as our table showed it at
    /// start: a descriptor's mount never changes, and once that mount is detached (`umount -l`)
    /// the descriptor's link reads as a path from the mount's own root.
    mount: Option<(u64, (u32, u32), PathBuf)>,
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
        // The kernel marks a link into a deleted folder with that very suffix.
        if path.as_os_str().as_bytes().ends_with(DELETED) {
            return Err(anyhow!(
                "{}: a folder whose name ends in \" (deleted)\" cannot be told from a deleted \
                 one; rename it",
                named()
            ));
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
        let mount = mnt_id
            .and_then(|id| table.by_id(id))
            .map(|m| (m.id, m.dev, m.root.clone()));
        Ok(Dir {
            path,
            ident,
            held: Arc::new(fd),
            mount,
        })
    }

    /// The mount our hold on the folder is on, when our table showed it at start.
    pub fn mount_id(&self) -> Option<u64> {
        self.mount.as_ref().map(|m| m.0)
    }

    /// The folder now, in our mount `table`: where it is after a rename (a deleted one keeps
    /// its last name, and says it was deleted), or its identity at start where its link cannot
    /// be read. An error says why where is not known: then the folder matches nothing, and the
    /// scan proves nothing.
    pub fn current(&self, table: &Table) -> Result<Vec<Target>, String> {
        let fd = self.held.as_raw_fd();
        let link = proc::link(&format!("self/fd/{fd}"))
            .ok()
            .and_then(|text| mounts::link_path(&text));
        let info = proc::fdinfo(&format!("self/fdinfo/{fd}"));
        let now = match &link {
            Some(l) => Some(self.placed(l, info.mnt_id, table)?),
            None => None,
        };
        let ident = now.unwrap_or_else(|| self.ident.clone());
        // A rename never leaves the filesystem.
        if ident.dev != self.ident.dev {
            return Err(self.lost("its link now names another filesystem"));
        }
        let mut targets = vec![Target {
            ident,
            deleted: link.as_ref().is_some_and(|l| l.deleted),
            ino: info.ino,
        }];
        // A live folder renamed to a name that ends in " (deleted)" reads the same as a deleted
        // one: both are swept (the other costs a match of a folder by that odd name, never a
        // miss).
        if let Some(l) = link.filter(|l| l.deleted) {
            let mut named = l.path.into_os_string();
            named.push(std::ffi::OsStr::from_bytes(DELETED));
            let named = Link {
                path: named.into(),
                deleted: false,
            };
            let live = self.placed(&named, info.mnt_id, table);
            if let Some(ident) = live.ok().filter(|i| i.dev == self.ident.dev) {
                targets.push(Target {
                    ident,
                    deleted: false,
                    ino: info.ino,
                });
            }
        }
        Ok(targets)
    }

    /// Where the link `l` of the held descriptor, on mount `mnt_id`, puts the folder.
    fn placed(&self, l: &Link, mnt_id: Option<u64>, table: &Table) -> Result<Ident, String> {
        let Some(id) = mnt_id else {
            return table
                .ident(l, None)
                .ok_or_else(|| self.lost("no mount of ours holds it"));
        };
        if let Some(m) = table.by_id(id) {
            // Moved out of the part of its filesystem that this mount shows (a rename out of a
            // bind mount's folder): the kernel then writes the link as `/`, on this mount, which
            // names the mount's own folder, not this one.
            if !l.path.starts_with(&m.point) {
                return Err(self.lost("it was moved out of the mount it was reached through"));
            }
            return table
                .ident(l, Some(id))
                .ok_or_else(|| self.lost("no mount of ours holds it"));
        }
        // Detached since: the link is a path from that mount's root, and any table would place
        // it in another folder (`/sub` on the root filesystem).
        match &self.mount {
            Some((own, dev, root)) if *own == id => {
                let rest = l.path.strip_prefix("/").unwrap_or(&l.path);
                let path = mounts::normalize(&root.join(rest));
                // A folder moved out of the detached mount's folder reads `/` too: only the
                // mount's own folder may be the swept one then.
                if rest.as_os_str().is_empty() && *root != self.ident.path {
                    return Err(self.lost("it was moved out of the mount it was reached through"));
                }
                Ok(Ident { dev: *dev, path })
            }
            _ => Err(self.lost("its mount is in no table of ours")),
        }
    }

    fn lost(&self, why: &str) -> String {
        format!(
            "where the swept folder {} is cannot be told: {why}",
            self.path.display()
        )
    }
}

/// What the kernel appends to a link into something deleted.
const DELETED: &[u8] = b" (deleted)";

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
