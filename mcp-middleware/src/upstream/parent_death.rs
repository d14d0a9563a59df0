//! A stdio upstream dies with the proxy that started it.
//!
//! The proxy stops its children itself on every exit it sees (end of input, SIGTERM, SIGINT,
//! SIGHUP, and `kill_on_drop` for a dropped child), but a proxy killed with SIGKILL, or one that
//! aborts, runs none of that. On Linux the child therefore asks the kernel, between `fork` and
//! `exec`, to send it SIGKILL when its parent goes (`PR_SET_PDEATHSIG`), so a killed proxy never
//! leaves an upstream orphaned. Elsewhere this does nothing.
//!
//! The kernel sends the signal when the *thread* that forked the child ends, not the process:
//! upstreams are spawned from the async runtime's worker threads, which live as long as the
//! runtime, never from a blocking-pool thread (those end when idle).

use tokio::process::Command;

/// Makes the child `command` starts receive SIGKILL when the proxy dies (Linux only).
pub(super) fn die_with_parent(command: &mut Command) {
    #[cfg(target_os = "linux")]
    linux::die_with_parent(command);
    #[cfg(not(target_os = "linux"))]
    let _ = command;
}

#[cfg(target_os = "linux")]
mod linux {
    use nix::errno::Errno;
    use nix::sys::prctl;
    use nix::sys::signal::Signal;
    use nix::unistd;
    use tokio::process::Command;

    pub(super) fn die_with_parent(command: &mut Command) {
        let parent = unistd::getpid();
        // The one `unsafe` in the workspace: `pre_exec` is unsafe because its closure runs in
        // the forked child, where only async-signal-safe calls are sound. This one makes two
        // system calls (prctl, getppid) and allocates nothing, so it is.
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(move || {
                prctl::set_pdeathsig(Signal::SIGKILL)?;
                // The proxy may have died between `fork` and `prctl`: then no signal would
                // ever come, so the child refuses to start (the spawn fails).
                if unistd::getppid() != parent {
                    return Err(Errno::ESRCH.into());
                }
                Ok(())
            });
        }
    }
}
