package respbody

import (
	"strings"
	"testing"

	"github.com/bytedance/sonic"
)

// compile builds an editor from masks and removals as a config gives them.
func compile(t testing.TB, masks []Mask, remove []string) *editor {
	t.Helper()
	r := &Route{ResponseBody: &Config{Mask: masks, Remove: remove}}
	r.Provision()
	var errs []string
	r.Validate(checkInto(&errs))
	if len(errs) > 0 {
		t.Fatalf("config: %v", errs)
	}
	return r.ResponseBody.ed
}

func TestEdit(t *testing.T) {
	cases := []struct {
		name   string
		masks  []Mask
		remove []string
		in     string
		want   string
	}{
		{"mask nested", []Mask{{Path: "$.user.phone"}}, nil,
			`{"user":{"name":"a","phone":"13812345678"}}`, `{"user":{"name":"a","phone":"***"}}`},
		{"keep last 4", []Mask{{Path: "$.user.phone", KeepLast: 4}}, nil,
			`{"user":{"phone":"13812345678"}}`, `{"user":{"phone":"*******5678"}}`},
		{"keep last of a number", []Mask{{Path: "$.card", KeepLast: 4}}, nil,
			`{"card":4111111111111111}`, `{"card":"************1111"}`},
		{"keep last of a short value masks it whole", []Mask{{Path: "$.pin", KeepLast: 4}}, nil,
			`{"pin":"123"}`, `{"pin":"***"}`},
		{"keep last counts escapes and UTF-8 as one", []Mask{{Path: "$.n", KeepLast: 2}}, nil,
			`{"n":"a\"b\u00e9日本"}`, `{"n":"****日本"}`},
		{"keep last of a long value", []Mask{{Path: "$.t", KeepLast: 1}}, nil,
			`{"t":"` + strings.Repeat("a", 100) + `b"}`, `{"t":"` + strings.Repeat("*", 100) + `b"}`},
		{"keep last on an object replaces it", []Mask{{Path: "$.o", KeepLast: 2}}, nil,
			`{"o":{"a":1}}`, `{"o":"***"}`},
		{"wildcard array", []Mask{{Path: "$.items[*].card", Replacement: "x"}}, nil,
			`{"items":[{"card":"1"},{"id":2},{"card":{"n":3}}]}`, `{"items":[{"card":"x"},{"id":2},{"card":"x"}]}`},
		{"index", []Mask{{Path: "$.items[1]"}}, nil,
			`{"items":[1,2,3]}`, `{"items":[1,"***",3]}`},
		{"root array", []Mask{{Path: "$[*].p"}}, nil,
			` [ {"p": 1} , {"q":2} ] `, ` [ {"p": "***"} , {"q":2} ] `},
		{"remove first", nil, []string{"$.a"}, `{"a":1,"b":2}`, `{"b":2}`},
		{"remove middle", nil, []string{"$.b"}, `{"a":1,"b":2,"c":3}`, `{"a":1,"c":3}`},
		{"remove last", nil, []string{"$.c"}, `{"a":1,"b":2,"c":3}`, `{"a":1,"b":2}`},
		{"remove all", nil, []string{"$.*"}, `{"a":1,"b":[2],"c":{"d":3}}`, `{}`},
		{"remove first two", nil, []string{"$.a", "$.b"}, `{ "a" : 1 , "b" : 2 , "c" : 3 }`, `{ "c" : 3 }`},
		{"remove array elements", nil, []string{"$.x[0]", "$.x[2]"}, `{"x":[0,1,2,3]}`, `{"x":[1,3]}`},
		{"remove wins over mask", []Mask{{Path: "$.a"}}, []string{"$.a"}, `{"a":1}`, `{}`},
		{"a key with an escaped quote is skipped whole", []Mask{{Path: "$.b"}}, nil,
			`{"a\"b":"\\","b":"v"}`, `{"a\"b":"\\","b":"***"}`},
		{"no match", []Mask{{Path: "$.zz"}}, nil, `{"a":[1,{"zz":2}]}`, `{"a":[1,{"zz":2}]}`},
		{"scalar body", []Mask{{Path: "$.a"}}, nil, `"a"`, `"a"`},
		{"path through a scalar", []Mask{{Path: "$.a.b"}}, nil, `{"a":5,"b":1}`, `{"a":5,"b":1}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := compile(t, c.masks, c.remove)
			got, changed := e.edit([]byte(c.in), nil)
			if string(got) != c.want {
				t.Fatalf("edit(%s) = %s, want %s", c.in, got, c.want)
			}
			if changed != (c.in != c.want) {
				t.Errorf("changed = %v", changed)
			}
			if !sonic.Valid(got) {
				t.Errorf("output is not valid JSON: %s", got)
			}
		})
	}
}

// TestEditAlwaysValid: every removal and mask on every member of a nested
// document leaves valid JSON.
func TestEditAlwaysValid(t *testing.T) {
	doc := `{"a":[1,{"b":2,"c":[3,4]},"x"],"d":{"e":{"f":null,"g":true}},"h":"s\"q"}`
	paths := []string{"$.a", "$.a[0]", "$.a[1]", "$.a[2]", "$.a[*]", "$.a[1].b", "$.a[1].c", "$.a[1].c[*]",
		"$.a[*].b", "$.d", "$.d.e", "$.d.e.f", "$.d.e.g", "$.d.*.*", "$.h", "$.*"}
	for _, p := range paths {
		for _, q := range paths {
			for _, masked := range []bool{false, true} {
				var e *editor
				if masked {
					e = compile(t, []Mask{{Path: q, KeepLast: 1}}, []string{p})
				} else {
					e = compile(t, nil, []string{p, q})
				}
				got, _ := e.edit([]byte(doc), nil)
				if !sonic.Valid(got) {
					t.Fatalf("remove %s, %s (masked %v): invalid %s", p, q, masked, got)
				}
			}
		}
	}
}

func TestParsePath(t *testing.T) {
	for _, bad := range []string{"", "user", "$", "$.", "$..a", "$[x]", "$[-1]", "$['a", "$[1", `$.a"b`, "$.a b[", "$" + strings.Repeat(".a", 17)} {
		if _, err := parsePath(bad); err == nil {
			t.Errorf("parsePath(%q) accepted", bad)
		}
	}
	segs, err := parsePath("$['odd.key'].items[*][3].x")
	if err != nil || len(segs) != 5 || string(segs[0].key) != "odd.key" || segs[2].kind != segAny || segs[3].index != 3 {
		t.Fatalf("parsePath = %+v, %v", segs, err)
	}
}
