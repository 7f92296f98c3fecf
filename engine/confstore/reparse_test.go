package confstore

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// reparseDocs are documents the quick way splits, and some it must not.
var reparseDocs = []string{
	"listen: :8080\nroutes:\n  - {id: a, path: /a, upstream: u}\n  - {id: b, path: /b/*, upstream: u}\nupstreams:\n  - {name: u, nodes: [\"127.0.0.1:1\"]}\n",
	"routes:\n- id: a\n  path: /a\n  # a comment\n\n  upstream: u\n- path: /noid\n  upstream: u\ntimeouts: {idle: 5s}\n",
	"routes:   # the routes\n  - id: a\n    headers:\n      - x\n      - y\n    path: |\n      /a\n  -\n    id: b\n# trailing\n",
	"routes:\n  - &r {id: a}\n  - *r\n",                  // anchors: whole
	"routes:\n  - {id: a,\npath: /x}\n",                  // a flow item continued too far left
	"x: 1\nroutes:\n  - {id: a}\nroutes:\n  - {id: b}\n", // twice
	"---\nroutes:\n  - {id: a}\n---\nroutes:\n  - {id: b}\n",
	"routes: [{id: a}]\n",
	"routes:\n  - {id: a}\n other: 1\n",
	"routes:\r\n  - {id: a, path: /a}\r\n  - {id: b}\r\n",
	"routes:\n\t- {id: a}\n",
	"a: &x 1\nroutes:\n  - {id: a, n: *x}\n",
	// Line breaks yaml.v3 ends a comment at, besides \n (a route hidden
	// behind a comment, a repeated key), and a \r alone.
	"listen: :1\nroutes:\n  - id: a\n    path: /a  # note\u2028    path: /b\n    upstream: u\n",
	"listen: :1\nroutes:\n  - {id: a, path: /a, upstream: u}  # note\u2028  - {id: b, path: /b, upstream: u}\n",
	"routes:\n  - {id: a, path: /a, upstream: u}\n# note\u0085pid: /tmp/p\n# n\u2029pid: /tmp/q\n",
	"routes: # c\rpid: x\n  - {id: a, path: /a, upstream: u}\n",
	// A routes line inside a quoted scalar and inside a flow collection.
	"listen: :1\npid: \"/tmp/x\nroutes:\n  - {id: a, path: /a, upstream: u}\nend\"\nupstreams: []\n",
	"listen: :1\nupstreams: [\n  {name: u, nodes: [\"127.0.0.1:9\"]},\nroutes:\n  - {id: a, path: /a, upstream: u}\n]\n",
}

// Every document, and every prefix of each, byte by byte, parses through
// a Reparser as Parse parses it: the same Doc, or an error from both;
// again with the Reparser's items from the whole document kept.
func TestReparserAgreesWithParse(t *testing.T) {
	for _, doc := range reparseDocs {
		warm := &Reparser{}
		if _, err := warm.Parse([]byte(doc)); err != nil {
			t.Logf("%q: %v", doc, err)
		}
		for n := 0; n <= len(doc); n++ {
			data := []byte(doc[:n])
			want, wantErr := Parse(data)
			for _, p := range []*Reparser{{}, {items: warm.items}} {
				got, err := p.Parse(data)
				if (err != nil) != (wantErr != nil) || err == nil && !reflect.DeepEqual(got, want) {
					t.Fatalf("%q:\nParse      %v, %v\nReparser   %v, %v", data, want, wantErr, got, err)
				}
			}
		}
	}
}

// A route kept word for word keeps its value (the same map, so Diff
// answers it at once); a changed one is decoded anew; a route without an
// id takes its place's default id every time.
func TestReparserKeepsUnchangedRoutes(t *testing.T) {
	var b strings.Builder
	b.WriteString("upstreams:\n  - {name: u, nodes: [\"127.0.0.1:1\"]}\nroutes:\n")
	for i := range 100 {
		fmt.Fprintf(&b, "  - {id: r%d, path: /r%d, upstream: u}\n", i, i)
	}
	first := b.String() + "  - {path: /last, upstream: u}\n"
	var p Reparser
	d1, err := p.Parse([]byte(first))
	if err != nil {
		t.Fatal(err)
	}
	next := strings.Replace(first, "path: /r7,", "path: /moved,", 1)
	next = strings.Replace(next, "  - {id: r3, path: /r3, upstream: u}\n", "", 1)
	d2, err := p.Parse([]byte(next))
	if err != nil {
		t.Fatal(err)
	}
	if p.items == nil {
		t.Fatal("the document was parsed whole")
	}
	changes := Diff(d1, d2)
	var got []string
	for _, c := range changes {
		got = append(got, c.Op()+" "+c.ID)
	}
	if want := []string{"changed r7", "added route-99", "removed r3", "removed route-100"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	r1, r2 := d1[Routes].([]any), d2[Routes].([]any)
	if !same(r1[0], r2[0]) || reflect.ValueOf(r1[0]).UnsafePointer() != reflect.ValueOf(r2[0]).UnsafePointer() {
		t.Fatal("an unchanged route was decoded again")
	}
	if id := r2[len(r2)-1].(map[string]any)["id"]; id != "route-99" {
		t.Fatalf("the route without an id is %v, want route-99", id)
	}
	if want, _ := Parse([]byte(next)); !reflect.DeepEqual(d2, want) {
		t.Fatal("the reparsed document is not Parse's")
	}
}
