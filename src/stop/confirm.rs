//! Step 4 of a stop: the proof that its scope is empty, or the survivors and why not.

use super::*;

impl Stop {
    /// Step 4: confirm. `proven_empty`: the kernel showed the scope empty (see the run's
    /// `tree_is_empty`), so /proc is not read; otherwise it lists the survivors. Survivors or any
    /// failure along the way mean no proof.
    pub fn finish(self, now: Instant, proven_empty: bool) -> Outcome {
        let known = self.known();
        let mut outcome = Outcome {
            sent: self.sent,
            sent_to_child: self.sent_to_child,
            elapsed: now.saturating_duration_since(self.started),
            ..Outcome::default()
        };
        let mut errors = self.errors;
        if !proven_empty {
            match self.plan.scope.scan(&known) {
                Ok(members) => {
                    let (live, ended): (Vec<Proc>, Vec<Proc>) =
                        members.into_iter().partition(Proc::is_live);
                    outcome.survivors = live;
                    if outcome.survivors.is_empty() {
                        // What the kernel still shows that the scan did not list as alive.
                        match self.plan.scope.confirm_none_left(ended) {
                            Ok(missed) => outcome.survivors = missed,
                            Err(e) => errors.push(e),
                        }
                    }
                }
                Err(e) => errors.push(e.0),
            }
        }
        outcome.survivors.sort_by_key(|p| p.pid);
        if !errors.is_empty() {
            errors.dedup();
            outcome.error = Some(errors.join("; "));
        }
        outcome
    }
}
