package objstore

// The S3 backend (s3:// over HTTPS, s3+http:// over plain HTTP for a
// local server), through minio-go.
//
//   - Credentials come from the environment (AWS_ACCESS_KEY_ID,
//     AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), else from the profile
//     AWS_PROFILE ("default") of ~/.aws/credentials
//     (AWS_SHARED_CREDENTIALS_FILE); never from the URL, never stored.
//     The region is AWS_REGION, default us-east-1.
//   - PutIfAbsent sends If-None-Match: *, PutIfMatch If-Match: "etag";
//     both are single PUTs (no multipart: a condition must hold for the
//     whole object). 412 PreconditionFailed and 409
//     ConditionalRequestConflict (a concurrent conditional write) are
//     ErrPrecondition; NoSuchKey is ErrNotExist.
//   - minio-go retries a request whose connection failed. A conditional
//     PUT that was applied but whose reply was lost comes back as 412 on
//     the retry: ErrPrecondition can then mean "you won". The replica
//     re-reads HEAD after every lost race and compares holder and
//     content, which covers this.
//   - Now is the Date header (one-second resolution) of a listing of at
//     most one key, captured by a RoundTripper for that one request.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

type s3Backend struct {
	client *minio.Client
	core   minio.Core
	bucket string
	prefix string // "" or ending in '/'
	url    string
}

// S3Config is a parsed s3:// or s3+http:// URL.
type S3Config struct {
	Endpoint string // host[:port]
	Secure   bool   // https
	Bucket   string
	Prefix   string // "" or a valid key, no trailing '/'
}

func (c S3Config) String() string {
	scheme := "s3"
	if !c.Secure {
		scheme = "s3+http"
	}
	s := scheme + "://" + c.Endpoint + "/" + c.Bucket
	if c.Prefix != "" {
		s += "/" + c.Prefix
	}
	return s
}

// OpenS3 opens the S3 backend; it makes no request (SelfTest does).
func OpenS3(cfg S3Config) (Backend, error) {
	creds := credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.FileAWSCredentials{}, // AWS_SHARED_CREDENTIALS_FILE, AWS_PROFILE
	})
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = "us-east-1"
	}
	tr, err := minio.DefaultTransport(cfg.Secure)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg, err)
	}
	lookup := minio.BucketLookupAuto
	if !cfg.Secure {
		lookup = minio.BucketLookupPath
	}
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:        creds,
		Secure:       cfg.Secure,
		Region:       region,
		BucketLookup: lookup,
		Transport:    dateTransport{tr},
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg, err)
	}
	p := cfg.Prefix
	if p != "" {
		p += "/"
	}
	return &s3Backend{client: client, core: minio.Core{Client: client}, bucket: cfg.Bucket, prefix: p, url: cfg.String()}, nil
}

func (s *s3Backend) String() string { return s.url }

// s3Err maps what the server said to this package's errors.
func (s *s3Backend) s3Err(op, key string, err error, conditional bool) error {
	if err == nil {
		return nil
	}
	r := minio.ToErrorResponse(err)
	switch {
	case r.Code == minio.NoSuchKey && conditional:
		// If-Match on a missing key: 404 (AWS, versitygw 1.8.0).
		return fmt.Errorf("%s %s: %w (no object)", op, key, ErrPrecondition)
	case r.Code == minio.NoSuchKey:
		return fmt.Errorf("%s %s: %w", op, key, ErrNotExist)
	case r.Code == minio.PreconditionFailed, r.StatusCode == http.StatusPreconditionFailed:
		return fmt.Errorf("%s %s: %w", op, key, ErrPrecondition)
	case conditional && (r.Code == "ConditionalRequestConflict" || r.StatusCode == http.StatusConflict):
		return fmt.Errorf("%s %s: %w (%s)", op, key, ErrPrecondition, r.Code)
	case r.Code == minio.NoSuchBucket:
		return fmt.Errorf("%s %s: no bucket %q at %s", op, key, s.bucket, s.url)
	}
	return fmt.Errorf("%s %s at %s: %w", op, key, s.url, err)
}

func (s *s3Backend) Get(ctx context.Context, key string) ([]byte, Info, error) {
	if err := begin(ctx, key); err != nil {
		return nil, Info{}, err
	}
	body, oi, _, err := s.core.GetObject(ctx, s.bucket, s.prefix+key, minio.GetObjectOptions{})
	if err != nil {
		return nil, Info{}, s.s3Err("get", key, err, false)
	}
	defer body.Close()
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, Info{}, s.s3Err("get", key, err, false)
	}
	return data, Info{Key: key, Size: int64(len(data)), ETag: oi.ETag, Mod: oi.LastModified}, nil
}

func (s *s3Backend) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := begin(ctx, key); err != nil {
		return nil, err
	}
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("get range %s: negative offset %d or length %d", key, off, n)
	}
	if n == 0 {
		// No Range header can ask for nothing: ask whether it exists.
		_, err := s.Stat(ctx, key)
		return []byte{}, err
	}
	var opts minio.GetObjectOptions
	if err := opts.SetRange(off, off+n-1); err != nil {
		return nil, fmt.Errorf("get range %s: %w", key, err)
	}
	body, _, _, err := s.core.GetObject(ctx, s.bucket, s.prefix+key, opts)
	if err != nil {
		if r := minio.ToErrorResponse(err); r.Code == "InvalidRange" || r.StatusCode == http.StatusRequestedRangeNotSatisfiable {
			return []byte{}, nil // off is at or past the end
		}
		return nil, s.s3Err("get range", key, err, false)
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, n))
	if err != nil {
		return nil, s.s3Err("get range", key, err, false)
	}
	return data, nil
}

func (s *s3Backend) Stat(ctx context.Context, key string) (Info, error) {
	if err := begin(ctx, key); err != nil {
		return Info{}, err
	}
	oi, err := s.client.StatObject(ctx, s.bucket, s.prefix+key, minio.StatObjectOptions{})
	if err != nil {
		return Info{}, s.s3Err("stat", key, err, false)
	}
	return Info{Key: key, Size: oi.Size, ETag: oi.ETag, Mod: oi.LastModified}, nil
}

func (s *s3Backend) put(ctx context.Context, op, key string, data []byte, opts minio.PutObjectOptions, conditional bool) (Info, error) {
	if err := begin(ctx, key); err != nil {
		return Info{}, err
	}
	opts.ContentType = "application/octet-stream"
	if conditional {
		opts.DisableMultipart = true
	}
	ui, err := s.client.PutObject(ctx, s.bucket, s.prefix+key, bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		return Info{}, s.s3Err(op, key, err, conditional)
	}
	mod := ui.LastModified
	if mod.IsZero() {
		mod = time.Now()
	}
	return Info{Key: key, Size: int64(len(data)), ETag: ui.ETag, Mod: mod}, nil
}

func (s *s3Backend) Put(ctx context.Context, key string, data []byte) error {
	_, err := s.put(ctx, "put", key, data, minio.PutObjectOptions{}, false)
	return err
}

func (s *s3Backend) PutIfAbsent(ctx context.Context, key string, data []byte) (Info, error) {
	var opts minio.PutObjectOptions
	opts.SetMatchETagExcept("*")
	return s.put(ctx, "put if absent", key, data, opts, true)
}

func (s *s3Backend) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (Info, error) {
	if err := begin(ctx, key); err != nil {
		return Info{}, err
	}
	// An ETag is hex (with "-N" for a multipart upload); anything else,
	// "*" above all (If-Match: * means "exists"), matches no object.
	if etag == "" || strings.Trim(etag, "0123456789abcdefABCDEF-") != "" {
		return Info{}, fmt.Errorf("put if match %s: %w (ETag %q cannot match)", key, ErrPrecondition, etag)
	}
	var opts minio.PutObjectOptions
	opts.SetMatchETag(etag)
	return s.put(ctx, "put if match", key, data, opts, true)
}

func (s *s3Backend) Delete(ctx context.Context, key string) error {
	if err := begin(ctx, key); err != nil {
		return err
	}
	err := s.client.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{})
	if err = s.s3Err("delete", key, err, false); errors.Is(err, ErrNotExist) {
		return nil
	}
	return err
}

func (s *s3Backend) List(ctx context.Context, prefix string, fn func(Info) error) error {
	if err := CheckPrefix(prefix); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops minio-go's listing goroutine when fn stops early
	last := ""
	for oi := range s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if oi.Err != nil {
			return s.s3Err("list", prefix, oi.Err, false)
		}
		key, ok := strings.CutPrefix(oi.Key, s.prefix)
		if !ok || !Valid(key) {
			continue // not a name reynfs writes
		}
		if key <= last {
			return fmt.Errorf("list %s at %s: the server lists %q after %q (not in key order)", prefix, s.url, key, last)
		}
		last = key
		if err := fn(Info{Key: key, Size: oi.Size, ETag: oi.ETag, Mod: oi.LastModified}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// dateKey carries, in a request's context, where dateTransport stores
// the response's Date header.
type dateKey struct{}

type dateTransport struct{ base http.RoundTripper }

func (t dateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if p, ok := req.Context().Value(dateKey{}).(*string); ok && err == nil {
		*p = resp.Header.Get("Date")
	}
	return resp, err
}

func (s *s3Backend) Now(ctx context.Context) (time.Time, error) {
	// A listing of one key, not a HEAD of the bucket: an error to a HEAD
	// has no body, and versitygw answers a HEAD signed with an unknown
	// access key with a bare 404 ("no such bucket").
	var date string
	dctx := context.WithValue(ctx, dateKey{}, &date)
	opts := minio.ListObjectsOptions{Prefix: s.prefix + "reynfs-remote.json", MaxKeys: 1}
	for oi := range s.client.ListObjectsIter(dctx, s.bucket, opts) {
		if oi.Err != nil {
			return time.Time{}, s.s3Err("list", "reynfs-remote.json", oi.Err, false)
		}
	}
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	t, err := http.ParseTime(date)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s sent no usable Date header (%q)", s.url, date)
	}
	return t, nil
}
