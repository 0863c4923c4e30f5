// Package compare runs a candidate rate-limiting algorithm beside the
// enforced one on live traffic, and counts how often the two agree.
//
// A Limiter is a strategy.Strategy built from two strategies:
//
//	enforced, _ := fixedwindow.New(rdb, lim, strategy.WithPrefix("rl:api:"))
//	candidate, _ := slidinglog.New(rdb, lim, strategy.WithPrefix("rl:api:"))
//	l, _ := compare.New(enforced, candidate)
//	defer l.Close()
//
// Its AllowN returns the enforced strategy's decision, unchanged; the
// candidate decides the same request (same subject, same cost) on its own
// keys, in shadow: its decision never reaches the caller, and its errors
// are counted, never returned. Every request
// then has one Outcome: BothAllow, BothDeny, EnforcedOnlyDeny (the
// candidate would have let it through), CandidateOnlyDeny (the candidate
// would have denied it), or, counted apart, CandidateError and Dropped.
// Agreement returns the cumulative counts (the agreement matrix), and
// WithReport hands each outcome to a callback, e.g. a metric.
//
// # Where the candidate runs
//
// By default the candidate adds no round trip to the caller's path:
//
//   - Pipelined (the default when both strategies are Redis strategies of
//     this module, unsharded, on the same *redis.Client, *redis.ClusterClient
//     or *redis.Ring): the enforced and the candidate script go to Redis
//     together in one pipeline on the caller's goroutine, one round trip.
//     Exact: the candidate sees each caller's requests in order and
//     nothing is dropped. It saves the second round trip of the inline
//     and background modes; BenchmarkCompareRatio measures the three as
//     ratios to the enforced strategy alone (go test -run '^$' -bench
//     CompareRatio -benchtime 1x ./compare).
//   - Background (the default otherwise, a batch.Client included, which
//     pipelines concurrent calls itself; or WithBackground): a goroutine
//     of its own, started after the enforced decision and not waited for.
//     At most WithMaxInFlight run at once (default 64): a request that
//     finds them all busy is not compared (Dropped), so a slow candidate
//     backend never piles up goroutines or slows enforcement. Each runs
//     under WithTimeout (default 1s) and under the caller's context values
//     but not its cancellation. Two concurrent requests of one subject may
//     reach the candidate in the other order than the enforced strategy.
//     With a batch.Client the candidate's call shares a pipeline with
//     other decisions.
//   - Inline (WithInline): on the caller's goroutine, right after the
//     enforced decision. Exact and never dropped; the right choice for a
//     local twin candidate and for tests: measured on twins, inline cost
//     the candidate twin's own time, while in the background a caller at
//     full speed saw 85% of its comparisons dropped at a bound of 1,024.
//     With a Redis candidate it adds its round trip. The default cannot
//     tell a twin from a sharded Redis strategy: pass WithInline for
//     twins.
//
// Wait waits for the background comparisons running; Close stops comparing
// and waits for them, leaving no goroutine behind.
//
// Peek reads the enforced strategy only; Reset resets both; Limit is the
// enforced strategy's. A request the enforced strategy answers with an
// error, and a request of cost 0, are not run on the candidate. CompareN
// runs the candidate alone on a request whose enforced decision was made
// elsewhere (the facade's cache of denials), so that it still sees every
// request.
//
// # Promoting without a cold start
//
// The candidate's state is the state the promoted policy will use. On
// Redis, give the candidate the same key prefix as the enforced strategy:
// its keys (<prefix><its algorithm tag>:{subject}) are the keys a strategy
// of the candidate's algorithm built later with that prefix reads, so
// switching the policy to the candidate's algorithm starts from the state
// it built in shadow. For local twins, whose state lives in the strategy
// object, hand over Candidate() itself. A subject at its limit under the
// enforced algorithm then stays at its limit after the swap; a naive swap
// to empty state lets up to a full limit more through (see
// docs/changing-limits.md, "Promoting without a cold start").
package compare
