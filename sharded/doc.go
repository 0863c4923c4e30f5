// Package sharded spreads one hot subject over several keys, so that on a
// Redis Cluster its decisions are served by several nodes instead of the
// one that owns its hash slot.
//
// New(shards, lim, build) builds the wrapped strategy once per distinct
// share (build receives the share's Limit) and splits the subject's limit
// over the shards: shard i enforces Shares(lim.Limit, shards)[i] units per
// Window and, when lim.Burst is set, Shares(lim.Burst, shards)[i] of the
// burst. Shares sum exactly to Limit and Burst; the remainder goes to the
// first shards. When the limit is smaller than shards the shard count is
// reduced so that no shard gets 0 (Count); Shards and Limits report what is
// in use. ratelimit.Config.Shards > 1 applies it to any algorithm.
//
// # Keys
//
// The shard index travels to the wrapped strategy through the context.
// Every strategy of this module puts it inside the key's hash tag:
//
//	rl:sl:{user:42#0} ... rl:sl:{user:42#5}
//
// so the shards of a subject land on different cluster slots, and since
// subjects are escaped ('#' is written %23), no subject's key, sharded or
// not, can equal another's shard key. A strategy from elsewhere (one that
// does not implement the internal ShardAware marker) receives the subject
// with "#<i>" appended instead: distinct as long as every subject of that
// strategy's key space goes through the wrapper.
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
// # Precision, measured
//
// The subject never gets more than its limit: each shard enforces its share
// atomically. It can get less, when a request lands on a full shard while
// another has room. TestPrecision measures it for 300 units a minute over 6
// shards of sliding-log twins: units allowed over units an exact limiter
// would allow, and round trips (shard decisions) per request, averaged
// over 20 runs (RATELIMIT_SHARDED_RUNS=20 go test -v -run TestPrecision
// ./sharded/):
//
//	                         burst 1x    burst 3x    steady      8 hosts     costs 1-10  2 subjects
//	unsharded                1.000 1.00  1.000 1.00  1.000 1.00  1.000 1.00  0.965 1.00  1.000 1.00
//	random, 1 probe          0.945 1.00  1.000 1.00  0.914 1.00  0.912 1.00  0.754 1.00  0.910 1.00
//	random, 2 probes         0.980 1.05  1.000 1.68  0.950 1.19  0.951 1.19  0.829 1.31  0.949 1.19
//	random, all 6 probes     1.000 1.13  1.000 4.37  1.000 3.01  1.000 3.05  0.918 2.17  1.000 3.03
//	round robin, 1 probe     1.000 1.00  1.000 1.00  1.000 1.00  0.984 1.00  0.830 1.00  0.500 1.00
//	round robin, 2 (default) 1.000 1.00  1.000 1.67  1.000 1.00  0.985 1.37  0.863 1.27  1.000 1.50
//	round robin, all 6       1.000 1.00  1.000 4.33  1.000 1.00  1.000 2.61  0.908 1.88  1.000 1.50
//
// Bursts: 1x or 3x the limit from 16 goroutines at one instant (a 3x burst
// is two thirds denials, which cost a round trip per probe). Steady:
// exactly the rate for 5 windows, from one host, or from 8 hosts (each its
// own Limiter, its own counters). Costs 1-10: random costs at the rate.
// 2 subjects: two busy subjects whose round-robin counters collide (1 in
// 64) and whose requests alternate strictly, the worst case of round robin,
// which the second probe absorbs. Random picks lose 5-9% on one probe and
// still 2-5% on two; round robin with two probes loses nothing on one host,
// 1.5% with 8 hosts, at one round trip per allowed request and two per
// denial. The loss grows with the cost of a request relative to a shard's
// share: keep the largest cost a small fraction of Limit/Shards.
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
