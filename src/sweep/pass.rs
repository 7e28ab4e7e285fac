//! What one pass makes of each process it looked at: a holder (signalled or only listed), one
//! that could not be looked at in full, or nothing.

use super::holds::Look;
use super::mounts::Table;
use super::proc::{self, Got, Stat};
use super::scan::{Linked, Others};
use super::target::Targets;
use super::{Found, Scan, Started, Unverified};

/// What one scan found so far.
pub(super) struct Pass {
    pub own_start: u64,
    pub scan: Scan,
    /// Why a look at a process may have missed something that passes (see `Held::unsettled`).
    pub looks_unsettled: Option<String>,
}

impl Pass {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish(
        &mut self,
        stat_listed: &Stat,
        mut linked: Linked,
        ours: &Table,
        others: &Others,
        dirs: &Targets,
        cmdline: Got<Vec<u8>>,
        maps: Got<Vec<u8>>,
    ) {
        if let Some(why) = linked.held.unsettled.take() {
            self.looks_unsettled.get_or_insert(why);
        }
        let stat = linked.other.take();
        let stat = stat.as_ref().unwrap_or(stat_listed);
        let pid = stat.pid;
        let table = match &linked.key {
            None => ours,
            Some(key) => match others.get(key) {
                Some(t) => t,
                None => return self.unverified(stat, linked.denied),
            },
        };
        if linked.unseen {
            return self.unverified(stat, linked.denied);
        }
        let look = Look {
            pid,
            ns: None,
            table,
            ours,
            dirs,
            root: linked.root,
        };
        let mut held = linked.held;
        look.slow(&mut held, linked.cwd.as_deref(), cmdline, maps);
        let denied = linked.denied.or(held.denied);
        if held.what.is_empty() {
            return self.unverified(stat, denied);
        }
        let Some(uids) = linked
            .own
            .or_else(|| same_process(stat).then(|| proc::uids(pid)).flatten())
        else {
            return;
        };
        let sure = held.sure;
        let mut what = held.what;
        what.sort();
        self.scan.found.push(Found {
            pid,
            starttime: stat.starttime,
            comm: stat.comm.clone(),
            uid: uids[1],
            started: self.started(stat),
            what,
            // A process whose every match is doubted is listed, never signalled.
            may_signal: may_signal(uids) && sure,
        });
    }

    fn unverified(&mut self, stat: &Stat, why: Option<String>) {
        let Some(why) = why else {
            return;
        };
        if !same_process(stat) {
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

    fn started(&self, stat: &Stat) -> Started {
        if stat.starttime > self.own_start {
            Started::During
        } else {
            Started::Before
        }
    }
}

/// Whether the pid still names the process whose stat began the look (not one that reused its
/// number since).
fn same_process(stat: &Stat) -> bool {
    proc::read(&format!("{}/stat", stat.pid))
        .ok()
        .and_then(|b| proc::stat(&b))
        .is_some_and(|now| now.starttime == stat.starttime)
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
