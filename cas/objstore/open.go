package objstore

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// Open opens the backend a remote URL names:
//
//	file:///abs/dir                          a directory (it must exist)
//	s3://host[:port]/bucket[/prefix]         S3 over HTTPS
//	s3+http://host:port/bucket[/prefix]      S3 over plain HTTP (a local server)
//
// Credentials never go in the URL (a URL with user info is refused):
// S3 takes them from the AWS environment variables or profile. Open
// makes no network request; SelfTest does.
func Open(ctx context.Context, rawURL string) (Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("remote URL: %v", unwrapURLError(err))
	}
	if u.User != nil {
		return nil, fmt.Errorf("remote URL %s: credentials in the URL are refused (use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE)", redact(u))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("remote URL %q: no query or fragment allowed", rawURL)
	}
	switch u.Scheme {
	case "file":
		if u.Opaque != "" {
			return nil, fmt.Errorf("remote URL %q: the path must be absolute (file:///abs/dir)", rawURL)
		}
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("remote URL %q: host %q in a file URL (want file:///abs/dir)", rawURL, u.Host)
		}
		if u.Path == "" {
			return nil, fmt.Errorf("remote URL %q: no directory (want file:///abs/dir)", rawURL)
		}
		return OpenDir(u.Path)
	case "s3", "s3+http":
		cfg, err := parseS3(u)
		if err != nil {
			return nil, fmt.Errorf("remote URL %q: %v", rawURL, err)
		}
		return OpenS3(cfg)
	case "":
		return nil, fmt.Errorf("remote URL %q: no scheme (want file:///abs/dir, s3://host/bucket or s3+http://host:port/bucket)", rawURL)
	}
	return nil, fmt.Errorf("remote URL %q: unknown scheme %q (want file, s3 or s3+http)", rawURL, u.Scheme)
}

func parseS3(u *url.URL) (S3Config, error) {
	cfg := S3Config{Endpoint: u.Host, Secure: u.Scheme == "s3"}
	if u.Opaque != "" || u.Host == "" {
		return cfg, fmt.Errorf("no host (want %s://host[:port]/bucket[/prefix])", u.Scheme)
	}
	if u.Port() == "" && u.Scheme == "s3+http" {
		return cfg, fmt.Errorf("no port (s3+http is for a local server: s3+http://host:port/bucket)")
	}
	p := strings.TrimPrefix(u.Path, "/")
	cfg.Bucket, cfg.Prefix, _ = strings.Cut(p, "/")
	cfg.Prefix = strings.TrimSuffix(cfg.Prefix, "/")
	if cfg.Bucket == "" {
		return cfg, fmt.Errorf("no bucket (want %s://%s/bucket[/prefix])", u.Scheme, u.Host)
	}
	if err := s3utils.CheckValidBucketNameStrict(cfg.Bucket); err != nil {
		return cfg, fmt.Errorf("bucket %q: %v", cfg.Bucket, err)
	}
	if cfg.Prefix != "" && !Valid(cfg.Prefix) {
		return cfg, fmt.Errorf("prefix %q: want [A-Za-z0-9._-] elements joined by '/'", cfg.Prefix)
	}
	return cfg, nil
}

// redact is u without its user info, for the message that refuses it.
func redact(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// unwrapURLError drops url.Error's repetition of the URL (which may hold
// a secret the user pasted).
func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}
