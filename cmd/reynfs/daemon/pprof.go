package daemon

import (
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"strconv"

	"github.com/rs/zerolog"
)

// servePprof serves Go's profiles (CPU, heap, block, mutex, goroutines)
// of the daemon at the address in REYNFS_PPROF, for performance work: a
// CPU profile of one workload (tar x, fio) rather than of the mount's
// whole life (REYNFS_CPUPROFILE). REYNFS_PPROF_RATE sets the block and
// mutex profile rates (default 10000: one sample per 10 µs blocked),
// which cost nothing unless set. Only a loopback address is accepted: the
// profiles show file names and contents of the workspace.
func servePprof(log zerolog.Logger) {
	addr := os.Getenv("REYNFS_PPROF")
	if addr == "" {
		return
	}
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		log.Error().Str("addr", addr).Msg("pprof: REYNFS_PPROF must be a loopback host:port")
		return
	}
	rate := 10000
	if s := os.Getenv("REYNFS_PPROF_RATE"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			rate = n
		}
	}
	runtime.SetBlockProfileRate(rate)
	runtime.SetMutexProfileFraction(max(rate/1000, 1))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error().Err(err).Msg("pprof: listen")
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Info().Str("addr", ln.Addr().String()).Msg("pprof: serving profiles")
	go func() { _ = http.Serve(ln, mux) }()
}
