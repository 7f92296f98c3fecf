package config

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"
)

// Both ways of parsing routes (the plain one, and the YAML decoder's for
// a document with a route it cannot take) lay them out in slabs of
// slabRoutes: each route right after the one before, but for the first
// of each slab.
func TestParsedRoutesAreInSlabs(t *testing.T) {
	n := 2*slabRoutes + 7
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nupstreams:\n  - {name: a, nodes: [\"127.0.0.1:9\"]}\nroutes:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {id: r%d, path: /r%d, upstream: a}\n", i, i)
	}
	plain := b.String()
	yamlOnly := plain + "  - {id: timed, path: /timed, upstream: a, response_timeout: 2s}\n" // not a plain route
	for name, doc := range map[string]string{"plain": plain, "yaml": yamlOnly} {
		c, err := Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(c.Routes); i++ {
			next := unsafe.Add(unsafe.Pointer(c.Routes[i-1]), unsafe.Sizeof(Route{})) == unsafe.Pointer(c.Routes[i])
			if next != (i%slabRoutes != 0) {
				t.Fatalf("%s: route %d adjacent to the one before: %v; want slabs of %d", name, i, next, slabRoutes)
			}
		}
	}
}
