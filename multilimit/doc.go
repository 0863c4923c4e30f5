// Package multilimit enforces several limits on one subject at once, all or
// nothing: e.g. 10 requests a second AND 1000 an hour. One script checks
// every limit first and records the request's units under every limit only
// when every limit allows them, so a denied request consumes nothing from
// any limit. (Checking two independent limiters one after the other eats
// the first limit's units when the second denies.)
//
//	lim, err := multilimit.New(rdb, []multilimit.Rule{
//		{Algorithm: strategy.SlidingLog, Limit: strategy.PerSecond(10)},
//		{Algorithm: strategy.FixedWindow, Limit: strategy.PerHour(1000)},
//	})
//
// A Limiter implements strategy.Strategy, so it drops in wherever one
// algorithm does. Its Result is the most restrictive of the rules: the
// smallest Remaining and the Limit of the rule that has it, the largest
// RetryAfter of the rules that deny, the largest ResetAfter (on a tie of Remaining, the smaller
// capacity, then the earlier rule). Limit returns the most restrictive
// rule's Limit. Limiter and Local both have AllowN, AllowNEach, Peek,
// RefundN, RefundNEach, Reset and Limit (go doc does not list them on the
// types: they come from the rules' shared internal type).
// AllowNEach also returns each rule's own Result, e.g. for one RateLimit
// header per policy: what the rule reports after the decision (Allowed
// says whether that rule alone would have allowed the request).
//
// RefundN gives back up to n units under every rule, each by its own
// rule: a sliding log rule its newest units still in its window (the
// newest entries go, so its RetryAfter stays exact), a fixed window rule
// its current window's count, down to 0. A rule never gets back units that
// left its window: after a refund a rule may hold fewer units back than
// another. It returns the state after the refund, as Peek reports it, from
// one script call; RefundNEach also returns each rule's.
//
// # Algorithms
//
// A rule is a sliding log (exact: a sorted set of every request in the
// window with its cost, as package slidinglog) or a fixed window (a count per
// window aligned to multiples of Window since the Unix epoch), in any mix.
// These two cover the usual pairing of a short exact rate with a long
// cheap quota: a sliding log stores one entry per request in its window,
// which is right for 10/s and wasteful for 1000/h, while a fixed window stores two
// integers whatever the limit, and an hourly or daily quota is usually meant
// to reset at the top of the window anyway. Both have an exact RetryAfter,
// so the combined RetryAfter (the largest over the rules that deny) is exact
// too: waiting it lets the same request pass if nothing else is recorded.
// The approximated sliding counter (its RetryAfter is an estimate) and the
// token bucket and GCRA (their capacity is a Burst refilled continuously,
// not a count per window) are not offered: combining them would make the
// combined Remaining and RetryAfter estimates; use a separate limiter for
// them. Limit.Burst is ignored.
//
// Two rules may not share both algorithm and window (the smaller limit alone
// would do); at most MaxRules rules.
//
// # Keys and Redis Cluster
//
// Each rule keeps its own key, <prefix>ml:<sl|fw>:<window ms>:{<subject>},
// e.g. rl:ml:sl:1000:{user:42} and rl:ml:fw:3600000:{user:42}. Every key of
// a subject carries the subject as its hash tag, so one script can touch all
// of them on Redis Cluster. A key depends on the rule's algorithm and
// window, not on its position or limit: reordering rules or changing a limit
// keeps the subjects' state. A sliding log key is a sorted set laid out as
// package slidinglog's (a base entry, then one entry per request in the
// window: score = the ms it was recorded at, member = a running count of
// units), so a request of n units is one entry and O(log N) work whatever
// n, and a clock that steps back is handled as slidinglog documents
// (recorded at the newest entry's time); a fixed window key is a hash
// {s: window start ms, c: units}. Every key expires once its state no longer
// matters.
//
// # Time and versions
//
// The Redis server's TIME by default, read once per decision so every rule
// sees the same instant; strategy.WithClock selects a client clock. Needs
// Redis 4 or later (HSET with several fields), Redis Cluster included.
//
// NewLocal is the in-process twin: the same decisions for the same clock.
// A subject costs 64 bytes per rule, plus 16 bytes per allowed request in
// a sliding log rule's window (whatever its cost), plus a small header,
// and is dropped once no rule's state matters; the twin holds at most
// WithMaxSubjects subjects, evicting the least recently used, and frees
// idle ones within about the longest window. A decision never allocates
// in proportion to its cost n, and takes O(log entries) time per rule
// (amortized), whichever way the clock moved.
//
// Limiter and Local are safe for concurrent use.
//
// # Per-subject limits
//
// The rules do not implement strategy.LimitOverrider: one call checks
// every rule of the set, and a per-call limit would need one per rule.
// Build one set per tier instead.
package multilimit
