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
// keys, in shadow: its decision never reaches the caller. Every request
// then has one Outcome: BothAllow, BothDeny, EnforcedOnlyDeny (the
// candidate would have let it through), CandidateOnlyDeny (the candidate
// would have denied it), or, counted apart, CandidateError and Dropped.
// Agreement returns the cumulative counts (the agreement matrix), and
// WithReport hands each outcome to a callback, e.g. a metric.
//
// # Off the request path
//
// By default the candidate runs on a goroutine of its own, started after
// the enforced decision and not waited for, so it adds no round trip to the
// caller's path: measured on a real Redis, enforced + candidate cost the
// caller about what the enforced strategy alone does (see the README's
// "Comparing two algorithms on live traffic"). With a batch.Client the
// candidate's call then shares a pipeline with other decisions. At most
// WithMaxInFlight candidate decisions run at once (default 64): a request
// that finds them all busy is not compared (Dropped), so a slow candidate
// backend never piles up goroutines or slows enforcement. Each runs under
// WithTimeout (default 1s) and under the caller's context values but not
// its cancellation. Wait waits for the running ones; Close stops comparing
// and waits for them, leaving no goroutine behind.
//
// Running in the background, the candidate may see two concurrent requests
// of one subject in the other order than the enforced strategy did; its
// decisions are then those of a slightly different interleaving. WithInline
// runs the candidate on the caller's goroutine instead, right after the
// enforced decision: exact and never dropped, the right choice for a local
// twin candidate (a microsecond) and for tests, but with a Redis candidate
// it adds its round trip to every request.
//
// Peek reads the enforced strategy only; Reset resets both; Limit is the
// enforced strategy's. A request the enforced strategy answers with an
// error, and a request of cost 0, are not run on the candidate.
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
// to empty state lets up to a full limit more through (measured in the
// README's "Promoting without a cold start").
package compare
