//! Files on a mount that was detached (`umount -l`). Such a mount is in no namespace's table any
//! more, and the kernel reads a link into it as a path from the mount's own root (`/f` for a
//! file at the top of a bind mount of DIR), which in any table names another file. The mount id
//! stays: `fdinfo` gives it for a descriptor, and for a working directory, root or executable
//! the `fdinfo` of a descriptor of our own opened (O_PATH) through the link does.
//!
//! So every scan remembers the mounts it sees showing a swept folder, in our table and in every
//! other namespace's it reads (their id, device, and the folder of the filesystem mounted
//! there), for the whole run. A link on one of them that no longer is in a table is placed
//! under that mount's root, on its device. A link that could lie in a folder but whose mount is
//! in no table and was never seen (made and detached between two scans) leaves the process not
//! looked at in full: unverified, never "holds nothing".

use super::holds::{Held, Look, What};
use super::mounts::{self, Ident, Link, Mount, Table};
use super::proc;
use super::target::{By, Node, Target};
use crate::slowread;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// At most this many mounts are remembered (the oldest go first): a run that sees more mounts
/// of its folders than this is not one to keep all of them for.
const KEPT: usize = 4096;

/// A mount seen showing a swept folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub id: u64,
    pub dev: (u32, u32),
    /// The folder of the filesystem mounted there.
    pub root: PathBuf,
    /// Where it is mounted, in its namespace's terms.
    pub point: PathBuf,
    /// The process whose mountinfo showed it, when not our own.
    from: Option<i32>,
}

impl Seen {
    /// Where `path` lies when it is read from this mount's own root, as a detached mount's
    /// links are.
    fn place(&self, path: &Path) -> Ident {
        let rest = path.strip_prefix("/").unwrap_or(path);
        Ident {
            dev: self.dev,
            path: mounts::normalize(&self.root.join(rest)),
        }
    }

    /// Where `path`, in the terms of the namespace that lists this mount, lies when it is on
    /// this mount: None when it is not below its mount point.
    fn through(&self, path: &Path) -> Option<Ident> {
        let rest = path.strip_prefix(&self.point).ok()?;
        Some(Ident {
            dev: self.dev,
            path: mounts::normalize(&self.root.join(rest)),
        })
    }
}

/// The mounts seen showing a swept folder since the start, shared by every scan of the run.
#[derive(Clone, Debug, Default)]
pub struct Memory(Arc<Mutex<Vec<Seen>>>);

impl Memory {
    /// Remembers the mounts of `tables` that show one of `dirs`. A mount id seen for another
    /// mount is forgotten: ids are reused once a mount is gone, and a detached mount is not gone
    /// while anything holds a file on it.
    /// Returns whether one of them was not remembered before.
    pub fn remember<'a>(
        &self,
        tables: impl IntoIterator<Item = &'a Table>,
        dirs: &[Target],
    ) -> bool {
        let mut fresh = false;
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for (table, m) in tables
            .into_iter()
            .flat_map(|t| t.iter().map(move |m| (t, m)))
        {
            let now = Seen {
                id: m.id,
                dev: m.dev,
                root: m.root.clone(),
                point: m.point.clone(),
                from: table.from,
            };
            let at = seen.iter().position(|s| s.id == m.id);
            match (at, dirs.iter().any(|d| shows(m, &d.ident))) {
                (Some(i), true) => seen[i] = now,
                (Some(i), false) => {
                    seen.remove(i);
                }
                (None, true) => {
                    if seen.len() >= KEPT {
                        seen.remove(0);
                    }
                    seen.push(now);
                    fresh = true;
                }
                (None, false) => {}
            }
        }
        fresh
    }

    /// The remembered mounts that `ours` does not list: detached ones, and other namespaces'
    /// views of a folder.
    pub fn unlisted(&self, ours: &Table) -> Vec<Seen> {
        let seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        seen.iter()
            .filter(|s| ours.by_id(s.id).is_none())
            .cloned()
            .collect()
    }
}

impl Seen {
    /// Whether the namespace that showed it lists it still (another namespace's view of a
    /// folder, a container's), read again now; else it was detached, or its namespace is gone.
    pub fn listed(&self) -> bool {
        self.from
            .is_some_and(|pid| mount_ids(pid).contains(&self.id))
    }
}

/// The places a link may be judged against, one mount for each (its device, folder and mount
/// point), from `unlisted`: those read from their root, as a detached mount's links are (lost),
/// and those read in their namespace's terms (foreign). A mount at `/` reads the same either
/// way, so only the others are looked up (each namespace made by `unshare -m` has a copy of
/// the root mount, and a machine may have hundreds). One detached after this lookup is taken
/// for foreign by this scan alone: the next finds it lost.
pub fn places(unlisted: &[Seen]) -> (Vec<Seen>, Vec<Seen>) {
    let mut listed: HashMap<i32, HashSet<u64>> = HashMap::new();
    let (lost, foreign): (Vec<Seen>, Vec<Seen>) = unlisted.iter().cloned().partition(|s| {
        s.point != Path::new("/")
            && !s.from.is_some_and(|pid| {
                listed
                    .entry(pid)
                    .or_insert_with(|| mount_ids(pid))
                    .contains(&s.id)
            })
    });
    (distinct(&lost), distinct(&foreign))
}

/// `seen` with one mount for each place shown (its device, folder and mount point).
fn distinct(seen: &[Seen]) -> Vec<Seen> {
    let mut places: HashSet<(&(u32, u32), &Path, &Path)> = HashSet::new();
    seen.iter()
        .filter(|s| places.insert((&s.dev, &s.root, &s.point)))
        .cloned()
        .collect()
}

/// The mount ids in `pid`'s mountinfo now (none when it cannot be read).
fn mount_ids(pid: i32) -> HashSet<u64> {
    let text = proc::read(&format!("{pid}/mountinfo"))
        .ok()
        .unwrap_or_default();
    text.split(|b| *b == b'\n')
        .filter_map(|line| line.split(|b| *b == b' ').next())
        .filter_map(|id| std::str::from_utf8(id).ok()?.parse().ok())
        .collect()
}

/// Whether `m` shows the folder `dir`, or part of it.
fn shows(m: &Mount, dir: &Ident) -> bool {
    m.dev == dir.dev && (m.root.starts_with(&dir.path) || dir.path.starts_with(&m.root))
}

/// What a look at one link made of it.
pub enum Is {
    Held,
    Not,
    /// It may lie in a folder, on a mount nothing tells where: why, in words.
    Unknown(String),
    /// It lies in a folder by its path, which another folder may have had too: why, in words.
    /// It counts against the proof, and is no reason to signal the process.
    Doubted(String),
}

impl Look<'_> {
    /// Judges the link `name` (`cwd`, `root`, `exe`) of `dir`, read as `link`, adding `what`
    /// to `held` when it holds a folder.
    pub(super) fn judge(
        &self,
        dir: &proc::Dir,
        name: &str,
        link: &Link,
        what: What,
        held: &mut Held,
    ) {
        held.judged(what, self.link_is(dir, name, link));
    }

    fn link_is(&self, dir: &proc::Dir, name: &str, link: &Link) -> Is {
        let seems = self.holds(link, None);
        // A deleted link that seems to be in a folder may be into a namesake of it (one deleted
        // since, or one the folder replaced by a rename): its inode tells. So does the mount
        // of a live one whose top mount shows a removed folder (it may lie beneath that one).
        let top_removed = (self.table.mount_of(link, None)).is_some_and(|m| m.root_deleted);
        if seems && !link.deleted && !top_removed {
            return Is::Held;
        }
        // Only a link that another mount than the top one at its path would place in a folder
        // (one stacked over the folder since, one of ours, a lost one) is worth a descriptor.
        let ours = self.in_ours();
        let by_ours = ours.as_ref().is_some_and(|o| o.could_hold(link));
        let by_text = seems || self.could_hold(link) || by_ours || self.remembered_fits(link);
        if !by_text && self.table.whole {
            return Is::Not;
        }
        let info = dir.link_info(name);
        let is = match info.mnt_id {
            None if link.deleted => self.settled(seems, link, None),
            None => Is::Not,
            Some(id) => self.by_mount(id, link, info.ino, || format!("its {}", plain(name))),
        };
        // A deleted folder's own `..` tells whether it was below a swept one, whatever its
        // path reads.
        if matches!(is, Is::Doubted(_)) && matches!(name, "cwd" | "root") {
            let dirs = self
                .dirs
                .iter()
                .filter_map(|d| {
                    Some(proc::Ident {
                        dev: d.ident.dev,
                        ino: d.ino?,
                        path: (!d.deleted).then(|| d.ident.path.clone()),
                    })
                })
                .collect();
            let mounts = self
                .table
                .iter()
                .chain(self.ours.iter())
                .map(|m| proc::Mounted {
                    id: m.id,
                    parent: m.parent,
                    dev: m.dev,
                    root: m.root.clone(),
                    root_deleted: m.root_deleted,
                })
                .collect();
            let above = dir.walk_up(name, dirs, mounts).and_then(slowread::read);
            match above.as_deref() {
                Ok([proc::WALK_HELD]) => return Is::Held,
                // Above the mount's root is its mount point, a live folder: one in a folder
                // holds it (a filesystem mounted inside it, a bind mount into it).
                Ok([proc::WALK_AT_MOUNT_ROOT]) => {
                    let point = info
                        .mnt_id
                        .and_then(|id| self.table.by_id(id).map(|m| (id, m.point.clone())));
                    return match point {
                        Some((id, path)) => {
                            let point = Link {
                                path,
                                deleted: false,
                            };
                            self.settled(self.holds_by(&point, Some(id), None), &point, None)
                        }
                        None => is,
                    };
                }
                _ => {}
            }
        }
        is
    }

    /// Whether descriptor `fd` of `dir`, its link read as `link`, holds a folder.
    pub(super) fn fd_is(&self, dir: &proc::Dir, fd: &str, link: &Link) -> Is {
        let by_table = self.could_hold(link);
        let ours = self.in_ours();
        let by_ours = ours.as_ref().is_some_and(|o| o.could_hold(link));
        // A table that does not show every mount leaves every path to its mount id.
        if !by_table && !by_ours && !self.remembered_fits(link) && self.table.whole {
            return Is::Not;
        }
        let info = dir.fdinfo(fd);
        match info.mnt_id {
            // No fdinfo (closed meanwhile, or no mount id in this kernel's): the top mount's
            // answer, as the path gives it.
            None => self.settled(self.holds(link, None), link, None),
            Some(id) => self.by_mount(id, link, info.ino, || format!("its descriptor {fd}")),
        }
    }

    /// Where `link` lies, reached through mount `id` (`what` names the link in words).
    pub(super) fn by_mount(
        &self,
        id: u64,
        link: &Link,
        ino: Option<u64>,
        what: impl FnOnce() -> String,
    ) -> Is {
        let link = &self.marked(link, id);
        match id {
            // One of the kernel's own mounts (a memfd, shared memory): in no folder.
            0 => Is::Not,
            id if self.table.by_id(id).is_some() => {
                let node = (self.table.by_id(id).zip(ino)).map(|(m, i)| (m.dev, i));
                self.settled(self.holds_by(link, Some(id), ino), link, node)
            }
            // A mount of ours that this process's namespace does not list (a file opened
            // before it made a namespace of its own, or kept after its namespace lost the
            // mount): the link reads as a path of ours.
            id if self.dirs.ours(id) => {
                let held = self
                    .in_ours()
                    .is_some_and(|o| o.holds_by(link, Some(id), ino));
                let node = (self.ours.by_id(id).zip(ino)).map(|(m, i)| (m.dev, i));
                self.settled(held, link, node)
            }
            id => self
                .on_remembered(id, link, ino)
                .unwrap_or_else(|| Is::Unknown(unknown(&what(), link, id, self))),
        }
    }

    /// Whether some remembered mount that is in no table now would place `link` in a folder: a
    /// lost one (the link read from its root), or another namespace's (the
    /// link read in that namespace's terms, as the kernel writes a link into a mount of a
    /// namespace not the holder's, one opened through `/proc/PID/root`).
    pub(super) fn remembered_fits(&self, link: &Link) -> bool {
        let by = By::Link {
            deleted: link.deleted,
            ino: None,
        };
        // (One the table lists may be among them: this only tells whether fdinfo is worth a
        // read, and the table's own mounts are judged there first.)
        let (lost, foreign) = &self.dirs.places;
        let lost = lost.iter().map(|m| Some(m.place(link)));
        let foreign = foreign.iter().map(|m| m.through(link));
        lost.chain(foreign)
            .flatten()
            .any(|at| self.dirs.has(&at, by))
    }

    /// What a placement in a folder (`held`) of `link`, of device and inode `node`, proves (see
    /// `Targets::doubts`).
    pub(super) fn settled(&self, held: bool, link: &Link, node: Option<Node>) -> Is {
        match held {
            false => Is::Not,
            true if self.dirs.doubts(link.deleted, node) => Is::Doubted(format!(
                "/proc/{}: {} was deleted below a swept folder's path, which another folder may \
                 have had too (one the swept folder replaced by a rename, one made under its \
                 name): whose it was cannot be told",
                self.pid,
                link.path.display()
            )),
            true => Is::Held,
        }
    }

    /// `link` marked deleted when mount `id`, the one it is on, shows a removed folder: the
    /// kernel marks only a removed file's own name, and one below a removed mount root reads as
    /// if it were at its path. (Never the top mount at its path: the link may lie beneath.)
    pub(super) fn marked(&self, link: &Link, id: u64) -> Link {
        let mount = (self.table.by_id(id)).or_else(|| self.ours.by_id(id));
        let gone = mount.is_some_and(|m| m.root_deleted);
        Link {
            path: link.path.clone(),
            deleted: link.deleted || gone,
        }
    }

    /// Where `link` lies when mount `id` is a remembered one: None when it is not.
    fn on_remembered(&self, id: u64, link: &Link, ino: Option<u64>) -> Option<Is> {
        let by = By::Link {
            deleted: link.deleted,
            ino,
        };
        let m = self.dirs.remembered.iter().find(|m| m.id == id)?;
        if !m.listed() {
            // An id is a mount's only while the mount lives. Once nothing holds a file on a
            // detached mount it is freed, and a mount made and detached between two scans may
            // take its id: what that mount's root places in a folder is not proof, unless
            // vloer-run itself holds the mount.
            return Some(match self.dirs.has(&m.place(link), by) {
                true if self.dirs.pinned.contains(&id) => {
                    self.settled(true, link, ino.map(|i| (m.dev, i)))
                }
                true => Is::Unknown(format!(
                    "/proc/{}: {} is on a mount (id {id}) detached (umount -l) since a scan \
                     saw it show a swept folder; a mount made since may have taken its id, so \
                     where it lies is not proven",
                    self.pid,
                    link.path.display()
                )),
                false => Is::Not,
            });
        }
        let held = m.through(link).is_some_and(|at| self.dirs.has(&at, by));
        Some(self.settled(held, link, ino.map(|i| (m.dev, i))))
    }
}

fn plain(name: &str) -> &str {
    match name {
        "cwd" => "working directory",
        "exe" => "executable",
        other => other,
    }
}

fn unknown(what: &str, link: &Link, id: u64, look: &Look) -> String {
    if !look.table.whole {
        return format!(
            "/proc/{}: {what} ({}) is on a mount (id {id}) that no table read shows: the \
             process is chroot'ed in a mount namespace of its own, whose mountinfo shows only \
             the mounts below its root",
            look.pid,
            link.path.display()
        );
    }
    format!(
        "/proc/{}: {what} ({}) is on a mount (id {id}) that no mount table lists and no scan \
         saw, one detached (umount -l) since: where it lies is unknown",
        look.pid,
        link.path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &[u8] = b"\
22 1 8:1 / / rw - ext4 /dev/sda1 rw
40 22 8:1 /srv/data /mnt/view rw - ext4 /dev/sda1 rw
41 22 8:1 /srv/other /mnt/other rw - ext4 /dev/sda1 rw
42 22 0:40 / /srv/data/tmp rw - tmpfs tmpfs rw
";

    fn target(path: &str) -> Target {
        Target {
            ident: Ident {
                dev: (8, 1),
                path: PathBuf::from(path),
            },
            deleted: false,
            ino: None,
        }
    }

    #[test]
    fn mounts_that_show_the_folder_are_remembered_and_an_id_reused_is_forgotten() {
        let memory = Memory::default();
        let table = Table::parse(INFO, Path::new("/"));
        memory.remember([&table], &[target("/srv/data/w")]);
        let ids: Vec<u64> = memory
            .unlisted(&Table::default())
            .iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(ids, [22, 40]);
        assert!(memory.unlisted(&table).is_empty());
        // Mount 40 is gone and its id now names another mount.
        let later = Table::parse(
            b"40 22 8:1 /srv/other /x rw - ext4 /dev/sda1 rw\n",
            "/".as_ref(),
        );
        memory.remember([&later], &[target("/srv/data/w")]);
        let lost = memory.unlisted(&Table::default());
        assert_eq!(lost.iter().map(|s| s.id).collect::<Vec<_>>(), [22]);
        assert!(!lost[0].listed(), "ours, and ours lists it no more");
        let view = Seen {
            id: 40,
            dev: (8, 1),
            root: PathBuf::from("/srv/data"),
            point: PathBuf::from("/mnt/view"),
            from: None,
        };
        assert_eq!(view.place(Path::new("/w/f")), target("/srv/data/w/f").ident);
    }

    #[test]
    fn a_mount_still_in_the_namespace_that_showed_it_is_not_lost() {
        let me = crate::sys::own_pid();
        let text = proc::read("self/mountinfo").ok().unwrap();
        let table = Table::parse(&text, Path::new("/")).read_from(me);
        let root = table.iter().find(|m| m.point == Path::new("/")).unwrap();
        let memory = Memory::default();
        memory.remember([&table], &[dir_of(root)]);
        let unlisted = memory.unlisted(&Table::default());
        let shown = unlisted.iter().find(|s| s.id == root.id).unwrap();
        assert!(shown.listed(), "still in the namespace that showed it");
        let (lost, foreign) = places(&unlisted);
        assert!(lost.is_empty());
        assert!(foreign.iter().any(|s| s.id == root.id));
        // Shown by a process that is gone: nothing says it is still mounted.
        let gone =
            Table::parse(&text, Path::new("/")).read_from(nix::unistd::Pid::from_raw(i32::MAX));
        memory.remember([&gone], &[dir_of(root)]);
        let unlisted = memory.unlisted(&Table::default());
        assert!(!unlisted.iter().any(|s| s.listed()));
    }

    #[test]
    fn each_place_is_judged_against_once() {
        let memory = Memory::default();
        let copies = b"\
22 1 8:1 / / rw - ext4 /dev/sda1 rw
40 22 8:1 /srv/data /mnt/view rw - ext4 /dev/sda1 rw
";
        let gone = nix::unistd::Pid::from_raw(i32::MAX);
        let mut tables: Vec<Table> = Vec::new();
        for n in 0..3u64 {
            let text = String::from_utf8_lossy(copies)
                .replace("22 ", &format!("{} ", 22 + 100 * n))
                .replace("40 ", &format!("{} ", 40 + 100 * n));
            tables.push(Table::parse(text.as_bytes(), Path::new("/")).read_from(gone));
        }
        memory.remember(tables.iter(), &[target("/srv/data/w")]);
        let unlisted = memory.unlisted(&Table::default());
        assert_eq!(unlisted.len(), 6);
        // The views at /mnt/view are listed by no live process: lost; the root mounts read the
        // same either way.
        let (lost, foreign) = places(&unlisted);
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert_eq!(lost[0].point, Path::new("/mnt/view"));
        assert_eq!(foreign.len(), 1, "{foreign:?}");
        assert_eq!(foreign[0].point, Path::new("/"));
    }

    fn dir_of(m: &Mount) -> Target {
        Target {
            ident: Ident {
                dev: m.dev,
                path: m.root.clone(),
            },
            ..target("/")
        }
    }
}
