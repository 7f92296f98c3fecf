// Benchmarks for the hot paths; each must report 0 allocs/op.

package codec

import (
	"math/rand/v2"
	"testing"
)

func BenchmarkParseRequest(b *testing.B) {
	buf := []byte(typicalGET)
	var r Request
	lim := DefaultLimits()
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if n, err := ParseRequest(buf, &r, &lim); n != len(buf) || err != nil {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkParseResponse(b *testing.B) {
	buf := []byte(typicalResponse)
	var r Response
	lim := DefaultLimits()
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if n, err := ParseResponse(buf, &r, &lim); n != len(buf) || err != nil {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkChunkedDecode walks a 64 KiB body in chunks of mixed sizes, delivered in 16 KiB reads.
func BenchmarkChunkedDecode(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	payload := make([]byte, 64<<10)
	enc := encodeChunked(rng, payload, false, false)
	const readSize = 16 << 10
	var d ChunkedDecoder
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		d.Reset(0)
		total := 0
		for off := 0; off < len(enc); off += readSize {
			src := enc[off:min(off+readSize, len(enc))]
			for len(src) > 0 {
				n, data, done, err := d.Next(src)
				if err != nil {
					b.Fatal(err)
				}
				total += len(data)
				src = src[n:]
				if done || n == 0 {
					break
				}
			}
		}
		if !d.Done() || total != len(payload) {
			b.Fatal("incomplete", total)
		}
	}
}

// BenchmarkNormalizePath normalises a typical API path and one that uses every rule.
func BenchmarkNormalizePath(b *testing.B) {
	for _, bc := range []struct{ name, path string }{
		{"clean", "/api/v1/users/42/orders"},
		{"messy", "/api//v1/./users/%7ejohn/../42%2fx\\y/%c3%a9/"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			path := []byte(bc.path)
			dst := make([]byte, 0, 3*len(path))
			b.ReportAllocs()
			b.SetBytes(int64(len(path)))
			for b.Loop() {
				if _, _, err := NormalizePath(dst[:0], path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkNormalizeHost(b *testing.B) {
	for _, bc := range []struct{ name, host string }{
		{"name", "API.Example.com:8443"},
		{"ipv6", "[2001:db8::8a2e:370:7334]:443"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			host := []byte(bc.host)
			dst := make([]byte, 0, len(host))
			b.ReportAllocs()
			b.SetBytes(int64(len(host)))
			for b.Loop() {
				if _, _, err := NormalizeHost(dst[:0], host); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkChunkedDecodeFraming walks a body that is mostly framing: 16-byte chunks, each with every
// extension form, then trailers, in one read. It measures the per-byte state machine.
func BenchmarkChunkedDecodeFraming(b *testing.B) {
	var enc []byte
	for range 256 {
		enc = AppendChunkHeader(enc, 16)
		enc = append(enc[:len(enc)-2], testExtensions+"\r\n0123456789abcdef\r\n"...)
	}
	enc = append(enc, "0\r\n"+testTrailerSection...)
	var d ChunkedDecoder
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		d.Reset(0)
		src := enc
		for len(src) > 0 && !d.Done() {
			n, _, _, err := d.Next(src)
			if err != nil {
				b.Fatal(err)
			}
			src = src[n:]
		}
		if !d.Done() {
			b.Fatal("incomplete")
		}
	}
}
