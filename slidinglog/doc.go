// Package slidinglog is the exact sliding window: a log of every unit
// recorded in the last Window, on a Redis sorted set, and its in-process twin.
//
// # Algorithm
//
// A request of n units at time now is allowed when the units recorded in the
// window (now - Window, now] plus n do not exceed Limit; only then are its n
// units recorded. One Lua script per decision runs, in this order,
// ZREMRANGEBYSCORE (evict what left the window), ZCARD, ZADD NX of n members,
// and PEXPIRE, atomically on the server. Denied requests are not recorded.
// Peek (and AllowN with n = 0) counts with ZCOUNT and writes nothing.
//
// RetryAfter of a denied request is exact, to the millisecond: the time until
// enough of the oldest entries leave for n units to fit (for n = 1, until the
// oldest leaves). ResetAfter is the time until the newest entry leaves.
// RetryAfter is strategy.Never when n > Limit. Limit.Burst is ignored.
//
// # Storage and memory
//
// One sorted set per subject, key <prefix>sl:{<subject>}, score = time in
// Unix milliseconds, member = a small integer that the script picks itself:
// starting from (now + count) modulo max(128, 2 x Limit) and moving on past
// any member still live (ZADD NX never overwrites one), so members are unique
// per recorded unit across hosts and within one millisecond, and a collision
// can never undercount. Small integers cost one or two bytes in a listpack:
// a subject holding 100 entries measured 1,352 bytes with MEMORY USAGE on
// Redis 7.0, against 5,192 for the common "<ms>-<random hex>" member. Above
// zset-max-listpack-entries (128 by default) Redis converts the set to a
// skiplist, about 100 bytes per entry. The key expires Window after its
// newest entry.
//
// # Time
//
// The script reads the Redis server's TIME unless strategy.WithClock gives a
// client clock. Any Redis >= 5 (scripts replicated by effects) runs it, and
// Redis Cluster too: the script touches only its one key.
//
// Limiter and Local are safe for concurrent use.
package slidinglog
