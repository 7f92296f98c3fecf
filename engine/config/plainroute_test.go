package config

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/engine/confstore"
)

// plainDoc is a config of n routes, most of the plainest kind, some not,
// some the config refuses.
func plainDoc(rng *rand.Rand, n int) string {
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nupstreams:\n  - {name: a, nodes: [\"127.0.0.1:9\"]}\n  - {name: b, nodes: [\"127.0.0.1:10\"]}\nroutes:\n")
	for i := 0; i < n; i++ {
		up := []string{"a", "b", "a", "b", "a", "b", "a", "b", "a", "b", "a", "b", "a", "b", "a", "b", "a", "b", "a", "b", "nosuch"}[rng.Intn(21)]
		switch rng.Intn(10) {
		case 0:
			fmt.Fprintf(&b, "  - id: r%d\n    # a comment\n    prefix: /p%d/\n\n    upstream: %s\n    methods: [GET, POST]\n", i, rng.Intn(n), up)
		case 1:
			fmt.Fprintf(&b, "  - {id: r%d, path: /r%d, upstream: %s, response_timeout: 2s}\n", i, i, up)
		case 2:
			fmt.Fprintf(&b, "  - {path: /r%d, upstream: a, host: \"h%d.example.com\"}\n", i, rng.Intn(3))
		case 3:
			fmt.Fprintf(&b, "  - {id: r%d, path: /r%d, upstream: a, escaped_slashes: %s, filters: [%s]}\n", i, i,
				[]string{"keep", "reject", "keep", "never"}[rng.Intn(4)], []string{"request_id", "request_id", "nosuch"}[rng.Intn(3)])
		case 4:
			fmt.Fprintf(&b, "  - {id: r%d, path: /r%d/*, upstream: a, disable_filters: [forwarded], upgrade: [websocket, Custom]}\n", i, i)
		default:
			fmt.Fprintf(&b, "  - {id: r%d, path: /r%d, upstream: %s}\n", i, rng.Intn(n*2), up)
		}
	}
	if rng.Intn(4) == 0 {
		b.WriteString("timeouts: {idle: 5s}\n")
	}
	return b.String()
}

// Parse's way for plain routes (confstore.PlainRoutes, then
// parseWithRoutes) gives what the YAML decoder gives for the whole
// document: the same Config, or the same error, for every test config,
// for random documents, and for every prefix of one, byte by byte.
func TestParsePlainMatchesYAML(t *testing.T) {
	agree := func(name string, data []byte) {
		t.Helper()
		got, gotEmpty, gotErr := parse(data)
		want, wantEmpty, wantErr := parseYAML(data)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || gotEmpty != wantEmpty {
			t.Fatalf("%s: parse: %v (empty %v); the YAML decoder: %v (empty %v)", name, gotErr, gotEmpty, wantErr, wantEmpty)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: parse's config differs from the YAML decoder's", name)
		}
	}
	files, _ := filepath.Glob("../../cmd/loopgate/dist/*.yaml")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		agree(f, data)
	}
	agree("embedded", embeddedYAML)
	// Documents whose \n lines are not their structure: other line
	// breaks (NEL, LS, PS, a \r alone) end a comment for yaml.v3, and a
	// routes line may sit inside a quoted scalar or a flow collection.
	head := "listen: 127.0.0.1:0\nupstreams: [{name: u, nodes: [\"127.0.0.1:9\"]}]\n"
	for _, doc := range []string{
		head + "routes:\n  - id: a\n    path: /a  # note\u2028    path: /b\n    upstream: u\n",
		head + "routes:\n  - {id: a, path: /a, upstream: u}  # note\u2028  - {id: b, path: /b, upstream: nosuch}\n",
		head + "routes:\n  - {id: a, path: /a, upstream: u}\n# note\u0085pid: /tmp/p\n",
		head + "routes: # c\rpid: x\n  - {id: a, path: /a, upstream: u}\n",
		"listen: 127.0.0.1:0\npid: \"/tmp/x\nroutes:\n  - {id: a, path: /a, upstream: u}\nend\"\nupstreams: [{name: u, nodes: [\"127.0.0.1:9\"]}]\n",
		"listen: 127.0.0.1:0\nupstreams: [\n  {name: u, nodes: [\"127.0.0.1:9\"]},\nroutes:\n  - {id: a, path: /a, upstream: u}\n]\n",
	} {
		agree(fmt.Sprintf("%q", doc), []byte(doc))
	}
	rng := rand.New(rand.NewSource(1))
	plain := 0
	for i := 0; i < 300; i++ {
		doc := plainDoc(rng, 1+rng.Intn(12))
		agree(fmt.Sprintf("doc %d", i), []byte(doc))
		if rest, routes, ok := confstore.PlainRoutes([]byte(doc)); ok {
			if _, _, err := parseWithRoutes(rest, routes); err == nil {
				plain++
			}
		}
	}
	t.Logf("%d of 300 documents parsed the plain way", plain)
	if plain < 30 {
		t.Fatalf("only %d of 300 documents parsed the plain way", plain)
	}
	doc := plainDoc(rand.New(rand.NewSource(2)), 6)
	for n := 0; n <= len(doc); n++ {
		agree(fmt.Sprintf("%q", doc[:n]), []byte(doc[:n]))
	}
}
