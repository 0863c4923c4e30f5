// Package propertytests holds property-based tests (gopter) that run every
// strategy of this module, sharded and not, over random schedules, and a
// mutation check that proves those properties can fail. It has no API: the
// tests are the point, and this file is what lets the package build.
//
// # Schedules
//
// A generated case is a Limit (units, window, burst) and a schedule: steps
// that move a manual clock (by 0, 1 ms, a fraction of the window, the window
// minus, plus or exactly one millisecond, to the next aligned window edge,
// several windows) and then issue a batch of requests, each from one of
// several app hosts (separate go-redis clients and strategy instances on the
// same Redis) for one of several subjects, with a cost n that is sometimes 0
// and sometimes above the capacity. Concurrent properties issue a batch from
// one goroutine per request, all released at once; serial ones issue it in
// order. Every host reads the same client clock, which moves only between
// batches, so the time of each decision is the time the script used.
//
// Backends: "miniredis" (client clock; FastForward keeps TTLs in step),
// "miniredis-time" (the script reads the server's TIME, set with SetTime),
// "redis" (a real redis-server started by the test, each host on a client
// with ContextTimeoutEnabled, so batched by default; windows of 5 to 10
// minutes, so that TTLs, which run in real time there, never cut into the
// simulated time of a case, and fixed windows kept out of the last eighth
// of a window for the same reason) and "local" (the in-process twins).
// Windows are mostly not multiples of the limits, so rates are fractions of
// a unit per millisecond and rounding shows.
//
// # Properties
//
// Each is its own subtest, TestProperties/<strategy>/<backend>/<property>:
//
//   - bound: under concurrency, the allowed units never exceed the
//     algorithm's bound: sliding log in every window (t-W, t]; fixed window
//     per aligned window; token bucket and GCRA over every interval [a, b]
//     at most Burst + rate*(b-a); sliding counter its documented bound;
//     sharded, the subject's total against the whole limit.
//   - exact: on a serial schedule every Result (Allowed, Remaining,
//     RetryAfter, ResetAfter, Limit) is the one an independent model of the
//     algorithm computes from the units allowed before: the units of
//     (t-W, t] for the sliding log (a request recorded at max(t, the newest
//     recorded time), as package slidinglog documents for a clock that
//     steps back; the property's clock never does), of the aligned window for the fixed
//     window, the sliding counter's integer estimate, and for the token
//     bucket and GCRA the tokens min(Burst, Burst + rate*(t - t_i) - units
//     allowed since t_i) in exact integers. Every strategy documents exact
//     arithmetic, so nothing is tolerated.
//   - steady: a client spending n units every ceil(n*W/Limit) ms or more is
//     never denied (after spending the whole burst, for the token bucket
//     and GCRA); not for the sliding counter, which does not promise it.
//   - denied_inert: the schedule without its denied requests gets the same
//     results for every request left.
//   - retry_after: a denied request passes once RetryAfter has passed (and,
//     where RetryAfter is exact, not 1 ms earlier); Never only when n exceeds
//     the capacity.
//   - remaining: Peek agrees with the Remaining just returned, Remaining+1
//     units are denied and Remaining units pass.
//   - twin: the Redis script and the local twin return identical Results.
//   - entries: a sliding log's sorted set holds at most one entry per
//     request allowed in the window ending at the last allowed request, plus
//     its base entry, whatever the costs (a request of n units is one
//     entry, and entries that left the window are removed).
//   - ttl: every key carries a TTL no longer than its state matters, and on
//     miniredis every key is gone once that time has passed.
//   - bound_servertime: on a real Redis with the default clock (the
//     server's TIME), goroutines of several hosts hammer one subject for a
//     few windows of real time; no set of allowed units whose decision
//     times, known to lie between the call and the reply, certainly break
//     the bound.
//
// Lease subjects (lease-slidinglog, lease-fixedwindow, lease-tokenbucket,
// lease-gcra: each host decides through package lease, with a lifetime of
// Window/2 and blocks up to the whole capacity, so units are spent well
// after Redis decided them) run these only:
//
//   - bound, as above, from the times the units were spent;
//   - lease_late: a host leases, spends some of its lease a random time
//     later, and the other hosts fill the limit where the late units are
//     still in the window: the bound holds;
//   - lease_return (token bucket, GCRA): once every host is closed, the
//     units leased less those given back and those stranded (refilled
//     while leased) are exactly the units spent;
//   - lease_refilled (token bucket, GCRA, on Redis): a host leases, the
//     bucket refills, another host drains it deciding directly, and the
//     first host's Close gives nothing back: its units were refilled.
//
// Sharded strategies run bound, ttl and bound_servertime only: which shard
// a request lands on is not deterministic, and a sharded subject may deny a
// request while another shard has room, so the serial properties do not
// apply to it.
//
// Every property run also fails when it saw no allowed request, or (but
// for steady) no denial: it would have checked nothing.
//
// On failure gopter shrinks the case and the test prints the seed and the
// command that replays it.
//
// # Environment
//
//	RATELIMIT_PROP_SEED=N    replay a run: the seed every property starts from
//	                         (default: the time; printed on failure)
//	RATELIMIT_PROP_CASES=N   cases per property and backend (default 15 to 40
//	                         depending on the backend; a tenth of that for
//	                         bound_servertime, which takes real time); a soak:
//	                         RATELIMIT_PROP_CASES=2000 go test -run TestProperties -timeout 2h ./propertytests
//	RATELIMIT_PROP_STEPS=N   longest schedule, in steps (default 24)
//	RATELIMIT_PROP_SHRINK=N  most shrink attempts on failure (default 300)
//	RATELIMIT_MUTANTS=REGEXP run only the mutants whose name matches
//
// # Mutation check
//
// TestMutants applies deliberate bugs, one at a time, to copies of the
// scripts and Go files (through go test -overlay, so the checkout is never
// changed), runs the strategy's properties against each with a fixed seed
// and a bounded number of cases, and fails if a mutant survives or if a
// mutation's snippet is no longer found in its file. Its log is a table of
// the property that first caught each mutant (a mutant's run stops there);
// see it with
//
//	go test -v -run TestMutants ./propertytests
//
// Scripts are mutated on the real Redis backend, twins on the local one.
// Each mutant is built once (a few seconds) and runs its strategy's
// properties with RATELIMIT_PROP_CASES=25 and no shrinking; the unmutated
// code must pass the same runs (alongside the mutants), so a catch is never
// a flaky failure of the suite itself.
package propertytests
