// Package ratelimit holds Loopgate's local rate limits: a lock-free GCRA
// bucket per key, and bounded key tables that every loop shares without
// locks.
//
// # GCRA
//
// The generic cell rate algorithm keeps one number per key, the theoretical
// arrival time (TAT): when the bucket would be full again if nothing more
// arrived. A Limit of r tokens a second with burst b spends T = 1/r per
// token and lets the TAT run at most b·T ahead of now. Taking n tokens at
// now moves the TAT from max(TAT, now) to that plus n·T, and is allowed when
// the result is at most now + b·T. So an idle key may take b at once and r
// a second after that, and over any interval of length t a key is allowed
// at most r·t + b tokens.
//
// A Bucket is that TAT in one atomic int64 of integer nanoseconds. Allow
// loads it, decides, and stores the new TAT with one compare-and-swap; a
// denial stores nothing. Loops racing on one bucket retry the CAS, never
// wait for each other, and never block. The clock is the caller's: any
// monotonic nanosecond count (filters.Exchange.Now in the gateway), so
// tests drive it by hand and no decision reads the time itself.
//
//	l, err := ratelimit.NewLimit(100, 20) // 100/s, bursts of 20
//	var global ratelimit.Bucket
//	d := global.Allow(l, x.Now(), 1)
//	if !d.Allowed {
//		// 429; Retry-After: d.RetryAfterSeconds(); X-RateLimit-Reset: d.ResetSeconds()
//	}
//
// A Decision carries what the X-RateLimit-* and Retry-After headers need:
// the tokens remaining, the time until the bucket is full again (Reset) and,
// for a denial, the time until the request would fit (RetryAfter).
//
// The Limit is passed to every call rather than kept in the bucket, so a
// config reload that changes a rate keeps every bucket's TAT: a client at
// its limit is not handed a fresh burst.
//
// # Keys
//
// Keys is one limit's table of buckets by key (a client IP, a user, a
// header's value), shared by every loop. It is a fixed array of slots made
// at construction, in groups of eight that share a cache line; a key's
// 64-bit seeded hash picks its group. Finding a key, inserting one and
// evicting one are compare-and-swaps on the slots, so no loop ever waits on
// a lock another loop holds, and the table never grows: a flood of a
// million spoofed addresses costs no more memory than the table's capacity.
//
// When a new key finds its group full, it evicts the group's entry whose
// bucket is fullest (the smallest TAT). Dropping a full bucket loses
// nothing, since a new one starts full; otherwise the evicted key loses the
// least debt there is to lose. Keys being limited carry the most debt and
// are the last to go, so a flood of new keys cannot wash an abusive
// client's state away. Sweep drops buckets that have been full for the idle
// time, so the table empties when traffic stops; the owner calls it off the
// loops now and then.
package ratelimit
