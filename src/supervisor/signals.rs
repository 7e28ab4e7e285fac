//! A received signal: the decision (`forward::decide`) carried out, and where forwarding goes.

use super::*;

impl Supervisor {
    pub(super) fn on_signal(&mut self, info: sys::SigInfo) {
        let sig = info.sig;
        let view = forward::View {
            ignored_at_start: sys::ignored_at_start(sig),
            from_terminal_to_shared_group: self.terminal.shared_group && info.from_kernel,
            stopping: matches!(self.state, State::Stopping(_)),
            stops_the_run: self.config.stop.stop_on.contains(&sig),
            rewrite: &self.config.signals.rewrite,
            session: self.config.signals.session,
            pid1: self.pid1,
            orphaned: sig.is_job_control() && !self.pid1 && crate::terminal::own_group_orphaned(),
        };
        match forward::decide(sig, view) {
            // The caller started us with it ignored (nohup, a background job's SIGINT): it asked
            // for the signal to be ignored. Being blocked for the signalfd, it still reaches us,
            // where a SIG_IGN alone would drop it.
            forward::Action::Ignore => msg::verbose(format_args!(
                "{sig} was ignored when vloer-run started; not forwarded"
            )),
            forward::Action::BeginStop {
                forwarded,
                delivered,
            } => {
                self.record.trigger = Some(sig);
                let forwarded = match self.forward_target() {
                    Some(to) if !forwarded.is_none() || delivered => Some(Forwarded {
                        to,
                        sig: forwarded,
                        received: sig,
                    }),
                    _ => None,
                };
                self.begin_stop(Reason::Signal, forwarded);
            }
            forward::Action::Forward {
                sig: out,
                stop_self,
            } => {
                if let (Sig::CONT, Some(group)) = (sig, self.child_group()) {
                    // `fg`: the shell gave the terminal to our group; it belongs to the child's.
                    self.give_terminal_to(group);
                }
                if let Some(target) = self.delivery_target() {
                    forward::deliver(target, out);
                }
                if stop_self {
                    msg::verbose(format_args!("stopping vloer-run itself for {sig}"));
                    sys::stop_self(sig);
                }
            }
        }
    }

    /// Where a signal that starts the stop is forwarded; None before the child was started.
    pub(super) fn forward_target(&self) -> Option<ForwardedTo> {
        Some(match self.config.signals.forward_to {
            ForwardTo::Group => ForwardedTo::Group(self.child_group()?),
            ForwardTo::Child => ForwardedTo::Process(self.child.pid()?),
        })
    }

    /// Where a forwarded signal goes now; None when there is nobody to send it to.
    pub(super) fn delivery_target(&self) -> Option<forward::Target<'_>> {
        let pid = self.child.pid()?;
        Some(match self.config.signals.forward_to {
            // The group is also the caller's: only the run's own members get it.
            ForwardTo::Group if self.terminal.shared_group => {
                forward::Target::GroupInTree(self.terminal.me_pgid)
            }
            ForwardTo::Group if self.child.alive() => forward::Target::ChildGroup(pid),
            // Reaped, the number is free and may already name someone else's group.
            ForwardTo::Group => forward::Target::GroupInTree(pid),
            ForwardTo::Child if self.child.alive() => {
                forward::Target::Child(pid, self.child.pidfd().map(|fd| fd.as_fd()))
            }
            ForwardTo::Child => return None,
        })
    }

    /// Makes `pgid` (the main child's group) the terminal's foreground group if ours is and the
    /// child lives; true when it now is.
    pub(super) fn give_terminal_to(&self, pgid: Pid) -> bool {
        self.child.alive() && self.terminal.give_to(pgid)
    }
}
