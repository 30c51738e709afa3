// Command loopback is the plain go-fuse baseline of scripts/bench.sh: it
// mounts ORIGINAL at MOUNTPOINT through go-fuse's fs.NewLoopbackRoot, with
// the mount options reynfs uses (fs/server.go): DirectMount, allow_other and
// default_permissions, noatime/nosuid/nodev, MaxWrite 1 MiB, 30 s entry and
// attribute timeouts. FUSE passthrough is off unless -passthrough is given,
// because reynfs cannot use it for a handle that can write: with it on, the
// loopback's reads and writes would bypass its daemon altogether.
//
// It prints "ready" on stdout once the mount is up, unmounts on SIGINT or
// SIGTERM, and exits when the mount is gone.
//
//	loopback [-cpuprofile FILE] [-passthrough] [-debug] MOUNTPOINT ORIGINAL
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to `FILE` until unmount")
	passthrough := flag.Bool("passthrough", false, "let the kernel pass reads and writes through to the backing files")
	debug := flag.Bool("debug", false, "log every FUSE request")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: %s [flags] MOUNTPOINT ORIGINAL\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), flag.Arg(1), *cpuprofile, *passthrough, *debug); err != nil {
		fmt.Fprintf(os.Stderr, "loopback: %v\n", err)
		os.Exit(1)
	}
}

func run(mountpoint, orig, cpuprofile string, passthrough, debug bool) error {
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	root, err := fs.NewLoopbackRoot(orig)
	if err != nil {
		return fmt.Errorf("loopback root %s: %w", orig, err)
	}
	timeout := 30 * time.Second // as reynfs (fs.Options.Timeout)
	root0 := os.Geteuid() == 0
	opts := &fs.Options{
		EntryTimeout: &timeout,
		AttrTimeout:  &timeout,
		MountOptions: fuse.MountOptions{
			FsName:            orig,
			Name:              "loopback",
			DirectMount:       true,
			DirectMountStrict: root0,
			DirectMountFlags:  syscall.MS_NOATIME | syscall.MS_NOSUID | syscall.MS_NODEV,
			MaxWrite:          1 << 20,
			Options:           []string{"default_permissions"},
			AllowOther:        root0,
			Debug:             debug,
		},
	}
	if !passthrough {
		opts.MountOptions.DisabledCapabilities = fuse.CAP_PASSTHROUGH
	}
	srv, err := fs.Mount(mountpoint, root, opts)
	if err != nil {
		return fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	fmt.Println("ready")

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		// Busy mounts refuse a clean unmount: detach lazily then.
		if err := srv.Unmount(); err != nil {
			_ = syscall.Unmount(mountpoint, syscall.MNT_DETACH)
		}
	}()
	srv.Wait()
	return nil
}
