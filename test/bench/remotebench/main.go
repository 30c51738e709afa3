// Command remotebench measures the remote rows of scripts/bench.sh
// (issue 12): push, incremental push and clone of a workspace against a
// versity gateway on 127.0.0.1, each as the wall time of the reynfs
// command and the requests and body bytes that crossed the wire (counted
// by a reverse proxy between reynfs and the gateway). It prints one
// tab-separated line per measurement (KEY, TARGET, RUN, VALUE, UNIT: the
// format of bench.sh's results file).
//
//	remotebench -reynfs BIN -versitygw BIN -work DIR -src DIR -store DIR [-runs N] [-change K]
//
// SRC is an unmounted project directory whose store is STORE. Each run
// pushes it whole to a new bucket, rewrites K files (a mount, the
// writes, an unmount: not measured), pushes again, then clones the
// remote's head into a new store and checks that the clone's files equal
// SRC's; then (where reynfs has clone --lazy) clones it lazily without
// prefetching and mounts it, runs `git status` and reads one file in the
// mount, each a row, and checks the mount's files against SRC's.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

type opts struct {
	reynfs, versitygw, work, src, store string
	runs, change                        int
}

func main() {
	var o opts
	flag.StringVar(&o.reynfs, "reynfs", "reynfs", "the reynfs binary")
	flag.StringVar(&o.versitygw, "versitygw", "versitygw", "the versity gateway binary")
	flag.StringVar(&o.work, "work", "", "scratch directory (the gateway's data, the clones)")
	flag.StringVar(&o.src, "src", "", "the unmounted project directory to push")
	flag.StringVar(&o.store, "store", "", "its store")
	flag.IntVar(&o.runs, "runs", 3, "runs")
	flag.IntVar(&o.change, "change", 10, "files rewritten between the two pushes")
	flag.Parse()
	if o.work == "" || o.src == "" || o.store == "" || o.runs < 1 {
		fmt.Fprintln(os.Stderr, "usage: remotebench -reynfs BIN -versitygw BIN -work DIR -src DIR -store DIR [-runs N] [-change K]")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "remotebench:", err)
		os.Exit(1)
	}
}

func run(o opts) error {
	s, err := startServer(o.versitygw, o.work)
	if err != nil {
		return err
	}
	defer s.stop()
	files, err := listFiles(o.src)
	if err != nil {
		return err
	}
	ws := filepath.Base(o.src)
	help, _ := exec.Command(o.reynfs, "clone", "--help").Output()
	lazy := bytes.Contains(help, []byte("--lazy"))
	for r := 1; r <= o.runs; r++ {
		url, err := s.bucket(fmt.Sprintf("bench-%d", r))
		if err != nil {
			return err
		}
		b := &bench{o: o, s: s, run: r}
		// A remote of the name from an earlier run points at its bucket.
		_ = b.cmd("remote", "remove", "bench", "--dir", o.src, "--store", o.store)
		if err := b.cmd("remote", "add", "bench", url, "--dir", o.src, "--store", o.store); err != nil {
			return err
		}
		if err := b.measure("remote-push", "push", "bench", "--dir", o.src, "--store", o.store); err != nil {
			return err
		}
		if err := b.rewrite(files); err != nil {
			return err
		}
		if err := b.measure("remote-push-incr", "push", "bench", "--dir", o.src, "--store", o.store); err != nil {
			return err
		}
		dst := filepath.Join(o.work, fmt.Sprintf("clone-%d", r), ws)
		if err := b.measure("remote-clone", "clone", url+"#"+ws, dst, "--store", dst+".store"); err != nil {
			return err
		}
		if err := sameFiles(o.src, dst, files); err != nil {
			return fmt.Errorf("run %d: the clone differs from the source: %w", r, err)
		}
		os.RemoveAll(filepath.Dir(dst))
		if lazy {
			if err := b.lazy(url, ws, files); err != nil {
				return err
			}
		}
	}
	return nil
}

// lazy measures `reynfs clone --lazy --prefetch=false` with the mount
// that serves it (one row: until the mount is ready), then `git status`
// and a `cat` of one file inside the mount, then checks the mount's
// files against the source (not measured) and unmounts.
func (b *bench) lazy(url, ws string, files []string) error {
	dst := filepath.Join(b.o.work, fmt.Sprintf("lazy-%d", b.run), ws)
	st := dst + ".store"
	defer os.RemoveAll(filepath.Dir(dst))
	b.s.reset()
	t0 := time.Now()
	if err := b.cmd("clone", "--lazy", "--prefetch=false", url+"#"+ws, dst, "--store", st); err != nil {
		return err
	}
	if err := b.cmd("mount", dst, "--store", st); err != nil {
		return err
	}
	mounted := true
	defer func() {
		if mounted {
			_ = b.cmd("unmount", dst)
		}
	}()
	b.row("remote-lazy", time.Since(t0))
	t0 = time.Now()
	git := exec.Command("git", "-C", dst, "status", "--porcelain")
	if out, err := git.CombinedOutput(); err != nil {
		return fmt.Errorf("git status in the lazy mount: %v: %s", err, bytes.TrimSpace(out))
	}
	b.row("remote-lazy-status", time.Since(t0))
	one := files[len(files)/2]
	t0 = time.Now()
	got, err := os.ReadFile(filepath.Join(dst, one))
	if err != nil {
		return err
	}
	b.row("remote-lazy-cat", time.Since(t0))
	want, err := os.ReadFile(filepath.Join(b.o.src, one))
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("run %d: %s differs in the lazy mount", b.run, one)
	}
	if err := sameFiles(b.o.src, dst, files); err != nil {
		return fmt.Errorf("run %d: the lazy mount differs from the source: %w", b.run, err)
	}
	mounted = false
	return b.cmd("unmount", dst)
}

type bench struct {
	o   opts
	s   *server
	run int
}

// cmd runs reynfs with args, its output to stderr on failure.
func (b *bench) cmd(args ...string) error {
	c := exec.Command(b.o.reynfs, args...)
	c.Env = b.s.env()
	out, err := c.CombinedOutput()
	if err != nil {
		return fmt.Errorf("reynfs %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// measure runs reynfs with args and prints its wall time and what the
// proxy counted meanwhile under key.
func (b *bench) measure(key string, args ...string) error {
	b.s.reset()
	t0 := time.Now()
	if err := b.cmd(args...); err != nil {
		return err
	}
	b.row(key, time.Since(t0))
	return nil
}

// row prints took and what the proxy counted since the last reset.
func (b *bench) row(key string, took time.Duration) {
	c := b.s.reset()
	fmt.Printf("%s\twall\t%d\t%.6f\ts\n", key, b.run, took.Seconds())
	fmt.Printf("%s\trequests\t%d\t%d\tn\n", key, b.run, c.Requests)
	fmt.Printf("%s\tbytes-up\t%d\t%d\tB\n", key, b.run, c.Up)
	fmt.Printf("%s\tbytes-down\t%d\t%d\tB\n", key, b.run, c.Down)
}

// rewrite mounts the source, appends a line to change of its files
// (different ones each run) and unmounts it.
func (b *bench) rewrite(files []string) error {
	if err := b.cmd("mount", b.o.src, "--store", b.o.store); err != nil {
		return err
	}
	var werr error
	for i := range b.o.change {
		p := filepath.Join(b.o.src, files[(b.run*b.o.change+i)%len(files)])
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			_, err = fmt.Fprintf(f, "remotebench run %d\n", b.run)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			werr = err
			break
		}
	}
	if err := b.cmd("unmount", b.o.src); err != nil {
		return err
	}
	return werr
}

// listFiles lists dir's regular files (relative) outside .git (which
// git may change behind the bench's back, and which rewrite must not
// touch).
func listFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("%s holds no files", dir)
	}
	return out, err
}

// sameFiles checks that dst holds files with the same bytes as src's.
func sameFiles(src, dst string, files []string) error {
	got, err := listFiles(dst)
	if err != nil {
		return err
	}
	if len(got) != len(files) {
		return fmt.Errorf("%d files, the source has %d", len(got), len(files))
	}
	for _, f := range files {
		a, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return err
		}
		c, err := os.ReadFile(filepath.Join(dst, f))
		if err != nil {
			return err
		}
		if !bytes.Equal(a, c) {
			return fmt.Errorf("%s differs", f)
		}
	}
	return nil
}
