// A file reload at scale: the file checked alone and the running config
// rebuilt from the routes that changed, not from the whole file.

package admin

import (
	"errors"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/engine/confstore"
)

// errFileEmpty refuses a file that decodes to nothing, as config.Load
// does: the defaults with no routes would answer every request 404.
var errFileEmpty = errors.New("config: the file sets nothing (it is empty or holds only comments): it would serve " +
	"with no routes, every request a 404; refused")

// loadFile decodes the config file's bytes and checks that the file loads
// on its own, as the next restart will load it: its document, and its
// config. A file whose document differs from the last one read only in
// routes, or not at all, is checked by splicing its changed routes into
// the last one's config (spliceOnto), so a reload of 30,000 routes parses
// what changed, not the file. Anything the splice does not vouch for is
// parsed whole, for config.Parse's errors with the file's lines. c.mu must
// be held.
func (c *Control) loadFile(data []byte) (confstore.Doc, *config.Config, error) {
	file, err := c.reparse.Parse(data)
	if err != nil {
		_, perr := c.opts.Parse(data) // the config's message, with the line
		if perr == nil {
			perr = err
		}
		return nil, nil, perr
	}
	if len(file) == 0 {
		return nil, nil, errFileEmpty
	}
	if last := c.fileConfig(); last != nil {
		diff := confstore.Diff(c.file, file)
		if len(diff) == 0 && sameOrder(last, file) {
			return file, last, nil
		}
		if cfg := c.spliceOnto(last, c.file, file, diff); cfg != nil {
			return file, cfg, nil
		}
	}
	cfg, err := c.opts.Parse(data)
	if err != nil {
		return nil, nil, err
	}
	return file, cfg, nil
}

// fileConfig is the config of the file alone as the last read gave it:
// fileCfg, or, when it is not kept (it differs from the running config
// in the overlay's resources only, and keeping both cost 9 MB at 30,000
// routes from the first API write on), the running config with the
// file's own versions of the overlay's routes spliced back in (a few
// routes parsed, and the route array copied). nil when that does not
// apply (the overlay changes more than routes): loadFile then parses the
// file whole. c.mu must be held.
func (c *Control) fileConfig() *config.Config {
	if c.fileCfg == nil && c.cfg != nil && c.file != nil {
		c.fileCfg = c.spliceOnto(c.cfg, c.cur, c.file, confstore.Diff(c.cur, c.file))
	}
	return c.fileCfg
}

// parseReload is the config of next, the file with the overlay, given diff
// from the running document: the running config when nothing changed
// (Diff goes by id: routes only moved in the list are spliced, in their
// new order); else spliced as an API write is (parseChange), onto
// whichever of the running config and the file's is the fewer routes
// away. When most routes changed in the file, the file's config (just
// parsed) is only the overlay's routes away from next, which Merge made
// from it: splicing those few onto it parses nothing again, where
// splicing diff onto the running config parsed every changed route a
// second time (at 30,000 routes, 1.2 s of a reload that changed them
// all). The settings are not parsed again either way; the engine's reload
// still builds what they read from files again (engine.Server.ReloadWith).
func (c *Control) parseReload(file confstore.Doc, fileCfg *config.Config, next confstore.Doc, diff []confstore.Change) (*config.Config, error) {
	if len(diff) == 0 && c.cfg != nil && sameOrder(c.cfg, next) {
		return c.cfg, nil
	}
	if len(diff) > c.st.Overlay.Size() {
		if cfg := c.spliceOnto(fileCfg, file, next, confstore.Diff(file, next)); cfg != nil {
			return cfg, nil
		}
	}
	return c.parseChange(next, diff)
}

// sameOrder reports whether d lists its routes in cfg's order.
func sameOrder(cfg *config.Config, d confstore.Doc) bool {
	list, _ := d[confstore.Routes].([]any)
	if len(list) != len(cfg.Routes) {
		return false
	}
	for i, it := range list {
		if m, _ := it.(map[string]any); m == nil || m["id"] != cfg.Routes[i].ID {
			return false
		}
	}
	return true
}
