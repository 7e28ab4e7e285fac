//! Filesystems mounted inside a swept folder, in any namespace a scan read. A file on one lies
//! in the folder through its mount point, so its device is no proof that a file on a mount no
//! table lists lies elsewhere (see `Look::or_elsewhere`). Remembered for the whole run, as the
//! views of a folder are (see `detached`): a file may be judged before the table that shows
//! such a filesystem is read, so a scan that first sees one does not count.

use super::holds::Look;
use super::placing;
use std::sync::{Arc, Mutex};

/// At most this many devices are remembered (the oldest go first).
const KEPT: usize = 4096;

/// The devices of the filesystems seen mounted inside a swept folder, shared by every scan.
#[derive(Clone, Debug, Default)]
pub struct Inside(Arc<Mutex<Vec<(u32, u32)>>>);

impl Inside {
    /// Adds those of `looks`' tables; returns whether one was not remembered before.
    pub fn note<'a>(&self, looks: impl IntoIterator<Item = Look<'a>>) -> bool {
        let mut devs = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut fresh = false;
        for look in looks {
            for dev in placing::inner(&look) {
                if !devs.contains(dev) {
                    if devs.len() >= KEPT {
                        devs.remove(0);
                    }
                    devs.push(*dev);
                    fresh = true;
                }
            }
        }
        fresh
    }

    pub fn all(&self) -> Vec<(u32, u32)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
