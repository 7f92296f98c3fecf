// routeList: a snapshot's compiled routes, in chunks the next version
// shares where it keeps them.

package engine

// routeChunk is how many routes one chunk of a routeList holds.
const (
	routeChunkBits = 8
	routeChunk     = 1 << routeChunkBits
)

// routeList holds a snapshot's compiled routes by router index, in chunks
// of routeChunk (the last one shorter). A chunk is never modified once its
// list is built, so a version compiled from the running one takes every
// chunk whose routes it keeps, each in its place, as it is: at 30,000
// routes a one-route write builds one chunk (48 KB), where a copy of every
// route's compiled state was 5.8 MB of garbage a write.
type routeList struct {
	chunks [][]route
	n      int
}

// len is how many routes the list holds.
func (l *routeList) len() int { return l.n }

// at is route i; 0 <= i < len.
func (l *routeList) at(i int) *route { return &l.chunks[i>>routeChunkBits][i&(routeChunk-1)] }

// chunkOf is the chunk holding routes [start, end) when the list has one
// exactly there, else nil.
func (l *routeList) chunkOf(start, end int) []route {
	k := start >> routeChunkBits
	if start&(routeChunk-1) != 0 || k >= len(l.chunks) || len(l.chunks[k]) != end-start {
		return nil
	}
	return l.chunks[k]
}

// add appends a chunk: every chunk but the last holds routeChunk routes.
func (l *routeList) add(c []route) {
	l.chunks = append(l.chunks, c)
	l.n += len(c)
}
