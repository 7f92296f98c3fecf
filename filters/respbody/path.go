// Field paths: $.user.phone, $.items[*].card, $.items[0].id, $['odd key'].

package respbody

import (
	"errors"
	"strconv"
	"strings"
)

// segKind is what one path segment matches.
type segKind uint8

const (
	segKey   segKind = iota // an object member by name
	segIndex                // an array element by position
	segAny                  // every element of an array or member of an object: [*] or .*
)

type segment struct {
	kind  segKind
	key   []byte // segKey: the member name as the body spells it (no escapes are decoded)
	index int    // segIndex
}

// maxDepth bounds a path's segments; the editor descends no deeper than
// the longest path, so a deeply nested body costs no stack.
const maxDepth = 16

// parsePath parses a path of the form $ followed by .name, ['name'],
// [N] or [*] segments. The root itself ($ alone) is not a field.
func parsePath(p string) ([]segment, error) {
	if !strings.HasPrefix(p, "$") {
		return nil, errors.New("must start with $")
	}
	var segs []segment
	rest := p[1:]
	for rest != "" {
		switch {
		case rest[0] == '.':
			rest = rest[1:]
			n := strings.IndexAny(rest, ".[")
			if n < 0 {
				n = len(rest)
			}
			name := rest[:n]
			rest = rest[n:]
			switch {
			case name == "":
				return nil, errors.New("empty member name")
			case name == "*":
				segs = append(segs, segment{kind: segAny})
			default:
				if err := plainName(name); err != nil {
					return nil, err
				}
				segs = append(segs, segment{kind: segKey, key: []byte(name)})
			}
		case strings.HasPrefix(rest, "['"):
			end := strings.Index(rest[2:], "']")
			if end < 0 {
				return nil, errors.New("unclosed ['")
			}
			name := rest[2 : 2+end]
			if err := plainName(name); err != nil {
				return nil, err
			}
			segs = append(segs, segment{kind: segKey, key: []byte(name)})
			rest = rest[2+end+2:]
		case rest[0] == '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, errors.New("unclosed [")
			}
			in := rest[1:end]
			rest = rest[end+1:]
			if in == "*" {
				segs = append(segs, segment{kind: segAny})
				continue
			}
			n, err := strconv.Atoi(in)
			if err != nil || n < 0 || in[0] == '+' {
				return nil, errors.New("index " + strconv.Quote(in) + " is not * or a number from 0")
			}
			segs = append(segs, segment{kind: segIndex, index: n})
		default:
			return nil, errors.New("expected . or [ at " + strconv.Quote(rest))
		}
	}
	if len(segs) == 0 {
		return nil, errors.New("names no field ($ is the whole body)")
	}
	if len(segs) > maxDepth {
		return nil, errors.New("more than " + strconv.Itoa(maxDepth) + " segments")
	}
	return segs, nil
}

// plainName refuses names the editor would never match: it compares the
// body's member names as written, so a name needing JSON escapes (a quote,
// a backslash, a control character) cannot be configured.
func plainName(name string) error {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c == '"' || c == '\\' || c < 0x20 {
			return errors.New("member name " + strconv.Quote(name) + " holds a character JSON escapes")
		}
	}
	return nil
}
