//go:build linux

// CPU pinning of event-loop threads (Linux).

package engine

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// pinThread binds the calling OS thread, which gnet locked to this loop's
// goroutine, to one CPU, so a loop keeps its caches and never migrates.
func pinThread(loopIndex int) error {
	var set unix.CPUSet
	set.Set(loopIndex % runtime.NumCPU())
	return unix.SchedSetaffinity(0, &set)
}
