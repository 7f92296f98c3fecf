//go:build !linux

// Priority: elsewhere than Linux handshakes compute at normal priority.

package tlsedge

type lowered struct{}

func (*lowered) lower(Priority) bool { return false }
func (*lowered) restore() bool       { return true }

// PriorityAvailable reports whether RunnerOptions.Priority p can take
// effect: off Linux only PriorityNormal.
func PriorityAvailable(p Priority) bool { return p == PriorityNormal }
