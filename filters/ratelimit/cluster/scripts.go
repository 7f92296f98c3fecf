// The Lua scripts Redis runs: GCRA with an "at most N" grant, the hand-back
// of unused tokens, and the membership heartbeat.

package cluster

import "github.com/redis/rueidis"

// Every script reads the clock with TIME on the Redis server, so nodes
// whose clocks disagree still share one timeline, and works in integer
// microseconds: a Lua number is a double, exact to 2^53, and microseconds
// since 1970 stay below 2^51 until the year 2041 + 35 years. Numbers are
// written back with string.format('%d'), because Lua's own conversion
// keeps only 14 significant digits. Redis 5 or later is required: its
// scripts replicate their effects, so a write after TIME is allowed.

// acquireScript takes up to ARGV[3] tokens from the GCRA bucket at
// KEYS[1], whose emission interval is ARGV[1] µs per token and whose burst
// is ARGV[2] tokens. It grants as many as are there, at most the number
// asked, and stores the new TAT with a PX expiry at the moment the bucket
// would be full again, so an idle limit leaves no key behind. It replies
// {granted, remaining, retry_us, reset_us}: retry_us is the wait until the
// tokens not granted would all fit, reset_us the wait until the bucket is
// full.
var acquireScript = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local tat = now
local stored = redis.call('GET', KEYS[1])
if stored then
  tat = math.max(tonumber(stored), now)
end
local tolerance = burst * interval
local avail = math.floor((now + tolerance - tat) / interval)
local granted = math.max(0, math.min(want, avail))
if granted > 0 then
  tat = tat + granted * interval
  redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', string.format('%d', math.ceil((tat - now) / 1000)))
end
local retry = 0
if granted < want then
  retry = math.max(1, tat + math.min(want - granted, burst) * interval - tolerance - now)
end
return {granted, math.max(0, avail - granted), retry, tat - now}
`)

// giveBackScript hands ARGV[2] unused tokens back to the bucket at KEYS[1]
// (ARGV[1] µs per token): it moves the TAT back, never before now, so the
// bucket is never fuller than its burst. It replies with the tokens it took
// back.
var giveBackScript = rueidis.NewLuaScript(`
local stored = redis.call('GET', KEYS[1])
if not stored then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tat = tonumber(stored)
local back = math.min(tonumber(ARGV[2]), math.floor(math.max(0, tat - now) / interval))
tat = tat - back * interval
if tat <= now then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', string.format('%d', math.ceil((tat - now) / 1000)))
end
return back
`)

// heartbeatScript scores node ARGV[1] with the server's time in
// milliseconds in the sorted set KEYS[1], trims members older than ARGV[2]
// ms, and replies with the members left: the live node count. The set
// expires once no node has beaten for ARGV[2] ms. No key is enumerated.
var heartbeatScript = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], string.format('%d', now), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('(%d', now - ttl))
redis.call('PEXPIRE', KEYS[1], string.format('%d', ttl))
return redis.call('ZCARD', KEYS[1])
`)
