package pool

// Kept is how many buffers of class c (0: 512 B) l holds for its next Gets.
func (l *Local) Kept(c int) int { return len(l.free[c]) }

// OwnedBy reports whether b returns to l on its final release.
func (b *Buffer) OwnedBy(l *Local) bool { return b.local == l }

const (
	LocalClasses = localClasses
	LocalMax     = localMax
)
