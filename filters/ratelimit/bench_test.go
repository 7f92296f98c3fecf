// Benchmarks for the per-request paths; a held key must report 0 allocs/op.

package ratelimit

import (
	"strconv"
	"sync/atomic"
	"testing"
)

func BenchmarkBucketAllow(b *testing.B) {
	l := mustLimit(b, 1e9, 1<<20)
	var bk Bucket
	now := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		now += 2
		bk.Allow(l, now, 1)
	}
}

// One bucket shared by every goroutine: the global dimension's contention.
func BenchmarkBucketAllowShared(b *testing.B) {
	l := mustLimit(b, 1e9, 1<<20)
	var bk Bucket
	var clock atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bk.Allow(l, clock.Add(2), 1)
		}
	})
}

// Keys already held, 4096 of them in a table of 65,536.
func BenchmarkKeysAllowHeld(b *testing.B) {
	l := mustLimit(b, 1e9, 1<<20)
	k := NewKeys(1<<16, 0)
	keys := make([][]byte, 4096)
	for i := range keys {
		keys[i] = []byte("198.51." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256))
		k.Allow(l, keys[i], 0, 1)
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		k.Allow(l, keys[i&4095], int64(i), 1)
	}
}

// A new key every time, in a full table: insert plus eviction.
func BenchmarkKeysAllowNew(b *testing.B) {
	l := mustLimit(b, 10, 5)
	k := NewKeys(1<<16, 0)
	key := []byte("flood-00000000")
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		n := i
		for j := len(key) - 1; j >= 6; j-- {
			key[j] = byte('0' + n%10)
			n /= 10
		}
		k.Allow(l, key, int64(i)*1000, 1)
	}
}
