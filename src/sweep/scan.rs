//! One pass over every process `/proc` shows: who holds or names a swept folder, and who could
//! not be looked at. Each mount namespace's table is read once per pass.

use super::holds::Look;
use super::mounts::{self, Table};
use super::proc::{self, Got, Stat};
use super::{Found, Scan, Started, Sweep, Unverified};
use crate::slowread;
use nix::unistd::Pid;
use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

/// Processes whose slow reads go to the reader thread in one hand-over.
const BATCH: usize = 128;

pub fn scan(sweep: &Sweep) -> Scan {
    let mut scan = Scan::default();
    let ours = match proc::read("self/mountinfo") {
        Got::Text(t) => Table::parse(&t, Path::new("/")),
        Got::Gone | Got::Denied(_) => {
            scan.error = Some("cannot read /proc/self/mountinfo".into());
            return scan;
        }
    };
    scan.error = hidden(&ours);
    let stats = match all_stats() {
        Ok(s) => s,
        Err(why) => {
            scan.error = Some(why);
            return scan;
        }
    };
    let skip = own_line(&stats);
    let looked: Vec<&Stat> = stats
        .iter()
        .filter(|s| !s.kernel_thread && !matches!(s.state, 'Z' | 'X' | 'x'))
        .filter(|s| !skip.contains(&s.pid))
        .collect();
    let mut pass = Pass {
        sweep,
        own_ns: proc::link("self/ns/mnt").ok(),
        ours,
        others: HashMap::new(),
        scan,
    };
    for batch in looked.chunks(BATCH) {
        let slow = slow_reads(batch);
        for (stat, (cmdline, maps)) in batch.iter().zip(slow) {
            pass.one(stat, cmdline, maps);
        }
    }
    pass.scan
}

/// What `/proc`'s own mount options hide: an answer that cannot see every process proves nothing.
fn hidden(ours: &Table) -> Option<String> {
    let root = crate::proctable::files::root().ok()?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&root);
    let id = proc::mnt_id(&format!("self/fdinfo/{fd}"))?;
    let opts = &ours.by_id(id)?.super_options;
    opts.split(',').find_map(|o| {
        let hides = match o.split_once('=') {
            Some(("hidepid", v)) => !matches!(v, "0" | "off"),
            Some(("subset", "pid")) => true,
            _ => false,
        };
        hides.then(|| format!("/proc is mounted with {o}: processes may be hidden from the sweep"))
    })
}

fn all_stats() -> Result<Vec<Stat>, String> {
    let names = match proc::list(".") {
        Got::Text(n) => n,
        Got::Gone | Got::Denied(_) => return Err("cannot list /proc".into()),
    };
    Ok(names
        .iter()
        .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|n| proc::read(&format!("{n}/stat")).ok())
        .filter_map(|b| proc::stat(&b))
        .collect())
}

/// vloer-run and its ancestors (the caller waiting for it): never matches.
fn own_line(stats: &[Stat]) -> HashSet<Pid> {
    let parent: HashMap<Pid, Pid> = stats.iter().map(|s| (s.pid, s.ppid)).collect();
    let mut line = HashSet::new();
    let mut at = crate::sys::own_pid();
    while at.as_raw() > 0 && line.insert(at) {
        match parent.get(&at) {
            Some(p) => at = *p,
            None => break,
        }
    }
    line
}

type Slow = (Got<Vec<u8>>, Got<Vec<u8>>);

/// Each process's command line and maps, read on the reader thread: both take the process's
/// memory lock, which a process stuck in a fault on a hung filesystem can hold for good. A read
/// that does not answer in time fails alone: the batch goes on after it.
fn slow_reads(batch: &[&Stat]) -> Vec<Slow> {
    let names: Vec<String> = batch
        .iter()
        .flat_map(|s| [format!("{}/cmdline", s.pid), format!("{}/maps", s.pid)])
        .collect();
    let mut results: Vec<io::Result<Vec<u8>>> = Vec::with_capacity(names.len());
    while results.len() < names.len() {
        let reads = names[results.len()..]
            .iter()
            .map(|n| {
                let n = n.clone();
                Box::new(move || crate::proctable::files::read_file(&n)) as slowread::Read
            })
            .collect();
        let got = slowread::read_all(reads);
        let late = got.iter().position(|r| {
            r.as_ref()
                .is_err_and(|e| e.kind() == io::ErrorKind::TimedOut)
        });
        match late {
            Some(i) => results.extend(got.into_iter().take(i + 1)),
            None => results.extend(got),
        }
    }
    let mut it = names.iter().zip(results).map(|(n, r)| proc::got(n, r));
    batch
        .iter()
        .map(|_| (it.next().expect("a cmdline"), it.next().expect("a map")))
        .collect()
}

/// One scan's state: the tables read so far and what was found.
struct Pass<'a> {
    sweep: &'a Sweep,
    own_ns: Option<Vec<u8>>,
    ours: Table,
    /// Other namespaces' tables, by namespace and the root they were read from.
    others: HashMap<(Vec<u8>, PathBuf), Option<Table>>,
    scan: Scan,
}

impl Pass<'_> {
    fn one(&mut self, stat: &Stat, cmdline: Got<Vec<u8>>, maps: Got<Vec<u8>>) {
        let pid = stat.pid;
        let mut denied = None;
        let mut text = |got: Got<Vec<u8>>| match got {
            Got::Text(t) => Some(t),
            Got::Gone => None,
            Got::Denied(why) => {
                denied.get_or_insert(why);
                None
            }
        };
        let ns = text(proc::link(&format!("{pid}/ns/mnt")));
        let root = text(proc::link(&format!("{pid}/root"))).and_then(|t| mounts::link_path(&t));
        let table = match (&ns, &root) {
            (Some(ns), Some(root)) if Some(ns) != self.own_ns.as_ref() => {
                let key = (ns.clone(), root.clone());
                let table = self.others.entry(key).or_insert_with(|| {
                    let text = proc::read(&format!("{pid}/mountinfo")).ok()?;
                    Some(Table::parse(&text, root))
                });
                match table {
                    Some(t) => &*t,
                    None => {
                        denied.get_or_insert(format!("/proc/{pid}/mountinfo: not readable"));
                        return self.unverified(stat, denied);
                    }
                }
            }
            _ => &self.ours,
        };
        let dirs: Vec<_> = self
            .sweep
            .dirs
            .iter()
            .map(|d| d.current(&self.ours))
            .collect();
        let look = Look {
            pid,
            table,
            dirs: &dirs,
            root,
        };
        let held = look.look(cmdline, maps);
        let denied = denied.or(held.denied);
        if held.what.is_empty() {
            return self.unverified(stat, denied);
        }
        let Some(uids) = self.same_process(stat).then(|| proc::uids(pid)).flatten() else {
            return;
        };
        let mut what = held.what;
        what.sort();
        self.scan.found.push(Found {
            pid,
            starttime: stat.starttime,
            comm: stat.comm.clone(),
            uid: uids[1],
            started: self.started(stat),
            what,
            may_signal: may_signal(uids),
        });
    }

    fn unverified(&mut self, stat: &Stat, why: Option<String>) {
        let Some(why) = why else {
            return;
        };
        if !self.same_process(stat) {
            return;
        }
        self.scan.unverified.push(Unverified {
            pid: stat.pid,
            comm: stat.comm.clone(),
            starttime: stat.starttime,
            started: self.started(stat),
            why,
        });
    }

    /// Whether the pid still names the process whose stat began the look (not one that reused
    /// its number since).
    fn same_process(&self, stat: &Stat) -> bool {
        proc::read(&format!("{}/stat", stat.pid))
            .ok()
            .and_then(|b| proc::stat(&b))
            .is_some_and(|now| now.starttime == stat.starttime)
    }

    fn started(&self, stat: &Stat) -> Started {
        if stat.starttime > self.sweep.own_start {
            Started::During
        } else {
            Started::Before
        }
    }
}

/// The kernel lets us signal a process when we are root, or when our real or effective uid is
/// its real or saved uid.
fn may_signal([real, _, saved]: [u32; 3]) -> bool {
    let (ruid, euid) = (
        nix::unistd::getuid().as_raw(),
        nix::unistd::geteuid().as_raw(),
    );
    euid == 0 || [ruid, euid].iter().any(|u| *u == real || *u == saved)
}
