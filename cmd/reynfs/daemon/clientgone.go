package daemon

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/reynfs/reynfs/agents/api"
)

// errClientGone is why a call's context ends when its client closed the
// connection (Ctrl-C on `reynfs push` or `reynfs sync`).
var errClientGone = errors.New("the client went away (connection closed)")

// waits lists the methods that may wait long on the network: their
// context ends when the client goes away, so a push stops sending and a
// sync stops waiting.
func waits(method string) bool {
	switch method {
	case api.PushParams{}.Method(), api.SyncParams{}.Method(), api.ForgetParams{}.Method():
		return true
	}
	return false
}

// watchClient returns a context cancelled (errClientGone) when the peer
// of c closes its end while a call runs, and stop, which ends the watch
// (the connection is not read meanwhile: a client waits for its answer
// before it sends again, and a request it did send is only peeked at).
func (d *Daemon) watchClient(c net.Conn) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sc, ok := c.(syscall.Conn)
	if !ok {
		return ctx, func() { cancel(nil) }
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return ctx, func() { cancel(nil) }
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Read waits for the socket to be readable (or the deadline stop
		// sets) and calls the function again; returning true ends it.
		_ = rc.Read(func(fd uintptr) bool {
			var b [1]byte
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case err == syscall.EAGAIN || err == syscall.EINTR:
				return false
			case n == 0 && err == nil, err != nil:
				cancel(errClientGone) // EOF, or the connection reset
			}
			return true // data: the client is there (and sent more)
		})
	}()
	return ctx, func() {
		_ = c.SetReadDeadline(time.Unix(1, 0))
		<-done
		select {
		case <-d.done: // the daemon finishing set its own deadline: keep it
		default:
			_ = c.SetReadDeadline(time.Time{})
		}
		cancel(nil)
	}
}
