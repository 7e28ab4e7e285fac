//! What a process names: its command-line arguments, resolved as it would resolve them.

use super::holds::Look;
use super::target::By;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

impl Look<'_> {
    /// Whether an argument, resolved as the process would resolve it, is at or below a swept
    /// folder.
    pub(super) fn names(&self, argv: &[u8], cwd: Option<&Path>) -> bool {
        // Its root, in our terms: a process whose root cannot be read, or was deleted, names
        // nothing that can be placed.
        let Some(root) = self.root.as_ref().filter(|r| !r.deleted) else {
            return false;
        };
        argv.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .any(|arg| {
                let arg = Path::new(OsStr::from_bytes(arg));
                let Some(path) = resolve(arg, cwd, root) else {
                    return false;
                };
                // A name, not a link: it never names a deleted folder.
                self.table
                    .mount_of(&path, None)
                    .is_some_and(|m| self.within(&path, m, By::Name))
            })
    }
}

/// Where argument `arg` leads, in our terms: an absolute one from the process's `root` (a
/// chroot'ed process's `/data` is its root's `data`), a relative one from its working directory
/// `cwd`, one component at a time as the kernel walks it: `..` never leaves the root, even on a
/// way that began outside it (a chroot without a chdir).
fn resolve(arg: &Path, cwd: Option<&Path>, root: &Path) -> Option<PathBuf> {
    let mut at = match arg.is_absolute() {
        true => root.to_path_buf(),
        false => cwd?.to_path_buf(),
    };
    for part in arg.components() {
        match part {
            Component::Normal(name) => at.push(name),
            Component::ParentDir if at != root => {
                at.pop();
            }
            _ => {}
        }
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_resolve_from_the_process_s_root_and_never_climb_above_it() {
        let at = |arg: &str, cwd: Option<&str>, root: &str| {
            resolve(Path::new(arg), cwd.map(Path::new), Path::new(root))
                .map(|p| p.display().to_string())
        };
        assert_eq!(at("/data/f", None, "/").as_deref(), Some("/data/f"));
        assert_eq!(
            at("/data/f", None, "/srv/jail").as_deref(),
            Some("/srv/jail/data/f")
        );
        assert_eq!(
            at("/../../etc", None, "/srv/jail").as_deref(),
            Some("/srv/jail/etc")
        );
        assert_eq!(
            at("f", None, "/"),
            None,
            "relative, with no working directory"
        );
        let cwd = Some("/srv/jail/a/b");
        assert_eq!(
            at("../c", cwd, "/srv/jail").as_deref(),
            Some("/srv/jail/a/c")
        );
        assert_eq!(
            at("../../../../x", cwd, "/srv/jail").as_deref(),
            Some("/srv/jail/x")
        );
        assert_eq!(
            at("../../x", Some("/tmp/a"), "/srv/jail").as_deref(),
            Some("/x")
        );
        assert_eq!(at("sub", Some("/w"), "/").as_deref(), Some("/w/sub"));
        // Outside its root, `..` climbs until it meets the root, and stops there.
        assert_eq!(
            at("jail/../../x", Some("/srv"), "/srv/jail").as_deref(),
            Some("/srv/jail/x")
        );
        assert_eq!(at("./a/./b/", Some("/w"), "/").as_deref(), Some("/w/a/b"));
    }
}
