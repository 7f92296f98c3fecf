// A file reload's quick way (the changed routes spliced, the file checked
// alone by a splice too) against the whole parse, over random edits of the
// file's text and of the API's overlay.

package admin

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/engine/confstore"
)

// recordingEngine applies nothing and keeps the config each reload
// handed it.
type recordingEngine struct{ last *config.Config }

func (e *recordingEngine) Prepare(cfg *config.Config) (func() error, error) {
	return func() error { e.last = cfg; return nil }, nil
}

func (e *recordingEngine) Reload(cfg *config.Config, _ bool) (string, error) {
	e.last = cfg
	return "config v2: ok", nil
}

func TestFileReloadMatchesWholeParse(t *testing.T) {
	for _, mode := range parseModes {
		t.Run(mode.name, func(t *testing.T) { testFileReloadMatchesWholeParse(t, mode.opts) })
	}
}

func testFileReloadMatchesWholeParse(t *testing.T, opts ControlOptions) {
	rng := rand.New(rand.NewSource(3))
	const n = 30
	lines := map[string]string{}
	seq := 0
	line := func(id string) string {
		seq++
		switch rng.Intn(60) {
		case 0:
			return fmt.Sprintf("  - {id: %s, path: /q%d, upstream: nosuch}\n", id, seq)
		case 1: // maybe another route's path
			return fmt.Sprintf("  - {id: %s, path: /r%d, upstream: a}\n", id, rng.Intn(n))
		case 3:
			return fmt.Sprintf("  - {id: %s, path: /q%d, upstream: a, limits: {max_body_bytes: 64}}\n", id, seq)
		case 4, 5:
			return fmt.Sprintf("  - id: %s\n    # a comment\n    path: /q%d\n\n    upstream: b\n", id, seq)
		default:
			return fmt.Sprintf("  - {id: %s, path: /q%d, upstream: a}\n", id, seq)
		}
	}
	var ids []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("r%d", i)
		ids, lines[id] = append(ids, id), fmt.Sprintf("  - {id: %s, path: /r%d, upstream: a}\n", id, i)
	}
	head := spliceBase
	text := func() []byte {
		var b strings.Builder
		b.WriteString(head)
		for _, id := range ids {
			b.WriteString(lines[id])
		}
		return []byte(b.String())
	}
	var data []byte
	opts.StatePath = filepath.Join(t.TempDir(), "state.json")
	opts.Read = func() ([]byte, error) { return data, nil }
	c, _, err := NewControl(opts, text())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Flush) // a reload's save may still write into TempDir
	eng := &recordingEngine{}
	c.Bind(eng, nil)
	applied, refused, overlaid := 0, 0, 0
	for step := 0; step < 300; step++ {
		switch k := rng.Intn(12); {
		case k < 5:
			id := ids[rng.Intn(len(ids))]
			lines[id] = line(id)
		case k < 6:
			id := fmt.Sprintf("n%d", step)
			ids, lines[id] = append(ids, id), line(id)
		case k < 7 && len(ids) > 1:
			j := rng.Intn(len(ids))
			ids = append(ids[:j:j], ids[j+1:]...)
		case k < 8: // a setting: parsed whole
			head = strings.Replace(spliceBase, "connect_timeout: 2s", fmt.Sprintf("connect_timeout: %ds", 1+rng.Intn(3)), 1)
		case k < 10: // an API write of a route: the overlay
			id := ids[rng.Intn(len(ids))]
			seq++
			path := fmt.Sprintf("/q%d", seq)
			if rng.Intn(15) == 0 { // maybe a path the file has
				path = fmt.Sprintf("/r%d", rng.Intn(n))
			}
			body := map[string]any{"id": id, "path": path, "upstream": "b"}
			if _, err := c.change(writer{action: "PUT"}, func(d confstore.Doc) error {
				confstore.Set(d, confstore.Routes, id, body)
				return nil
			}); err == nil {
				overlaid++
			}
			continue
		}
		data = text()
		c.mu.Lock()
		overlay := c.st.Overlay
		c.mu.Unlock()
		// What a reload must do: refuse a file that does not load alone,
		// with Parse's error; else run the file with the overlay, parsed
		// whole.
		_, fileErr := config.Parse(data)
		var want *config.Config
		var wantErr error
		if fileErr != nil {
			wantErr = fileErr
		} else {
			file, _ := confstore.Parse(data)
			want, wantErr = c.parseWhole(confstore.Merge(file, overlay))
		}
		_, err := c.Reload("test", ReloadOptions{})
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("step %d: reload: %v; want %v", step, err, wantErr)
		}
		if err != nil {
			refused++
			continue
		}
		applied++
		if !sameConfig(t, want, eng.last) {
			t.Fatalf("step %d: the reload's config differs from the whole parse's: %s", step, configDiff(want, eng.last))
		}
		// The file alone, as the next reload checks it against.
		if alone, _ := config.Parse(data); !reflect.DeepEqual(sortedIDs(alone), sortedIDs(c.fileConfig())) {
			t.Fatalf("step %d: the file's own config has routes %v, want %v", step, sortedIDs(c.fileConfig()), sortedIDs(alone))
		}
	}
	if applied < 80 || refused < 20 || overlaid < 20 {
		t.Fatalf("applied %d, refused %d reloads; %d API writes", applied, refused, overlaid)
	}
	t.Logf("applied %d, refused %d reloads; %d API writes", applied, refused, overlaid)
}

func sortedIDs(c *config.Config) []string {
	var ids []string
	for i := range c.Routes {
		ids = append(ids, c.Routes[i].ID+" "+c.Routes[i].Path)
	}
	sort.Strings(ids)
	return ids
}

// configDiff names what differs between two configs: the first route, or
// the settings.
func configDiff(a, b *config.Config) string {
	if len(a.Routes) != len(b.Routes) {
		return fmt.Sprintf("%d routes, want %d", len(b.Routes), len(a.Routes))
	}
	var x, y []string
	for i := range a.Routes {
		x, y = append(x, a.Routes[i].ID), append(y, b.Routes[i].ID)
	}
	if !reflect.DeepEqual(x, y) {
		return fmt.Sprintf("routes %v, want %v", y, x)
	}
	for i := range a.Routes {
		if !reflect.DeepEqual(a.Routes[i], b.Routes[i]) {
			return fmt.Sprintf("route %d: %+v, want %+v", i, b.Routes[i], a.Routes[i])
		}
	}
	sa, sb := *a, *b
	sa.Routes, sb.Routes = nil, nil
	return fmt.Sprintf("settings: %+v, want %+v", sb, sa)
}
