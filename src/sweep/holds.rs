//! What one process holds (its working directory, root, executable, open files, file-backed
//! maps) and names (its command-line arguments), matched against the swept folders' identities.

use super::mounts::{self, Ident, Mount, Table};
use super::proc::{self, Got};
use nix::unistd::Pid;
use serde::Serialize;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// How a process holds or names a swept folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum What {
    Cwd,
    Root,
    Exe,
    Fd,
    Map,
    Argv,
}

/// What a look at one process found.
#[derive(Default)]
pub struct Held {
    pub what: Vec<What>,
    /// The first file that could not be read, when one could not: the process may hold a folder
    /// without this look seeing it.
    pub denied: Option<String>,
}

impl Held {
    fn add(&mut self, what: What) {
        if !self.what.contains(&what) {
            self.what.push(what);
        }
    }

    fn deny<T>(&mut self, got: Got<T>) -> Option<T> {
        match got {
            Got::Text(t) => Some(t),
            Got::Gone => None,
            Got::Denied(why) => {
                self.denied.get_or_insert(why);
                None
            }
        }
    }
}

/// One process as the scan sees it: its links' texts are in the terms of `table`.
pub struct Look<'a> {
    pub pid: Pid,
    pub table: &'a Table,
    pub dirs: &'a [Ident],
    /// Its root link's text, already read to pick `table`.
    pub root: Option<PathBuf>,
}

impl Look<'_> {
    /// Looks at the links: root, working directory, executable and descriptors; returns what
    /// they hold, and the working directory (against which arguments are resolved).
    pub fn links(&self, dir: &proc::Dir) -> (Held, Option<PathBuf>) {
        let mut held = Held::default();
        if let Some(root) = &self.root {
            if self.holds(root, None) {
                held.add(What::Root);
            }
        }
        let cwd = held
            .deny(dir.link("cwd"))
            .and_then(|t| mounts::link_path(&t));
        if cwd.as_deref().is_some_and(|c| self.holds(c, None)) {
            held.add(What::Cwd);
        }
        let exe = held.deny(dir.link("exe"));
        if exe
            .and_then(|t| mounts::link_path(&t))
            .is_some_and(|e| self.holds(&e, None))
        {
            held.add(What::Exe);
        }
        if self.any_fd(dir, &mut held) {
            held.add(What::Fd);
        }
        (held, cwd)
    }

    /// Adds what the other threads hold: a thread may have unshared its working directory and
    /// root, and when the main thread has exited (`leader_gone`) its own links show nothing, so
    /// each thread's open files are read too.
    pub fn threads(&self, leader_gone: bool, held: &mut Held) {
        /// Threads looked at beyond the main one; a process with more shares its links anyway.
        const MOST: usize = 256;
        let Some(tids) = proc::list(&format!("{}/task", self.pid)).ok() else {
            return;
        };
        let me = self.pid.to_string();
        for tid in tids.iter().filter(|t| **t != me).take(MOST) {
            let Some(task) = proc::Dir::open_task(self.pid, tid).ok() else {
                continue;
            };
            for (name, what) in [("cwd", What::Cwd), ("root", What::Root)] {
                let path = task.link(name).ok().and_then(|t| mounts::link_path(&t));
                if path.is_some_and(|p| self.holds(&p, None)) {
                    held.add(what);
                }
            }
            if leader_gone && self.any_fd(&task, held) {
                held.add(What::Fd);
            }
        }
    }

    /// Adds what the two reads that take the process's memory lock show (made on the reader
    /// thread): its maps and its arguments.
    pub fn slow(
        &self,
        held: &mut Held,
        cwd: Option<&Path>,
        cmdline: Got<Vec<u8>>,
        maps: Got<Vec<u8>>,
    ) {
        if held.deny(maps).is_some_and(|m| self.any_map(&m)) {
            held.add(What::Map);
        }
        if let Some(argv) = held.deny(cmdline) {
            if self.names(&argv, cwd) {
                held.add(What::Argv);
            }
        }
    }

    fn holds(&self, path: &Path, mnt_id: Option<u64>) -> bool {
        self.table
            .mount_of(path, mnt_id)
            .is_some_and(|m| self.within(path, m))
    }

    /// Whether `path` on `mount`, or a mount point it lies under, is at or below a swept folder.
    fn within(&self, path: &Path, mount: &Mount) -> bool {
        let chain = self.table.chain(path, mount);
        chain.iter().any(|i| self.dirs.iter().any(|d| i.within(d)))
    }

    /// Whether some mount on a swept folder's device could show `path` at or below the folder:
    /// only such descriptors are worth reading `fdinfo` for.
    fn could_hold(&self, path: &Path) -> bool {
        self.dirs.iter().any(|d| {
            self.table
                .mount_on(path, d.dev)
                .is_some_and(|m| self.within(path, m))
        })
    }

    fn any_fd(&self, dir: &proc::Dir, held: &mut Held) -> bool {
        let pid = self.pid;
        let Some(fds) = held.deny(dir.fds()) else {
            return false;
        };
        for (fd, text) in fds {
            let Some(path) = mounts::link_path(&text) else {
                continue;
            };
            if !self.could_hold(&path) {
                continue;
            }
            // The mount it was opened through, which a path under a later mount does not show;
            // a mount this namespace no longer lists keeps the path's own answer.
            let mnt_id = proc::mnt_id(&format!("{pid}/fdinfo/{fd}"));
            let known = mnt_id.filter(|id| self.table.by_id(*id).is_some());
            if known.is_none() || self.holds(&path, known) {
                return true;
            }
        }
        false
    }

    fn any_map(&self, maps: &[u8]) -> bool {
        maps.split(|b| *b == b'\n').any(|line| {
            // start-end perms offset major:minor inode path
            let mut f = line.splitn(6, |b| *b == b' ');
            let (Some(dev), Some(inode), Some(path)) = (f.nth(3), f.next(), f.next()) else {
                return false;
            };
            if inode == b"0" {
                return false;
            }
            let Some(dev) = hex_dev(dev) else {
                return false;
            };
            let path = path.trim_ascii_start();
            let Some(path) = mounts::link_path(path) else {
                return false;
            };
            self.table
                .mount_on(&path, dev)
                .is_some_and(|m| self.within(&path, m))
        })
    }

    /// Whether an argument, made absolute against the working directory, is at or below a
    /// swept folder.
    fn names(&self, argv: &[u8], cwd: Option<&Path>) -> bool {
        argv.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .any(|arg| {
                let arg = Path::new(OsStr::from_bytes(arg));
                let path = match cwd {
                    _ if arg.is_absolute() => mounts::normalize(arg),
                    Some(cwd) => mounts::absolute(arg, cwd),
                    None => return false,
                };
                self.holds(&path, None)
            })
    }
}

fn hex_dev(text: &[u8]) -> Option<(u32, u32)> {
    let text = std::str::from_utf8(text).ok()?;
    let (a, b) = text.split_once(':')?;
    Some((
        u32::from_str_radix(a, 16).ok()?,
        u32::from_str_radix(b, 16).ok()?,
    ))
}
