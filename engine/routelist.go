// routeList: a snapshot's compiled routes, by router slot, in chunks the
// next version shares where it keeps them.

package engine

// routeChunk is how many routes one chunk of a routeList holds.
const (
	routeChunkBits = 8
	routeChunk     = 1 << routeChunkBits
)

// routeList holds a snapshot's compiled routes by router slot (the
// Result.Index of router.Table.Match), in chunks of routeChunk (the last one
// shorter). A chunk is never modified once its list is built, so a
// version compiled from the running one takes every chunk whose routes it
// keeps, each in its place, as it is: at 30,000 routes a one-route write
// builds one chunk (48 KB), where a copy of every route's compiled state
// was 5.8 MB of garbage a write. A route the router table removed leaves
// its slot empty (a zero route, metrics nil) until the table is compiled
// whole again, so a route deleted from the middle of the list moves no
// other: its chunk alone is built again, where renumbering every route
// after it built the chunks after it (6 MB at 30,000 routes). The router
// bounds the empty slots (router.maxGone, 4096).
type routeList struct {
	chunks [][]route
	n      int // slots
	routes int // slots that hold a route
}

// len is how many slots the list holds, empty ones included.
func (l *routeList) len() int { return l.n }

// count is how many routes the list holds.
func (l *routeList) count() int { return l.routes }

// at is the route in slot i, 0 <= i < len; an empty slot's has nil
// metrics.
func (l *routeList) at(i int) *route { return &l.chunks[i>>routeChunkBits][i&(routeChunk-1)] }

// chunkOf is the chunk holding slots [start, end) when the list has one
// exactly there, else nil.
func (l *routeList) chunkOf(start, end int) []route {
	k := start >> routeChunkBits
	if start&(routeChunk-1) != 0 || k >= len(l.chunks) || len(l.chunks[k]) != end-start {
		return nil
	}
	return l.chunks[k]
}

// add appends a chunk: every chunk but the last holds routeChunk slots.
func (l *routeList) add(c []route) {
	l.chunks = append(l.chunks, c)
	l.n += len(c)
	for i := range c {
		if !c[i].empty() {
			l.routes++
		}
	}
}

// empty reports whether r is an empty slot's.
func (r *route) empty() bool { return r.metrics == nil }
