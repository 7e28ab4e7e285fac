//! What one process holds (its working directory, root, executable, open files, file-backed
//! maps) and names (its command-line arguments), matched against the swept folders' identities.

use super::listing::{self, Seen, TASK_RELISTS};
use super::mounts::{self, Link, Mount, Table};
use super::placing::Is;
use super::proc::{self, Got};
use super::target::{By, Targets};
use super::uring;
use crate::sys::{self, Shared};
use nix::unistd::Pid;
use serde::Serialize;
use std::cmp::Ordering;
use std::io;
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
    /// Why this look may have missed one of the process's threads, when it may: new ones kept
    /// appearing. The scan then proves nothing.
    pub unsettled: Option<String>,
    /// Some match proves it (not only doubted ones, see `Targets::doubts`): only then is the
    /// process signalled.
    pub sure: bool,
    /// Why a match may be another folder's, when one may.
    pub doubt: Option<String>,
    /// The kinds some match proved: a thread's tables need no look for those alone.
    proven: Vec<What>,
}

impl Held {
    /// Adds a match that proves the process holds or names a folder.
    pub(super) fn add(&mut self, what: What) {
        self.sure = true;
        if !self.proven.contains(&what) {
            self.proven.push(what);
        }
        self.push(what);
    }

    fn push(&mut self, what: What) {
        if !self.what.contains(&what) {
            self.what.push(what);
        }
    }

    /// Adds what a look at one link made of it; returns whether it proved a match.
    pub(super) fn judged(&mut self, what: What, is: Is) -> bool {
        match is {
            Is::Held => {
                self.add(what);
                return true;
            }
            Is::Doubted(why) => {
                self.push(what);
                self.doubt.get_or_insert(why);
            }
            Is::Unknown(why) => {
                self.denied.get_or_insert(why);
            }
            Is::Not => {}
        }
        false
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
    /// The mount namespace its links are judged in (`table`'s), when it could be read.
    pub ns: Option<Vec<u8>>,
    pub table: &'a Table,
    /// Our own mount table (which `table` is, for a process of our namespace).
    pub ours: &'a Table,
    pub dirs: &'a Targets,
    /// Its root link's text, already read to pick `table`.
    pub root: Option<Link>,
}

#[cfg(test)]
impl<'a> Look<'a> {
    /// A look at no process in particular, to judge `table`'s own mounts.
    pub fn of(table: &'a Table, ours: &'a Table, dirs: &'a Targets) -> Look<'a> {
        Look {
            pid: Pid::from_raw(0),
            ns: None,
            table,
            ours,
            dirs,
            root: None,
        }
    }
}

impl Look<'_> {
    /// Looks at the links: root, working directory, executable and descriptors; returns what
    /// they hold, and the working directory (against which arguments are resolved).
    pub fn links(&self, dir: &proc::Dir) -> (Held, Option<PathBuf>) {
        let mut held = Held::default();
        if let Some(root) = &self.root {
            self.judge(dir, "root", root, What::Root, &mut held);
        }
        let cwd = held
            .deny(dir.link("cwd"))
            .and_then(|t| mounts::link_path(&t));
        if let Some(c) = &cwd {
            self.judge(dir, "cwd", c, What::Cwd, &mut held);
        }
        let exe = held.deny(dir.link("exe"));
        if let Some(e) = exe.and_then(|t| mounts::link_path(&t)) {
            self.judge(dir, "exe", &e, What::Exe, &mut held);
        }
        self.any_fd(dir, &mut held);
        // A deleted working directory names nothing: what lies at its old path now is
        // another folder's (one that replaced it by a rename).
        (held, cwd.filter(|c| !c.deleted).map(|c| c.path))
    }

    /// Adds what the other threads hold where it may differ from what was read: a thread may
    /// have unshared its working directory and root or its file table, and when the main thread
    /// has exited (`leader_gone`) its own links show nothing. kcmp tells which threads share
    /// what was read already, so each distinct one is read once; a thread it cannot compare
    /// (no kcmp in the kernel, a seccomp profile) is read.
    ///
    /// The threads are listed again until a listing shows none not yet considered: a table
    /// that only ever lives in a thread that did not exist at the last listing (each one starts
    /// the next, sharing it, and exits) is then read, or the look says it never settled.
    pub fn threads(&self, dir: &proc::Dir, leader_gone: bool, held: &mut Held) {
        let main = (!leader_gone).then_some(self.pid);
        let (mut fs, mut files) = (Read::new(Shared::Fs, main), Read::new(Shared::Files, main));
        let mut seen = Seen::default();
        for _ in 0..TASK_RELISTS {
            let has = |w| held.proven.contains(&w);
            // What is proven already needs no second look (a doubted match may be proven by
            // another thread's table).
            if has(What::Fd) && has(What::Cwd) && has(What::Root) {
                return;
            }
            let Some(tids) = held.deny(dir.tasks()) else {
                return;
            };
            let new: Vec<Pid> = seen
                .news(tids)
                .into_iter()
                .filter(|t| *t != self.pid)
                .collect();
            if new.is_empty() {
                return;
            }
            for tid in new {
                self.thread(dir, tid, (&mut fs, &mut files), held);
            }
        }
        held.unsettled = Some(listing::threads_unsettled(self.pid));
    }

    /// Reads thread `tid`'s working directory and root, and its descriptors, where its tables
    /// of them were not read yet.
    fn thread(
        &self,
        dir: &proc::Dir,
        tid: Pid,
        (fs, files): (&mut Read, &mut Read),
        held: &mut Held,
    ) {
        let has = |w| held.proven.contains(&w);
        let read_fs = !(has(What::Cwd) && has(What::Root)) && fs.unread(tid);
        let read_files = !has(What::Fd) && files.unread(tid);
        if !read_fs && !read_files {
            return;
        }
        let Some(task) = held.deny(dir.task(tid)) else {
            return;
        };
        if read_fs && self.own_namespace(&task) {
            // Its links are in the terms of a mount table this look did not read.
            held.denied.get_or_insert(format!(
                "/proc/{}/task/{tid}: a thread with a mount namespace of its own, which the \
                 sweep does not read",
                self.pid
            ));
        }
        if read_fs {
            for (name, what) in [("cwd", What::Cwd), ("root", What::Root)] {
                let path = held
                    .deny(task.link(name))
                    .and_then(|t| mounts::link_path(&t));
                if let Some(p) = path {
                    self.judge(&task, name, &p, what, held);
                }
            }
        }
        if read_files {
            self.any_fd(&task, held);
        }
    }

    /// Whether thread `task` is in another mount namespace than the one the process's links are
    /// judged in (only a thread with a working directory of its own can be:
    /// unshare(CLONE_NEWNS) unshares it too).
    fn own_namespace(&self, task: &proc::Dir) -> bool {
        match task.link("ns/mnt") {
            // The process's namespace could not be read: neither can be told apart.
            Got::Text(thread) => self.ns.as_ref() != Some(&thread),
            _ => false,
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
        if let Some(maps) = held.deny(maps) {
            self.any_map(&maps, held);
        }
        if let Some(argv) = held.deny(cmdline) {
            if self.names(&argv, cwd) {
                held.add(What::Argv);
            } else if self.unplaced_root() {
                held.denied.get_or_insert(format!(
                    "/proc/{}: chroot'ed in a mount namespace of its own, whose mountinfo shows \
                     no mount its root is on: what its arguments name cannot be placed",
                    self.pid
                ));
            }
        }
    }

    pub(super) fn holds(&self, link: &Link, mnt_id: Option<u64>) -> bool {
        self.holds_by(link, mnt_id, None)
    }

    /// `holds`, with the inode number `fdinfo` gave.
    pub(super) fn holds_by(&self, link: &Link, mnt_id: Option<u64>, ino: Option<u64>) -> bool {
        let by = By::Link {
            deleted: link.deleted,
            ino,
        };
        self.table
            .mount_of(link, mnt_id)
            .is_some_and(|m| self.within(link, m, by))
    }

    /// Whether `path` on `mount`, or a mount point it lies under, is at or below a swept folder.
    pub(super) fn within(&self, path: &Path, mount: &Mount, by: By) -> bool {
        let chain = self.table.chain(path, mount);
        // A mount point is a live folder, whatever was deleted on the mount.
        let point = match by {
            By::Link { .. } => By::Link {
                deleted: false,
                ino: None,
            },
            By::Name => By::Name,
        };
        chain
            .iter()
            .enumerate()
            .any(|(i, at)| self.dirs.has(at, if i == 0 { by } else { point }))
    }

    /// The same look in our own namespace's terms, for a process of another: a descriptor on a
    /// mount of ours reads as a path of ours, whatever its own namespace lists.
    pub(super) fn in_ours(&self) -> Option<Look<'_>> {
        (!std::ptr::eq(self.table, self.ours)).then_some(Look {
            pid: self.pid,
            ns: None,
            table: self.ours,
            ours: self.ours,
            dirs: self.dirs,
            root: None,
        })
    }

    /// Whether some mount on a swept folder's device could show `link` at or below the folder:
    /// only such descriptors are worth reading `fdinfo` for.
    pub(super) fn could_hold(&self, link: &Link) -> bool {
        let by = By::Link {
            deleted: link.deleted,
            ino: None,
        };
        self.dirs.iter().any(|d| {
            self.table
                .mount_on(link, d.ident.dev)
                .is_some_and(|m| self.within(link, m, by))
        })
    }

    /// Adds what the descriptors hold (`fd`); returns whether one proved it.
    fn any_fd(&self, dir: &proc::Dir, held: &mut Held) -> bool {
        let Some(fds) = held.deny(dir.fds()) else {
            return false;
        };
        for proc::Fd {
            num: fd,
            text,
            mount,
        } in fds
        {
            let Some(link) = mounts::link_path(&text) else {
                // A ring's registered files may have no descriptor of their own left.
                if uring::is_ring(&text) {
                    // No mount is shown for them: the top mount at the path places a file in
                    // a folder; one that only a mount beneath it would place there may be
                    // anywhere.
                    let files = held
                        .deny(uring::files(dir, self.pid, &fd))
                        .unwrap_or_default();
                    for l in files.iter().filter(|l| self.holds(l, None)) {
                        if held.judged(What::Fd, self.settled(true, l, None)) {
                            return true;
                        }
                    }
                    if let Some(l) = files.iter().find(|l| self.could_hold(l)) {
                        held.denied.get_or_insert(format!(
                            "/proc/{}/fdinfo/{fd}: a file registered with an io_uring ring ({}) \
                             lies under a mount stacked over a swept folder, and its own mount \
                             is not shown",
                            self.pid,
                            l.path.display()
                        ));
                    }
                }
                continue;
            };
            // The mount it was opened through tells where it lies, which its path does not
            // under a later mount or on a mount detached since (see `detached`).
            if held.judged(What::Fd, self.fd_is(dir, &fd, &link, mount)) {
                return true;
            }
        }
        false
    }

    /// Whether the process's root is on no mount its table shows (a chroot'ed process of
    /// another namespace, whose table shows only the mounts below its root).
    fn unplaced_root(&self) -> bool {
        !self.table.whole
            && self
                .root
                .as_ref()
                .is_some_and(|r| self.table.mount_of(r, None).is_none())
    }
}

/// The threads whose table of one kind (file table, or working directory and root) was read,
/// one per distinct table, in the kernel's order of tables.
struct Read {
    what: Shared,
    by: Vec<Pid>,
}

impl Read {
    fn new(what: Shared, main: Option<Pid>) -> Read {
        Read {
            what,
            by: main.into_iter().collect(),
        }
    }

    /// Whether `tid`'s table is to be read: one not read yet (then `tid` stands for it from now
    /// on), or one kcmp could not compare. A thread that has exited is read too, and found gone.
    fn unread(&mut self, tid: Pid) -> bool {
        match place(self.by.len(), |i| sys::kcmp(tid, self.by[i], self.what)) {
            Ok(Ok(_)) => false,
            Ok(Err(at)) => {
                self.by.insert(at, tid);
                true
            }
            Err(_) => true,
        }
    }
}

/// A binary search of `n` sorted items by a comparison that may fail: `Ok(i)` when item `i` is
/// equal, `Err(i)` where an unequal one would go.
fn place(
    n: usize,
    mut cmp: impl FnMut(usize) -> io::Result<Ordering>,
) -> io::Result<Result<usize, usize>> {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match cmp(mid)? {
            Ordering::Less => hi = mid,
            Ordering::Greater => lo = mid + 1,
            Ordering::Equal => return Ok(Ok(mid)),
        }
    }
    Ok(Err(lo))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn place_finds_an_equal_item_or_where_an_unequal_one_goes() {
        let sorted = [10, 20, 30, 40];
        let at = |x: i32| place(sorted.len(), |i| Ok(x.cmp(&sorted[i]))).unwrap();
        assert_eq!(at(30), Ok(2));
        assert_eq!(at(10), Ok(0));
        assert_eq!(at(5), Err(0));
        assert_eq!(at(25), Err(2));
        assert_eq!(at(45), Err(4));
        assert_eq!(place(0, |_| unreachable!()).unwrap(), Err(0));
        let failed = place(sorted.len(), |_| Err(io::Error::other("no order")));
        assert!(failed.is_err(), "a comparison that fails fails the search");
    }
}
