// The response_body filter's route config, its defaults and registration.

package respbody

import (
	"strconv"
	"strings"

	"github.com/bytedance/sonic"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool/units"
)

// Name is how the config names the filter.
const Name = "response_body"

// DefaultMaxBytes is max_bytes when left out.
const DefaultMaxBytes = 1 << 20

// maxMaxBytes bounds max_bytes: a held body is memory per in-flight
// response.
const maxMaxBytes = 64 << 20

// bodyPlaceholder marks where the body goes in an envelope template.
const bodyPlaceholder = "<body>"

func init() {
	filters.Register(filters.Registration{
		// Its response phase is a no-op; the engine asks it about bodies
		// after every filter's response phase, whatever its order.
		Name: Name, Order: 900, NeedsRoute: true,
		Route:   func() filters.RouteConfig { return new(Route) },
		Service: func() any { return new(Counts) },
		New:     newFilter,
	})
}

// Route is the filter's route key.
type Route struct {
	ResponseBody *Config `yaml:"response_body,omitempty"` // default none: bodies stream untouched
}

// Config is what the filter does to a route's response bodies.
type Config struct {
	// MaxBytes is the largest body held for rewriting; a larger one
	// streams untouched. Default 1MiB, at most 64MiB.
	MaxBytes units.ByteSize `yaml:"max_bytes"`
	// ContentTypes lists the media types rewritten (compared without
	// parameters, ASCII case ignored); an entry starting with '+' matches
	// that suffix. Default [application/json, +json].
	ContentTypes []string `yaml:"content_types"`
	// Mask replaces the values at these paths. Default none.
	Mask []Mask `yaml:"mask"`
	// Remove drops the members (or array elements) at these paths.
	// Default none.
	Remove []string `yaml:"remove"`
	// Envelope wraps a 2xx body: a JSON template in which <body> stands
	// for the (masked) body, such as {"code":0,"data":<body>}. Default ""
	// = none.
	Envelope string `yaml:"envelope"`
	// Replace sends a fixed body instead of the upstream's for the
	// statuses listed, whatever its type, size or encoding. Default none.
	Replace []Replace `yaml:"replace"`

	ed         *editor          // compiled by Validate
	pre, post  []byte           // the envelope around the body
	replaceFor map[int]*Replace // by status
	checked    bool
}

// Mask is one masked path.
type Mask struct {
	Path string `yaml:"path"` // $.user.phone, $.items[*].card; required
	// Replacement is the JSON string written in place of the value.
	// Default "***".
	Replacement string `yaml:"replacement"`
	// KeepLast, when above 0, keeps the last KeepLast characters of a
	// string or number and masks the others with '*' (a number becomes a
	// string); a value no longer than KeepLast is masked whole. A value of
	// another type gets the Replacement. Default 0 = replace whole.
	KeepLast int `yaml:"keep_last"`
}

// Replace is a fixed body for some statuses.
type Replace struct {
	Status      []int  `yaml:"status"`       // required
	Body        string `yaml:"body"`         // sent as it is; default ""
	ContentType string `yaml:"content_type"` // default application/json

	body, ctype []byte // Body and ContentType as sent
}

var _ filters.RouteConfig = (*Route)(nil)

// Provision applies the defaults documented on Config.
func (r *Route) Provision() {
	c := r.ResponseBody
	if c == nil {
		return
	}
	filters.SetDefault(&c.MaxBytes, DefaultMaxBytes)
	if c.ContentTypes == nil {
		c.ContentTypes = []string{"application/json", "+json"}
	}
	for i := range c.Mask {
		filters.SetDefault(&c.Mask[i].Replacement, "***")
	}
	for i := range c.Replace {
		filters.SetDefault(&c.Replace[i].ContentType, "application/json")
	}
}

// Validate compiles the paths, the envelope and the replacements, and
// rejects what cannot work.
func (r *Route) Validate(ck *filters.Check) {
	c := r.ResponseBody
	if c == nil {
		return
	}
	const k = "response_body."
	if c.MaxBytes <= 0 || c.MaxBytes > maxMaxBytes {
		ck.Add(k+"max_bytes", "must be 1B to 64MiB, got %d", c.MaxBytes)
	}
	for i, t := range c.ContentTypes {
		if strings.TrimSpace(t) == "" || strings.ContainsAny(t, "; ") {
			ck.Add(k+"content_types["+strconv.Itoa(i)+"]", "must be a media type without parameters, got %q", t)
		}
	}
	var rules []rule
	for i, m := range c.Mask {
		key := k + "mask[" + strconv.Itoa(i) + "]"
		segs, err := parsePath(m.Path)
		if err != nil {
			ck.Add(key+".path", "%v", err)
			continue
		}
		if m.KeepLast < 0 {
			ck.Add(key+".keep_last", "must be 0 or more, got %d", m.KeepLast)
		}
		repl, _ := sonic.Marshal(m.Replacement) // a string always encodes
		act := actMask
		if m.KeepLast > 0 {
			act = actKeepLast
		}
		rules = append(rules, rule{segs: segs, act: act, repl: repl, keep: m.KeepLast})
	}
	for i, p := range c.Remove {
		segs, err := parsePath(p)
		if err != nil {
			ck.Add(k+"remove["+strconv.Itoa(i)+"]", "%v", err)
			continue
		}
		rules = append(rules, rule{segs: segs, act: actRemove})
	}
	if len(rules) > maxRules {
		ck.Add(k+"mask", "mask and remove hold %d paths together, at most %d", len(rules), maxRules)
		rules = nil
	}
	c.ed = newEditor(rules)
	if c.Envelope != "" {
		pre, post, ok := strings.Cut(c.Envelope, bodyPlaceholder)
		switch {
		case !ok || strings.Contains(post, bodyPlaceholder):
			ck.Add(k+"envelope", "must hold %s exactly once", bodyPlaceholder)
		case !sonic.ValidString(pre + "null" + post):
			ck.Add(k+"envelope", "is not JSON with %s standing for a value", bodyPlaceholder)
		default:
			c.pre, c.post = []byte(pre), []byte(post)
		}
	}
	c.replaceFor = map[int]*Replace{}
	for i := range c.Replace {
		rp := &c.Replace[i]
		key := k + "replace[" + strconv.Itoa(i) + "]"
		if len(rp.Status) == 0 {
			ck.Add(key+".status", "is required")
		}
		for _, s := range rp.Status {
			switch {
			case s < 200 || s > 599 || s == 204 || s == 304:
				ck.Add(key+".status", "must be 200 to 599 and not 204 or 304 (they have no body), got %d", s)
			case c.replaceFor[s] != nil:
				ck.Add(key+".status", "%d is replaced twice", s)
			default:
				c.replaceFor[s] = rp
			}
		}
		if strings.IndexFunc(rp.ContentType, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
			ck.Add(key+".content_type", "is not a valid header value: %q", rp.ContentType)
		}
		rp.body, rp.ctype = []byte(rp.Body), []byte(rp.ContentType)
	}
	if len(rules) == 0 && c.Envelope == "" && len(c.Replace) == 0 {
		ck.Add(k[:len(k)-1], "does nothing: set mask, remove, envelope or replace")
	}
	c.checked = true
}

// EnabledBy: the route key itself turns the filter on.
func (r *Route) EnabledBy(filters.GlobalConfig) string {
	if r.ResponseBody != nil {
		return "response_body"
	}
	return ""
}
