package tlsedge_test

import (
	"testing"

	"github.com/loopgate/loopgate/pool/pooltest"
)

// Sessions take their plaintext buffers from the pools: every test ends
// with each of them given back.
func TestMain(m *testing.M) { pooltest.Main(m) }
