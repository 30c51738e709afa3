package objstoretest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strconv"
	"testing"
)

// SeaweedVersion is the SeaweedFS module `scripts/install.sh --full`
// builds bin/weed from (go install refuses its replace directive: it is
// downloaded and built inside the module).
const SeaweedVersion = "v0.0.0-20261109003541-7506e5f91cd6"

// FindSeaweed returns the weed binary: $REYNFS_WEED, else bin/weed in
// this module's checkout, else one on PATH.
func FindSeaweed() (string, error) {
	return findServer("weed", "REYNFS_WEED", "bash scripts/install.sh --full builds it into bin/")
}

func startSeaweed(t testing.TB) *S3Server {
	t.Helper()
	bin, err := FindSeaweed()
	if err != nil {
		missing(t, err)
	}
	g := &S3Server{Kind: "seaweedfs", Access: "reynfsaccess", Secret: "reynfssecret0123456789", Dir: t.TempDir()}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a free port may be taken before weed binds it
		if lastErr = g.startWeed(t, bin); lastErr == nil {
			return g
		}
	}
	t.Fatalf("seaweedfs: %v", lastErr)
	return nil
}

// startWeed runs `weed mini` on 127.0.0.1: every service on a port that
// is free with its gRPC companion (port+10000), the S3 credentials from
// the environment (weed's way), no telemetry, no web UIs.
func (g *S3Server) startWeed(t testing.TB, bin string) error {
	ports, err := freePairs(4)
	if err != nil {
		return err
	}
	g.Endpoint = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3]))
	cmd := exec.Command(bin, "mini", "-dir="+g.Dir, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port="+strconv.Itoa(ports[0]), "-filer.port="+strconv.Itoa(ports[1]),
		"-volume.port="+strconv.Itoa(ports[2]), "-s3.port="+strconv.Itoa(ports[3]),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false", "-admin.ui=false",
		"-admin.port.legacy=0", "-master.telemetry=false")
	cmd.Env = append(cmd.Environ(), "AWS_ACCESS_KEY_ID="+g.Access, "AWS_SECRET_ACCESS_KEY="+g.Secret)
	return g.run(t, cmd)
}

// freePairs returns n ports below 55536 that are free on 127.0.0.1 with
// their port+10000 (weed's gRPC ports).
func freePairs(n int) ([]int, error) {
	var out []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for p := 20000 + rand.IntN(20000); len(out) < n && p < 45536; p++ {
		a, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+10000)))
		if err != nil {
			a.Close()
			continue
		}
		held = append(held, a, b)
		out = append(out, p)
	}
	if len(out) < n {
		return nil, fmt.Errorf("no %d free port pairs on 127.0.0.1", n)
	}
	return out, nil
}
