package confstore

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// plainPieces are what random items are made of: keys, values YAML reads
// as strings and as anything else, and the punctuation between them.
var (
	plainKeys   = []string{"id", "path", "upstream", "methods", "on", "y", "Id", "x-y", "a1", "_k", "1a", "id"}
	plainValues = []string{"r0", "/r0", "/a/*", "/a/**", "backend", "GET", "true", "True", "NULL", "~", "yes", "off", "12", "0x1f",
		"1_0", "_1", ".inf", "-1", "+1", "1e3", "2001-12-14", "a b", "a#b", "a #b", "a,b", "a:b", "a: b", "&x a", "*x", "!!str a", "<<",
		`"q"`, `"a b # c"`, `"a\nb"`, `"a\\b"`, `'s'`, `'it''s'`, `''`, `""`, "[a, b]", "[]", "[a,b]", "[ a ]", "[a, [b]]", "[a,]",
		"{a: b}", "|", ">", "é", "/é", "a.b-c_d", "-", "?", "@x", "`x", "%x"}
	plainSeps = []string{", ", ",", " , ", ",  "}
	plainEnds = []string{"", " ", " # c", "#c", "  #c", "\n", "\n\n  # c\n", "\n \n", "\r"}
)

// randomPlainItem is an item of a routes list, flow or block, that is
// often of the plain kind and often just outside it.
func randomPlainItem(rng *rand.Rand) string {
	pick := func(s []string) string { return s[rng.Intn(len(s))] }
	n := rng.Intn(4)
	var b strings.Builder
	indent := strings.Repeat(" ", rng.Intn(3))
	b.WriteString(indent + "-" + strings.Repeat(" ", 1+rng.Intn(2)))
	if rng.Intn(2) == 0 {
		b.WriteString("{")
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString(pick(plainSeps))
			}
			b.WriteString(pick(plainKeys) + ":" + strings.Repeat(" ", rng.Intn(3)) + pick(plainValues))
		}
		b.WriteString("}" + pick(plainEnds))
		return b.String()
	}
	col := b.Len()
	for i := 0; i <= n; i++ {
		if i > 0 {
			shift := 0
			if rng.Intn(8) == 0 {
				shift = rng.Intn(3) - 1
			}
			b.WriteString(strings.Repeat(" ", col+shift))
		}
		b.WriteString(pick(plainKeys) + ":" + strings.Repeat(" ", rng.Intn(3)) + pick(plainValues) + pick(plainEnds))
		if !strings.HasSuffix(b.String(), "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// Whatever decodePlainItem decodes, yaml.v3 decodes to the same value;
// and it decodes the plain items of a large config at all.
func TestPlainItemAgreesWithYAML(t *testing.T) {
	names := map[string]string{}
	for _, item := range []string{
		"  - {id: r0, path: /r0, upstream: backend}\n",
		"  - id: r0\n    path: /r0\n\n    # c\n    methods: [GET, POST]\n",
		"- {id: a, methods: [], host: \"example.com:80\"}  # c\n",
	} {
		if _, ok := decodePlainItem([]byte(item), names); !ok {
			t.Errorf("%q not decoded", item)
		}
	}
	rng := rand.New(rand.NewSource(1))
	decoded := 0
	for range 200000 {
		item := randomPlainItem(rng)
		got, ok := decodePlainItem([]byte(item), names)
		if !ok {
			continue
		}
		decoded++
		var want []any
		if err := yaml.Unmarshal([]byte(item), &want); err != nil || len(want) != 1 {
			t.Fatalf("%q: decoded as %v, but yaml.v3 says %v, %v", item, got, want, err)
		}
		if !reflect.DeepEqual(want[0], any(got)) {
			t.Fatalf("%q: decoded as %#v, yaml.v3 as %#v", item, got, want[0])
		}
	}
	if decoded < 2000 {
		t.Fatalf("only %d of 200000 random items decoded", decoded)
	}
	t.Logf("%d of 200000 decoded", decoded)
}
