package daemon

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// unixPair is a connected pair of unix stream sockets.
func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pair")
		c, err := net.FileConn(f)
		_ = f.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = c.(*net.UnixConn)
		t.Cleanup(func() { _ = c.Close() })
	}
	return out[0], out[1]
}

// TestWatchClient: the call's context ends (errClientGone) when the
// client closes its end, not while it is there, not when it sends more
// (those bytes stay for the next read), and stop ends the watch and
// leaves the connection readable.
func TestWatchClient(t *testing.T) {
	d := &Daemon{done: make(chan struct{})}
	srv, cli := unixPair(t)
	ctx, stop := d.watchClient(srv)
	time.Sleep(100 * time.Millisecond)
	if ctx.Err() != nil {
		t.Fatalf("cancelled with the client there: %v", context.Cause(ctx))
	}
	if _, err := cli.Write([]byte("next\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if ctx.Err() != nil {
		t.Fatalf("cancelled by the client's next request: %v", context.Cause(ctx))
	}
	stop()
	buf := make([]byte, 5)
	_ = srv.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadFull(srv, buf); err != nil || string(buf) != "next\n" {
		t.Fatalf("after the watch, read %q, %v; want the client's bytes", buf, err)
	}
	_ = srv.SetReadDeadline(time.Time{})

	ctx, stop = d.watchClient(srv)
	defer stop()
	_ = cli.Close()
	select {
	case <-ctx.Done():
		if !errors.Is(context.Cause(ctx), errClientGone) {
			t.Fatalf("cause %v, want errClientGone", context.Cause(ctx))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the client closed its end and the call's context lives on")
	}
}
