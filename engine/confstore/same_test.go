package confstore

import (
	"math"
	"reflect"
	"testing"
)

// same answers as reflect.DeepEqual for the values documents hold.
func TestSameIsDeepEqual(t *testing.T) {
	shared := map[string]any{"id": "a"}
	values := []any{
		nil, "a", "b", "", 1.0, 2.0, math.NaN(), true, false, 1, int64(1),
		map[string]any(nil), map[string]any{}, map[string]any{"id": "a"}, shared, map[string]any{"id": "b"},
		map[string]any{"id": "a", "x": nil}, map[string]any{"id": nil}, map[string]any{"n": []any{"a"}},
		map[string]any{"n": []any{"a", "b"}}, map[string]any{"n": []any{}}, map[string]any{"n": []any(nil)},
		[]any(nil), []any{}, []any{"a"}, []any{"a", 1.0}, []any{map[string]any{"id": "a"}}, []any{shared},
		[]string{"a"}, map[string]string{"id": "a"},
	}
	for _, a := range values {
		for _, b := range values {
			if got, want := same(a, b), reflect.DeepEqual(a, b); got != want {
				t.Errorf("same(%#v, %#v) = %v, reflect.DeepEqual %v", a, b, got, want)
			}
		}
	}
}
