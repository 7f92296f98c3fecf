package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// WithRoutes refuses an id list naming a route twice, whether both are
// out of their place or one is in it, for a few ids and for many.
func TestWithRoutesRefusesRepeats(t *testing.T) {
	const head = "listen: 127.0.0.1:0\nupstreams:\n  - {name: a, nodes: [\"127.0.0.1:9\"]}\nroutes:\n"
	var b strings.Builder
	b.WriteString(head)
	ids := []string{}
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&b, "  - {id: r%d, path: /r%d, upstream: a}\n", i, i)
		ids = append(ids, fmt.Sprintf("r%d", i))
	}
	c, err := Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	none, err := Parse([]byte(head + "  - {id: x, path: /x, upstream: a}\n"))
	if err != nil {
		t.Fatal(err)
	}
	rev := append([]string(nil), ids...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	for name, list := range map[string][]string{
		"in place and appended":    append(append([]string(nil), ids...), "r3"),
		"in place and moved":       append([]string{"r5"}, ids[1:]...),
		"both moved":               {"r1", "r1"},
		"many moved, one repeated": append(rev, "r0"),
		"many moved, one in place": inPlaceAt(rev, 10),
	} {
		if _, err := c.WithRoutes(list, none); err == nil || !strings.Contains(err.Error(), "repeated") {
			t.Errorf("%s: WithRoutes = %v; want a repeated route refused", name, err)
		}
	}
	for name, list := range map[string][]string{"same": ids, "reversed": rev, "appended": append(append([]string(nil), ids...), "x")} {
		if _, err := c.WithRoutes(list, none); err != nil {
			t.Errorf("%s: WithRoutes: %v", name, err)
		}
	}
	// Around a kept head and tail, a repeat of one of theirs is found too,
	// and the kept routes are c's own.
	for name, mid := range map[string][]string{
		"a head's id moved":   append([]string{"r3"}, ids[11:30]...),
		"a tail's id moved":   append(append([]string(nil), ids[10:29]...), "r35"),
		"a head's id changed": append(append([]string(nil), ids[10:30]...), "r0"),
	} {
		if _, err := c.WithRoutesAround(10, mid, 10, none); err == nil || !strings.Contains(err.Error(), "repeated") {
			t.Errorf("%s: WithRoutesAround = %v; want a repeated route refused", name, err)
		}
	}
	out, err := c.WithRoutesAround(10, append(append([]string(nil), ids[10:15]...), ids[16:30]...), 10, none)
	if err != nil || len(out.Routes) != 39 || out.Routes[0] != c.Routes[0] || out.Routes[38] != c.Routes[39] || out.Routes[15].ID != "r16" {
		t.Fatalf("WithRoutesAround deleting r15: %v, %d routes", err, len(out.Routes))
	}
	if _, err := c.WithRoutesAround(30, nil, 20, none); err == nil {
		t.Error("WithRoutesAround kept more routes than c has")
	}
}

// inPlaceAt is list with list[i] set to "r<i>", the id c holds there.
func inPlaceAt(list []string, i int) []string {
	out := append([]string(nil), list...)
	out[i] = fmt.Sprintf("r%d", i)
	return out
}

// sameRetry is reflect.DeepEqual of two retry sections, nil and empty
// lists told apart as DeepEqual tells them.
func TestSameRetryIsDeepEqual(t *testing.T) {
	if n := reflect.TypeOf(Retry{}).NumField(); n != 4 {
		t.Fatalf("Retry has %d fields; sameRetry compares 4", n)
	}
	values := []Retry{{}, {Attempts: 2}, {Methods: []string{}}, {Methods: []string{"GET"}}, {Methods: []string{"PUT"}},
		{OnStatus: []int{}}, {OnStatus: []int{502}}, {OnStatus: []int{502, 503}}, {PerTryTimeout: 5}}
	for i := range values {
		for j := range values {
			if got, want := sameRetry(&values[i], &values[j]), reflect.DeepEqual(&values[i], &values[j]); got != want {
				t.Errorf("sameRetry(%+v, %+v) = %v; DeepEqual says %v", values[i], values[j], got, want)
			}
		}
	}
}
