// The state: the overlay and the kept versions, and the file they live in.

package confstore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"gopkg.in/yaml.v3"
)

// Keep is how many versions a State holds; older ones are dropped.
const Keep = 50

// Sources of a version.
const (
	SourceFile    = "file"    // the config file, at start or on a reload
	SourceAPI     = "api"     // an admin API write on this node
	SourceCluster = "cluster" // a version another node wrote, taken from Redis
)

// Version is one applied config.
type Version struct {
	Number  uint64   `json:"number" yaml:"number"`
	Time    string   `json:"time" yaml:"time"` // RFC 3339, UTC
	Source  string   `json:"source" yaml:"source"`
	Token   string   `json:"token,omitempty" yaml:"token,omitempty"` // the admin token's name, for an API write
	Action  string   `json:"action" yaml:"action"`                   // "PUT /routes/api", "SIGHUP", "start", "rollback to 3"
	Changes []Change `json:"changes" yaml:"changes"`                 // against the version before; none for the first; nil once compact (ChangeList reads them then)

	// enc is the version as Encode writes it, from the first Encode of a
	// State holding it (copies of the Version share it). A version does
	// not change once recorded, and every write saves every kept version:
	// encoding them all again made each write after a reload that changed
	// 30,000 routes cost 100 ms and 20 MB more.
	//
	// Once encoded, the version can be compact (State.Compact): Changes is
	// dropped, and ChangeList decodes it from enc when asked (a diff, a
	// rollback). The changes of a reload that changed 30,000 routes hold
	// every old route's decoded value, about 15 MB, where their JSON is
	// 4.6 MB; with 50 versions kept they outweighed the running config.
	// summary is Summarize(Changes), kept for the version list.
	enc     *encoding
	summary string
}

// encoding is one version's bytes, made once by whichever goroutine
// saves a State holding it first (State.Snapshot); done is set once b is.
type encoding struct {
	once sync.Once
	b    []byte
	err  error
	done atomic.Bool
}

// compact reports whether v keeps its changes only encoded.
func (v *Version) compact() bool { return v.Changes == nil && v.enc != nil && v.enc.done.Load() }

// ChangeList returns v's changes: Changes, or for a compact version (see
// Version.enc) its changes decoded anew, values as a config document
// decodes them. Each call of a compact version decodes a fresh copy.
func (v *Version) ChangeList() ([]Change, error) {
	if !v.compact() {
		return v.Changes, nil
	}
	var full Version
	if err := yaml.Unmarshal(v.enc.b, &full); err != nil {
		return nil, fmt.Errorf("confstore: version %d does not decode: %v", v.Number, err)
	}
	if full.Changes == nil {
		full.Changes = []Change{}
	}
	return full.Changes, nil
}

// Summary words v's changes as Summarize does.
func (v *Version) Summary() string {
	if v.compact() {
		return v.summary
	}
	return Summarize(v.Changes)
}

// Summarize words changes as a reload line does: "routes added a, changed
// b; upstreams removed c".
func Summarize(changes []Change) string {
	var parts []string
	for _, kind := range []string{Routes, Upstreams, Settings} {
		byOp := map[string][]string{}
		for _, ch := range changes {
			if ch.Kind == kind {
				byOp[ch.Op()] = append(byOp[ch.Op()], ch.ID)
			}
		}
		var ops []string
		for _, op := range []string{"added", "removed", "changed"} {
			if ids := byOp[op]; len(ids) > 0 {
				ops = append(ops, op+" "+strings.Join(ids, ", "))
			}
		}
		if len(ops) > 0 {
			parts = append(parts, kind+" "+strings.Join(ops, ", "))
		}
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, "; ")
}

// Compact makes every version of s a save has encoded compact (see
// Version.enc). It replaces them in a copy of s.Versions: a reader
// holding the list as it was (an API snapshot, a save under way) keeps
// reading their Changes. Not safe for concurrent use with other changes
// of s.
func (s *State) Compact() {
	copied := false
	for i := range s.Versions {
		v := &s.Versions[i]
		if v.Changes == nil || v.enc == nil || !v.enc.done.Load() {
			continue
		}
		if !copied {
			s.Versions, copied = slices.Clone(s.Versions), true
			v = &s.Versions[i]
		}
		v.summary = Summarize(v.Changes)
		v.Changes = nil
	}
}

// State is what the admin API keeps across restarts.
type State struct {
	Format   int       `json:"format" yaml:"format"` // stateFormat
	Overlay  Overlay   `json:"overlay" yaml:"overlay"`
	Versions []Version `json:"versions" yaml:"versions"` // oldest first, at most Keep
}

const stateFormat = 1

// Latest is the number of the newest version, or 0 when there is none.
func (s *State) Latest() uint64 {
	if len(s.Versions) == 0 {
		return 0
	}
	return s.Versions[len(s.Versions)-1].Number
}

// Add appends v, dropping the oldest versions beyond Keep.
func (s *State) Add(v Version) {
	v.enc = &encoding{}
	s.Versions = append(s.Versions, v)
	if n := len(s.Versions) - Keep; n > 0 {
		s.Versions = append([]Version(nil), s.Versions[n:]...)
	}
}

// Snapshot is a copy of s that another goroutine may Save while s
// changes: the versions' list is its own, and the versions share their
// encodings with s's, so each is still encoded once. A State changes only
// by Add and by its Overlay being replaced, never edited in place.
func (s *State) Snapshot() *State {
	for i := range s.Versions {
		if s.Versions[i].enc == nil {
			s.Versions[i].enc = &encoding{}
		}
	}
	c := *s
	c.Versions = slices.Clone(s.Versions)
	return &c
}

// Find returns version n, or nil when it is not kept.
func (s *State) Find(n uint64) *Version {
	for i := range s.Versions {
		if s.Versions[i].Number == n {
			return &s.Versions[i]
		}
	}
	return nil
}

// ErrNotKept is At's and Find's callers' error for a version no longer,
// or never, kept.
var ErrNotKept = errors.New("confstore: version not kept")

// At returns the config of version n, given current, the config of the
// latest version: current with the changes of every later version undone.
func (s *State) At(current Doc, n uint64) (Doc, error) {
	if s.Find(n) == nil {
		return nil, ErrNotKept
	}
	d := current
	for i := len(s.Versions) - 1; i >= 0 && s.Versions[i].Number > n; i-- {
		changes, err := s.Versions[i].ChangeList()
		if err != nil {
			return nil, err
		}
		d = Undo(d, changes)
	}
	if d == nil {
		return Doc{}, nil
	}
	return Clone(d), nil
}

// Load reads the state file at path. A missing file is an empty state; a
// file that does not decode is an error, never silently an empty state.
func Load(path string) (*State, error) {
	// A crash in WriteAtomic leaves its temporary file; the state is the
	// old one then, and the file nothing.
	if stale, err := filepath.Glob(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"*.tmp-*")); err == nil {
		for _, f := range stale {
			os.Remove(f)
		}
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &State{Format: stateFormat}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("admin state: %w", err)
	}
	s, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("admin state: %s: %w", path, err)
	}
	return s, nil
}

// Encode is s as JSON, the form Save writes and Decode reads: the bytes
// json.Marshal(s) gives, each kept version encoded once (see
// Version.enc).
func Encode(s *State) ([]byte, error) {
	parts, err := encodeParts(s)
	if err != nil {
		return nil, err
	}
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	out := make([]byte, 0, size)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out, nil
}

// encodeParts is Encode in pieces, the kept versions' own bytes among
// them, so that Save writes them without joining them: after reloads that
// changed 30,000 routes each, the state is tens of megabytes, and a copy
// of it per save was garbage the size of the file.
func encodeParts(s *State) ([][]byte, error) {
	s.Format = stateFormat
	head := fmt.Appendf(nil, `{"format":%d,"overlay":`, s.Format)
	head, err := appendOverlay(head, &s.Overlay)
	if err != nil {
		return nil, err
	}
	head = append(head, `,"versions":`...)
	if s.Versions == nil {
		return [][]byte{append(head, "null}"...)}, nil
	}
	parts := make([][]byte, 0, 2*len(s.Versions)+2)
	parts = append(parts, append(head, '['))
	for i := range s.Versions {
		v := &s.Versions[i]
		if v.enc == nil {
			v.enc = &encoding{}
		}
		v.enc.once.Do(func() {
			// Made in a scratch buffer and kept as an exact copy: the
			// version keeps no spare room, and a large one allocates its
			// size once, not its growth.
			scratch := encodeScratch.Get().(*[]byte)
			b, err := appendVersion((*scratch)[:0], v)
			if err == nil {
				v.enc.b = slices.Clone(b)
			}
			v.enc.err = err
			v.enc.done.Store(err == nil)
			*scratch = b[:0]
			encodeScratch.Put(scratch)
		})
		if v.enc.err != nil {
			return nil, v.enc.err
		}
		if i > 0 {
			parts = append(parts, comma)
		}
		parts = append(parts, v.enc.b)
	}
	return append(parts, closing), nil
}

var comma, closing = []byte(","), []byte("]}")

// encodeScratch holds the buffers versions are encoded in.
var encodeScratch = sync.Pool{New: func() any { return new([]byte) }}

// Decode reads a state Encode wrote.
func Decode(data []byte) (*State, error) {
	// The state is JSON; yaml.v3 reads it into the same Go types the
	// config file's documents decode into (int, not float64), so a
	// resource read back compares equal to the same resource read from the
	// config file.
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("is empty")
	}
	var s State
	if err := yaml.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("does not decode: %v", err)
	}
	if s.Format != stateFormat {
		return nil, fmt.Errorf("format %d; this build reads format %d", s.Format, stateFormat)
	}
	// Each version keeps its own bytes as its encoding and is compact (see
	// Version.enc): a state of 50 large versions is not held decoded.
	var raw struct {
		Versions []json.RawMessage `json:"versions"`
	}
	if err := json.Unmarshal(data, &raw); err == nil && len(raw.Versions) == len(s.Versions) {
		for i := range s.Versions {
			v := &s.Versions[i]
			v.enc = &encoding{b: raw.Versions[i]}
			v.enc.once.Do(func() {})
			v.enc.done.Store(true)
			v.summary, v.Changes = Summarize(v.Changes), nil
		}
	}
	return &s, nil
}

// Save replaces the state file at path with s atomically: a crash at any
// moment leaves the old file or the new one, whole.
func Save(path string, s *State) error {
	parts, err := encodeParts(s)
	if err != nil {
		return fmt.Errorf("admin state: %w", err)
	}
	return writeAtomic(path, parts)
}

// WriteAtomic writes data to path through a temporary file in the same
// directory: write, fsync, rename over path, fsync the directory (so the
// rename itself is durable). The temporary file is removed on failure.
func WriteAtomic(path string, data []byte) error { return writeAtomic(path, [][]byte{data}) }

// writeAtomic is WriteAtomic of parts, written one after the other.
func writeAtomic(path string, parts [][]byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("admin state: %w", err)
	}
	name := tmp.Name()
	w := bufio.NewWriterSize(tmp, 64<<10) // the small parts in one write; a large one goes past it
	for _, p := range parts {
		if _, err = w.Write(p); err != nil {
			break
		}
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
		return fmt.Errorf("admin state: write %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("admin state: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("admin state: fsync %s: %w", dir, err)
	}
	return nil
}
