//! File-backed maps. A line of `maps` gives the mapped file's device and inode, and its path as
//! the kernel writes a link: from the mount's own root for a detached mount, in our terms for a
//! mount of ours that the process's namespace does not list. So a map is taken at its path
//! only when the file at that path is the mapped one (see `unproven`); else it is placed by
//! the mount it was mapped through: `map_files` names it (as root), or the mount at its path
//! does when the file there is the mapped one. Lookups run on the reader thread: opening a
//! `map_files` link takes the process's memory lock, and a path may reach a hung server.

use super::holds::{Held, Look, What};
use super::mounts::MapLine;
use super::mounts::{self, Link};
use super::placing::Is;
use super::proc;
use super::target::By;
use crate::slowread;
use std::collections::HashSet;
use std::io;
use std::os::unix::ffi::OsStrExt;

/// One file-backed line of `maps`.
struct Line<'a> {
    range: &'a [u8],
    dev: (u32, u32),
    ino: u64,
    /// The name as `maps` writes it (a newline as `\012`).
    path: &'a [u8],
}

fn lines(maps: &[u8]) -> impl Iterator<Item = Line<'_>> {
    maps.split(|b| *b == b'\n').filter_map(|line| {
        // start-end perms offset major:minor inode path
        let mut f = line.splitn(6, |b| *b == b' ');
        let (Some(range), Some(dev), Some(ino), Some(path)) =
            (f.next(), f.nth(2), f.next(), f.next())
        else {
            return None;
        };
        let ino = std::str::from_utf8(ino).ok()?.parse().ok()?;
        let path = path.trim_ascii_start();
        (ino != 0 && path.first() == Some(&b'/')).then_some(Line {
            range,
            dev: hex_dev(dev)?,
            ino,
            path,
        })
    })
}

/// Where a mapped file was found: the mount it was reached through, its inode, and its name
/// read without escapes.
type Found = Option<(u64, u64, Vec<u8>)>;

impl Look<'_> {
    /// Adds what the maps hold (`map`).
    pub(super) fn any_map(&self, maps: &[u8], held: &mut Held) {
        let mut once = HashSet::new();
        // Only a map whose path could lie in a folder, by some table, is worth a lookup, as
        // for a descriptor (see `detached`); and one whose name may not be its path (see
        // `unproven`).
        let proven = self.table.proven_maps.lock().expect("no panic holds it");
        let (mut asked, far): (Vec<Line>, Vec<Line>) = lines(maps)
            .filter(|l| once.insert((l.dev, l.ino, l.path)))
            .filter(|l| match proven.get(&(l.dev, l.ino, l.path.to_vec())) {
                Some(mount) => {
                    self.table.trust(*mount);
                    false
                }
                None => true,
            })
            .partition(|l| self.could_map(l));
        drop(proven);
        asked.extend(self.unproven(far));
        let reads = asked.iter().map(|l| self.lookup(l)).collect();
        let answers = slowread::read_all(reads);
        for (l, answer) in asked.iter().zip(answers) {
            if held.judged(What::Map, self.map_is(l, decode(answer))) {
                return;
            }
        }
    }

    /// Those of the maps `far`, which no table places in a folder by name, whose name is not
    /// proven to be their path. A map's name is written from the root of the mount it was
    /// mapped through, and that mount may be one made and detached while no scan looked (in no
    /// table): `/f` may then be a swept folder's `f`. It is its name's when the file at that
    /// name, on a mount the table lists, is the mapped one (asked once per scan for each place
    /// on a filesystem, see `named`).
    fn unproven<'m>(&self, far: Vec<Line<'m>>) -> Vec<Line<'m>> {
        let known = &self.dirs.at_name;
        let is_known = |k: &MapLine| known.lock().expect("no panic holds it").contains_key(k);
        let mut left = Vec::new();
        let mut asked = Vec::new();
        for l in far {
            match self.named(&l) {
                // No mount of its device at its name: the name is not its path.
                None => left.push(l),
                Some((mount, k)) if is_known(&k) => self.proven(&l, mount),
                Some(k) => asked.push((l, k)),
            }
        }
        let reads = asked.iter().map(|(l, _)| self.at_name(l)).collect();
        let answers = slowread::read_all(reads);
        for ((l, (mount, key)), answer) in asked.into_iter().zip(answers) {
            match decode(answer).is_some_and(|(id, ino, _)| id == mount && ino == l.ino) {
                true => {
                    self.proven(&l, mount);
                    known.lock().expect("no panic holds it").insert(key, mount);
                }
                false => left.push(l),
            }
        }
        left
    }

    /// Notes that the map `l`'s name is its path, on mount `mount` of this table.
    fn proven(&self, l: &Line, mount: u64) {
        self.table.trust(mount);
        let mut proven = self.table.proven_maps.lock().expect("no panic holds it");
        proven.insert((l.dev, l.ino, l.path.to_vec()), mount);
    }

    /// The mount of the map `l`'s device at its name in this table, and where that name lies
    /// on the filesystem with the mapped inode: a fact of the filesystem, whichever namespace
    /// shows it, so one look at it serves every process of the scan.
    fn named(&self, l: &Line) -> Option<(u64, MapLine)> {
        let link = mounts::link_path(l.path).filter(|k| !k.deleted)?;
        let mount = self.table.mount_on(&link.path, l.dev)?;
        let at = self.table.chain(&link.path, mount).swap_remove(0);
        let place = at.path.as_os_str().as_bytes().to_vec();
        Some((mount.id, (at.dev, l.ino, place)))
    }

    /// Whether some table could place the map `l` in a folder by its path (either reading of
    /// a `\012`): the process's, ours, or a remembered mount's; any map of a process whose
    /// table does not show every mount.
    fn could_map(&self, l: &Line) -> bool {
        let ours = self.in_ours();
        let on = |look: &Look, link: &Link| {
            let by = By::Link {
                deleted: link.deleted,
                ino: None,
            };
            look.table
                .mount_on(link, l.dev)
                .is_some_and(|m| look.within(link, m, by))
        };
        let fits = |path: &[u8]| {
            mounts::link_path(path).is_some_and(|link| {
                on(self, &link)
                    || ours.as_ref().is_some_and(|o| on(o, &link))
                    || self.remembered_fits(&link)
            })
        };
        !self.table.whole || fits(l.path) || newlines(l.path).is_some_and(|n| fits(&n))
    }

    /// Finds the mount of the file `l` maps, on the reader thread: through `map_files` (root
    /// only), else through its path when the file there has the mapped inode.
    fn lookup(&self, l: &Line) -> slowread::Read {
        let through = format!(
            "{}/map_files/{}",
            self.pid,
            String::from_utf8_lossy(l.range)
        );
        let named = self.at_name(l);
        Box::new(move || {
            proc::reached(&through)
                .and_then(encode)
                .or_else(|_| named())
        })
    }

    /// Finds the file at the name of the map `l`, on the reader thread, when it has the mapped
    /// inode: its mount, its inode and its name (see `decode`).
    fn at_name(&self, l: &Line) -> slowread::Read {
        // The path is in the terms of the table it is judged in: ours from our root, another
        // namespace's from the root of the process that showed its whole table.
        let named = mounts::link_path(l.path)
            .filter(|link| !link.deleted)
            .and_then(|link| match self.table.from {
                None => Some(link.path.display().to_string()),
                Some(from) if self.table.whole => {
                    Some(format!("{from}/root{}", link.path.display()))
                }
                Some(_) => None,
            });
        let ino = l.ino;
        Box::new(move || {
            let named = named.ok_or(io::Error::other("no name to look at"))?;
            let (info, raw) = proc::reached(&named)?;
            match info.ino == Some(ino) {
                true => encode((info, raw)),
                false => Err(io::Error::other("another file")),
            }
        })
    }

    /// Where the map `l` lies: by the mount it was `found` through, else by its name alone.
    fn map_is(&self, l: &Line, found: Found) -> Is {
        // The file found must be the one mapped: the same inode, on the same device.
        let found = found.filter(|(id, ino, _)| {
            let mount = self.table.by_id(*id).or_else(|| self.ours.by_id(*id));
            *ino == l.ino && mount.map_or(true, |m| m.dev == l.dev)
        });
        if let Some((id, _, raw)) = found {
            return match mounts::link_path(&raw) {
                Some(link) => self.by_mount(id, &link, Some(l.ino), || "a mapped file".into()),
                None => Is::Not,
            };
        }
        let by_name = |path: &[u8]| {
            mounts::link_path(path).is_some_and(|link| {
                let by = By::Link {
                    deleted: link.deleted,
                    ino: Some(l.ino),
                };
                self.table
                    .mount_on(&link, l.dev)
                    .is_some_and(|m| self.within(&link, m, by))
            })
        };
        let shown = String::from_utf8_lossy(l.path);
        // The kernel writes a newline in a name as `\012`, and a name with those four
        // characters in it the same way.
        let twofold = newlines(l.path).map(|n| by_name(&n));
        match (by_name(l.path), twofold) {
            (true, None | Some(true)) => match mounts::link_path(l.path) {
                Some(link) => self.settled(true, &link, Some((l.dev, l.ino))),
                None => Is::Not,
            },
            (false, Some(true)) | (true, Some(false)) => Is::Unknown(format!(
                "/proc/{}/maps: a mapped file's name ({shown}) reads two ways, as a newline or \
                 as the characters \\012, and only one of them lies in a swept folder",
                self.pid
            )),
            // Unplaced, its name is all there is: only a deleted file's is taken as it reads
            // (a run that is not root cannot ask where one lies, and a file that a package
            // update replaced while mapped is one).
            _ if mounts::link_path(l.path).is_some_and(|k| k.deleted) => Is::Not,
            _ => Is::Unknown(format!(
                "/proc/{}/maps: a mapped file ({shown}) on a swept folder's device is not the \
                 file at its name, and where it lies cannot be read (map_files needs root)",
                self.pid
            )),
        }
    }
}

/// A file found: its mount id and inode, then its name (an error where `fdinfo` has no mount
/// id or no inode).
fn encode((info, raw): (proc::FdInfo, Vec<u8>)) -> io::Result<Vec<u8>> {
    let id = info.mnt_id.ok_or(io::Error::other("no mount id"))?;
    let ino = info.ino.ok_or(io::Error::other("no inode"))?;
    let mut out = format!("{id} {ino}").into_bytes();
    out.push(0);
    out.extend(raw);
    Ok(out)
}

/// A lookup's answer, as `encode` wrote it.
fn decode(answer: io::Result<Vec<u8>>) -> Found {
    let answer = answer.ok()?;
    let at = answer.iter().position(|b| *b == 0)?;
    let (id, ino) = std::str::from_utf8(&answer[..at]).ok()?.split_once(' ')?;
    Some((
        id.parse().ok()?,
        ino.parse().ok()?,
        answer[at + 1..].to_vec(),
    ))
}

/// `path` with each `\012` read as the newline the kernel writes that way in maps, when it has
/// one.
fn newlines(path: &[u8]) -> Option<Vec<u8>> {
    const ESCAPED: &[u8] = b"\\012";
    path.windows(ESCAPED.len()).any(|w| w == ESCAPED).then(|| {
        let mut out = Vec::with_capacity(path.len());
        let mut rest = path;
        while !rest.is_empty() {
            if rest.starts_with(ESCAPED) {
                out.push(b'\n');
                rest = &rest[ESCAPED.len()..];
            } else {
                out.push(rest[0]);
                rest = &rest[1..];
            }
        }
        out
    })
}

fn hex_dev(text: &[u8]) -> Option<(u32, u32)> {
    let text = std::str::from_utf8(text).ok()?;
    let (a, b) = text.split_once(':')?;
    Some((
        u32::from_str_radix(a, 16).ok()?,
        u32::from_str_radix(b, 16).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newline_in_a_mapped_name_is_read_back() {
        assert_eq!(newlines(b"/w/a\\012b\\012").unwrap(), b"/w/a\nb\n");
        assert_eq!(newlines(b"/w/a\\01b"), None);
        assert_eq!(newlines(b"/w/plain"), None);
    }

    #[test]
    fn only_file_backed_lines_are_read() {
        let maps = b"\
55d0-55d1 r--p 00000000 08:01 1234 /usr/bin/sleep
7ff0-7ff1 rw-p 00000000 00:00 0 \n\
7ff2-7ff3 rw-p 00000000 00:00 0                          [heap]
7ff4-7ff5 r--p 00000000 00:2a 77                         /w/a b (deleted)
";
        let got: Vec<_> = lines(maps)
            .map(|l| (l.dev, l.ino, String::from_utf8_lossy(l.path).into_owned()))
            .collect();
        assert_eq!(
            got,
            [
                ((8, 1), 1234, "/usr/bin/sleep".to_string()),
                ((0, 0x2a), 77, "/w/a b (deleted)".to_string())
            ]
        );
        assert_eq!(
            decode(Ok(b"42 7\0/w/f".to_vec())),
            Some((42, 7, b"/w/f".to_vec()))
        );
        assert_eq!(decode(Ok(b"42\0/w/f".to_vec())), None);
    }
}
