package integration

import (
	"sort"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"
)

// posixSkip lists the posixtest cases that do not apply to a reynfs mount,
// each with its reason. A case that should pass and fails is a bug: it is
// not listed here.
var posixSkip = map[string]string{
	// F_SETLK record locks belong to the process, so a second fd of the same
	// process gets the conflicting lock; the case asserts go-fuse's own
	// in-memory lock semantics and fails on ext4 and tmpfs too.
	"FcntlFlockLocksFile": "POSIX record locks are per process: fails on a native ext4 dir as well",
}

// TestPosix runs go-fuse's reusable POSIX suite, each case in a fresh,
// empty project directory with a fresh store.
func TestPosix(t *testing.T) {
	names := make([]string, 0, len(posixtest.All))
	for nm := range posixtest.All {
		names = append(names, nm)
	}
	sort.Strings(names)
	for _, nm := range names {
		fn := posixtest.All[nm]
		t.Run(nm, func(t *testing.T) {
			if why, ok := posixSkip[nm]; ok {
				t.Skip(why)
			}
			m := mountProject(t, t.TempDir())
			checkFds(t)
			fn(t, m.Dir)
		})
	}
}
