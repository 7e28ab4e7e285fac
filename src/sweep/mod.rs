//! The folder sweep (`--sweep DIR`): which processes, inside the run's tree or not, hold or name
//! a swept folder. Everything is learned from `/proc` (link texts, `fdinfo`, `mountinfo`, `maps`),
//! never from a `stat` that would wait on a hung filesystem's server.

mod args;
mod detached;
mod dir;
mod holds;
mod listing;
mod maps;
mod mounts;
mod pass;
mod pids;
mod placing;
mod proc;
mod report;
mod scan;
mod target;
mod uring;
mod walk;

pub use dir::Dir;
pub use holds::What;
pub use report::Report;

use nix::unistd::Pid;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The swept folders, resolved once at start.
#[derive(Clone, Debug)]
pub struct Sweep {
    pub dirs: Vec<Dir>,
    /// `--sweep-strict`: a process that could not be looked at fails the proof even when it was
    /// there before the run.
    pub strict: bool,
    /// The clock tick (since boot, as /proc's start times count) in which the run began: a
    /// process that started in a later tick started during the run. One of the same tick cannot
    /// be told apart, and is taken as started before: never signalled, only listed.
    own_start: u64,
    /// The mounts seen showing a folder since the start (see `detached`).
    mounts: detached::Memory,
}

impl Sweep {
    /// Resolves each folder once; an error names the path (the run then starts nothing).
    pub fn resolve(dirs: &[PathBuf], strict: bool) -> anyhow::Result<Sweep> {
        let table = match proc::read("self/mountinfo") {
            proc::Got::Text(t) => mounts::Table::parse(&t, Path::new("/")),
            _ => anyhow::bail!("--sweep: cannot read /proc/self/mountinfo"),
        };
        // Now, not vloer-run's own start time: that is when its process was forked, which for
        // `exec vloer-run` at the end of a script is when the script began.
        let own_start = crate::sys::boot_ticks()
            .ok_or_else(|| anyhow::anyhow!("--sweep: cannot read the boot clock"))?;
        let dirs = dirs
            .iter()
            .map(|d| Dir::resolve(d, &table))
            .collect::<anyhow::Result<_>>()?;
        let sweep = Sweep {
            dirs,
            strict,
            own_start,
            mounts: detached::Memory::default(),
        };
        sweep.targets(&table);
        Ok(sweep)
    }

    /// The folders as a scan matches them, from our mount `table` as it is now; remembers the
    /// mounts in it that show a folder.
    fn targets(&self, table: &mounts::Table) -> target::Targets {
        let mut lost = None;
        let dirs: Vec<_> = self
            .dirs
            .iter()
            .filter_map(|d| d.current(table).map_err(|why| lost = Some(why)).ok())
            .flatten()
            .collect();
        // Our own table is read whole by every scan: a new mount in it needs no second scan.
        let _ = self.mounts.remember([table], &dirs);
        let mut ours: Vec<u64> = table.iter().map(|m| m.id).collect();
        ours.sort_unstable();
        let remembered = self.mounts.unlisted(table);
        target::Targets {
            places: detached::places(&remembered),
            remembered,
            dirs,
            ours,
            pinned: self.dirs.iter().filter_map(|d| d.mount_id()).collect(),
            unknown: lost,
            at_name: Default::default(),
        }
    }

    /// One pass over every process `/proc` shows.
    pub fn scan(&self) -> Scan {
        scan::scan(self)
    }

    /// A pass for `status`, which has no stop to scan again: up to three, until one is settled;
    /// one that never is says so as its error.
    pub fn scan_settled(&self) -> Scan {
        let mut scan = self.scan();
        for _ in 1..3 {
            if scan.unsettled.is_none() {
                break;
            }
            scan = self.scan();
        }
        if scan.error.is_none() {
            scan.error = scan.unsettled.take();
        }
        scan
    }
}

/// What one pass found.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    /// Processes that hold or name a swept folder.
    pub found: Vec<Found>,
    /// Processes that could not be looked at in full and were not found to match.
    pub unverified: Vec<Unverified>,
    /// Why the pass proves nothing (`/proc` hides processes, or could not be read).
    pub error: Option<String>,
    /// Why the pass may have missed a process although it could read them all: processes came
    /// and went too fast for its listings. Another pass may do better.
    pub unsettled: Option<String>,
}

impl Scan {
    /// The matches the stop signals: started during the run, and ours to signal.
    pub fn to_signal(&self) -> impl Iterator<Item = &Found> {
        self.found
            .iter()
            .filter(|f| f.started == Started::During && f.may_signal)
    }

    /// Whether this pass counts towards the proof: no match, no error, settled, and no process
    /// that could not be looked at and started during the run (with `strict`, none at all).
    pub fn clean(&self, strict: bool) -> bool {
        self.error.is_none()
            && self.unsettled.is_none()
            && self.found.is_empty()
            && self
                .unverified
                .iter()
                .all(|u| !strict && u.started == Started::Before)
    }
}

/// Whether a process started before the run or during it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Started {
    Before,
    During,
}

/// A process that holds or names a swept folder.
#[derive(Clone, Debug)]
pub struct Found {
    pub pid: Pid,
    /// Its start time, which tells it from a later process with the same pid.
    pub starttime: u64,
    pub comm: String,
    /// Its effective uid.
    pub uid: u32,
    pub started: Started,
    pub what: Vec<What>,
    /// Whether it is ours to signal: the kernel lets us (we are root, or it runs as our uid),
    /// and a match proves it holds a folder (not only doubted ones, see `Targets::doubts`).
    pub may_signal: bool,
}

/// A process that could not be looked at in full (another user's, as non-root).
#[derive(Clone, Debug)]
pub struct Unverified {
    pub pid: Pid,
    pub comm: String,
    pub starttime: u64,
    pub started: Started,
    pub why: String,
}
