// Package benchmarks measures the module's strategies against each other,
// a trivial EVALSHA floor and peer libraries. It is a nested module so that
// the peers (go-redis/redis_rate, ulule/limiter, mennanov/limiters) never
// enter the library's go.mod.
//
// The Go benchmarks:
//
//	cd benchmarks
//	go test -run '^$' -bench . -benchmem                      # everything
//	go test -run '^$' -bench 'Decide/fixed_window/local' -benchmem
//	go test -run '^$' -bench 'Workload/.*/redis' -benchmem -count 6 | tee new.txt   # compare with benchstat
//
// BenchmarkDecide runs each strategy (and the floor) on its local twin, an
// embedded miniredis and a real redis-server that the benchmark starts on a
// free loopback port and stops afterwards; serial and parallel; 10,000
// subjects and one hot subject; allowed and denied paths. It drives the
// strategies with a client clock so that each path is what it says: on the
// allowed path the clock advances 1% less than Window/Limit between two
// visits of a subject (it runs at its limit, about 99% allowed, and its state
// never lapses), on the denied path it stands still on exhausted subjects.
// Custom metric allowed/op shows the path taken.
//
// BenchmarkWorkload is the report's workload (10,000 random subjects, 100
// per minute, the Redis server's TIME) for every target, peers included.
//
// BenchmarkWorstCall reads from SLOWLOG the Redis time of the worst valid
// sliding-log call (n = capacity at Limit = MaxUnits, slidinglog and
// multilimit) and of a denial that binary-searches 10,000 entries:
//
//	go test -run '^$' -bench BenchmarkWorstCall -benchtime 1000x .
//
// The report command, ./cmd/report, puts it all in one table; see its doc.
package benchmarks
