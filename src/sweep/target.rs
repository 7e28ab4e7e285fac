//! The swept folders as one scan matches them: where each is now, whether it was deleted, and
//! the mounts that showed one and that no longer are in our table (see `detached`).
//!
//! A deleted folder has no name any more: a new folder created under its old name is another
//! folder. What still lies in the deleted one is deleted too (a folder is empty when it is
//! removed, and nothing can be created in it afterwards), so the kernel marks every link into it
//! ` (deleted)`: only such links match a deleted folder, and no argument names it.

use super::detached::Seen;
use super::mounts::Ident;

/// One swept folder, now.
#[derive(Clone, Debug)]
pub struct Target {
    /// Where it is (its last name when deleted).
    pub ident: Ident,
    /// It was removed: the link to it that vloer-run holds reads ` (deleted)`.
    pub deleted: bool,
    /// Its inode number, from the `fdinfo` of the descriptor vloer-run holds.
    pub ino: Option<u64>,
}

/// A file's device and inode number.
pub type Node = ((u32, u32), u64);

/// How a path came to be matched.
#[derive(Clone, Copy, Debug)]
pub enum By {
    /// A link (working directory, root, executable, descriptor, map): whether its text was
    /// marked deleted, and its inode number where `fdinfo` gave one.
    Link { deleted: bool, ino: Option<u64> },
    /// An argument of the command line: a name, resolved by text.
    Name,
}

impl Target {
    /// Whether `at`, reached as `by` says, lies in this folder.
    pub fn has(&self, at: &Ident, by: By) -> bool {
        if !at.within(&self.ident) {
            return false;
        }
        match by {
            // A deleted folder at a live folder's own path is another folder, one the folder
            // replaced by a rename (`mv -T`): the folder's own name is not deleted.
            By::Link { deleted: true, .. } if *at == self.ident && !self.deleted => false,
            // At a deleted folder's path, its inode tells the folder from a namesake deleted
            // since.
            By::Link {
                deleted: true,
                ino: Some(ino),
            } if *at == self.ident => self.ino.map_or(true, |own| own == ino),
            _ if !self.deleted => true,
            // A name now names whatever has it, never the deleted folder.
            By::Name => false,
            By::Link { deleted: false, .. } => false,
            By::Link { .. } => true,
        }
    }
}

/// Every swept folder, and what a scan needs to place a path on a detached mount.
#[derive(Debug, Default)]
pub struct Targets {
    pub dirs: Vec<Target>,
    /// Mounts seen showing a folder since the start that our own table does not list: a
    /// descriptor whose mount id is one of them is on another namespace's view of a folder, or
    /// on a mount detached since.
    pub remembered: Vec<Seen>,
    /// Those with one mount for each place they show, lost and foreign (see
    /// `detached::places`): what a link is placed against.
    pub places: (Vec<Seen>, Vec<Seen>),
    /// The mount ids of our own table, sorted.
    pub ours: Vec<u64>,
    /// The mounts vloer-run's own hold on a folder is on: while it holds them they live, so
    /// their ids are theirs even once they are detached.
    pub pinned: Vec<u64>,
    /// Why a folder is left out, when one is: where it is now cannot be told.
    pub unknown: Option<String>,
    /// Mapped files found at their name by this scan (see `maps`).
    /// (Its key: the device, the inode and the path on that filesystem; its value unused.)
    pub at_name: std::sync::Mutex<std::collections::HashMap<super::mounts::MapLine, u64>>,
}

impl Targets {
    pub fn iter(&self) -> impl Iterator<Item = &Target> {
        self.dirs.iter()
    }

    /// Whether mount `id` is in our own table.
    pub fn ours(&self, id: u64) -> bool {
        self.ours.binary_search(&id).is_ok()
    }

    /// Whether `at` lies in some folder.
    pub fn has(&self, at: &Ident, by: By) -> bool {
        self.dirs.iter().any(|d| d.has(at, by))
    }

    /// Whether a link that lies in a folder by its path is only maybe the folder's: a deleted
    /// one. What was removed from another folder that had the folder's path at some time (an
    /// empty one the folder replaced by a rename, one made under its name while it was renamed
    /// away or after it was deleted) reads the same as what was removed from the folder. The
    /// folder's own inode (on its own device) is sure.
    pub fn doubts(&self, deleted: bool, node: Option<Node>) -> bool {
        let own =
            |(dev, ino): Node| (self.dirs.iter()).any(|d| d.ino == Some(ino) && d.ident.dev == dev);
        deleted && !node.is_some_and(own)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn at(path: &str) -> Ident {
        Ident {
            dev: (8, 1),
            path: PathBuf::from(path),
        }
    }

    #[test]
    fn a_deleted_folder_is_matched_by_deleted_links_alone() {
        let live = Target {
            ident: at("/x/dir"),
            deleted: false,
            ino: Some(7),
        };
        let gone = Target {
            deleted: true,
            ..live.clone()
        };
        let link = |deleted, ino| By::Link { deleted, ino };
        for by in [link(false, None), link(true, None), By::Name] {
            assert!(live.has(&at("/x/dir/f"), by), "{by:?}");
            assert!(!live.has(&at("/x/dirt"), by), "{by:?}");
        }
        // The folder the live one replaced by a rename, still open somewhere (an io_uring
        // ring's registered file shows no inode).
        assert!(!live.has(&at("/x/dir"), link(true, Some(8))));
        assert!(!live.has(&at("/x/dir"), link(true, None)));
        assert!(live.has(&at("/x/dir/f"), link(true, Some(8))));
        assert!(gone.has(&at("/x/dir"), link(true, None)));
        assert!(gone.has(&at("/x/dir/sub"), link(true, Some(9))));
        assert!(gone.has(&at("/x/dir"), link(true, Some(7))));
        // A namesake of the folder, deleted too, open: another inode.
        assert!(!gone.has(&at("/x/dir"), link(true, Some(8))));
        // The new folder of its name, and a name.
        assert!(!gone.has(&at("/x/dir"), link(false, Some(7))));
        assert!(!gone.has(&at("/x/dir/f"), link(false, None)));
        assert!(!gone.has(&at("/x/dir/f"), By::Name));
    }

    #[test]
    fn a_deleted_link_is_doubted_unless_it_is_the_folder_s_own_inode() {
        let targets = Targets {
            dirs: vec![Target {
                ident: at("/x/dir"),
                deleted: false,
                ino: Some(7),
            }],
            ..Targets::default()
        };
        assert!(targets.doubts(true, Some(((8, 1), 9))));
        assert!(targets.doubts(true, None));
        assert!(!targets.doubts(true, Some(((8, 1), 7))), "its own inode");
        assert!(
            targets.doubts(true, Some(((0, 40), 7))),
            "its number on another device"
        );
        assert!(!targets.doubts(false, Some(((8, 1), 9))), "not deleted");
    }
}
