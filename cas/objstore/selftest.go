package objstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// SelfTest checks that b does what a remote relies on; `reynfs remote
// add` runs it and refuses a remote that fails. It works under a random
// key in selftest/ and removes what it wrote, also when it fails.
//
// Checked, each a condition the replica's ordering and lease need:
//
//   - PutIfAbsent on an existing key fails (a new workspace's HEAD and
//     reynfs-remote.json are created this way: two creators, one wins);
//   - PutIfMatch with an ETag that never was, and with the previous one,
//     fails, and with the current one succeeds (HEAD moves only by CAS);
//   - 8 concurrent PutIfAbsent of one key: exactly one wins;
//   - GetRange returns the bytes asked for, List the keys written in
//     order, Delete removes them, Now answers.
//
// Not checked: PutIfMatch on a missing key. Some servers write the
// object there (they ignore If-Match when there is nothing to match;
// versitygw 1.8.0 does not: it answers 404 NoSuchKey and writes nothing,
// which the S3 backend reports as ErrPrecondition), and the design never
// needs it to fail: HEAD is created by PutIfAbsent only, and a
// workspace's HEAD is never deleted while a writer may still CAS it
// (removing a workspace is a lease-holding writer's last step).
//
// A server that ignores a condition gives an error wrapping
// ErrUnsupported that names the check; any other failure (network,
// permission) is returned as it is.
func SelfTest(ctx context.Context, b Backend) (err error) {
	var rnd [8]byte
	rand.Read(rnd[:])
	dir := "selftest/" + hex.EncodeToString(rnd[:]) + "/"
	var written []string
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, k := range written {
			if derr := b.Delete(cctx, k); derr != nil && err == nil {
				err = fmt.Errorf("self-test of %s: clean up: %w", b, derr)
			}
		}
	}()
	fail := func(check string, err error) error {
		return fmt.Errorf("self-test of %s: %s: %w", b, check, err)
	}
	unsupported := func(format string, args ...any) error {
		return fmt.Errorf("self-test of %s: %s: %w", b, fmt.Sprintf(format, args...), ErrUnsupported)
	}

	if _, err := b.Now(ctx); err != nil {
		return fail("the server's clock (Now)", err)
	}
	key := dir + "cas"
	written = append(written, key)
	v1, err := b.PutIfAbsent(ctx, key, []byte("one"))
	if err != nil {
		return fail("PutIfAbsent (If-None-Match: *) of a new key", err)
	}
	switch _, err := b.PutIfAbsent(ctx, key, []byte("two")); {
	case err == nil:
		return unsupported("PutIfAbsent (If-None-Match: *) overwrote an existing key")
	case !errors.Is(err, ErrPrecondition):
		return fail("PutIfAbsent (If-None-Match: *) of an existing key", err)
	}
	if err := expect(ctx, b, key, "one"); err != nil {
		return unsupported("PutIfAbsent (If-None-Match: *) that failed changed the object (%v)", err)
	}
	never := ETagOf([]byte("an ETag no object has"))
	if never == v1.ETag {
		never = ETagOf([]byte("another"))
	}
	switch _, err := b.PutIfMatch(ctx, key, []byte("three"), never); {
	case err == nil:
		return unsupported("PutIfMatch (If-Match) with a wrong ETag replaced the object")
	case !errors.Is(err, ErrPrecondition):
		return fail("PutIfMatch (If-Match) with a wrong ETag", err)
	}
	v2, err := b.PutIfMatch(ctx, key, []byte("four"), v1.ETag)
	if err != nil {
		return fail("PutIfMatch (If-Match) with the current ETag", err)
	}
	switch _, err := b.PutIfMatch(ctx, key, []byte("five"), v1.ETag); {
	case err == nil:
		return unsupported("PutIfMatch (If-Match) with the previous ETag replaced the object")
	case !errors.Is(err, ErrPrecondition):
		return fail("PutIfMatch (If-Match) with the previous ETag", err)
	}
	if err := expect(ctx, b, key, "four"); err != nil {
		return unsupported("PutIfMatch (If-Match) that failed changed the object (%v)", err)
	}
	if st, err := b.Stat(ctx, key); err != nil {
		return fail("Stat", err)
	} else if st.ETag != v2.ETag {
		return fmt.Errorf("self-test of %s: Stat's ETag %q is not the one PutIfMatch returned (%q)", b, st.ETag, v2.ETag)
	}

	race := dir + "race"
	written = append(written, race)
	const racers = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		won  []int
		errs []error
	)
	for i := range racers {
		wg.Go(func() {
			_, err := b.PutIfAbsent(ctx, race, fmt.Appendf(nil, "racer %d", i))
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				won = append(won, i)
			} else if !errors.Is(err, ErrPrecondition) {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return fail("concurrent PutIfAbsent", errs[0])
	}
	if len(won) != 1 {
		return unsupported("%d of %d concurrent PutIfAbsent (If-None-Match: *) of one key succeeded", len(won), racers)
	}
	if err := expect(ctx, b, race, fmt.Sprintf("racer %d", won[0])); err != nil {
		return unsupported("concurrent PutIfAbsent: the winner's bytes are not the object's (%v)", err)
	}

	data := []byte("0123456789abcdefghij")
	rng := dir + "range"
	written = append(written, rng)
	if err := b.Put(ctx, rng, data); err != nil {
		return fail("Put", err)
	}
	if got, err := b.GetRange(ctx, rng, 5, 7); err != nil {
		return fail("GetRange", err)
	} else if !bytes.Equal(got, data[5:12]) {
		return fmt.Errorf("self-test of %s: GetRange(5, 7) returned %q, want %q", b, got, data[5:12])
	}
	var listed []string
	if err := b.List(ctx, dir, func(in Info) error { listed = append(listed, in.Key); return nil }); err != nil {
		return fail("List", err)
	}
	if want := []string{key, race, rng}; !slices.Equal(listed, want) {
		return fmt.Errorf("self-test of %s: List(%s) = %q, want %q", b, dir, listed, want)
	}
	for _, k := range written {
		if err := b.Delete(ctx, k); err != nil {
			return fail("Delete", err)
		}
	}
	if _, err := b.Stat(ctx, key); !errors.Is(err, ErrNotExist) {
		return fmt.Errorf("self-test of %s: Stat after Delete: %v, want %v", b, err, ErrNotExist)
	}
	written = nil
	return nil
}

func expect(ctx context.Context, b Backend, key, want string) error {
	got, _, err := b.Get(ctx, key)
	if err != nil {
		return err
	}
	if string(got) != want {
		return fmt.Errorf("it holds %q, want %q", got, want)
	}
	return nil
}
