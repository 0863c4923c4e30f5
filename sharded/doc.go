// Package sharded spreads one hot subject over several keys, so that on a
// Redis Cluster its decisions are served by several nodes instead of the
// one that owns its hash slot.
//
// New(shards, lim, build) builds the wrapped strategy once per distinct
// share (build receives the share's Limit) and splits the subject's limit
// over the shards: each shard enforces lim.Limit/shards units per Window
// and, when lim.Burst is set, lim.Burst/shards of the burst, the remainders
// going one unit each to the first shards, so that shares sum exactly to
// Limit and Burst. When the limit is smaller than shards the shard count is
// reduced so that no shard gets 0; Shards and Limits report what is in use.
// Each shard's capacity is what its strategy's Limit().Capacity() says, and
// Limit returns the subject's whole limit (Burst 0 when the wrapped
// strategy has none). ratelimit.Config.Shards > 1 applies it to any
// algorithm.
//
// # Keys
//
// Every strategy of this module decides shard i on its own view of the
// subject's shard i (the index is a value of the view, not of the
// context), which puts it inside the key's hash tag:
//
//	rl:sl:{user:42#0} ... rl:sl:{user:42#5}
//
// so the shards of a subject land on different cluster slots, and since
// subjects are escaped ('#' is written %23), no subject's key, sharded or
// not, can equal another's shard key. A strategy from elsewhere receives
// the subject with "#<i>" appended instead: distinct as long as every
// subject of that strategy's key space goes through the wrapper.
//
// # Decisions
//
// A request of n units goes to one shard, picked round robin over the units
// of Limit (shard i gets exactly its share of every Limit consecutive
// picks) from a counter that starts at random and is one of 64 chosen by
// the subject's hash. When that shard denies, the next shard is tried, up
// to WithProbes shards (2 by default: the allowed path costs one round
// trip, a denial two). One decision is atomic on one shard: a cost above
// the largest share (the first shard's) can never pass and is denied with
// RetryAfter strategy.Never, so choose Shards such that Limit/Shards is
// well above your largest cost. Denials record nothing.
//
// # Results
//
// AllowN's Result speaks for the subject, estimated from the shards it
// tried: Limit is the subject's capacity; Remaining is the remaining units
// of the shards tried scaled to the subject's capacity, rounded down (exact
// when every shard was tried; 0 once the shards tried are full);
// RetryAfter, on a denial, is the shortest wait among the shards tried;
// ResetAfter the longest. Round robin keeps shards within a unit or two of
// each other, so the estimates are close. Peek reads every shard and is
// exact: sums of Remaining and Limit, Allowed when any shard would take one
// unit, the shortest RetryAfter and the longest ResetAfter. Reset clears
// every shard. With the Redis strategies of this module, Peek and Reset send
// one pipeline (a *redis.ClusterClient splits it into one per node, sent
// concurrently): one round trip whatever the shard count. With other
// strategies they call every shard concurrently.
//
// # Precision
//
// The subject never gets more than its limit: each shard enforces its share
// atomically. It can get less, when a request lands on a full shard while
// another has room: with the default round robin and two probes, nothing is
// lost from one host and about 1.5% from 8 hosts (measured by TestPrecision;
// docs/cluster.md has the table).
//
// # When to shard
//
// Only subjects hot enough to load one Redis node: a global limit, a big
// tenant, a public endpoint's anonymous bucket. Sharding divides per-node
// load by about the shard count; it costs a little precision (above),
// Peek and Reset cost one script per shard (in one pipeline per node), and
// a subject's memory is that of Shards subjects of 1/Shards the limit. New
// accepts at most MaxShards (1,024) shards: a few per cluster node is
// enough.
//
// A Limiter is safe for concurrent use.
//
// # Per-subject limits
//
// Sharded does not implement strategy.LimitOverrider: a per-call limit
// would have to be split among the shards on every call, with shard
// counts that depend on the limit (see Count), so that a subject's shards
// would change with its tier. Give a hot subject whose limit depends on a
// tier a sharded strategy per tier instead.
package sharded
