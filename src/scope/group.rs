//! The group scope's proof: the kernel answers for a whole process group at once (signal 0), and
//! a full read of /proc tells the run's members from outsiders that joined the group.

use super::Settled;
use crate::proctable::{self, Proc};
use crate::signal::Sig;
use crate::sys;
use nix::unistd::Pid;
use std::collections::HashSet;

/// No process at all is in group `pgid`: the kernel's word, so no member of the run is either.
/// A group id is never reused while any process holds it.
pub(super) fn is_empty(pgid: Pid) -> bool {
    matches!(sys::killpg(pgid, Sig::NONE), Err(e) if e.raw_os_error() == Some(libc::ESRCH))
}

/// Who /proc shows in group `pgid`, alive: the run's own (descendants of vloer-run) and the
/// others, which joined the group from outside the run and are not in the scope.
struct Occupants {
    ours: Vec<Proc>,
    others: usize,
}

fn occupants(pgid: Pid) -> Result<Occupants, String> {
    let me = sys::own_pid();
    let all = proctable::all(me).map_err(|e| e.0)?;
    let mut tree = HashSet::from([me]);
    proctable::close_over_children(&all, &mut tree);
    let (ours, others): (Vec<Proc>, Vec<Proc>) = all
        .into_iter()
        .filter(|p| p.pgid == pgid && p.is_live())
        .partition(|p| tree.contains(&p.pid));
    Ok(Occupants {
        ours,
        others: others.len(),
    })
}

/// After a scan that found no live member: empty when the kernel says the group is, or when
/// everyone /proc shows in it is an outsider; otherwise the scan missed a member, or /proc hides
/// it, and the stop looks again.
pub(super) fn settled(pgid: Pid) -> Result<Settled, String> {
    if is_empty(pgid) {
        return Ok(Settled::Empty);
    }
    let o = occupants(pgid)?;
    Ok(if o.ours.is_empty() && o.others > 0 {
        Settled::Empty
    } else {
        Settled::Unseen
    })
}

/// Step 4 when a scan listed no survivor: the run's members the kernel still shows in the group,
/// or an error when it shows members /proc does not list at all.
pub(super) fn confirm_none_left(pgid: Pid) -> Result<Vec<Proc>, String> {
    if is_empty(pgid) {
        return Ok(Vec::new());
    }
    let o = occupants(pgid)?;
    if o.ours.is_empty() && o.others == 0 {
        if is_empty(pgid) {
            return Ok(Vec::new());
        }
        return Err(format!(
            "the kernel shows process group {pgid} alive, but /proc lists none of its members \
             (a /proc mounted with hidepid hides them), so the stop cannot be proven"
        ));
    }
    Ok(o.ours)
}
