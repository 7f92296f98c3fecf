package admin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/engine/confstore"
)

// A file reload's version reaches the state file after the reload
// returns (Flush waits for it), and a save never replaces the state of a
// later one: an API write right after a reload keeps both versions.
func TestReloadSavesAfterAndInOrder(t *testing.T) {
	c := scaleControl(t, 50)
	data := []byte(strings.Replace(string(scaleConfig(50)), "path: /r5,", "path: /r5x,", 1))
	c.opts.Read = func() ([]byte, error) { return data, nil }
	if _, err := c.Reload("test", ReloadOptions{}); err != nil {
		t.Fatal(err)
	}
	moveR7(t, c, 1) // an API write, saved before it applies
	c.Flush()
	st, err := confstore.Load(c.opts.StatePath)
	if err != nil {
		t.Fatal(err)
	}
	if st.Latest() != 3 || st.Find(2) == nil || st.Find(2).Source != confstore.SourceFile {
		t.Fatalf("the state file holds versions up to %d (%+v); want the reload's 2 and the write's 3", st.Latest(), st.Versions)
	}

	// An older save after a newer one writes nothing.
	c.mu.Lock()
	newer, older := c.st.Snapshot(), c.st.Snapshot()
	older.Versions = older.Versions[:1]
	c.saves.next += 2
	n := c.saves.next
	c.mu.Unlock()
	if err := c.write(n, newer, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.write(n-1, older, false, nil); err != nil {
		t.Fatal(err)
	}
	if st, err := confstore.Load(c.opts.StatePath); err != nil || st.Latest() != 3 {
		t.Fatalf("after an older save: latest %d (%v); want 3", st.Latest(), err)
	}
	if base, err := filepath.Glob(c.basePath()); err != nil || len(base) != 1 {
		t.Fatalf("the file base: %v %v", base, err)
	}

	// A file reload's save overtaken by an API write's still writes the
	// base only it carries (its state is the older one, and is not).
	c.mu.Lock()
	c.saves.next += 2
	n = c.saves.next
	c.mu.Unlock()
	if err := c.write(n, newer, false, nil); err != nil {
		t.Fatal(err)
	}
	edited := append([]byte("# edited\n"), data...)
	if err := c.write(n-1, older, true, edited); err != nil {
		t.Fatal(err)
	}
	if base, err := os.ReadFile(c.basePath()); err != nil || string(base) != string(edited) {
		t.Fatalf("the overtaken reload's base was not written (%v): the next start would record the file again", err)
	}
	if st, err := confstore.Load(c.opts.StatePath); err != nil || st.Latest() != 3 {
		t.Fatalf("after an overtaken save: latest %d (%v); want 3", st.Latest(), err)
	}
}
