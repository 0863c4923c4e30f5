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
