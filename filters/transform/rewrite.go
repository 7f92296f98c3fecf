// The rewrite filter: strip_prefix, regex and add_prefix on the upstream path.

package transform

import (
	"bytes"
	"errors"
	"regexp"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
)

type rewrite struct {
	filters.Base
	strip []byte         // normalised, no trailing '/'; removed when the path starts with it as whole segments
	re    *regexp.Regexp // nil: no regex step
	repl  []byte         // re's replacement, with $1-style groups
	add   []byte         // prepended; "" or starting with '/'
}

var _ filters.Filter = (*rewrite)(nil)

// slash is the path of an empty result. Read-only.
var slash = []byte("/")

// NewRewrite returns the "rewrite" filter, which sets x.Path (the query is
// kept by the engine) in three steps:
//
//  1. strip_prefix is removed when the path starts with it as whole
//     segments, matched as routes match: on the normalised path the engine
//     hands filters, ASCII case-insensitively. "/api" and "/api/" are the
//     same prefix; both turn "/API/users" into "/users" and "/api" into
//     "/", and neither touches "/apiv2". strip_prefix itself is normalised
//     the same way (codec.NormalizePath) when the config is validated;
//  2. regex, when set, has every match replaced (regexp.ReplaceAll with
//     $1-style groups);
//  3. add_prefix is prepended, with exactly one '/' at the join; an empty
//     remainder gives add_prefix itself.
//
// The result always starts with '/' (one is added if the steps left none;
// an empty path becomes "/") and is built in the exchange's arena, so it
// outlives the request buffer. Steps 1 and 3 do not allocate; step 2 does
// (regexp has no append-into API), so only routes with a regex pay for it.
// Without a regex, a path that is neither stripped nor prefixed leaves
// x.Path nil. cfg must be one Validate accepted: it checked every piece
// (bytes valid in a path, prefixes starting with '/') and compiled the
// regex and the strip prefix, and this builds from those. Safe for
// concurrent use.
func NewRewrite(order int, cfg *Rewrite) (filters.Filter, error) {
	switch {
	case cfg == nil:
		return nil, errors.New("transform: rewrite: no configuration")
	case !cfg.checked:
		return nil, errors.New("transform: rewrite: the config was not validated")
	}
	return &rewrite{
		Base:  filters.Base{FilterName: NameRewrite, FilterOrder: order},
		strip: cfg.strip,
		re:    cfg.re,
		repl:  []byte(cfg.Replacement),
		add:   []byte(cfg.AddPrefix),
	}, nil
}

// Request rewrites the path. It starts from x.Path when an earlier filter
// set one.
func (f *rewrite) Request(x *filters.Exchange) filters.Verdict {
	p := x.Path
	if p == nil {
		p = x.Req.Path
	}
	changed := false
	if rest, ok := cutSegments(p, f.strip); ok {
		p, changed = rest, true
	}
	if f.re != nil {
		p, changed = f.re.ReplaceAll(p, f.repl), true
	}
	if !changed && len(f.add) == 0 {
		return filters.Continue
	}
	x.Path = join(x, f.add, p)
	return filters.Continue
}

// cutSegments removes prefix from p when p starts with it as whole
// segments, comparing ASCII case-insensitively as the router does: p is
// prefix itself, or prefix followed by '/'. The rest is "" or starts with
// '/'. prefix has no trailing '/'; an empty prefix cuts nothing.
func cutSegments(p, prefix []byte) ([]byte, bool) {
	if len(prefix) == 0 {
		return p, false
	}
	// Segment by segment, as the router matches: ASCII case folded, and a
	// segment's ";params" ignored (so "/admin;x/y" loses "/admin;x").
	i, j := 0, 0 // positions in p and prefix, each at a '/'
	for j < len(prefix) {
		if i >= len(p) || p[i] != '/' {
			return p, false
		}
		pe := i + 1
		for pe < len(p) && p[pe] != '/' {
			pe++
		}
		qe := j + 1
		for qe < len(prefix) && prefix[qe] != '/' {
			qe++
		}
		seg := p[i+1 : pe]
		if k := bytes.IndexByte(seg, ';'); k >= 0 {
			seg = seg[:k]
		}
		if !codec.EqualFold(seg, prefix[j+1:qe]) {
			return p, false
		}
		i, j = pe, qe
	}
	return p[i:], true
}

// join returns add+rest with exactly one '/' between them, starting with
// '/', in the arena (or a read-only constant). add is "" or starts with '/'.
func join(x *filters.Exchange, add, rest []byte) []byte {
	if len(rest) == 0 {
		if len(add) == 0 {
			return slash
		}
		return add
	}
	add = bytes.TrimSuffix(add, slash)
	sep := 0
	if rest[0] != '/' {
		sep = 1
	}
	out := reserve(x, len(add)+sep+len(rest))
	n := copy(out, add)
	n += copy(out[n:], slash[:sep])
	copy(out[n:], rest)
	return out
}
