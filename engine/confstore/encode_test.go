package confstore

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// Encode's own writer gives json.Marshal's bytes for random states: every
// value kind a document holds, strings json.Marshal escapes (quotes, HTML,
// controls, invalid UTF-8, U+2028), and what it cannot encode (an error,
// as json.Marshal's).
func TestEncodeRandomStatesAreJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 1))
	for n := range 3000 {
		st := randomState(rng)
		got, err := Encode(st)
		want, werr := json.Marshal(st)
		if (err != nil) != (werr != nil) {
			t.Fatalf("state %d: Encode error %v, json.Marshal error %v", n, err, werr)
		}
		if string(got) != string(want) {
			t.Fatalf("state %d: Encode\n%s\njson.Marshal\n%s", n, got, want)
		}
	}
}

func randomState(rng *rand.Rand) *State {
	st := &State{}
	if rng.IntN(3) > 0 {
		st.Overlay.Set = map[string][]Resource{}
		for range rng.IntN(3) {
			var list []Resource
			if rng.IntN(5) > 0 {
				list = []Resource{}
			}
			for range rng.IntN(3) {
				list = append(list, Resource{ID: randomString(rng), Value: randomValue(rng, 3)})
			}
			st.Overlay.Set[randomString(rng)] = list
		}
	}
	if rng.IntN(3) == 0 {
		st.Overlay.Deleted = map[string][]string{randomString(rng): {randomString(rng)}, "routes": nil}
	}
	if rng.IntN(6) == 0 {
		return st // versions: null
	}
	st.Versions = []Version{}
	for i := range rng.IntN(4) {
		v := Version{Number: uint64(i + 1), Time: randomString(rng), Source: randomString(rng), Action: randomString(rng)}
		if rng.IntN(2) == 0 {
			v.Token = randomString(rng)
		}
		if rng.IntN(5) > 0 {
			v.Changes = []Change{}
		}
		for range rng.IntN(4) {
			c := Change{Kind: randomString(rng), ID: randomString(rng)}
			if rng.IntN(3) > 0 {
				c.Before = randomValue(rng, 3)
			}
			if rng.IntN(3) > 0 {
				c.After = randomValue(rng, 3)
			}
			v.Changes = append(v.Changes, c)
		}
		st.Versions = append(st.Versions, v)
	}
	return st
}

var pieces = []string{"", "a", "id", "/r7", "backend", `"`, `\`, "<", ">", "&", "\n", "\x00", "\x1f", "\x7f",
	"é", "\u2028", "\u2029", "\xff", "\xe2\x80", "日本", " ", "{}", "\t"}

func randomString(rng *rand.Rand) string {
	s := ""
	for range rng.IntN(4) {
		s += pieces[rng.IntN(len(pieces))]
	}
	return s
}

func randomValue(rng *rand.Rand, depth int) any {
	k := rng.IntN(14)
	if depth == 0 {
		k = rng.IntN(9)
	}
	switch k {
	case 0:
		return nil
	case 1, 2:
		return randomString(rng)
	case 3:
		return rng.IntN(2) == 0
	case 4:
		return rng.IntN(2000) - 1000
	case 5:
		return int64(rng.Uint64())
	case 6:
		return rng.Uint64()
	case 7:
		return []float64{0, 1.5, -2e-7, 1e21, 123456789, math.Inf(1)}[rng.IntN(6)] // Inf: an error
	case 8:
		return []any{uint8(3), map[any]any{1: 2}, struct{ A int }{4}, []string{"x"}}[rng.IntN(4)]
	case 9, 10, 11:
		if rng.IntN(8) == 0 {
			return map[string]any(nil)
		}
		m := map[string]any{}
		for range rng.IntN(20) {
			m[randomString(rng)] = randomValue(rng, depth-1)
		}
		return m
	default:
		var l []any
		if rng.IntN(8) > 0 {
			l = []any{}
		}
		for range rng.IntN(4) {
			l = append(l, randomValue(rng, depth-1))
		}
		if l == nil {
			return []any(nil)
		}
		return l
	}
}

// BenchmarkEncodeVersionAt30k is the first Encode of a version that
// changed 30,000 routes (a full reload's), by json.Marshal and by Encode's
// own writer.
func BenchmarkEncodeVersionAt30k(b *testing.B) {
	v := Version{Number: 2, Time: "2026-12-02T18:00:00Z", Source: SourceFile, Action: "SIGHUP"}
	for i := range 30000 {
		id := "r" + strconv.Itoa(i)
		v.Changes = append(v.Changes, Change{Kind: Routes, ID: id,
			Before: map[string]any{"id": id, "path": "/r" + strconv.Itoa(i), "upstream": "backend"},
			After:  map[string]any{"id": id, "path": "/v" + strconv.Itoa(i), "upstream": "backend"}})
	}
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v.enc = nil // encoded afresh
			if _, err := encodeParts(&State{Versions: []Version{v}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
