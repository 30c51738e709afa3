package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/reynfs/reynfs/agents/api"
	"golang.org/x/sys/unix"
)

// The control socket and the store are private to the user who mounts
// (DESIGN invariant 10). Another local user must not be able to answer in
// the daemon's place (a socket planted in a directory that user owns), nor
// reach the daemon (a socket or store others can open), nor make the
// daemon write through a symlink planted in the store. So:
//
//   - the socket lives in the store when its path fits sun_path, else in
//     $XDG_RUNTIME_DIR/reynfs, else in /tmp/reynfs-<uid>; a directory that
//     is not ours, is a symlink, or that others can open is refused, never
//     used or "fixed" (it may be an attacker's);
//   - a store folder others can write to is refused; one others can only
//     read or search is made private (0700) with a log line;
//   - the files reynfs opens in the store are opened relative to the
//     store's descriptor with O_NOFOLLOW;
//   - the socket is 0600 whatever the umask, and both ends check the other
//     with SO_PEERCRED (control.go).

// ErrDenied: the other end of the control socket, or a directory on the
// way to it, belongs to someone it must not.
var ErrDenied = api.ErrDenied

// SocketPath is the control socket of a store's daemon: control.sock in the
// store, or, where that path is too long for a unix socket address (108
// bytes on Linux), a name derived from the store in the first of
// socketDirs.
func SocketPath(store string) string { return socketPaths(store)[0] }

// socketPaths are the places the socket of store may be, the daemon's
// choice first. A client tries each: the daemon chose by its own
// environment, and a client started elsewhere (another session, cron)
// may not have the same $XDG_RUNTIME_DIR.
func socketPaths(store string) []string {
	p := filepath.Join(store, "control.sock")
	if len(p) < maxSocketPath {
		return []string{p}
	}
	sum := sha256.Sum256([]byte(store))
	var out []string
	for _, d := range socketDirs() {
		out = append(out, filepath.Join(d, hex.EncodeToString(sum[:10])+".sock"))
	}
	return out
}

// maxSocketPath leaves room for the NUL in sockaddr_un.sun_path[108].
const maxSocketPath = 104

// socketDirs are the folders for sockets that do not fit in the store:
// $XDG_RUNTIME_DIR/reynfs when that is set and fits a socket address,
// then /tmp/reynfs-<uid>.
func socketDirs() []string {
	var out []string
	if rt := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(rt) {
		d := filepath.Join(filepath.Clean(rt), "reynfs")
		if len(d)+1+20+len(".sock") < maxSocketPath {
			out = append(out, d)
		}
	}
	return append(out, fmt.Sprintf("/tmp/reynfs-%d", os.Geteuid()))
}

// ensureSocketDir makes sure the directory of a socket is private to this
// user: the store (PrepareStore made it so) or a fallback directory,
// created 0700 when missing and refused when it is anyone else's.
func ensureSocketDir(sock string) error {
	dir := filepath.Dir(sock)
	if err := checkParent(dir); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	return checkPrivateDir(dir)
}

// checkSocketDir is the client's check of a socket's folder outside the
// store before it connects: a folder another user made (to plant a server
// there) is refused. A missing folder means no daemon.
func checkSocketDir(sock string) error {
	dir := filepath.Dir(sock)
	if filepath.Base(sock) == "control.sock" {
		return nil // in the store: the peer check answers for it
	}
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := checkParent(dir); err != nil {
		return err
	}
	return checkPrivateDir(dir)
}

// checkPrivateDir refuses a directory that is a symlink, not ours, or open
// to others.
func checkPrivateDir(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	return privateDirStat(dir, &st)
}

func privateDirStat(dir string, st *unix.Stat_t) error {
	euid := uint32(os.Geteuid())
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("%w: socket directory %s is a symlink: refusing", ErrDenied, dir)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%w: socket directory %s is not a directory: refusing", ErrDenied, dir)
	case st.Uid != euid:
		return fmt.Errorf("%w: socket directory %s is owned by uid %d, not by you (uid %d): refusing", ErrDenied, dir, st.Uid, euid)
	case st.Mode&0o077 != 0:
		return fmt.Errorf("%w: socket directory %s has mode %04o, not 0700: refusing", ErrDenied, dir, st.Mode&0o7777)
	}
	return nil
}

// checkParent refuses to use dir when someone else could replace it: its
// parent must be ours or root's, and one others can write to must be
// sticky (as /tmp is), so that only we can rename or remove our entry.
func checkParent(dir string) error {
	parent := filepath.Dir(dir)
	var st unix.Stat_t
	if err := unix.Stat(parent, &st); err != nil {
		return fmt.Errorf("socket directory %s: %w", parent, err)
	}
	euid := uint32(os.Geteuid())
	if st.Uid != euid && st.Uid != 0 {
		return fmt.Errorf("%w: %s, which holds the control socket's folder %s, is owned by uid %d, not by you or root: refusing", ErrDenied, parent, dir, st.Uid)
	}
	if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
		return fmt.Errorf("%w: %s, which holds the control socket's folder %s, is writable by others and not sticky: refusing", ErrDenied, parent, dir)
	}
	return nil
}

// StoreDir is a store folder made ready for a daemon.
type StoreDir struct {
	Created bool     // this call made the folder (a first mount)
	Log     *os.File // reynfs.log, opened for appending
	// Tightened is the mode the folder had when others could read or
	// search it; it is 0700 now (the caller logs it).
	Tightened os.FileMode
}

// PrepareStore creates the store folder (0700) or checks the one that is
// there: it must be a directory of ours that no one else can write to (a
// folder others can write to may already hold what they planted, so it is
// refused, not fixed). It opens reynfs.log through the folder's
// descriptor, never following a symlink.
func PrepareStore(store string) (*StoreDir, error) {
	sd := &StoreDir{}
	if err := os.MkdirAll(filepath.Dir(store), 0o700); err != nil {
		return nil, fmt.Errorf("store %s: %w", store, err)
	}
	err := os.Mkdir(store, 0o700)
	switch {
	case err == nil:
		sd.Created = true
	case !errors.Is(err, os.ErrExist):
		return nil, fmt.Errorf("store %s: %w", store, err)
	}
	fail := func(err error) (*StoreDir, error) {
		if sd.Created {
			_ = os.RemoveAll(store)
		}
		return nil, err
	}
	dfd, err := unix.Open(store, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return fail(fmt.Errorf("%w: store %s is not a directory (a symlink?): refusing", ErrUsage, store))
		}
		return fail(fmt.Errorf("store %s: %w", store, err))
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return fail(fmt.Errorf("store %s: %w", store, err))
	}
	if euid := uint32(os.Geteuid()); st.Uid != euid {
		return fail(fmt.Errorf("%w: store %s is owned by uid %d, not by you (uid %d): refusing", ErrUsage, store, st.Uid, euid))
	}
	if st.Mode&0o022 != 0 {
		return fail(fmt.Errorf("%w: store %s is writable by others (mode %04o): refusing; check what is in it, then chmod 700 it", ErrUsage, store, st.Mode&0o7777))
	}
	if st.Mode&0o077 != 0 {
		if err := unix.Fchmod(dfd, 0o700); err != nil {
			return fail(fmt.Errorf("store %s: %w", store, err))
		}
		sd.Tightened = os.FileMode(st.Mode & 0o777)
	}
	lfd, err := unix.Openat(dfd, logName, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return fail(fmt.Errorf("%w: %s is a symlink: refusing to write through it", ErrUsage, LogPath(store)))
		}
		return fail(fmt.Errorf("log %s: %w", LogPath(store), err))
	}
	if err := unix.Fstat(lfd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 || st.Uid != uint32(os.Geteuid()) {
		unix.Close(lfd)
		return fail(fmt.Errorf("%w: %s is not a regular file of yours with one link: refusing to write to it", ErrUsage, LogPath(store)))
	}
	sd.Log = os.NewFile(uintptr(lfd), LogPath(store))
	return sd, nil
}

const logName = "reynfs.log"

// LogPath is the daemon's log file.
func LogPath(store string) string { return filepath.Join(store, logName) }
