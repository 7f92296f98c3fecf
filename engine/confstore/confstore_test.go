package confstore

import (
	"os"
	"path/filepath"
	"reflect"
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
