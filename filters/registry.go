// The filter registry: every filter kind registers once, by name, with its
// default order, the config keys it owns and its constructor.

package filters

import (
	"fmt"
	"net/netip"
	"reflect"
	"sort"
	"strings"

	"github.com/loopgate/loopgate/codec"
)

// Registration is one kind of filter as its package registers it: how the
// config names and orders it, the config it owns, and how to build it.
// Caddy's modules are the model: the config decodes a filter's own keys
// into the filter's own types, the filter provisions and validates them,
// and engine/config knows none of their fields.
type Registration struct {
	// Name is how the config names the filter, in filters,
	// disable_filters and filter_orders: lower-case letters, digits and
	// '_'.
	Name string

	// Order places the filter in a chain (lower runs first) unless
	// filter_orders overrides it. Unique among registered filters.
	Order int

	// Default puts the filter in the default chain, the one routes run
	// when the config has no top-level filters list.
	Default bool

	// Global, when set, makes an empty top-level config: a pointer to a
	// struct whose yaml-tagged fields are the top-level keys the filter
	// owns (ip_access's ip_allow and ip_deny). Every config holds one,
	// decoded from those keys or left empty, then provisioned and
	// validated.
	Global func() GlobalConfig

	// Route, when set, makes an empty route config, likewise: its fields
	// are the route keys the filter owns (gray's gray). Every route holds
	// one.
	Route func() RouteConfig

	// NeedsRoute marks a filter that acts only on its route keys: named
	// in a filters list on a route without them, it has nothing to do and
	// is left out of the route's chain.
	NeedsRoute bool

	// RouteIndependent marks a filter whose New depends on the route only
	// through Build.Config, and whose Filter holds nothing of the route:
	// the engine builds one per config instance and lends it to every
	// route given that instance. A route config a route does not set is
	// one default instance per parsed config, so the routes that set
	// none of the filter's keys share one Filter (ip_access, forwarded
	// and request_id in the default chain: 30,000 routes, one of each).
	RouteIndependent bool

	// SetsIdentity marks a filter that sets identity headers on the
	// upstream request (IdentitySource): a route running it may not set
	// those headers itself with request_headers.
	SetsIdentity bool

	// Prepare, when set, builds what every route's filter of this kind
	// shares, once per compiled config (the auth filter's verifier). New
	// finds it in Build.Shared. It runs even when no route runs the
	// filter, so the control plane always has it.
	Prepare func(b *Build) (any, error)

	// New builds the filter for one route from its validated configs. A
	// nil Filter and nil error mean it has nothing to do on the route.
	New func(b *Build) (Filter, error)

	// Service, when set, makes the object the server owns for this
	// filter across every config version (ip_access's ban list, auth's
	// revocations, the rate limits' store): made once per server, lent to
	// Prepare and New (Service), and reached by the control plane by its
	// type. The engine also writes its series when it has a
	// WriteMetrics(io.Writer) method, serves GET /limits from a
	// Handler() http.Handler method, and calls a Close() method when it
	// drops a server's worth of them unused (a config compiled only to
	// be checked).
	Service func() any

	// ClientIP, when set, names the client behind the trusted proxies
	// (trusted_proxies) that forwarded the request from peer: ip_access's
	// X-Forwarded-For walk (access.ClientIP). The engine resolves
	// Exchange.ClientIP and the access log's client with it, so it names
	// no filter. At most one registration sets it; without one the
	// client is the peer. Called per request on the event loop: it must
	// not allocate or block.
	ClientIP func(peer netip.Addr, h codec.Headers, trusted []netip.Prefix) netip.Addr

	globalKeys, routeKeys []string // from the configs' yaml tags
}

// GlobalKeys returns the top-level keys the filter owns. Read-only.
func (r *Registration) GlobalKeys() []string { return r.globalKeys }

// RouteKeys returns the route keys the filter owns. Read-only.
func (r *Registration) RouteKeys() []string { return r.routeKeys }

// GlobalConfig is a filter's top-level config. Provision and Validate
// have one job each, as in Caddy and yamux: the first fills in defaults,
// the second only rejects.
type GlobalConfig interface {
	// Provision gives every option left out the default its comment
	// states. It runs once, before Validate.
	Provision()
	// Validate reports to c what cannot work, naming each key. It changes
	// no option; what it parses or compiles to judge (IP lists, regular
	// expressions) it keeps for New, so nothing is parsed twice.
	Validate(c *Check)
}

// RouteConfig is a filter's config on one route.
type RouteConfig interface {
	// Provision and Validate are as for GlobalConfig.
	Provision()
	Validate(c *Check)
	// EnabledBy names the route option that turns the filter on for the
	// route, as a message would quote it ("auth: required"), or "" when
	// none does. global is the filter's top-level config, nil when it has
	// none.
	EnabledBy(global GlobalConfig) string
}

// IdentitySource is implemented by a top-level config whose filter sets
// identity headers on the upstream request. IdentityHeaders names every
// such header. The engine removes client-sent fields of these names on
// every route, so an upstream never sees a client's own value under them.
type IdentitySource interface {
	IdentityHeaders() []string
}

// RequestLimiter is implemented by a route config that tightens the
// route's request limits (the limits filter). The engine enforces the body
// limit itself while a chunked body streams, where a filter cannot. ok is
// false when the route sets none; a zero field in l inherits the global
// limit.
type RequestLimiter interface {
	RequestLimits() (l codec.Limits, ok bool)
}

// registry holds every Registration. It is written by Register, from init
// functions, and only read after that, so lookups need no lock.
var registry struct {
	byName     map[string]*Registration
	sorted     []*Registration          // by Order
	globalKeys map[string]*Registration // top-level key -> owner
	routeKeys  map[string]*Registration // route key -> owner
}

// Register adds a filter kind. Call it from an init function of the
// filter's package; a blank import of that package (see filters/builtin)
// then makes the filter available to every config. It panics when the
// registration is incomplete or clashes with one already made (name,
// order, or a key another filter owns): both are programming errors.
func Register(r Registration) {
	if r.Name == "" || strings.IndexFunc(r.Name, func(c rune) bool { return !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') }) >= 0 {
		panic(fmt.Sprintf("filters: Register: bad name %q", r.Name))
	}
	if r.New == nil {
		panic("filters: Register " + r.Name + ": no New")
	}
	if _, dup := registry.byName[r.Name]; dup {
		panic("filters: Register: " + r.Name + " registered twice")
	}
	for _, o := range registry.sorted {
		if o.Order == r.Order {
			panic(fmt.Sprintf("filters: Register %s: order %d is %s's", r.Name, r.Order, o.Name))
		}
	}
	if r.ClientIP != nil && ClientResolver() != nil {
		panic("filters: Register " + r.Name + ": a second ClientIP")
	}
	reg := &r
	if r.Global != nil {
		reg.globalKeys = yamlKeys(r.Name, r.Global())
	}
	if r.Route != nil {
		reg.routeKeys = yamlKeys(r.Name, r.Route())
	}
	if r.NeedsRoute && len(reg.routeKeys) == 0 {
		panic("filters: Register " + r.Name + ": NeedsRoute without route keys")
	}
	initRegistry()
	unclaimed(registry.globalKeys, reg, reg.globalKeys, "top-level")
	unclaimed(registry.routeKeys, reg, reg.routeKeys, "route")
	for _, k := range reg.globalKeys {
		registry.globalKeys[k] = reg
	}
	for _, k := range reg.routeKeys {
		registry.routeKeys[k] = reg
	}
	registry.byName[r.Name] = reg
	registry.sorted = append(registry.sorted, reg)
	sort.SliceStable(registry.sorted, func(i, j int) bool { return registry.sorted[i].Order < registry.sorted[j].Order })
}

func initRegistry() {
	if registry.byName == nil {
		registry.byName = map[string]*Registration{}
		registry.globalKeys = map[string]*Registration{}
		registry.routeKeys = map[string]*Registration{}
	}
}

// theGateway owns the keys ReserveKeys reserves.
var theGateway = &Registration{Name: "the gateway"}

// ReserveKeys declares the gateway's own top-level and route keys, which no
// filter may own: engine/config calls it from its init function. It panics
// when a filter registered earlier owns one; Register panics for a filter
// registered later.
func ReserveKeys(global, route []string) {
	initRegistry()
	for _, k := range global {
		if o := registry.globalKeys[k]; o != nil && o != theGateway {
			panic(fmt.Sprintf("filters: top-level key %q is %s's and the gateway's own", k, o.Name))
		}
		registry.globalKeys[k] = theGateway
	}
	for _, k := range route {
		if o := registry.routeKeys[k]; o != nil && o != theGateway {
			panic(fmt.Sprintf("filters: route key %q is %s's and the gateway's own", k, o.Name))
		}
		registry.routeKeys[k] = theGateway
	}
}

// unclaimed panics when another filter, or the gateway, owns one of keys.
func unclaimed(owners map[string]*Registration, reg *Registration, keys []string, where string) {
	for _, k := range keys {
		if o, taken := owners[k]; taken {
			panic(fmt.Sprintf("filters: Register %s: %s key %q is already %s's", reg.Name, where, k, o.Name))
		}
	}
}

// yamlKeys lists the yaml keys of the struct cfg points to. Every exported
// field must name its key: a key the reader cannot see in the source is a
// key nobody documents.
func yamlKeys(name string, cfg any) []string {
	t := reflect.TypeOf(cfg)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("filters: Register %s: a config must be a pointer to a struct, not %T", name, cfg))
	}
	var keys []string
	for _, f := range reflect.VisibleFields(t.Elem()) {
		if !f.IsExported() {
			continue
		}
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case tag == "-":
		case tag == "" || strings.Contains(opts, "inline"):
			panic(fmt.Sprintf("filters: Register %s: field %s.%s needs a yaml key", name, t.Elem().Name(), f.Name))
		default:
			keys = append(keys, tag)
		}
	}
	return keys
}

// Lookup returns the registration called name. Safe for concurrent use
// once init functions have run.
func Lookup(name string) (*Registration, bool) {
	r, ok := registry.byName[name]
	return r, ok
}

// Registered returns every registration by default order. The slice is
// shared: do not modify it. Safe for concurrent use once init functions
// have run.
func Registered() []*Registration { return registry.sorted }

// ClientResolver returns the registered Registration.ClientIP, or nil.
func ClientResolver() func(peer netip.Addr, h codec.Headers, trusted []netip.Prefix) netip.Addr {
	for _, r := range registry.sorted {
		if r.ClientIP != nil {
			return r.ClientIP
		}
	}
	return nil
}

// GlobalKeyOwner returns the filter that owns the top-level key, or nil
// (for the gateway's own keys too).
func GlobalKeyOwner(key string) *Registration { return owner(registry.globalKeys[key]) }

// RouteKeyOwner returns the filter that owns the route key, or nil.
func RouteKeyOwner(key string) *Registration { return owner(registry.routeKeys[key]) }

func owner(r *Registration) *Registration {
	if r == theGateway {
		return nil
	}
	return r
}

// SetDefault sets *field to def when it holds the zero value: the usual
// step of a Provision.
func SetDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}
