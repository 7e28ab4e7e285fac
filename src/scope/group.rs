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

/// Whether the kernel proves that no process of the run is in the child's group `pgid`: the
/// group is empty, the run has no process left at all (vloer-run, the reaper of every
/// descendant, has no child), or the number names another group now.
pub(super) fn none_of_ours(pgid: Pid) -> bool {
    is_empty(pgid) || matches!(sys::children_left(), Ok(sys::Children::None)) || taken_over(pgid)
}

/// Whether the number now names another group: a process vloer-run did not start holds the
/// pid, which the kernel gives out again only once the child's group had emptied for good.
fn taken_over(pgid: Pid) -> bool {
    matches!(proctable::read(pgid), Ok(Some(p)) if !super::exec::was_spawned(&p))
}

/// After a scan that found no live member: empty only on the kernel's word (see `none_of_ours`).
/// Otherwise the scan missed a member, or /proc hides it, or an outsider holds the group while
/// the run still has processes elsewhere, which /proc alone cannot tell apart from a member
/// that keeps moving: the stop looks again, and its deadlines move it on.
pub(super) fn settled(pgid: Pid) -> Result<Settled, String> {
    Ok(if none_of_ours(pgid) {
        Settled::Empty
    } else {
        Settled::Unseen
    })
}

/// Step 4 when a scan listed no survivor: the run's members the kernel still shows in the group,
/// or an error when it shows members /proc does not list at all.
pub(super) fn confirm_none_left(pgid: Pid) -> Result<Vec<Proc>, String> {
    if none_of_ours(pgid) {
        return Ok(Vec::new());
    }
    let o = occupants(pgid)?;
    if !o.ours.is_empty() {
        return Ok(o.ours);
    }
    if none_of_ours(pgid) {
        return Ok(Vec::new());
    }
    Err(if o.others > 0 {
        format!(
            "process group {pgid} holds {} process(es) from outside the run while the run still \
             has processes elsewhere, and /proc alone cannot prove that none of the run's is in \
             it, so the stop cannot be proven",
            o.others
        )
    } else {
        format!(
            "the kernel shows process group {pgid} alive, but /proc lists none of its members \
             (a /proc mounted with hidepid hides them), so the stop cannot be proven"
        )
    })
}
