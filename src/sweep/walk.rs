//! A walk up `..` from a deleted working directory or root, which still has its way up: the
//! only way to tell whether a removed folder was below a swept one.

use super::proc::{self, FdInfo};
use crate::slowread;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// A folder to find on a walk up `..`: its device, inode, and path in its filesystem (none
/// for a deleted folder: no live mount root lies below it).
pub struct Ident {
    pub dev: (u32, u32),
    pub ino: u64,
    pub path: Option<std::path::PathBuf>,
}

/// What a walk up `..` tells: the folder it started from is below a swept one, it is not
/// (reached the root of its mount, whose folder is outside them all), or it cannot tell (the
/// mount's folder was deleted, or the walk left the part of the filesystem the mount shows).
/// The mount point of the mount it ended on tells the rest (see `Look::link_is`).
pub const WALK_HELD: u8 = 1;
pub const WALK_AT_MOUNT_ROOT: u8 = 0;
pub const WALK_UNDECIDED: u8 = 2;

/// A mount a walk may start on, as a table lists it.
pub struct Mounted {
    pub id: u64,
    pub parent: u64,
    pub dev: (u32, u32),
    /// The folder of the filesystem mounted there.
    pub root: std::path::PathBuf,
    /// That folder was removed.
    pub root_deleted: bool,
}

/// How many folders a walk up `..` passes at most (a path has at most 2048 of them).
const WALK_STEPS: usize = 4096;

impl proc::Dir {
    /// A walk up `..` from the folder the link `name` (`cwd`, `root`) leads to, which a deleted
    /// folder still has, with descriptors of our own: whether it or a folder above it is one of
    /// `dirs` (answered as `[1]`, else `[0]`). Each folder is told by its inode on the device
    /// of its mount, one of `mounts` (an unknown one ends the walk with an error). The walk
    /// stays on the mount it starts on: at that mount's root, the folder of the filesystem
    /// mounted there tells the rest by its path (a bind mount's `..` leads to where it is
    /// mounted, not to the parent of its folder). For the reader thread: each step checks the
    /// permission to search a folder, which a network filesystem may ask its server about.
    pub fn walk_up(
        &self,
        name: &str,
        dirs: Vec<Ident>,
        mounts: Vec<Mounted>,
    ) -> io::Result<slowread::Read> {
        let at = self.fd.try_clone()?;
        let name = name.to_string();
        Ok(Box::new(move || {
            let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
            let info = |fd: &OwnedFd| {
                FdInfo::of(proc::read(&format!("self/fdinfo/{}", fd.as_raw_fd())).ok())
            };
            let mut fd = nix::fcntl::openat(&at, name.as_str(), flags, Mode::empty())?;
            let mut here = info(&fd);
            let id = here.mnt_id.ok_or_else(|| io::Error::other("no mount id"))?;
            let Mounted {
                parent,
                dev,
                root,
                root_deleted,
                ..
            } = mounts
                .into_iter()
                .find(|m| m.id == id)
                .ok_or_else(|| io::Error::other("a mount no table shows"))?;
            for _ in 0..WALK_STEPS {
                let ino = here
                    .ino
                    .ok_or_else(|| io::Error::other("no inode number"))?;
                if dirs.iter().any(|d| d.ino == ino && d.dev == dev) {
                    return Ok(vec![WALK_HELD]);
                }
                let up = nix::fcntl::openat(&fd, "..", flags, Mode::empty())?;
                let above = info(&up);
                let crossed = above.mnt_id != Some(id);
                if crossed || above.ino == here.ino {
                    // The root of the mount: its folder, and what is above it, by path. The
                    // root of the filesystem is the mount's only when the mount shows it all
                    // (a folder moved out of a bind mount's part walks up past its root).
                    // `..` follows a mount stacked on the folder above: a mount that is not
                    // the one this one is mounted on was reached from below its root.
                    let stacked = crossed && above.mnt_id != Some(parent);
                    if root_deleted || stacked || (!crossed && root != std::path::Path::new("/")) {
                        return Ok(vec![WALK_UNDECIDED]);
                    }
                    let held = dirs.iter().any(|d| {
                        d.dev == dev && d.path.as_ref().is_some_and(|p| root.starts_with(p))
                    });
                    return Ok(vec![if held { WALK_HELD } else { WALK_AT_MOUNT_ROOT }]);
                }
                (fd, here) = (up, above);
            }
            Err(io::Error::other("deeper than a walk goes"))
        }))
    }
}
