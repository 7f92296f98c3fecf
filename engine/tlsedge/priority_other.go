//go:build !linux

// Priority: elsewhere than Linux handshakes compute at normal priority.

package tlsedge

type lowered struct{}

func (*lowered) lower() bool   { return false }
func (*lowered) restore() bool { return true }

// LowPriorityAvailable reports whether RunnerOptions.LowPriority can take
// effect: never off Linux.
func LowPriorityAvailable() bool { return false }
