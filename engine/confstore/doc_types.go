// Documents, resources, changes: the diff, merge and undo of configs.

package confstore

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"unsafe"

	"gopkg.in/yaml.v3"
)

// Doc is a config document decoded into maps, lists and scalars.
type Doc = map[string]any

// Kinds of resources.
const (
	Routes    = "routes"
	Upstreams = "upstreams"
	Settings  = "settings" // every other top-level key
)

// Lists are the resource kinds that are lists in a document, with the field
// that keys their items.
var Lists = []struct{ Kind, Key string }{{Routes, "id"}, {Upstreams, "name"}}

// KeyField is the field that keys a list kind's items, or "" for another
// kind.
func KeyField(kind string) string {
	for _, l := range Lists {
		if l.Kind == kind {
			return l.Key
		}
	}
	return ""
}

// Change is one resource's value before and after a version: Before nil
// when the version added it, After nil when it removed it.
type Change struct {
	Kind   string `json:"kind"`
	ID     string `json:"id"`
	Before any    `json:"before,omitempty"`
	After  any    `json:"after,omitempty"`
}

// Op names what c did: "added", "removed" or "changed".
func (c *Change) Op() string {
	switch {
	case c.Before == nil:
		return "added"
	case c.After == nil:
		return "removed"
	default:
		return "changed"
	}
}

// Parse decodes YAML (or JSON, which YAML reads) into a Doc, keying each
// route without an id by its default id ("route-<index>", as the config
// does), so every list item has its key.
func Parse(data []byte) (Doc, error) {
	var d Doc
	if err := yaml.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	if d == nil {
		d = Doc{}
	}
	for _, l := range Lists {
		items, ok := d[l.Kind].([]any)
		if !ok {
			continue
		}
		for i, it := range items {
			if m, ok := it.(map[string]any); ok && l.Kind == Routes {
				if id, _ := m["id"].(string); id == "" {
					m["id"] = fmt.Sprintf("route-%d", i)
				}
			}
		}
	}
	return d, nil
}

// Marshal encodes d for config.Parse: as JSON, which YAML reads, because
// encoding/json writes a document of 30,000 routes several times faster
// than yaml.v3 does.
func Marshal(d Doc) ([]byte, error) { return json.Marshal(d) }

// Clone copies d deeply.
func Clone(d Doc) Doc { return cloneValue(d).(map[string]any) }

// Copy copies d's top level and its resource lists, sharing the resources
// themselves: what Set changes in the copy leaves d as it was, at the cost
// of the lists alone (30,000 routes share their maps instead of doubling
// them). Resources are never modified in place: Set replaces them whole,
// and whoever edits one edits a Clone of it.
func Copy(d Doc) Doc {
	c := make(Doc, len(d))
	for k, v := range d {
		if list, ok := v.([]any); ok && KeyField(k) != "" {
			v = slices.Clone(list)
		}
		c[k] = v
	}
	return c
}

func cloneValue(v any) any {
	switch n := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(n))
		for k, c := range n {
			m[k] = cloneValue(c)
		}
		return m
	case []any:
		s := make([]any, len(n))
		for i, c := range n {
			s[i] = cloneValue(c)
		}
		return s
	default:
		return v
	}
}

// item is one keyed resource of a list kind.
type item struct {
	id string
	v  any
}

// items lists the resources of list, keyed by key, in order; an item
// without a string key is skipped (the config refuses it anyway).
func items(list []any, key string) []item {
	out := make([]item, 0, len(list))
	for _, it := range list {
		if id, ok := keyOf(it, key); ok {
			out = append(out, item{id, it})
		}
	}
	return out
}

// inPlace reports whether was and is list the same ids in the same order.
// Place by place is then what the maps would find, for ids listed once,
// as in any document the config accepts (one with an id twice is refused
// whatever its diff says).
func inPlace(was, is []item) bool {
	if len(was) != len(is) {
		return false
	}
	for i := range is {
		if was[i].id != is[i].id {
			return false
		}
	}
	return true
}

// Get returns resource id of kind in d, or nil.
func Get(d Doc, kind, id string) any {
	if kind == Settings {
		return d[id]
	}
	list, _ := d[kind].([]any)
	key := KeyField(kind)
	for _, it := range list {
		if k, ok := keyOf(it, key); ok && k == id {
			return it
		}
	}
	return nil
}

// Set makes v resource id of kind in d, in place: it replaces the item of
// that key where it stands, or appends it; nil removes it. It reports
// whether d changed.
func Set(d Doc, kind, id string, v any) bool {
	if kind == Settings {
		old, had := d[id]
		if v == nil {
			delete(d, id)
			return had
		}
		d[id] = v
		return !had || !reflect.DeepEqual(old, v)
	}
	list, _ := d[kind].([]any)
	key := KeyField(kind)
	for i, it := range list {
		if m, ok := it.(map[string]any); ok && m[key] == id {
			if v == nil {
				d[kind] = slices.Delete(slices.Clone(list), i, i+1)
				return true
			}
			if reflect.DeepEqual(it, v) {
				return false
			}
			list[i] = v
			return true
		}
	}
	if v == nil {
		return false
	}
	d[kind] = append(list, v)
	return true
}

// Diff lists what changed from old to next: list kinds in their order,
// then settings by name.
func Diff(old, next Doc) []Change {
	var out []Change
	for _, l := range Lists {
		was, _ := old[l.Kind].([]any)
		is, _ := next[l.Kind].([]any)
		out = diffList(out, l.Kind, l.Key, was, is)
	}
	for _, k := range settingKeys(old, next) {
		if b, a := old[k], next[k]; !reflect.DeepEqual(b, a) {
			out = append(out, Change{Kind: Settings, ID: k, Before: b, After: a})
		}
	}
	return out
}

// diffList appends to out what changed from the list was to the list is,
// in is's order, the removed ones last in was's order. Most of two lists
// a write leaves are the same resources in the same places (see Copy), so
// the common head and tail are walked place by place, by identity or by
// key, without a map or a copy; only what lies between them (the edited
// stretch, one resource for an append or a delete) is matched by key.
// That is the definition's answer for ids listed once, as in any document
// the config accepts (one with an id twice is refused whatever its diff
// says).
func diffList(out []Change, kind, key string, was, is []any) []Change {
	head := 0
	for head < len(was) && head < len(is) && samePlace(was[head], is[head], key) {
		head++
	}
	tail := 0
	for tail < len(was)-head && tail < len(is)-head && samePlace(was[len(was)-1-tail], is[len(is)-1-tail], key) {
		tail++
	}
	out = changedInPlace(out, kind, key, was[:head], is[:head])
	midWas, midIs := items(was[head:len(was)-tail], key), items(is[head:len(is)-tail], key)
	if inPlace(midWas, midIs) {
		// The same ids in the same places, as after an edit of a few:
		// compared place by place, without maps.
		for i := range midIs {
			if !same(midWas[i].v, midIs[i].v) {
				out = append(out, Change{Kind: kind, ID: midIs[i].id, Before: midWas[i].v, After: midIs[i].v})
			}
		}
		return changedInPlace(out, kind, key, was[len(was)-tail:], is[len(is)-tail:])
	}
	before := make(map[string]any, len(midWas))
	for _, it := range midWas {
		before[it.id] = it.v
	}
	seen := make(map[string]bool, len(midIs))
	for _, it := range midIs {
		seen[it.id] = true
		if b, ok := before[it.id]; !ok || !same(b, it.v) {
			out = append(out, Change{Kind: kind, ID: it.id, Before: b, After: it.v})
		}
	}
	out = changedInPlace(out, kind, key, was[len(was)-tail:], is[len(is)-tail:])
	for _, it := range midWas {
		if !seen[it.id] {
			out = append(out, Change{Kind: kind, ID: it.id, Before: it.v})
		}
	}
	return out
}

// samePlace reports whether a and b, at one place of two lists, are one
// resource (shared, see Copy) or two of the same key: what Diff matches
// by key, and pairs by place when every place pairs.
func samePlace(a, b any, key string) bool {
	if Identical(a, b) {
		return true
	}
	ka, ok := keyOf(a, key)
	if !ok {
		return false
	}
	kb, ok := keyOf(b, key)
	return ok && ka == kb
}

// changedInPlace appends the changes of was and is, paired place by place
// (samePlace holds for every place).
func changedInPlace(out []Change, kind, key string, was, is []any) []Change {
	// The places that changed first, then out grown once: when every
	// route of 30,000 changed, growing the changes by doubling allocated
	// twice the 2 MB they hold, in each of a reload's three diffs.
	type place struct {
		i  int
		id string
	}
	var small [16]place
	at := small[:0]
	for i := range is {
		if Identical(was[i], is[i]) {
			continue
		}
		if id, ok := keyOf(is[i], key); ok && !same(was[i], is[i]) {
			at = append(at, place{i, id})
		}
	}
	out = slices.Grow(out, len(at))
	for _, p := range at {
		out = append(out, Change{Kind: kind, ID: p.id, Before: was[p.i], After: is[p.i]})
	}
	return out
}

// keyOf is v's key, when v is a resource with a string key.
func keyOf(v any, key string) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	id, ok := m[key].(string)
	return id, ok
}

// same is reflect.DeepEqual(a, b), answered at once for one resource
// shared by both documents (see Copy), as most of them are, and walked
// without reflection for the maps, lists and strings documents are made
// of (reflect.DeepEqual took a tenth of a reload that changed 30,000
// routes).
func same(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || (x == nil) != (y == nil) || len(x) != len(y) {
			return false
		}
		if Identical(a, b) {
			return true
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !same(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || (x == nil) != (y == nil) || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !same(x[i], y[i]) {
				return false
			}
		}
		return true
	case string:
		y, ok := b.(string)
		return ok && x == y
	}
	return reflect.DeepEqual(a, b)
}

// Identical reports whether a and b are one resource, shared by two
// documents (see Copy): the same map, not merely an equal one. A map
// value is the pointer to its table, so two are the same map when their
// pointers are equal; reading it directly rather than through reflect
// (reflect.Value.UnsafePointer) makes Diff's walk of 30,000 routes 3-4
// times faster.
func Identical(a, b any) bool {
	x, ok := a.(map[string]any)
	if !ok {
		return false
	}
	y, ok := b.(map[string]any)
	return ok && *(*unsafe.Pointer)(unsafe.Pointer(&x)) == *(*unsafe.Pointer)(unsafe.Pointer(&y))
}

// settingKeys are the top-level keys of either document that are not list
// kinds, sorted.
func settingKeys(docs ...Doc) []string {
	set := map[string]bool{}
	for _, d := range docs {
		for k := range d {
			if KeyField(k) == "" {
				set[k] = true
			}
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Undo returns d with changes undone, the last first: each resource back
// to its Before.
func Undo(d Doc, changes []Change) Doc {
	d = Copy(d)
	for i := len(changes) - 1; i >= 0; i-- {
		c := changes[i]
		Set(d, c.Kind, c.ID, cloneValue(c.Before))
	}
	return d
}

// Overlay is what the API changed over the config file: whole resources
// set, and resources deleted, by kind and key.
type Overlay struct {
	Set     map[string][]Resource `json:"set,omitempty"`     // by kind, in the order they are laid over the file
	Deleted map[string][]string   `json:"deleted,omitempty"` // by kind
}

// Resource is one resource of an Overlay.
type Resource struct {
	ID    string `json:"id"`
	Value any    `json:"value"`
}

// Empty reports whether o changes nothing.
func (o *Overlay) Empty() bool { return len(o.Set) == 0 && len(o.Deleted) == 0 }

// Size is how many resources o sets or deletes.
func (o *Overlay) Size() int {
	n := 0
	for _, set := range o.Set {
		n += len(set)
	}
	for _, del := range o.Deleted {
		n += len(del)
	}
	return n
}

// Merge lays o over base: every resource o sets replaces base's of the
// same key where it stands, or is appended; every one o deletes is
// removed. base is not modified; the result shares base's resources that
// o leaves alone (see Copy).
func Merge(base Doc, o Overlay) Doc {
	d := Copy(base)
	for _, kind := range overlayKinds(o) {
		for _, r := range o.Set[kind] {
			Set(d, kind, r.ID, cloneValue(r.Value))
		}
		for _, id := range o.Deleted[kind] {
			Set(d, kind, id, nil)
		}
	}
	return d
}

func overlayKinds(o Overlay) []string {
	kinds := []string{Routes, Upstreams, Settings}
	for k := range o.Set {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// Delta is the overlay that makes target from base: Merge(base,
// Delta(base, target)) holds what target holds (list items that base
// already has keep base's place).
func Delta(base, target Doc) Overlay {
	o := Overlay{Set: map[string][]Resource{}, Deleted: map[string][]string{}}
	for _, c := range Diff(base, target) {
		if c.After == nil {
			o.Deleted[c.Kind] = append(o.Deleted[c.Kind], c.ID)
		} else {
			o.Set[c.Kind] = append(o.Set[c.Kind], Resource{c.ID, c.After})
		}
	}
	for k, v := range o.Set {
		if len(v) == 0 {
			delete(o.Set, k)
		}
	}
	for k, v := range o.Deleted {
		if len(v) == 0 {
			delete(o.Deleted, k)
		}
	}
	return o
}
