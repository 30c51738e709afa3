// Package agents keeps what belongs to agents beside the file tree: their
// published runtime state, and the processes started with `reynfs run`.
//
// # Runtime state
//
// An agent saves its state (a plan, a conversation cursor, whatever it
// needs to resume) as a blob; the save is one OpAgentState record in the
// same journal as the file operations, so it has a seq like everything
// else. A generation records every agent's latest state with the tree root
// at one seq, and a rewind brings both back together: the state of agent A
// at seq X is the last save of A on X's active path at or before X.
//
// # Runs
//
// A run is a command and every process it ever forks. Runs (one per store)
// tracks them in one of two modes, and Mode says which and why:
//
// cgroup2 (the normal case). The cgroup2 mount is found in
// /proc/self/mountinfo (on a hybrid host, /sys/fs/cgroup/unified), and the
// daemon's subtree is
//
//	<cgroup2>/reynfs/<store-id>/<run-id>/   one cgroup per run
//
// No controller is enabled: cgroup.freeze, cgroup.kill and cgroup.events
// are core files of every non-root cgroup, so the subtree works under any
// parent and never hits the no-internal-process rule. A run's first process
// is created inside its cgroup by clone3(CLONE_INTO_CGROUP)
// (SysProcAttr.UseCgroupFD): there is no window in which it, or a child it
// forks, runs outside. Membership is exact whatever the processes do
// (setsid, double fork, daemonising), and "populated 0" in cgroup.events
// means no process, zombies included, is left.
//
// process-group (the fallback, where no cgroup2 is writable: not root, or
// no cgroup2 mounted). The run's first process leads a new process group
// and the launching process becomes a child subreaper, so that orphaned
// grandchildren are reparented to it and reaped there rather than by init
// (a Runs that is itself a subreaper ancestor reaps an attached run's
// orphans too).
// Freeze is SIGSTOP to the group, thaw SIGCONT, kill SIGKILL. A process
// that moves itself to another group or session escapes the run; the
// fallback says so instead of pretending.
//
// Who does what: the daemon owns the subtree and the registry (Create
// makes the run's cgroup, Attach records the pid the launcher reports,
// RunOf, Cancel, StopForRewind); the launcher, `reynfs run` in the CLI
// process, calls Launch with that cgroup, waits and passes the exit status
// through (a daemon that execs into its own mount can deadlock). Start
// does both halves in one process. In cgroup mode the processes of a run
// orphaned by their parent are reaped by init (or the nearest subreaper)
// like any others, and "populated 0" waits for that.
//
// # Cancel: freeze, SIGTERM, thaw, grace, kill
//
// A rewind cancels the runs of the future it abandons (ADR-0038 D2/D4),
// before it appends its reset record. Cancel freezes the run first, so the
// tree stops forking and the list of its processes is complete and stable;
// sends SIGTERM to each of them while frozen (the signal waits); thaws them
// so they can handle it for the grace period; then cgroup.kill whatever is
// left, which cannot be caught or outrun by forking; and waits, bounded,
// until the run is empty before removing its cgroup. A frozen process cannot
// run a SIGTERM handler, which is why the thaw comes before the grace: the
// writes a handler makes then land before the reset record, in the
// abandoned future, and are harmless. The one thing no order may allow, a
// write after the reset record, is excluded because Cancel returns only
// when the run is empty; the caller must still wait until the FUSE
// requests those processes had in flight are answered. Runs with policy
// freeze are frozen across the rewind and thawed after it; keep leaves a
// run alone. StopForRewind applies the policies to every run at once, so n
// runs cost one grace period.
//
// # Attribution
//
// Every journal record names the run (and agent) whose process made it.
// The daemon asks RunOfThread from the FUSE handler of the request: from
// /proc/<tid>/cgroup in cgroup mode, from getpgid(2) in the fallback. It
// reads no /proc/<pid>/stat there: that read can wait for a lock of the
// process whose thread is blocked in the very request being answered, and
// the mount hangs. fs/ caches the answer per thread with a pidfd, so a pid
// the kernel hands to a new process is never taken for the one that had it
// before. RunOf, for callers outside a handler, also walks the parent chain
// in the fallback; its cache is keyed on the pid and the process's start
// time (/proc/<pid>/stat field 22) for the same reason.
//
// A rewind marks the runs it cancelled in the live tree before it appends
// its reset record (tree.Live.CancelRunsLocked): from then on their
// mutations are refused with ESTALE, so none lands after the reset, not
// even a request that was in flight when the run was killed.
//
// # Listing
//
// List shows every live run and the last MaxEnded (64) ended ones: a run
// whose first process exited and that has no process left, or that was
// cancelled, is forgotten by the registry (Remove) and kept only as a
// RunInfo for the listing.
package agents
