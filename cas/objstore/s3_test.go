package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cas/objstore/objstoretest"
)

func openURL(t *testing.T, url string) objstore.Backend {
	t.Helper()
	b, err := objstore.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	return b
}

// TestS3Conformance runs the suite on a versity gateway: one bucket,
// a fresh prefix per test (which checks the prefix handling too), and a
// bucket of its own with no prefix.
func TestS3Conformance(t *testing.T) {
	gw := objstoretest.StartS3(t)
	gw.SetEnv(t)
	bucket := gw.NewBucket(t)
	var n atomic.Int32
	t.Run("Prefixed", func(t *testing.T) {
		objstoretest.Run(t, func(t *testing.T) objstore.Backend {
			return openURL(t, fmt.Sprintf("%s/run/p%d", bucket, n.Add(1)))
		})
	})
	t.Run("WholeBucket", func(t *testing.T) {
		objstoretest.Run(t, func(t *testing.T) objstore.Backend { return openURL(t, gw.NewBucket(t)) })
	})
}

// TestS3SelfTest: the gateway passes SelfTest, and this test writes down
// what versitygw does with each condition, including the one SelfTest
// leaves alone (If-Match on a missing key).
func TestS3SelfTest(t *testing.T) {
	gw := objstoretest.StartS3(t)
	gw.SetEnv(t)
	ctx := context.Background()
	b := openURL(t, gw.NewBucket(t))
	if err := objstore.SelfTest(ctx, b); err != nil {
		t.Fatalf("SelfTest: %v", err)
	}
	v1, err := b.PutIfAbsent(ctx, "k", []byte("1"))
	must(t, err)
	_, err = b.PutIfAbsent(ctx, "k", []byte("2"))
	t.Logf("If-None-Match: * on an existing key: %v", err)
	_, err = b.PutIfMatch(ctx, "k", []byte("3"), "0123456789abcdef0123456789abcdef")
	t.Logf("If-Match with a wrong ETag: %v", err)
	_, err = b.PutIfMatch(ctx, "k", []byte("4"), v1.ETag)
	t.Logf("If-Match with the current ETag: %v", err)
	_, err = b.PutIfMatch(ctx, "missing", []byte("5"), v1.ETag)
	_, statErr := b.Stat(ctx, "missing")
	t.Logf("If-Match on a missing key: %v (the key exists afterwards: %v)", err, statErr == nil)
	now, err := b.Now(ctx)
	must(t, err)
	t.Logf("server Date: %v (%v from this clock)", now, time.Since(now).Round(time.Millisecond))
}

// TestS3Credentials: credentials come from the profile file when the
// environment has none, and wrong ones are a clear failure, not a
// missing object.
func TestS3Credentials(t *testing.T) {
	gw := objstoretest.StartS3(t)
	gw.SetEnv(t)
	url := gw.NewBucket(t)
	ctx := context.Background()

	creds := filepath.Join(t.TempDir(), "credentials")
	must(t, os.WriteFile(creds, []byte(fmt.Sprintf("[default]\naws_access_key_id = wrong\naws_secret_access_key = wrongwrong\n\n[reynfs]\naws_access_key_id = %s\naws_secret_access_key = %s\n", gw.Access, gw.Secret)), 0o600))
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_PROFILE", "reynfs")
	if err := openURL(t, url).Put(ctx, "from-profile", []byte("x")); err != nil {
		t.Fatalf("Put with credentials from profile reynfs: %v", err)
	}
	t.Setenv("AWS_PROFILE", "")
	// Get, not Stat: versitygw 1.8.0 answers a HEAD signed with an
	// unknown access key with a bare 404, which reads as NoSuchKey.
	_, _, err := openURL(t, url).Get(ctx, "from-profile")
	if err == nil || errors.Is(err, objstore.ErrNotExist) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Get with the default profile's wrong keys: %v, want a one-line refusal", err)
	}
	t.Logf("wrong credentials: %v", err)
	err = objstore.SelfTest(ctx, openURL(t, url))
	if err == nil || errors.Is(err, objstore.ErrUnsupported) || errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("SelfTest with wrong keys: %v, want the server's refusal", err)
	}
	t.Logf("SelfTest with wrong credentials: %v", err)
}

func TestOpenURLs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, c := range []struct{ url, want string }{
		{"file://" + dir, "file://" + dir},
		{"file://localhost" + dir, "file://" + dir},
		{"s3://s3.example.com/bucket", "s3://s3.example.com/bucket"},
		{"s3://s3.example.com:9000/bucket/some/prefix/", "s3://s3.example.com:9000/bucket/some/prefix"},
		{"s3+http://127.0.0.1:7070/bucket/p", "s3+http://127.0.0.1:7070/bucket/p"},
	} {
		b, err := objstore.Open(ctx, c.url)
		if err != nil {
			t.Errorf("Open(%s): %v", c.url, err)
		} else if b.String() != c.want {
			t.Errorf("Open(%s).String() = %s, want %s", c.url, b.String(), c.want)
		}
	}
	for _, c := range []struct{ url, want string }{
		{"file://relative/dir", "host \"relative\""},
		{"file:relative", "must be absolute"},
		{"file://" + dir + "/missing", "no such directory"},
		{"/abs/dir", "no scheme"},
		{"ftp://host/bucket", "unknown scheme \"ftp\""},
		{"s3://host", "no bucket"},
		{"s3://host/", "no bucket"},
		{"s3:///bucket", "no host"},
		{"s3+http://host/bucket", "no port"},
		{"s3://host/Bad_Bucket", "bucket \"Bad_Bucket\""},
		{"s3://host/bucket/bad prefix", "prefix"},
		{"s3://host/bucket/a/../b", "prefix"},
		{"s3://AKIAXXX:s3cr3t@host/bucket", "credentials in the URL are refused"},
		{"s3+http://user@127.0.0.1:9000/bucket", "credentials in the URL are refused"},
		{"s3://host/bucket?region=x", "no query"},
		{"s3://ho st/bucket", "remote URL"},
	} {
		_, err := objstore.Open(ctx, c.url)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Open(%s) = %v, want a one-line error with %q", c.url, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("Open(%s): the error repeats the secret: %v", c.url, err)
		}
	}
}

// TestS3NowIsServerTime puts a proxy that rewrites the Date header in
// front of the gateway: Now must report the server's date, not this
// machine's.
func TestS3NowIsServerTime(t *testing.T) {
	gw := objstoretest.StartS3(t)
	gw.SetEnv(t)
	url := gw.NewBucket(t)
	past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	target, err := neturl.Parse("http://" + gw.Endpoint)
	must(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		r.Header.Set("Date", past.Format(http.TimeFormat))
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	b := openURL(t, strings.Replace(url, gw.Endpoint, strings.TrimPrefix(srv.URL, "http://"), 1))
	now, err := b.Now(context.Background())
	must(t, err)
	if !now.Equal(past) {
		t.Fatalf("Now() = %v, the server said %v", now, past)
	}
}

// TestS3LargeObject: an object above minio-go's multipart threshold
// (16 MiB) is stored whole, read back by ranges, and its multipart ETag
// ("hex-N") works for PutIfMatch.
func TestS3LargeObject(t *testing.T) {
	gw := objstoretest.StartS3(t)
	gw.SetEnv(t)
	ctx := context.Background()
	b := openURL(t, gw.NewBucket(t))
	data := make([]byte, 17<<20+5)
	for i := range data {
		data[i] = byte(i*7 + i>>13)
	}
	must(t, b.Put(ctx, "packs/big.pack", data))
	st, err := b.Stat(ctx, "packs/big.pack")
	must(t, err)
	if st.Size != int64(len(data)) {
		t.Fatalf("Stat size %d, want %d", st.Size, len(data))
	}
	t.Logf("ETag of a %d-byte Put: %s", len(data), st.ETag)
	for _, off := range []int64{0, 16<<20 - 3, int64(len(data)) - 10} {
		got, err := b.GetRange(ctx, "packs/big.pack", off, 100)
		must(t, err)
		if want := data[off:min(off+100, int64(len(data)))]; string(got) != string(want) {
			t.Fatalf("GetRange(%d, 100) differs", off)
		}
	}
	got, _, err := b.Get(ctx, "packs/big.pack")
	must(t, err)
	if string(got) != string(data) {
		t.Fatal("Get of the large object differs")
	}
	if _, err := b.PutIfMatch(ctx, "packs/big.pack", []byte("small"), st.ETag); err != nil {
		t.Fatalf("PutIfMatch with the large object's ETag %s: %v", st.ETag, err)
	}
}
