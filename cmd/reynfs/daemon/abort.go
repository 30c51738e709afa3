package daemon

import "github.com/reynfs/reynfs/fs"

// AbortConnection aborts the kernel's FUSE connection of the mount at point
// through fusectl (/sys/fs/fuse/connections/<conn>/abort), as `umount -f`
// would: every request still waiting on it fails, and so does every later
// one with ENOTCONN. Use it on a mount whose daemon is dead or dying only:
// it releases processes blocked on the mount, and a daemon thread stuck
// in the kernel waiting for itself, which would keep the process alive
// after kill -9. The connection is found in /proc/self/mountinfo, without
// a system call on point (which a dead daemon would leave hanging).
// Nothing FUSE mounted at point: nothing to do.
func AbortConnection(point string) error {
	conn, ok, err := fs.ConnectionOf(point)
	if err != nil || !ok {
		return err
	}
	return fs.Abort(conn)
}
