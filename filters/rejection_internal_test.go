package filters

import "testing"

// Reset empties a rejection that was used, header slots included, so the
// next request's rejection starts with none of the last one's headers.
func TestRejectionReset(t *testing.T) {
	var r Rejection
	r.Status, r.Code, r.Message = 503, 50303, "busy"
	for i := 0; i < MaxRejectionHeaders; i++ {
		r.AddHeader("Retry-After", []byte("1"))
	}
	r.Reset()
	if r.Status != 0 || r.Code != 0 || r.Message != "" || r.n != 0 {
		t.Fatalf("after Reset: %+v", r)
	}
	for i, h := range r.headers {
		if h.Name != "" || h.Value != nil {
			t.Fatalf("slot %d kept %+v", i, h)
		}
	}
	if !r.AddHeader("Allow", []byte("GET")) || len(r.Headers()) != 1 || string(r.Header("allow")) != "GET" {
		t.Fatalf("after Reset and AddHeader: %+v", r.Headers())
	}
}
