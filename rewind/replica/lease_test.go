package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
)

// pushAsync runs a push of s to b#ws and returns its result channel.
func pushAsync(s *source, b objstore.Backend, ws string, o Options) chan error {
	errc := make(chan error, 1)
	go func() {
		_, err := PushWith(context.Background(), s.j, b, ws, o)
		errc <- err
	}()
	return errc
}

func waitBlocked(t *testing.T, g *gate) {
	t.Helper()
	select {
	case <-g.blocked:
	case <-time.After(20 * time.Second):
		t.Fatal("the push never reached the gate")
	}
}

func waitErr(t *testing.T, errc chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the push did not return")
		return nil
	}
}

func readHead(t *testing.T, b objstore.Backend, ws string) (*Head, []byte) {
	t.Helper()
	data, _, err := b.Get(context.Background(), HeadKey(ws))
	if err != nil {
		t.Fatal(err)
	}
	h, err := DecodeHead(HeadKey(ws), data)
	if err != nil {
		t.Fatal(err)
	}
	return h, data
}

// TestLeaseRenewed: a push held up for three TTLs keeps its lease live
// (the renewal goroutine), so a takeover waits it out; once the push
// ends, the lease is released.
func TestLeaseRenewed(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("renew")
	s := newSource(t)
	s.write(t, "a", []byte("a"))
	s.sync(t)
	o := Options{TTL: 600 * time.Millisecond}
	if _, err := PushWith(ctx, s.j, fake, "w", o); err != nil {
		t.Fatal(err)
	}
	s.write(t, "b", pattern(2, 5000))
	s.cut(t, "two")
	g := newGate(fake, isPackPut, isPackPut) // only the pack PUT hangs
	t.Cleanup(g.open)
	errc := pushAsync(s, g, "w", o)
	waitBlocked(t, g)
	end := time.Now().Add(3 * o.TTL)
	for time.Now().Before(end) {
		h, _ := readHead(t, fake, "w")
		now, _ := fake.Now(ctx)
		if !now.Before(h.Expires) {
			t.Fatalf("lease expired at %s during the push (now %s): not renewed", h.Expires, now)
		}
		time.Sleep(20 * time.Millisecond)
	}
	tctx, cancel := context.WithTimeout(ctx, 2*o.TTL)
	defer cancel()
	waits := 0
	tdir := filepath.Join(t.TempDir(), "db")
	_, err := Take(tctx, fake, "w", tdir, TakeOptions{Poll: 50 * time.Millisecond,
		Wait: func(Holder, time.Duration) { waits++ }})
	if !errors.Is(err, context.DeadlineExceeded) || waits == 0 {
		t.Fatalf("take under a renewed lease = %v after %d waits, want it to wait until its deadline", err, waits)
	}
	if _, err := os.Stat(tdir); !os.IsNotExist(err) {
		t.Fatalf("a take that stopped waiting left %s: %v", tdir, err)
	}
	g.open()
	if err := waitErr(t, errc); err != nil {
		t.Fatal(err)
	}
	h, _ := readHead(t, fake, "w")
	if now, _ := fake.Now(ctx); now.Before(h.Expires) || h.Seq != s.j.Durable() {
		t.Fatalf("HEAD after the push: %+v; want seq %d and the lease released", h, s.j.Durable())
	}
}

// TestLostLeaseStopsWrites: a push whose lease is taken while a request
// hangs learns it from the renewal, abandons the hung request and writes
// nothing more: no index, no segment, no HEAD.
func TestLostLeaseStopsWrites(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("lost")
	s := newSource(t)
	s.write(t, "a", []byte("a"))
	s.sync(t)
	o := Options{TTL: 600 * time.Millisecond}
	if _, err := PushWith(ctx, s.j, fake, "w", o); err != nil {
		t.Fatal(err)
	}
	s.write(t, "b", pattern(2, 5000))
	s.sync(t)
	g := newGate(fake, isPackPut, isPackPut)
	t.Cleanup(g.open)
	errc := pushAsync(s, g, "w", o)
	waitBlocked(t, g)
	h, _ := readHead(t, fake, "w")
	first := h.Seq
	_, info, err := fake.Get(ctx, HeadKey("w"))
	if err != nil {
		t.Fatal(err)
	}
	h.Epochs = append(h.Epochs, Epoch{Epoch: 2, First: h.Seq + 1})
	h.Holder = Holder{Host: "elsewhere", Pid: 7, Store: "taker"}
	taker := h.Encode()
	if _, err := fake.PutIfMatch(ctx, HeadKey("w"), taker, info.ETag); err != nil {
		t.Fatal(err)
	}
	err = waitErr(t, errc) // the gate stays closed: only the lost lease ends the push
	want := fmt.Sprintf("deposed: workspace w was taken over at epoch 2 by elsewhere; your records after seq %d are not on the remote", first)
	if !errors.Is(err, ErrDeposed) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("push that lost its lease = %v, want one line with %q", err, want)
	}
	for _, w := range g.written() {
		if !strings.HasSuffix(w, "/HEAD") {
			t.Errorf("the push wrote %s after the request that hung; want nothing", w)
		}
	}
	if _, data := readHead(t, fake, "w"); string(data) != string(taker) {
		t.Fatalf("HEAD after the deposed push: %s; want the taker's", data)
	}
}

// TestTwoWriters: while a push holds the lease, another store's push to
// the same workspace is refused naming the holder; once it is released,
// the other store is refused as not the workspace's writer.
func TestTwoWriters(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			b := open(t)
			a := newSource(t)
			a.write(t, "a", []byte("a"))
			a.sync(t)
			if _, err := Push(ctx, a.j, b, "w"); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "db")
			if _, err := Clone(ctx, b, "w", dir, ""); err != nil {
				t.Fatal(err)
			}
			c := reopen(t, dir)
			a.write(t, "b", pattern(3, 3000))
			a.sync(t)
			g := newGate(b, isPackPut, isPackPut)
			t.Cleanup(g.open)
			errc := pushAsync(a, g, "w", Options{})
			waitBlocked(t, g)
			host, _ := os.Hostname()
			want := fmt.Sprintf("remote locked by %s pid %d", host, os.Getpid())
			if _, err := Push(ctx, c.j, b, "w"); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), want) {
				t.Fatalf("second writer's push = %v, want %q", err, want)
			}
			g.open()
			if err := waitErr(t, errc); err != nil {
				t.Fatal(err)
			}
			if _, err := Push(ctx, c.j, b, "w"); !errors.Is(err, ErrNotOurs) {
				t.Fatalf("second writer's push after the lease = %v, want ErrNotOurs", err)
			}
		})
	}
}
