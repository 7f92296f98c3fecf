package confstore

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func mustParse(t *testing.T, yaml string) Doc {
	t.Helper()
	d, err := Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

const file = `
listen: 127.0.0.1:8080
upstreams:
  - {name: a, nodes: ["10.0.0.1:80"]}
routes:
  - {path: /one, upstream: a}
  - {id: two, path: /two, upstream: a}
`

func TestParseKeysRoutesWithoutID(t *testing.T) {
	d := mustParse(t, file)
	if got := Get(d, Routes, "route-0"); got == nil || got.(map[string]any)["path"] != "/one" {
		t.Fatalf("route-0: %v", got)
	}
}

// Delta and Merge: the overlay that makes a target from the file, laid
// over the file, gives the target; laid over a changed file it keeps the
// file's other changes.
func TestDeltaMerge(t *testing.T) {
	base := mustParse(t, file)
	target := Clone(base)
	Set(target, Routes, "two", map[string]any{"id": "two", "path": "/2", "upstream": "a"})
	Set(target, Routes, "route-0", nil)
	Set(target, Upstreams, "b", map[string]any{"name": "b", "nodes": []any{"10.0.0.2:80"}})
	Set(target, Settings, "loops", 2)
	o := Delta(base, target)
	if got := Merge(base, o); len(Diff(got, target)) != 0 {
		t.Fatalf("Merge(base, Delta(base, target)) differs: %+v", Diff(got, target))
	}
	if !reflect.DeepEqual(o.Deleted, map[string][]string{Routes: {"route-0"}}) {
		t.Errorf("deleted %v", o.Deleted)
	}
	// The file gains a route: the overlay keeps its own changes.
	next := mustParse(t, file+"  - {id: three, path: /three, upstream: a}\n")
	got := Merge(next, o)
	if Get(got, Routes, "three") == nil || Get(got, Routes, "route-0") != nil || Get(got, Routes, "two").(map[string]any)["path"] != "/2" {
		t.Fatalf("merged over a changed file: %v", got[Routes])
	}
	if len(Delta(base, base).Set)+len(Delta(base, base).Deleted) != 0 {
		t.Errorf("Delta of a document with itself is not empty")
	}
}

// At walks back to any kept version by undoing later diffs.
func TestStateAtUndoesLaterVersions(t *testing.T) {
	st := &State{}
	docs := []Doc{mustParse(t, file)}
	st.Add(Version{Number: 1})
	for i := 2; i <= 5; i++ {
		next := Clone(docs[len(docs)-1])
		Set(next, Routes, "two", map[string]any{"id": "two", "path": "/v" + string(rune('0'+i)), "upstream": "a"})
		if i == 4 {
			Set(next, Settings, "loops", 4)
		}
		st.Add(Version{Number: uint64(i), Changes: Diff(docs[len(docs)-1], next)})
		docs = append(docs, next)
	}
	for n := 1; n <= 5; n++ {
		got, err := st.At(docs[4], uint64(n))
		if err != nil || len(Diff(got, docs[n-1])) != 0 {
			t.Errorf("At(%d): %v %+v", n, err, Diff(got, docs[n-1]))
		}
	}
	if _, err := st.At(docs[4], 9); err != ErrNotKept {
		t.Errorf("At(9): %v", err)
	}
}

func TestStateKeepsTheLast50(t *testing.T) {
	st := &State{}
	for i := 1; i <= Keep+7; i++ {
		st.Add(Version{Number: uint64(i)})
	}
	if len(st.Versions) != Keep || st.Versions[0].Number != 8 || st.Latest() != Keep+7 {
		t.Fatalf("%d versions, first %d, latest %d", len(st.Versions), st.Versions[0].Number, st.Latest())
	}
}

// Save and Load round-trip with the config's Go types (int, not float64),
// a missing file is an empty state, a broken one an error, and a stale
// temporary file is removed.
func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if st, err := Load(path); err != nil || st.Latest() != 0 {
		t.Fatalf("missing file: %v %v", st, err)
	}
	d := mustParse(t, file)
	st := &State{Overlay: Delta(Doc{}, d)}
	st.Add(Version{Number: 1, Source: SourceAPI, Changes: Diff(Doc{}, d)})
	if err := Save(path, st); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, ".state.json.tmp-123"), []byte("half"), 0o600)
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(Diff(Merge(Doc{}, got.Overlay), d)) != 0 || got.Versions[0].Source != SourceAPI {
		t.Fatalf("round trip: %+v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, ".state.json.tmp-123")); err == nil {
		t.Errorf("the stale temporary file is still there")
	}
	os.WriteFile(path, []byte(`{"format": 1, "versions": [`), 0o600)
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "does not decode") {
		t.Fatalf("a broken file: %v", err)
	}
}

// diffByKey is Diff's definition for one list kind, by key alone: every
// resource of next that old lacks or holds otherwise, in next's order,
// then every one next lacks, in old's order.
func diffByKey(kind string, was, is []any) []Change {
	key := KeyField(kind)
	var out []Change
	before := map[string]any{}
	for _, it := range items(was, key) {
		before[it.id] = it.v
	}
	seen := map[string]bool{}
	for _, it := range items(is, key) {
		seen[it.id] = true
		if b, ok := before[it.id]; !ok || !reflect.DeepEqual(b, it.v) {
			out = append(out, Change{Kind: kind, ID: it.id, Before: b, After: it.v})
		}
	}
	for _, it := range items(was, key) {
		if !seen[it.id] {
			out = append(out, Change{Kind: kind, ID: it.id, Before: it.v})
		}
	}
	return out
}

// Diff, which walks the common head and tail of two lists by identity and
// place, finds what the definition by key finds, in its order, over random
// edits of a shared list: resources replaced, replaced by equal copies,
// added anywhere, deleted, moved, and items without a key.
func TestDiffMatchesDiffByKey(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	route := func(id string, path int) map[string]any {
		return map[string]any{"id": id, "path": fmt.Sprint("/", path)}
	}
	for step := 0; step < 3000; step++ {
		n := rng.Intn(12)
		was := make([]any, n)
		for i := range was {
			was[i] = route(fmt.Sprint("r", i), i)
		}
		if n > 0 && rng.Intn(8) == 0 {
			was[rng.Intn(n)] = map[string]any{"path": "/nokey"}
		}
		is := slices.Clone(was) // shared resources, as Copy leaves them
		for e := rng.Intn(4); e > 0; e-- {
			at := func() int { return rng.Intn(len(is) + 1) }
			switch rng.Intn(6) {
			case 0: // replaced in place
				if len(is) > 0 {
					i := rng.Intn(len(is))
					if id, ok := keyOf(is[i], "id"); ok {
						is[i] = route(id, rng.Intn(3))
					}
				}
			case 1: // an equal copy
				if len(is) > 0 {
					i := rng.Intn(len(is))
					is[i] = Clone(Doc{"v": is[i]})["v"]
				}
			case 2: // added
				is = slices.Insert(is, at(), any(route(fmt.Sprint("new", step, e), e)))
			case 3: // deleted
				if len(is) > 0 {
					i := rng.Intn(len(is))
					is = slices.Delete(is, i, i+1)
				}
			case 4: // moved
				if len(is) > 1 {
					i := rng.Intn(len(is))
					v := is[i]
					is = slices.Delete(is, i, i+1)
					is = slices.Insert(is, rng.Intn(len(is)+1), v)
				}
			case 5: // an item without a key
				is = slices.Insert(is, at(), any(map[string]any{"path": "/x"}))
			}
		}
		got := Diff(Doc{Routes: was}, Doc{Routes: is})
		want := diffByKey(Routes, was, is)
		if len(got) != len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want)) {
			t.Fatalf("step %d: Diff of\n%v\nto\n%v\n= %+v\nwant %+v", step, was, is, got, want)
		}
	}
}

// BenchmarkDiffOneRouteAt30k is the diff of an API write at 30,000
// routes: the running document against its Copy with one route replaced.
func BenchmarkDiffOneRouteAt30k(b *testing.B) {
	routes := make([]any, 30000)
	for i := range routes {
		routes[i] = map[string]any{"id": fmt.Sprint("r", i), "path": fmt.Sprint("/r", i), "upstream": "backend"}
	}
	cur := Doc{Routes: routes, "listen": "127.0.0.1:8080"}
	next := Copy(cur)
	Set(next, Routes, "r7", map[string]any{"id": "r7", "path": "/moved", "upstream": "backend"})
	b.ReportAllocs()
	for b.Loop() {
		if len(Diff(cur, next)) != 1 {
			b.Fatal("want one change")
		}
	}
}

// Encode writes what json.Marshal writes, and encodes each version once:
// a version changed after its first Encode (which the Control never does)
// is written as it was.
func TestEncodeIsJSONAndEncodesEachVersionOnce(t *testing.T) {
	d := mustParse(t, file)
	for _, st := range []*State{
		{},
		{Overlay: Delta(Doc{}, d)},
		{Overlay: Delta(d, Doc{}), Versions: []Version{}},
	} {
		st.Add(Version{Number: 1, Source: SourceFile, Action: "start", Changes: []Change{}})
		st.Add(Version{Number: 2, Source: SourceAPI, Token: "deploy", Action: "PUT <x> & y", Changes: Diff(Doc{}, d)})
		// What json.Marshal writes of the versions before Encode compacts
		// them (a copy of the list keeps their changes).
		ref := State{Format: stateFormat, Overlay: st.Overlay, Versions: st.Versions}
		want, err := json.Marshal(&ref)
		if err != nil {
			t.Fatal(err)
		}
		for round := 0; round < 2; round++ {
			got, err := Encode(st) // sets st.Format
			if err != nil || string(got) != string(want) {
				t.Fatalf("Encode\n%s\nwant\n%s (%v)", got, want, err)
			}
			if back, err := Decode(got); err != nil || back.Latest() != 2 || len(Diff(Merge(Doc{}, back.Overlay), Merge(Doc{}, st.Overlay))) != 0 {
				t.Fatalf("Decode: %v %+v", err, back)
			}
		}
		once, _ := Encode(st)
		st.Versions[1].Action = "changed after it was recorded"
		if again, _ := Encode(st); string(again) != string(once) {
			t.Fatalf("version 2 was encoded again:\n%s", again)
		}
	}
	if got, _ := Encode(&State{}); string(got) != `{"format":1,"overlay":{},"versions":null}` {
		t.Fatalf("the empty state: %s", got)
	}
}

// An encoded version is made compact by Compact: it drops its decoded changes, and
// ChangeList decodes them again, equal to what was recorded (numbers as
// the config decodes them); Summary words them as before, and At walks
// back through compact versions. A list read before Encode (an API
// snapshot) keeps its changes. Decode makes compact versions too.
func TestEncodedVersionsAreCompact(t *testing.T) {
	one := mustParse(t, "routes:\n  - {id: a, path: /a, upstream: u, retry: {attempts: 2}}\n")
	two := mustParse(t, "routes:\n  - {id: a, path: /b, upstream: u, retry: {attempts: 3}}\n  - {id: c, path: /c, upstream: u}\n")
	st := &State{}
	st.Add(Version{Number: 1, Source: SourceFile, Action: "start", Changes: Diff(Doc{}, one)})
	st.Add(Version{Number: 2, Source: SourceFile, Action: "SIGHUP", Changes: Diff(one, two)})
	held := st.Versions
	summary := Summarize(st.Versions[1].Changes)
	data, err := Encode(st)
	if err != nil {
		t.Fatal(err)
	}
	st.Compact()
	back, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*State{st, back} {
		for i := range s.Versions {
			v := &s.Versions[i]
			if v.Changes != nil {
				t.Fatalf("version %d keeps its decoded changes", v.Number)
			}
			got, err := v.ChangeList()
			if err != nil || !reflect.DeepEqual(got, held[i].Changes) {
				t.Fatalf("version %d: ChangeList %#v (%v), recorded %#v", v.Number, got, err, held[i].Changes)
			}
		}
		if got := s.Versions[1].Summary(); got != summary || summary != "routes added c, changed a" {
			t.Fatalf("summary %q, want %q", got, summary)
		}
		if d, err := s.At(two, 1); err != nil || !reflect.DeepEqual(d, one) {
			t.Fatalf("At 1: %v %v", d, err)
		}
	}
	if held[1].Changes == nil {
		t.Fatal("a list read before Encode lost its changes")
	}
}
