package buffers

import (
	"testing"

	"github.com/cloudwego/netpoll"
	"github.com/loopgate/loopgate/pool"
)

var (
	head  = make([]byte, 320)
	chunk = make([]byte, 64<<10)
	sink  int
)

// BenchmarkHead*: a request head written into a buffer, read back out for
// the socket, then released.
func BenchmarkHeadPool(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf := pool.Get(len(head) + 64)
		buf.B = append(buf.B, head...)
		sink += len(buf.B)
		buf.Release()
	}
}

func BenchmarkHeadLinkBuffer(b *testing.B) {
	lb := netpoll.NewLinkBuffer(4096)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p, _ := lb.Malloc(len(head))
		copy(p, head)
		_ = lb.Flush()
		out, _ := lb.Next(len(head))
		sink += len(out)
		_ = lb.Release()
	}
}

// BenchmarkChunk*: a 64 KiB body chunk staged and drained.
func BenchmarkChunkPool(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(chunk)))
	for i := 0; i < b.N; i++ {
		buf := pool.Get(len(chunk))
		buf.B = append(buf.B, chunk...)
		sink += len(buf.B)
		buf.Release()
	}
}

func BenchmarkChunkLinkBuffer(b *testing.B) {
	lb := netpoll.NewLinkBuffer(64 << 10)
	b.ReportAllocs()
	b.SetBytes(int64(len(chunk)))
	for i := 0; i < b.N; i++ {
		_, _ = lb.WriteBinary(chunk)
		_ = lb.Flush()
		out, _ := lb.Next(len(chunk))
		sink += len(out)
		_ = lb.Release()
	}
}
