//! Where one link lies: by the mount it is on (its id from name_to_handle_at or `fdinfo`), in
//! this namespace's table, in ours, or on a mount a scan remembered (see `detached`); on a mount
//! no table lists, nowhere that can be told (unless it is a character device); and, for a
//! deleted working directory or root, by its way up `..`.

use super::holds::{Held, Look, What};
use super::mounts::{Link, Table};
use super::proc;
use super::target::{By, Node};
use super::walk;
use crate::slowread;

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
        // of a live one whose top mount shows a removed folder (it may lie beneath that one),
        // or that is on a mount no table lists (its text is a path from that mount's root).
        let top_removed = (self.table.mount_of(link, None)).is_some_and(|m| m.root_deleted);
        if seems && !link.deleted && !top_removed && self.on_listed(dir, name) {
            return Is::Held;
        }
        // Only a link that another mount than the top one at its path would place in a folder
        // (one stacked over the folder since, one of ours, a lost one) is worth a descriptor.
        let ours = self.in_ours();
        let by_ours = ours.as_ref().is_some_and(|o| o.could_hold(link));
        let by_text = seems || self.could_hold(link) || by_ours || self.remembered_fits(link);
        if !by_text && self.table.whole && self.on_listed(dir, name) {
            return Is::Not;
        }
        let info = dir.link_info(name);
        let is = match info.mnt_id {
            None if link.deleted => self.settled(seems, link, None),
            None => Is::Not,
            Some(id) => self.placed(dir, name, id, link, info.ino, || {
                format!("its {}", plain(name))
            }),
        };
        // A deleted folder's own `..` tells whether it was below a swept one, whatever its
        // path reads.
        if matches!(is, Is::Doubted(_)) && matches!(name, "cwd" | "root") {
            let dirs = self
                .dirs
                .iter()
                .filter_map(|d| {
                    Some(walk::Ident {
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
                .map(|m| walk::Mounted {
                    id: m.id,
                    parent: m.parent,
                    dev: m.dev,
                    root: m.root.clone(),
                    root_deleted: m.root_deleted,
                })
                .collect();
            let above = dir.walk_up(name, dirs, mounts).and_then(slowread::read);
            match above.as_deref() {
                Ok([walk::WALK_HELD]) => return Is::Held,
                // Above the mount's root is its mount point, a live folder: one in a folder
                // holds it (a filesystem mounted inside it, a bind mount into it).
                Ok([walk::WALK_AT_MOUNT_ROOT]) => {
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
    pub(super) fn fd_is(
        &self,
        dir: &proc::Dir,
        fd: &str,
        link: &Link,
        mount: proc::Got<u64>,
    ) -> Is {
        let by_table = self.could_hold(link);
        let ours = self.in_ours();
        let by_ours = ours.as_ref().is_some_and(|o| o.could_hold(link));
        // A table that does not show every mount leaves every path to its mount id.
        let far = !by_table && !by_ours && !self.remembered_fits(link) && self.table.whole;
        if far && self.listed(mount) {
            return Is::Not;
        }
        let info = match dir.fdinfo(fd) {
            proc::Got::Text(info) => info,
            // Closed since its link was read: it holds nothing now (and what took its number
            // is another file, whose link was not read).
            proc::Got::Gone => return Is::Not,
            proc::Got::Denied(why) => return Is::Unknown(why),
        };
        match info.mnt_id {
            // No mount id in this kernel's fdinfo (before 3.15): the top mount's answer, as
            // the path gives it.
            None => self.settled(self.holds(link, None), link, None),
            Some(id) => self.placed(dir, &format!("fd/{fd}"), id, link, info.ino, || {
                format!("its descriptor {fd}")
            }),
        }
    }

    /// Whether the link `name` of `dir` is on a mount that this namespace's table or ours
    /// lists (or one of the kernel's own), so that its text is a path in those terms: a mount
    /// made and detached while no scan looked (`umount -l`, `open_tree`) is in no table, and a
    /// link on it reads as a path from that mount's own root, which may name anything. A link
    /// gone meanwhile holds nothing; one whose mount cannot be asked this way is not taken as
    /// listed (its `fdinfo` tells).
    fn on_listed(&self, dir: &proc::Dir, name: &str) -> bool {
        self.listed(dir.mount_id(name))
    }

    /// `on_listed`, with the mount id already asked.
    fn listed(&self, mount: proc::Got<u64>) -> bool {
        match mount {
            proc::Got::Text(0) => true,
            proc::Got::Text(id) if self.table.by_id(id).is_some() => {
                self.table.trust(id);
                true
            }
            proc::Got::Text(id) if self.dirs.ours(id) => {
                self.ours.trust(id);
                true
            }
            proc::Got::Text(_) => false,
            proc::Got::Gone => true,
            proc::Got::Denied(_) => false,
        }
    }

    /// Where `link`, the link `name` of `dir`, lies on mount `id` (see `by_mount`). Where that
    /// is unknown, a table of the process's namespace read now may list the mount (one made
    /// after the scan read that table); else a character device is in none.
    fn placed(
        &self,
        dir: &proc::Dir,
        name: &str,
        id: u64,
        link: &Link,
        ino: Option<u64>,
        what: impl Fn() -> String,
    ) -> Is {
        let is = self.by_mount(id, link, ino, &what);
        if !matches!(is, Is::Unknown(_)) {
            return is;
        }
        let now = (self.root.as_ref())
            .and_then(|root| Some(Table::parse(&dir.read("mountinfo").ok()?, &root.path)))
            .filter(|t| t.by_id(id).is_some());
        if let Some(table) = &now {
            let look = Look {
                table,
                ns: self.ns.clone(),
                root: self.root.clone(),
                ..*self
            };
            return look.by_mount(id, link, ino, &what);
        }
        // A character device (a terminal, /dev/null) writes into no folder, and a process
        // inherits such descriptors across namespaces (a container's stdin, opened by its
        // runtime in a namespace no process here shows).
        match dir.is_device(name, id) {
            true => Is::Not,
            false => is,
        }
    }

    /// Where `link` lies, reached through mount `id` (`what` names the link in words).
    pub(super) fn by_mount(
        &self,
        id: u64,
        link: &Link,
        ino: Option<u64>,
        what: impl Fn() -> String,
    ) -> Is {
        let link = &self.marked(link, id);
        if id == 0 {
            // One of the kernel's own mounts (a memfd, shared memory): in no folder.
            return Is::Not;
        }
        // In this namespace's table; else a mount of ours that it does not list (a file opened
        // before it made a namespace of its own, or kept after its namespace lost the mount),
        // where the link reads as a path of ours.
        let listed = match self.table.by_id(id) {
            Some(m) => Some((m, None)),
            None if self.dirs.ours(id) => self.ours.by_id(id).map(|m| (m, self.in_ours())),
            None => None,
        };
        let Some((mount, in_ours)) = listed else {
            return self
                .on_remembered(id, link, ino)
                .unwrap_or_else(|| Is::Unknown(unknown(&what(), link, id, self)));
        };
        // The kernel writes a link on a listed mount below that mount's point: one that is not
        // was read after the mount the table knows by that id was unmounted (the id is another
        // mount's now, one made and detached since). Its text then proves nothing.
        if !link.path.starts_with(&mount.point) {
            return Is::Unknown(format!(
                "/proc/{}: {} ({}) is not below the mount its id ({id}) names in the table read \
                 ({}): that mount may have been replaced since",
                self.pid,
                what(),
                link.path.display(),
                mount.point.display()
            ));
        }
        let look = in_ours.as_ref().unwrap_or(self);
        look.table.trust(id);
        let node = ino.map(|i| (mount.dev, i));
        self.settled(look.holds_by(link, Some(id), ino), link, node)
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
    use crate::sweep::mounts::Ident;
    use crate::sweep::target::{Target, Targets};
    use std::path::{Path, PathBuf};

    #[test]
    fn a_link_not_below_the_mount_its_id_names_proves_nothing() {
        let table = Table::parse(
            b"22 1 8:1 / / rw - ext4 /dev/sda1 rw\n40 22 0:40 / /mnt/m rw - tmpfs none rw\n",
            Path::new("/"),
        );
        let dirs = Targets {
            dirs: vec![Target {
                ident: Ident {
                    dev: (8, 1),
                    path: PathBuf::from("/x/dir"),
                },
                deleted: false,
                ino: Some(7),
            }],
            ours: vec![22, 40],
            ..Targets::default()
        };
        let look = Look::of(&table, &table, &dirs);
        let link = Link {
            path: PathBuf::from("/x/dir/f"),
            deleted: false,
        };
        let what = || "its descriptor 3".to_string();
        assert!(matches!(look.by_mount(22, &link, None, what), Is::Held));
        // Id 40 is a tmpfs at /mnt/m in the table read: a link that reads /x/dir/f was read
        // when the id was another mount's (one made and detached after that tmpfs went).
        assert!(matches!(
            look.by_mount(40, &link, None, what),
            Is::Unknown(_)
        ));
    }
}
