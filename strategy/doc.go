// Package strategy defines the contract every rate-limiting algorithm in this
// module implements: the Strategy interface, the Limit it enforces, the Result
// of a decision, the errors it returns and the options every algorithm shares.
//
// Each algorithm lives in a package of its own (slidinglog, compactlog,
// slidingcounter, fixedwindow, tokenbucket, gcra) and offers New, backed by one Lua script on
// Redis, and NewLocal, an in-process twin that makes the same decisions for
// the same clock. A caller that holds a Strategy can swap one algorithm for
// another without touching its call sites.
//
// # The contract
//
// A Strategy decides (AllowN), reads (Peek), forgets (Reset) and says what
// it enforces (Limit). Limit's Burst is 0 unless the algorithm uses a burst
// (token bucket, GCRA): the sliding log, compact log, fixed window and
// sliding counter store their Limit with Burst 0 whatever they were given,
// so Limit().Capacity() is always the most units a subject can hold and the
// Result.Limit of its decisions. Wrappers (sharded, multilimit, the facade)
// read it rather than infer it. Algorithm names the algorithms in
// configuration.
//
// Every strategy of the module also implements ContextHonourer: a Redis
// strategy honours contexts when its client does (a *redis.Client, or a
// type embedding one, built with ContextTimeoutEnabled, or a client that
// implements ContextHonourer and says so), a local twin always. A caller
// may then call it on its own goroutine and still return by the deadline.
//
// # The algorithms' types
//
// Every algorithm package (slidinglog, compactlog, slidingcounter,
// fixedwindow, tokenbucket, gcra) has the same two types, built on one
// engine, with
// the same methods: Limiter (on Redis) and Local (its in-process twin) have
// AllowN, Peek, Reset and Limit (Strategy), HonoursContext
// (ContextHonourer), AllowNWith, PeekWith and ValidateLimit
// (LimitOverrider) and RefundN (Refunder); a Limiter also has Key, the
// Redis key of a subject, and a Local Subjects, how many subjects it holds.
// go doc does not list them on each type, since they come from the engine.
//
// Errors wrap one of the sentinels of this package and read
// "ratelimit: <what>: <detail>", with one "ratelimit:" prefix; the detail
// names the field, and the package when the bound is its own
// ("ratelimit: invalid limit: compactlog: Limit must be <= 10000, got ...").
//
// # Time
//
// Redis-backed strategies read the Redis server's TIME inside their script by
// default, so clock skew between application hosts cannot matter. WithClock
// selects a client clock instead: the script then receives the time as an
// argument. Local twins use time.Now unless WithClock is given. All
// arithmetic is done in whole milliseconds; a Window must be a whole number
// of milliseconds.
//
// # Window edges
//
// A unit recorded at time t counts while now - t < Window: the sliding window
// is (now - Window, now]. Fixed windows are aligned to multiples of Window
// since the Unix epoch.
//
// # Keys
//
// A Redis key is <prefix><algorithm tag>:{<subject>} where the subject is kept
// readable and only '{', '}', '#' and '%' are percent-escaped, so that no two
// distinct (algorithm, subject, shard) triples share a key and every subject
// is its own Redis Cluster hash tag. See KeyFor.
package strategy
