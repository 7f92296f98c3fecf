// The state's JSON, written without reflection for the values documents
// are made of: the bytes encoding/json gives, at a fraction of its cost.

package confstore

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// appendJSON appends json.Marshal(v)'s bytes to b. Maps of strings, lists,
// strings, bools, ints and nil (what a document decodes into) are written
// here; anything else, and any string json.Marshal escapes, goes through
// json.Marshal, so the bytes are always its bytes. At 30,000 changed
// routes json.Marshal took a fifth of a reload, most of it reflection and
// map key sorting through reflect.Value.
func appendJSON(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, x)
	case bool:
		return strconv.AppendBool(b, x), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case uint64:
		return strconv.AppendUint(b, x, 10), nil
	case map[string]any:
		if x == nil {
			return append(b, "null"...), nil
		}
		return appendMap(b, x)
	case []any:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	return appendMarshal(b, v)
}

// appendMap writes m with its keys sorted, as json.Marshal does.
func appendMap(b []byte, m map[string]any) ([]byte, error) {
	type pair struct {
		k string
		v any
	}
	var small [16]pair
	pairs := small[:0]
	for k, v := range m { // the values with the keys: no lookup of each
		pairs = append(pairs, pair{k, v})
	}
	slices.SortFunc(pairs, func(x, y pair) int { return strings.Compare(x.k, y.k) })
	b = append(b, '{')
	for i, p := range pairs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendString(b, p.k); err != nil {
			return nil, err
		}
		b = append(b, ':')
		if b, err = appendJSON(b, p.v); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendString writes s quoted. A string of printable ASCII that
// json.Marshal leaves as it is (no '"', '\\', and none of the "<>&" it
// escapes for HTML) is copied; any other goes through json.Marshal.
func appendString(b []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return appendMarshal(b, s)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}

func appendMarshal(b []byte, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, data...), nil
}

// appendVersion is json.Marshal(v).
func appendVersion(b []byte, v *Version) ([]byte, error) {
	b = append(b, `{"number":`...)
	b = strconv.AppendUint(b, v.Number, 10)
	var err error
	for _, f := range [...]struct {
		name, value string
		omitEmpty   bool
	}{{`,"time":`, v.Time, false}, {`,"source":`, v.Source, false}, {`,"token":`, v.Token, true}, {`,"action":`, v.Action, false}} {
		if f.omitEmpty && f.value == "" {
			continue
		}
		b = append(b, f.name...)
		if b, err = appendString(b, f.value); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"changes":`...)
	if v.Changes == nil {
		return append(b, "null}"...), nil
	}
	b = append(b, '[')
	for i := range v.Changes {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendChange(b, &v.Changes[i]); err != nil {
			return nil, err
		}
	}
	return append(b, "]}"...), nil
}

// appendChange is json.Marshal(c).
func appendChange(b []byte, c *Change) ([]byte, error) {
	b = append(b, `{"kind":`...)
	b, err := appendString(b, c.Kind)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"id":`...)
	if b, err = appendString(b, c.ID); err != nil {
		return nil, err
	}
	if c.Before != nil {
		b = append(b, `,"before":`...)
		if b, err = appendJSON(b, c.Before); err != nil {
			return nil, err
		}
	}
	if c.After != nil {
		b = append(b, `,"after":`...)
		if b, err = appendJSON(b, c.After); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendOverlay is json.Marshal(o).
func appendOverlay(b []byte, o *Overlay) ([]byte, error) {
	b = append(b, '{')
	var err error
	if len(o.Set) > 0 {
		b = append(b, `"set":{`...)
		for i, kind := range slices.Sorted(maps.Keys(o.Set)) {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendString(b, kind); err != nil {
				return nil, err
			}
			b = append(b, ':')
			list := o.Set[kind]
			if list == nil {
				b = append(b, "null"...)
				continue
			}
			b = append(b, '[')
			for j := range list {
				if j > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"id":`...)
				if b, err = appendString(b, list[j].ID); err != nil {
					return nil, err
				}
				b = append(b, `,"value":`...)
				if b, err = appendJSON(b, list[j].Value); err != nil {
					return nil, err
				}
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	if len(o.Deleted) > 0 {
		if len(o.Set) > 0 {
			b = append(b, ',')
		}
		b = append(b, `"deleted":`...)
		if b, err = appendMarshal(b, o.Deleted); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}
