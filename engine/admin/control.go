// Control: every config change, from the file or the API, applied one at a
// time and recorded as a version.

package admin

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/engine/confstore"
)

// Engine is what Control changes the running config through. Both methods
// are engine.Server's, wrapped by the command; both are safe for
// concurrent use.
type Engine interface {
	// Prepare compiles cfg and returns what applies it, or why it does not
	// compile. Nothing runs it until apply is called.
	Prepare(cfg *config.Config) (apply func() error, err error)
	// Reload compiles and applies a config read from the file, refusing
	// what a reload refuses (engine.Server.ReloadWith); it returns what
	// changed.
	Reload(cfg *config.Config, allowEmpty bool) (string, error)
}

// ControlOptions are how Control reads the file and keeps its state.
type ControlOptions struct {
	// Read returns the config file's bytes, re-read on every reload, or a
	// ConfigError. Reload parses them, and refuses a file that does not
	// load on its own, as a restart would, with Parse's errors. With no
	// file (the embedded config) Reload is nil.
	Read func() ([]byte, error)
	// Parse turns a document into a Config, applying what the command
	// line overrides (-loops, -pin), as config.Parse would.
	Parse func(data []byte) (*config.Config, error)
	// ParseWithRoutes, when set, is Parse of data with routes added,
	// each a config.PlainRoute, as config.ParseWithRoutes parses them
	// (with the same overrides as Parse): a splice of many changed routes
	// hands it the plain ones as they are instead of writing them into
	// the document for the YAML decoder.
	ParseWithRoutes func(data []byte, routes []map[string]any) (*config.Config, error)
	// StatePath is admin.state: the state file, "" for none. The file
	// base (base.yaml beside it) is the config file as the last version
	// read it.
	StatePath string
	// Audit is told of every applied API write and rollback (see Bind).
	Audit func(AuditEntry)
	// Now is the clock of version times; nil is time.Now.
	Now func() time.Time
	// CheckOnly writes nothing: loopgate -check reads the state only.
	CheckOnly bool
	// Log is told of a state file write that failed after a file reload
	// applied (Reload saves the state once the new config serves, see
	// there); nil logs nothing.
	Log func(level, msg string)
}

// AuditEntry is one applied write, for the audit line.
type AuditEntry struct {
	Token    string // the admin token's name; "" when the port has none
	Action   string // "PUT /routes/api"
	From, To uint64 // the versions before and after
	Changes  string // "routes changed api"
}

// Control owns the config the gateway runs: the file's document, the
// API's overlay over it, and the versions. Its methods are safe for
// concurrent use; changes run one at a time, under mu.
type Control struct {
	opts ControlOptions
	eng  Engine

	// cluster, when set, holds the overlay and the versions in Redis
	// instead of the state file (see cluster.go).
	cluster *Cluster

	mu      sync.Mutex
	reparse confstore.Reparser // the config file's reads; guarded by mu
	fileCfg *config.Config     // the config file alone, parsed (see loadFile); guarded by mu
	st      *confstore.State   // guarded by mu
	file    confstore.Doc      // the config file's document as last read; guarded by mu
	cur     confstore.Doc      // the running document, file with overlay; guarded by mu
	cfg     *config.Config     // cur parsed; guarded by mu

	saves saves
}

// saves orders the writes of the state file: each save is numbered when
// the state it writes is made (under Control.mu), and a save older than
// the one on disk writes nothing, so the save a file reload runs after
// it returns never replaces a later write's state.
type saves struct {
	next    uint64         // the last number handed out; guarded by Control.mu
	mu      sync.Mutex     // held while a save writes the files
	written uint64         // the newest save whose state is on disk; guarded by mu
	based   uint64         // the newest save whose file base is on disk; guarded by mu
	pending sync.WaitGroup // the saves running after their reload
}

// Errors of a write, each answered with its status by the API.
var (
	errNoState = errors.New("the API cannot write without admin.state (or admin.cluster): " +
		"its changes would be lost on the next restart; set admin.state to a file path")
	errNotFound = errors.New("no such resource")
)

// staleError is a write whose If-Match names a version that is no longer
// the latest.
type staleError struct{ want, have uint64 }

func (e *staleError) Error() string {
	return fmt.Sprintf("version %d is not the latest (%d is): read the resource again and retry", e.want, e.have)
}

// invalidError is a write the config refuses, with the config's message.
type invalidError struct{ err error }

func (e *invalidError) Error() string { return e.err.Error() }

// NewControl loads the state (admin.state) and the config file, lays the
// overlay over the file, and returns the Control and the config to start
// with. A new version is recorded when that config is not the latest
// version's (the file changed while the gateway was down, or there is no
// state yet).
func NewControl(opts ControlOptions, fileData []byte) (*Control, *config.Config, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Control{opts: opts}
	st := &confstore.State{}
	if opts.StatePath != "" {
		var err error
		if st, err = confstore.Load(opts.StatePath); err != nil {
			return nil, nil, err
		}
	}
	file, err := c.reparse.Parse(fileData)
	if err != nil {
		return nil, nil, err
	}
	cur := confstore.Merge(file, st.Overlay)
	cfg, err := c.parseDoc(cur)
	if err != nil {
		if st.Overlay.Empty() {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("the config file with the admin API's changes from %s does not load (%v); "+
			"fix the file, or remove %s to start from the file alone (the API's changes and the versions are lost)",
			opts.StatePath, err, opts.StatePath)
	}
	c.st, c.file, c.cur, c.cfg = st, file, cur, cfg
	if st.Overlay.Empty() {
		c.fileCfg = cfg
	}
	prev := cur
	if base, err := os.ReadFile(c.basePath()); err == nil && st.Latest() > 0 {
		if d, err := confstore.Parse(base); err == nil {
			prev = confstore.Merge(d, st.Overlay)
		}
	}
	if changes := confstore.Diff(prev, cur); len(changes) > 0 || st.Latest() == 0 {
		if st.Latest() == 0 {
			changes = nil // the first version has nothing before it
		}
		c.record(confstore.SourceFile, "", "start", changes)
		if err := c.save(true, fileData); err != nil {
			return nil, nil, err
		}
	}
	return c, cfg, nil
}

// basePath is where the config file is kept as the last version read it,
// beside the state file: at start, the diff of a file changed while the
// gateway was down is taken against it.
func (c *Control) basePath() string {
	if c.opts.StatePath == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(c.opts.StatePath), filepath.Base(c.opts.StatePath)+".base.yaml")
}

// parseDoc is the config of d, as the config file would give it. When
// every route of d is a config.PlainRoute, they are handed to
// ParseWithRoutes as they are, not written out for the YAML decoder (at
// 30,000 routes, most of a start or a -check); anything that refuses is
// parsed the whole way, for Parse's error.
func (c *Control) parseDoc(d confstore.Doc) (*config.Config, error) {
	if c.opts.ParseWithRoutes != nil {
		if list, _ := d[confstore.Routes].([]any); len(list) > 0 {
			plain := make([]map[string]any, len(list))
			for i, it := range list {
				if plain[i], _ = it.(map[string]any); !config.PlainRoute(plain[i]) {
					plain = nil
					break
				}
			}
			if plain != nil {
				rest := confstore.Copy(d)
				delete(rest, confstore.Routes)
				if data, err := confstore.Marshal(rest); err == nil {
					if cfg, err := c.opts.ParseWithRoutes(data, plain); err == nil {
						return cfg, nil
					}
				}
			}
		}
	}
	return c.parseWhole(d)
}

// parseWhole is parseDoc by Parse alone: d written out whole for it.
func (c *Control) parseWhole(d confstore.Doc) (*config.Config, error) {
	data, err := confstore.Marshal(d)
	if err != nil {
		return nil, err
	}
	return c.opts.Parse(data)
}

// parseChange is parseDoc(d), given diff, what d changes from c.cur (nil
// when unknown). When only routes changed, it parses the changed routes
// alone, in d with every other route left out, and splices them into the
// running config (config.WithRoutes): at 30,000 routes that is a
// millisecond or so where parsing d whole takes most of a second. Anything
// the splice does not vouch for is parsed whole, so a document the config
// refuses gets the whole parse's error, with its paths.
func (c *Control) parseChange(d confstore.Doc, diff []confstore.Change) (*config.Config, error) {
	if cfg := c.spliceRoutes(d, diff); cfg != nil {
		return cfg, nil
	}
	return c.parseDoc(d)
}

// spliceRoutes is parseChange's quick way, or nil when it does not apply.
func (c *Control) spliceRoutes(d confstore.Doc, diff []confstore.Change) *config.Config {
	return c.spliceOnto(c.cfg, c.cur, d, diff)
}

// spliceOnto is the config of d, given diff from baseDoc, base's
// document, when only routes changed (or only their order): base with the
// changed routes, parsed alone, spliced in. nil when that does not apply,
// or the changed routes do not parse.
func (c *Control) spliceOnto(base *config.Config, baseDoc, d confstore.Doc, diff []confstore.Change) *config.Config {
	if base == nil {
		return nil
	}
	changed := make(map[string]bool, len(diff))
	for _, ch := range diff {
		if ch.Kind != confstore.Routes {
			return nil
		}
		changed[ch.ID] = true
	}
	list, _ := d[confstore.Routes].([]any)
	// base's routes are baseDoc's, in its order (base was parsed or
	// spliced from it), so a route d shares with baseDoc in the same place
	// is base's route there, unchanged. The head and tail d shares so are
	// handed to the splice as they are (config.WithRoutesAround): one
	// walk, from either end to the first route that differs, with no
	// lookup for each of 30,000 routes; the ids are read only between.
	was, _ := baseDoc[confstore.Routes].([]any)
	if len(was) != len(base.Routes) {
		was = nil
	}
	head := 0
	for head < len(list) && head < len(was) && confstore.Identical(list[head], was[head]) {
		head++
	}
	tail := 0
	for tail < len(list)-head && tail < len(was)-head && confstore.Identical(list[len(list)-1-tail], was[len(was)-1-tail]) {
		tail++
	}
	mid := list[head : len(list)-tail]
	idList := idLists.Get().(*[]string)
	defer func() { clear(*idList); idLists.Put(idList) }() // the splice keeps none of it
	ids := slices.Grow((*idList)[:0], len(mid))[:len(mid)]
	*idList = ids
	var only []any
	for k, it := range mid {
		var id string
		if i := head + k; i < len(was) && confstore.Identical(it, was[i]) {
			ids[k] = base.Routes[i].ID // unchanged, in its place
			continue
		}
		m, _ := it.(map[string]any)
		if id, _ = m["id"].(string); id == "" {
			return nil
		}
		ids[k] = id
		if changed[id] {
			only = append(only, it)
		}
	}
	if len(only) > len(list)/2 {
		// Most routes changed (a file rewritten but for a route or two):
		// parsed all, they are the result as they are (config.WithRoutes),
		// where splicing the few kept ones among them copied every route.
		only, head, tail, ids = list, 0, 0, ids[:0]
		for _, it := range list {
			m, _ := it.(map[string]any)
			id, _ := m["id"].(string)
			if id == "" {
				return nil
			}
			ids = append(ids, id)
		}
		*idList = ids
	}
	mini := maps.Clone(d) // the other routes left out; the rest shared, for Marshal to read
	var part *config.Config
	var err error
	if c.opts.ParseWithRoutes != nil {
		var rest []any
		var plain []map[string]any
		for _, it := range only {
			if m, _ := it.(map[string]any); config.PlainRoute(m) {
				plain = append(plain, m)
			} else {
				rest = append(rest, it)
			}
		}
		mini[confstore.Routes] = rest
		var data []byte
		if data, err = confstore.Marshal(mini); err == nil {
			part, err = c.opts.ParseWithRoutes(data, plain)
		}
	} else {
		mini[confstore.Routes] = only
		part, err = c.parseDoc(mini)
	}
	if err != nil {
		return nil
	}
	cfg, err := base.WithRoutesAround(head, ids, tail, part)
	if err != nil {
		return nil
	}
	return cfg
}

// idLists are the id lists of spliceOnto, reused: between the head and
// the tail a write keeps, a list can be every route's id (a reload that
// re-read them all, two writes far apart), 480 KB at 30,000 routes. A
// list is at most the config's routes; the collector empties the pool.
var idLists = sync.Pool{New: func() any { return new([]string) }}

// record appends a version. c.mu must be held (or c not yet shared).
func (c *Control) record(source, token, action string, changes []confstore.Change) confstore.Version {
	v := confstore.Version{Number: c.st.Latest() + 1, Time: c.opts.Now().UTC().Format(time.RFC3339Nano),
		Source: source, Token: token, Action: action, Changes: changes}
	if changes == nil {
		v.Changes = []confstore.Change{}
	}
	c.st.Add(v)
	return v
}

// save writes the state file, and the file base first when withBase.
// Without a state file it does nothing. c.mu must be held.
func (c *Control) save(withBase bool, fileData []byte) error {
	if c.opts.StatePath == "" || c.opts.CheckOnly {
		return nil
	}
	c.saves.next++
	if err := c.write(c.saves.next, c.st.Snapshot(), withBase, fileData); err != nil {
		return err
	}
	c.st.Compact() // the versions it encoded keep only their JSON
	return nil
}

// saveLater is save on another goroutine: it returns at once, and the
// state and base it writes are the ones of now. Flush waits for it. c.mu
// must be held.
func (c *Control) saveLater(withBase bool, fileData []byte) {
	if c.opts.StatePath == "" || c.opts.CheckOnly {
		return
	}
	c.saves.next++
	n, st := c.saves.next, c.st.Snapshot()
	c.saves.pending.Add(1)
	go func() {
		defer c.saves.pending.Done()
		if err := c.write(n, st, withBase, fileData); err != nil {
			if c.opts.Log != nil {
				c.opts.Log("error", fmt.Sprintf("version %d applied, but %v; the next write or reload saves it again", st.Latest(), err))
			}
			return
		}
		// The versions it encoded keep only their JSON (Flush's callers
		// do not hold c.mu, so waiting for it here cannot deadlock).
		c.mu.Lock()
		c.st.Compact()
		c.mu.Unlock()
	}()
}

// write is save number n of st: its base unless a later base is on disk,
// and its state unless a later state is. A file reload's save that an API
// write overtook still writes the base only it carries, or the next start
// would find the file changed since the base and record it again.
func (c *Control) write(n uint64, st *confstore.State, withBase bool, fileData []byte) error {
	c.saves.mu.Lock()
	defer c.saves.mu.Unlock()
	if withBase && n > c.saves.based {
		if err := confstore.WriteAtomic(c.basePath(), fileData); err != nil {
			return err
		}
		c.saves.based = n
	}
	if n <= c.saves.written {
		return nil
	}
	if err := confstore.Save(c.opts.StatePath, st); err != nil {
		return err
	}
	c.saves.written = n
	return nil
}

// Flush waits until the state file holds every version applied so far:
// a file reload's save runs after the reload returns. Call it before the
// process exits, and never with c.mu held (the save takes it to compact
// the versions it wrote). Safe for concurrent use.
func (c *Control) Flush() { c.saves.pending.Wait() }

// Reload re-reads the config file, lays the overlay over it and applies
// the result as a reload does; a result that differs from the running
// config becomes a version (source file). It serves the Reloader.
func (c *Control) Reload(trigger string, o ReloadOptions) (string, error) {
	if c.opts.Read == nil {
		return "", &ConfigError{Err: errors.New("no -config file to re-read: the embedded config cannot change")}
	}
	data, err := c.opts.Read()
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	file, fileCfg, err := c.loadFile(data)
	if err != nil {
		return "", &ConfigError{Err: err}
	}
	next := confstore.Merge(file, c.st.Overlay)
	diff := confstore.Diff(c.cur, next)
	cfg := fileCfg // with no overlay, the file is the running document
	if !c.st.Overlay.Empty() {
		if cfg, err = c.parseReload(file, fileCfg, next, diff); err != nil {
			return "", &ConfigError{Err: err}
		}
	}
	changes, err := c.eng.Reload(cfg, o.AllowEmpty)
	if err != nil {
		return "", err
	}
	c.file, c.fileCfg, c.cur, c.cfg = file, fileCfg, next, cfg
	if cfg != fileCfg {
		c.fileCfg = nil // not kept beside the running config: see fileConfig
	}
	// The engine counts its own applies ("config v4: ..."); the line names
	// the version the admin API lists instead.
	if _, rest, ok := strings.Cut(changes, ": "); ok && strings.HasPrefix(changes, "config v") {
		changes = rest
	}
	// In cluster mode the versions are the cluster's: a reload of this
	// node's file changes this node only, and is none of them.
	if len(diff) == 0 || c.cluster != nil {
		return fmt.Sprintf("still version %d: %s", c.st.Latest(), changes), nil
	}
	v := c.record(confstore.SourceFile, "", trigger, diff)
	// Saved once the version serves, off the reload's time: after 30,000
	// changed routes, tens of milliseconds of encoding and writing. A
	// crash before the write lands loses no config: the next start reads
	// the file, finds it differs from the base still on disk, and records
	// it as a version again. A later write's save waits for this one.
	c.saveLater(true, data)
	return fmt.Sprintf("version %d: %s", v.Number, changes), nil
}

// Bind sets the engine the Control applies configs through, and where its
// audit lines go: the server exists only once the start config
// (NewControl's) made it. Call it before any change.
func (c *Control) Bind(e Engine, audit func(AuditEntry)) { c.eng, c.opts.Audit = e, audit }

// writer is who asks for a write, and what.
type writer struct {
	token   string // the admin token's name
	action  string // "PUT /routes/api"
	ifMatch uint64 // 0: no If-Match
}

// change edits a copy of the running document with edit and, when the
// result is a valid config different from the running one, commits and
// applies it as a new version. A result equal to the running config is
// no version: the latest is returned, unchanged.
func (c *Control) change(w writer, edit func(d confstore.Doc) error) (confstore.Version, error) {
	if c.cluster != nil {
		return c.cluster.change(w, edit)
	}
	if c.opts.StatePath == "" {
		return confstore.Version{}, errNoState
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.ifMatch != 0 && w.ifMatch != c.st.Latest() {
		return confstore.Version{}, &staleError{w.ifMatch, c.st.Latest()}
	}
	next := confstore.Copy(c.cur)
	if err := edit(next); err != nil {
		return confstore.Version{}, err
	}
	diff := confstore.Diff(c.cur, next)
	if len(diff) == 0 {
		return unchanged(c.st), nil
	}
	cfg, apply, err := c.prepare(next, diff)
	if err != nil {
		return confstore.Version{}, err
	}
	// The state is saved before the config applies: a crash between the
	// two restarts on the new version, never loses an answered write.
	prev := *c.st
	prev.Versions = slices.Clone(c.st.Versions)
	c.st.Overlay = confstore.Delta(c.file, next)
	from := c.st.Latest()
	v := c.record(confstore.SourceAPI, w.token, w.action, diff)
	if err := c.save(false, nil); err != nil {
		*c.st = prev
		return confstore.Version{}, err
	}
	if err := apply(); err != nil { // Prepare checked everything Apply does
		return confstore.Version{}, err
	}
	c.cur, c.cfg = next, cfg
	c.fileCfg = nil // not kept beside the running config: see fileConfig
	c.audit(w, from, v)
	return v, nil
}

// unchanged is the answer to a write that changes nothing: the latest
// version, with no changes of its own.
func unchanged(st *confstore.State) confstore.Version {
	return confstore.Version{Number: st.Latest()}
}

// prepare parses and compiles d, refusing what cannot change live. diff
// is confstore.Diff(c.cur, d) when the caller has it, nil otherwise. c.mu
// must be held.
func (c *Control) prepare(d confstore.Doc, diff []confstore.Change) (*config.Config, func() error, error) {
	cfg, err := c.parseChange(d, diff)
	if err != nil {
		return nil, nil, &invalidError{err}
	}
	if fixed := config.FixedChanges(c.cfg, cfg); len(fixed) > 0 {
		return nil, nil, &invalidError{fmt.Errorf("%s cannot change while running (restart instead)", strings.Join(fixed, ", "))}
	}
	apply, err := c.eng.Prepare(cfg)
	if err != nil {
		return nil, nil, &invalidError{err}
	}
	return cfg, apply, nil
}

func (c *Control) audit(w writer, from uint64, v confstore.Version) {
	if c.opts.Audit != nil {
		c.opts.Audit(AuditEntry{Token: w.token, Action: w.action, From: from, To: v.Number, Changes: Summary(v.Changes)})
	}
}

// Summary words changes as a reload line does: "routes added a, changed b;
// upstreams removed c".
func Summary(changes []confstore.Change) string { return confstore.Summarize(changes) }

// rollback makes version n's config the running one again, as a new
// version.
func (c *Control) rollback(w writer, n uint64) (confstore.Version, error) {
	var target confstore.Doc
	c.mu.Lock()
	t, err := c.st.At(c.cur, n)
	c.mu.Unlock()
	if err != nil {
		return confstore.Version{}, err
	}
	target = t
	return c.change(w, func(d confstore.Doc) error {
		for k := range d {
			delete(d, k)
		}
		for k, v := range target {
			d[k] = v
		}
		return nil
	})
}

// reset drops the overlay: the config file alone runs, as a new version.
func (c *Control) reset(w writer) (confstore.Version, error) {
	c.mu.Lock()
	file := confstore.Clone(c.file)
	c.mu.Unlock()
	return c.change(w, func(d confstore.Doc) error {
		for k := range d {
			delete(d, k)
		}
		for k, v := range file {
			d[k] = v
		}
		return nil
	})
}

// snapshot is a consistent read of the running config and the state.
type snapshot struct {
	cur      confstore.Doc
	cfg      *config.Config
	latest   uint64
	versions []confstore.Version
}

func (c *Control) read() snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return snapshot{cur: c.cur, cfg: c.cfg, latest: c.st.Latest(), versions: c.st.Versions}
}

// at is the document of version n.
func (c *Control) at(n uint64) (confstore.Doc, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.At(c.cur, n)
}
