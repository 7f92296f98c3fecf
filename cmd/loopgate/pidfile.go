// The pidfile (-pidfile, pid: in the config): the process's PID for
// scripts that signal it (logrotate's postrotate), one per instance.

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// pidfile is a pidfile this process wrote and holds.
//
// The file's contents appear at once: it is written whole under a
// temporary name and then linked to its path, so a reader never sees it
// empty or half written. The process holds an exclusive flock(2) on it
// while it runs. A second instance started on the same path finds the
// lock taken and refuses to start, naming the PID; a file left by a
// process that died has no lock, so it is stale and replaced (a PID
// number the kernel has since given to another process does not matter).
// link(2) rather than rename(2) never replaces a file another instance
// has just put there; a stale file is unlinked only while its lock is
// held and only if the path still names it.
type pidfile struct {
	path string
	f    *os.File // open and locked until remove
}

// writePidfile writes the PID to path and locks it.
func writePidfile(path string) (*pidfile, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*")
	if err != nil {
		return nil, fmt.Errorf("pidfile: %w", err)
	}
	p := &pidfile{path: path, f: tmp}
	fail := func(err error) (*pidfile, error) {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	if err := syscall.Flock(int(tmp.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fail(fmt.Errorf("pidfile: lock %s: %w", tmp.Name(), err))
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fail(fmt.Errorf("pidfile: %w", err))
	}
	if _, err := fmt.Fprintf(tmp, "%d\n", os.Getpid()); err != nil {
		return fail(fmt.Errorf("pidfile: %w", err))
	}
	if err := tmp.Sync(); err != nil {
		return fail(fmt.Errorf("pidfile: %w", err))
	}
	for range 5 {
		err := os.Link(tmp.Name(), path)
		if err == nil {
			os.Remove(tmp.Name())
			return p, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return fail(fmt.Errorf("pidfile: %w", err))
		}
		if err := clearStale(path); err != nil {
			return fail(err)
		}
	}
	return fail(fmt.Errorf("pidfile %s: keeps reappearing; is another loopgate starting?", path))
}

// clearStale removes the file at path unless a running process holds it.
func clearStale(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // gone meanwhile: link again
	}
	if err != nil {
		return fmt.Errorf("pidfile: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := os.ReadFile(path)
			return fmt.Errorf("pidfile %s: held by running process %s; is another loopgate running with this pidfile?", path, strings.TrimSpace(string(b)))
		}
		return fmt.Errorf("pidfile: lock %s: %w", path, err)
	}
	if same(path, f) {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("pidfile: stale %s: %w", path, err)
		}
	}
	return nil
}

// same reports whether path still names the file f has open.
func same(path string, f *os.File) bool {
	a, err1 := os.Stat(path)
	b, err2 := f.Stat()
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// remove deletes the pidfile if it is still this process's, then lets go
// of the lock. Safe on a nil pidfile (none configured).
func (p *pidfile) remove() {
	if p == nil {
		return
	}
	if same(p.path, p.f) {
		os.Remove(p.path)
	}
	p.f.Close()
}
