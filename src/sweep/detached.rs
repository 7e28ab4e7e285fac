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

use super::mounts::{self, Ident, Mount, Table};
use super::proc;
use super::target::Target;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// At most this many mounts are remembered: a run that sees more mounts of its folders than
/// this is not one to keep all of them for.
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
    pub(super) fn place(&self, path: &Path) -> Ident {
        let rest = path.strip_prefix("/").unwrap_or(path);
        Ident {
            dev: self.dev,
            path: mounts::normalize(&self.root.join(rest)),
        }
    }

    /// Where `path`, in the terms of the namespace that lists this mount, lies when it is on
    /// this mount: None when it is not below its mount point.
    pub(super) fn through(&self, path: &Path) -> Option<Ident> {
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
                // Once full, a new one is not remembered (and so makes no scan wait for it):
                // a file on it once it is detached is then unverified. Forgetting an old one
                // for it instead would have every scan "see" one again for the first time.
                (None, true) if seen.len() >= KEPT => {}
                (None, true) => {
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

    #[test]
    fn a_full_memory_takes_no_more_and_never_sees_one_again_for_the_first_time() {
        let memory = Memory::default();
        let lines: String = (0..KEPT + 10)
            .map(|i| {
                format!(
                    "{} 22 8:1 /srv/data /mnt/v{i} rw - ext4 /dev/sda1 rw\n",
                    100 + i
                )
            })
            .collect();
        let table = Table::parse(lines.as_bytes(), Path::new("/"));
        let dirs = [target("/srv/data/w")];
        assert!(memory.remember([&table], &dirs));
        assert!(
            !memory.remember([&table], &dirs),
            "seen again for the first time"
        );
        assert_eq!(memory.unlisted(&Table::default()).len(), KEPT);
    }
}
