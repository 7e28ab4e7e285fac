//! A mount namespace's table as `/proc/PID/mountinfo` shows it, and the way a path seen in that
//! namespace maps to its filesystem identity: the device and the path within the filesystem.
//! Bind mounts and other namespaces' views of one folder map to the same identity.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Where a path lies, whatever mount it was reached through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ident {
    /// The filesystem's device, as `major:minor`.
    pub dev: (u32, u32),
    /// The path from the filesystem's own root.
    pub path: PathBuf,
}

impl Ident {
    /// Whether this lies at `dir` or below it.
    pub fn within(&self, dir: &Ident) -> bool {
        self.dev == dir.dev && self.path.starts_with(&dir.path)
    }
}

/// One line of mountinfo.
#[derive(Debug)]
pub struct Mount {
    pub id: u64,
    pub parent: u64,
    pub dev: (u32, u32),
    /// The folder of the filesystem mounted here (not `/` for a bind mount of a subfolder).
    pub root: PathBuf,
    /// Where it is mounted, in the reader's terms (see `Table::parse`).
    pub point: PathBuf,
    /// Its folder was removed (mountinfo marks it `//deleted`): nothing on it lies at a path.
    pub root_deleted: bool,
}

/// The mounts of one namespace, in mountinfo's order (a later mount at the same point is on top).
#[derive(Debug, Default)]
pub struct Table {
    mounts: Vec<Mount>,
    /// The process whose mountinfo it is, when not our own.
    pub from: Option<i32>,
    /// Read from a process whose root is its namespace's: every mount is shown. A process
    /// chroot'ed elsewhere is shown only the mounts below its root.
    pub whole: bool,
    /// The text it was read from.
    pub text: Vec<u8>,
    /// The ids of its mounts that a link was taken at its text by (see `lost_since`).
    pub trusted: std::sync::Mutex<Vec<u64>>,
    /// The last of them noted: most links of a process are on one mount.
    pub last_trusted: std::sync::atomic::AtomicU64,
    /// Maps (device, inode, name as `maps` writes it) whose name this scan proved their path,
    /// each with the mount it lies on (see `maps`): the processes of a namespace map the same
    /// libraries.
    pub proven_maps: std::sync::Mutex<std::collections::HashMap<MapLine, u64>>,
}

/// A line of `maps` as a key: the device, the inode and the name as written.
pub type MapLine = ((u32, u32), u64, Vec<u8>);

impl Table {
    /// Parses mountinfo text. Its mount points are relative to the root of the process it was read
    /// from; `base` is that root as our links show it, so that the points become comparable.
    pub fn parse(text: &[u8], base: &Path) -> Table {
        let mounts = text
            .split(|b| *b == b'\n')
            .filter_map(|line| parse_line(line, base))
            .collect();
        Table {
            mounts,
            from: None,
            whole: base == Path::new("/"),
            text: text.to_vec(),
            trusted: Default::default(),
            last_trusted: Default::default(),
            proven_maps: Default::default(),
        }
    }

    /// The table, as read from `pid`'s mountinfo.
    pub fn read_from(self, pid: nix::unistd::Pid) -> Table {
        Table {
            from: Some(pid.as_raw()),
            ..self
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Mount> {
        self.mounts.iter()
    }

    /// Notes that a link was taken at its text because mount `id` is in this table.
    pub fn trust(&self, id: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        if self.last_trusted.load(Relaxed) == id {
            return;
        }
        let mut ids = self.trusted.lock().unwrap_or_else(|e| e.into_inner());
        if !ids.contains(&id) {
            ids.push(id);
        }
        self.last_trusted.store(id, Relaxed);
    }

    /// Whether a mount of this table that a link was taken at its text by (see `trust`) is not
    /// in `now` (read later) as it was: unmounted, or its id another mount's since.
    pub fn lost_since(&self, now: &Table) -> bool {
        let ids = self.trusted.lock().unwrap_or_else(|e| e.into_inner());
        self.mounts.iter().filter(|m| ids.contains(&m.id)).any(|m| {
            !now.by_id(m.id).is_some_and(|n| {
                (n.parent, n.dev, &n.root, &n.point, n.root_deleted)
                    == (m.parent, m.dev, &m.root, &m.point, m.root_deleted)
            })
        })
    }

    pub fn by_id(&self, id: u64) -> Option<&Mount> {
        self.mounts.iter().find(|m| m.id == id)
    }

    /// The mount `path` (absolute, normalized) lies on: `mnt_id` when known and listed, else the
    /// topmost mount with the longest mount point above it.
    pub fn mount_of(&self, path: &Path, mnt_id: Option<u64>) -> Option<&Mount> {
        let by_id = mnt_id
            .and_then(|id| self.by_id(id))
            .filter(|m| path.starts_with(&m.point));
        by_id.or_else(|| self.covering(path, |_| true))
    }

    /// The mount `path` lies on among those of device `dev` (a memory map names its device, so
    /// an over-mounted path still maps right).
    pub fn mount_on(&self, path: &Path, dev: (u32, u32)) -> Option<&Mount> {
        self.covering(path, |m| m.dev == dev)
    }

    /// The identity of `path`; see `mount_of`.
    pub fn ident(&self, path: &Path, mnt_id: Option<u64>) -> Option<Ident> {
        self.mount_of(path, mnt_id).map(|m| through(m, path))
    }

    /// The identity of `path` on `mount`, then of each mount point it lies under, up to the
    /// namespace's root: a file on a filesystem mounted inside a folder lies in that folder.
    pub fn chain(&self, path: &Path, mount: &Mount) -> Vec<Ident> {
        let mut idents = vec![through(mount, path)];
        let mut m = mount;
        while let Some(up) = self.by_id(m.parent).filter(|up| up.id != m.id) {
            if idents.len() > self.mounts.len() {
                break;
            }
            idents.push(through(up, &m.point));
            m = up;
        }
        idents
    }

    fn covering(&self, path: &Path, keep: impl Fn(&Mount) -> bool) -> Option<&Mount> {
        let mut best: Option<&Mount> = None;
        for m in self.mounts.iter().filter(|m| keep(m)) {
            if path.starts_with(&m.point)
                && best.map_or(true, |b| {
                    m.point.as_os_str().len() >= b.point.as_os_str().len()
                })
            {
                best = Some(m);
            }
        }
        best
    }
}

fn through(mount: &Mount, path: &Path) -> Ident {
    let rest = path.strip_prefix(&mount.point).unwrap_or(Path::new(""));
    let path = if rest.as_os_str().is_empty() {
        mount.root.clone()
    } else {
        mount.root.join(rest)
    };
    Ident {
        dev: mount.dev,
        path,
    }
}

fn parse_line(line: &[u8], base: &Path) -> Option<Mount> {
    // id parent major:minor root point options [optional...] - fstype source super_options
    // (the options of our own /proc are read by proctable::files::hides_processes)
    let fields: Vec<&[u8]> = line.split(|b| *b == b' ').collect();
    let dash = fields.iter().position(|f| *f == b"-")?;
    if dash < 6 || fields.len() < dash + 4 {
        return None;
    }
    let text = |f: &[u8]| String::from_utf8_lossy(f).into_owned();
    let id = text(fields[0]).parse().ok()?;
    let parent = text(fields[1]).parse().ok()?;
    let (major, minor) = text(fields[2])
        .split_once(':')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))?;
    let point = unescape(fields[4]);
    let point = match point.strip_prefix("/") {
        Ok(rel) if !rel.as_os_str().is_empty() => base.join(rel),
        _ => base.to_path_buf(),
    };
    let root = fields[3].strip_suffix(b"//deleted");
    Some(Mount {
        id,
        parent,
        dev: (major, minor),
        root: normalize(&unescape(root.unwrap_or(fields[3]))),
        point: normalize(&point),
        root_deleted: root.is_some(),
    })
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`, and so does an io_uring ring's
/// `fdinfo` in its list of registered files.
pub fn unescape(field: &[u8]) -> PathBuf {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (field[i], octal) {
            (b'\\', Some(d)) => {
                out.push(d.iter().fold(0u8, |n, c| n.wrapping_mul(8) + (c - b'0')));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    PathBuf::from(OsStr::from_bytes(&out))
}

/// Resolves `.` and `..` by text; `..` above the root stays at the root, as the kernel does.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// A link text as a path, and whether the kernel marked it deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub path: PathBuf,
    /// The text ended with ` (deleted)`: what it names was removed (a folder removed while it
    /// was someone's working directory, a file removed while open), and the path is its last.
    pub deleted: bool,
}

impl std::ops::Deref for Link {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

/// A link text (`/proc/PID/cwd`, `fd/N`, a map's path) without the ` (deleted)` the kernel adds
/// to a path that no longer exists, which `deleted` keeps; None when it is no path at all
/// (`socket:[…]`, `anon_inode:…`).
pub fn link_path(text: &[u8]) -> Option<Link> {
    if text.first() != Some(&b'/') {
        return None;
    }
    let stripped = text.strip_suffix(b" (deleted)");
    Some(Link {
        path: normalize(Path::new(OsStr::from_bytes(stripped.unwrap_or(text)))),
        deleted: stripped.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &[u8] = b"\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:25 / /proc rw,nosuid - proc proc rw,hidepid=invisible
40 22 8:1 /srv/data /mnt/view rw - ext4 /dev/sda1 rw
41 40 0:40 / /mnt/view/sub rw - tmpfs tmpfs rw
42 41 0:41 / /mnt/view/sub rw - tmpfs tmpfs rw
43 22 8:1 / /a\\040b rw - ext4 /dev/sda1 rw
";

    #[test]
    fn a_mount_unmounted_or_whose_id_another_took_is_lost_and_a_new_one_is_not() {
        let then = Table::parse(INFO, Path::new("/"));
        for id in [22, 30, 40, 41, 42, 43] {
            then.trust(id);
        }
        let same = Table::parse(INFO, Path::new("/"));
        assert!(!then.lost_since(&same));
        let more = [INFO, b"50 22 0:50 / /new rw - tmpfs tmpfs rw\n"].concat();
        assert!(!then.lost_since(&Table::parse(&more, Path::new("/"))));
        let text = String::from_utf8(INFO.to_vec()).unwrap();
        let fewer = text.replace("43 22 8:1 / /a\\040b rw - ext4 /dev/sda1 rw\n", "");
        assert!(then.lost_since(&Table::parse(fewer.as_bytes(), Path::new("/"))));
        // Id 43 unmounted, then taken by another mount.
        let other = text.replace("43 22 8:1 / /a\\040b", "43 22 0:60 / /elsewhere");
        assert!(then.lost_since(&Table::parse(other.as_bytes(), Path::new("/"))));
        // One no link was taken by is no matter.
        let few = Table::parse(INFO, Path::new("/"));
        few.trust(22);
        assert!(!few.lost_since(&Table::parse(fewer.as_bytes(), Path::new("/"))));
    }

    fn id(dev: (u32, u32), path: &str) -> Option<Ident> {
        Some(Ident {
            dev,
            path: PathBuf::from(path),
        })
    }

    #[test]
    fn a_path_maps_through_the_topmost_longest_mount() {
        let t = Table::parse(INFO, Path::new("/"));
        assert_eq!(
            t.ident(Path::new("/srv/data/x"), None),
            id((8, 1), "/srv/data/x")
        );
        assert_eq!(
            t.ident(Path::new("/mnt/view/x"), None),
            id((8, 1), "/srv/data/x")
        );
        assert_eq!(
            t.ident(Path::new("/mnt/view"), None),
            id((8, 1), "/srv/data")
        );
        assert_eq!(
            t.ident(Path::new("/mnt/view/sub/f"), None),
            id((0, 41), "/f")
        );
        assert_eq!(
            t.ident(Path::new("/mnt/viewer"), None),
            id((8, 1), "/mnt/viewer")
        );
        assert_eq!(t.ident(Path::new("/a b/c"), None), id((8, 1), "/c"));
        // A descriptor names its mount: one opened before the tmpfs went over it.
        assert_eq!(
            t.ident(Path::new("/mnt/view/sub/f"), Some(40)),
            id((8, 1), "/srv/data/sub/f")
        );
        let under = t.mount_on(Path::new("/mnt/view/sub/f"), (8, 1)).unwrap();
        let want = id((8, 1), "/srv/data/sub/f").unwrap();
        assert_eq!(through(under, Path::new("/mnt/view/sub/f")), want);
        // The tmpfs on /mnt/view/sub lies in the bind mount of /srv/data, which lies on /.
        let tmpfs = t.mount_of(Path::new("/mnt/view/sub/f"), None).unwrap();
        let chain = t.chain(Path::new("/mnt/view/sub/f"), tmpfs);
        let want: Vec<Ident> = [
            ((0, 41), "/f"),
            ((0, 40), "/"),
            ((8, 1), "/srv/data/sub"),
            ((8, 1), "/mnt/view"),
        ]
        .iter()
        .map(|(d, p)| id(*d, p).unwrap())
        .collect();
        assert_eq!(chain, want);
    }

    #[test]
    fn another_root_s_mount_points_are_put_under_it() {
        let t = Table::parse(
            b"50 49 8:1 /srv/data /w rw - ext4 /dev/sda1 rw\n",
            Path::new("/jail"),
        );
        assert_eq!(
            t.ident(Path::new("/jail/w/f"), None),
            id((8, 1), "/srv/data/f")
        );
        assert_eq!(t.ident(Path::new("/w/f"), None), None);
    }

    #[test]
    fn a_mount_of_a_removed_folder_is_marked_so() {
        let t = Table::parse(
            b"95 71 0:42 /DIR/sub//deleted /b rw - tmpfs t rw\n96 71 0:42 /x /c rw - tmpfs t rw\n",
            Path::new("/"),
        );
        let b = t.by_id(95).unwrap();
        assert!(b.root_deleted);
        assert_eq!(b.root, PathBuf::from("/DIR/sub"));
        assert!(!t.by_id(96).unwrap().root_deleted);
    }

    #[test]
    fn paths_are_resolved_by_text() {
        assert_eq!(
            normalize(Path::new("/srv/x/../data/./f")),
            PathBuf::from("/srv/data/f")
        );
        assert_eq!(normalize(Path::new("//a//b/")), PathBuf::from("/a/b"));
        assert_eq!(normalize(Path::new("/srv/../../..")), PathBuf::from("/"));
        let link = |path: &str, deleted| {
            Some(Link {
                path: PathBuf::from(path),
                deleted,
            })
        };
        assert_eq!(link_path(b"/srv/f (deleted)"), link("/srv/f", true));
        assert_eq!(link_path(b"/srv//f"), link("/srv/f", false));
        assert_eq!(link_path(b"socket:[123]"), None);
    }
}
