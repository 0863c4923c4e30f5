package benchmarks_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/benchmarks/internal/targets"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

const manySubjects = 10000

var (
	serversMu sync.Mutex
	mr        *miniredis.Miniredis
	srv       *testredis.Server
	clients   = map[string]*redis.Client{}
)

func TestMain(m *testing.M) {
	code := m.Run()
	serversMu.Lock()
	for _, c := range clients {
		c.Close()
	}
	if mr != nil {
		mr.Close()
	}
	if srv != nil {
		srv.Close()
	}
	serversMu.Unlock()
	os.Exit(code)
}

// client returns a client of the backend, starting the server on first use:
// an embedded miniredis, or a redis-server on a free loopback port.
func client(b *testing.B, backend string) *redis.Client {
	b.Helper()
	serversMu.Lock()
	defer serversMu.Unlock()
	if c := clients[backend]; c != nil {
		return c
	}
	var addr string
	switch backend {
	case "miniredis":
		m, err := miniredis.Run()
		if err != nil {
			b.Fatal(err)
		}
		mr, addr = m, m.Addr()
	case "redis":
		s, err := testredis.StartProcess()
		if err != nil {
			b.Fatal(err)
		}
		srv, addr = s, s.Addr
	default:
		b.Fatalf("unknown backend %q", backend)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 128})
	clients[backend] = c
	return c
}

// stepClock is a client clock driven by the benchmark's operation count:
// now = base + ops * perOp.
type stepClock struct {
	base  int64
	perOp int64
	ops   atomic.Int64
}

func (c *stepClock) Now() time.Time { return time.Unix(0, c.base+c.ops.Load()*c.perOp) }

// fixture is a strategy with its subjects and clock, kept across the runs
// of one benchmark (b.N grows) so that setup happens once.
type fixture struct {
	st       strategy.Strategy
	subjects []string
	clock    *stepClock
}

var (
	fixturesMu sync.Mutex
	fixtures   = map[string]*fixture{}
)

var epoch = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC).UnixNano()

var floorScript = redis.NewScript("return 1")

// floorStrategy is the EVALSHA `return 1` floor dressed as a strategy.
type floorStrategy struct{ rdb *redis.Client }

func (f floorStrategy) AllowN(ctx context.Context, key string, _ int64) (strategy.Result, error) {
	return strategy.Result{Allowed: true}, floorScript.Run(ctx, f.rdb, []string{key}).Err()
}
func (f floorStrategy) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return f.AllowN(ctx, key, 0)
}
func (floorStrategy) Reset(context.Context, string) error { return nil }
func (floorStrategy) Limit() strategy.Limit               { return strategy.Limit{} } // no limit: it allows everything

func getFixture(b *testing.B, alg, backend, keys, path string) *fixture {
	b.Helper()
	id := alg + "/" + backend + "/" + keys + "/" + path
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	if f := fixtures[id]; f != nil {
		return f
	}
	n, shards := 1, 0
	switch keys {
	case "many":
		n = manySubjects
	case "hot-sharded4":
		shards = 4
	}
	lim := strategy.PerMinute(100)
	if path == "denied" {
		lim = strategy.PerHour(100) // real TTLs outlive any benchmark run
	}
	f := &fixture{clock: &stepClock{base: epoch}}
	if path == "allowed" {
		// a subject is visited every n decisions; between two visits the
		// clock advances 1% less than Window/Limit: the subject runs at its
		// limit (about 99% allowed) and its state never lapses
		f.clock.perOp = int64(lim.Window/time.Duration(lim.Limit)*99/100) / int64(n)
	}
	prefix := "bench" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36) + ":"
	var err error
	switch {
	case alg == "floor":
		f.st = floorStrategy{client(b, backend)}
	case backend == "local":
		f.st, err = targets.NewLocalStrategy(strategy.Algorithm(alg), lim, f.clock, shards)
	default:
		f.st, err = targets.NewStrategy(strategy.Algorithm(alg), client(b, backend), lim, prefix, f.clock, shards)
	}
	if err != nil {
		b.Fatal(err)
	}
	f.subjects = make([]string, n)
	for i := range f.subjects {
		f.subjects[i] = "user:" + strconv.Itoa(i)
	}
	ctx := context.Background()
	if alg != "floor" {
		// warm every subject; exhaust it for the denied path (unit by unit
		// when sharded: a cost above one shard's share never passes)
		cost, times := int64(1), int64(1)
		if path == "denied" {
			cost = lim.Capacity()
			if shards > 0 {
				cost, times = 1, 2*lim.Capacity()
			}
		}
		for _, s := range f.subjects {
			for range times {
				if _, err := f.st.AllowN(ctx, s, cost); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	fixtures[id] = f
	return f
}

func algorithms() []string {
	var a []string
	for _, x := range targets.Names() {
		a = append(a, string(x))
	}
	return a
}

// BenchmarkDecide: every strategy on every backend, serial and parallel,
// many subjects, one hot subject and one hot subject spread over 4 shards
// (Config.Shards), allowed and denied paths.
func BenchmarkDecide(b *testing.B) {
	for _, alg := range append(algorithms(), "floor") {
		for _, backend := range []string{"local", "miniredis", "redis"} {
			if alg == "floor" && backend == "local" {
				continue
			}
			for _, keys := range []string{"many", "hot", "hot-sharded4"} {
				if alg == "floor" && keys == "hot-sharded4" {
					continue
				}
				for _, path := range []string{"allowed", "denied"} {
					if alg == "floor" && path == "denied" {
						continue
					}
					b.Run(fmt.Sprintf("%s/%s/%s/%s/serial", alg, backend, keys, path), func(b *testing.B) {
						decide(b, getFixture(b, alg, backend, keys, path), false)
					})
					b.Run(fmt.Sprintf("%s/%s/%s/%s/parallel", alg, backend, keys, path), func(b *testing.B) {
						decide(b, getFixture(b, alg, backend, keys, path), true)
					})
				}
			}
		}
	}
}

func decide(b *testing.B, f *fixture, parallel bool) {
	ctx := context.Background()
	n := int64(len(f.subjects))
	var allowed, failed atomic.Int64
	var firstErr atomic.Value
	one := func() bool {
		i := f.clock.ops.Add(1)
		r, err := f.st.AllowN(ctx, f.subjects[i%n], 1)
		if err != nil {
			if failed.Add(1) == 1 {
				firstErr.Store(err)
			}
		}
		return r.Allowed
	}
	b.ReportAllocs()
	b.ResetTimer()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			var yes int64
			for pb.Next() {
				if one() {
					yes++
				}
			}
			allowed.Add(yes)
		})
	} else {
		var yes int64
		for range b.N {
			if one() {
				yes++
			}
		}
		allowed.Add(yes)
	}
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d errors, first: %v", failed.Load(), firstErr.Load())
	}
	b.ReportMetric(float64(allowed.Load())/float64(b.N), "allowed/op")
}

// BenchmarkWorkload is the report's workload for every target, peers
// included: 10,000 random subjects, 100 per minute, the Redis server's TIME
// (redis_rate too; ulule/limiter and mennanov/limiters use this process's
// clock). parallel64 runs 64 goroutines whatever GOMAXPROCS is.
func BenchmarkWorkload(b *testing.B) {
	for _, t := range targets.All(true) {
		for _, backend := range []string{"miniredis", "redis"} {
			for _, mode := range []string{"serial", "parallel64"} {
				b.Run(t.Name+"/"+backend+"/"+mode, func(b *testing.B) {
					workload(b, t, backend, mode == "parallel64")
				})
			}
		}
	}
}

var workloadRun = "w" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36) + "/"

func workload(b *testing.B, t targets.Target, backend string, parallel bool) {
	d, err := t.New(targets.Env{RDB: client(b, backend), Limit: strategy.PerMinute(100), Prefix: "bench:"})
	if err != nil {
		b.Skipf("%s: n/a on %s: %v", t.Name, backend, err) // a peer that cannot run here
	}
	subjects := make([]string, manySubjects)
	for i := range subjects {
		subjects[i] = workloadRun + "u" + strconv.Itoa(i)
	}
	ctx := context.Background()
	var allowed, failed atomic.Int64
	var firstErr atomic.Value
	var seed atomic.Uint64
	loop := func(next func() bool) {
		rng := rand.New(rand.NewPCG(1, seed.Add(1)))
		var yes int64
		for next() {
			ok, err := d.Decide(ctx, subjects[rng.IntN(manySubjects)])
			if err != nil && failed.Add(1) == 1 {
				firstErr.Store(err)
			}
			if ok {
				yes++
			}
		}
		allowed.Add(yes)
	}
	b.ReportAllocs()
	b.ResetTimer()
	if parallel {
		b.SetParallelism(max(1, 64/runtimeProcs()))
		b.RunParallel(func(pb *testing.PB) { loop(pb.Next) })
	} else {
		i := 0
		loop(func() bool { i++; return i <= b.N })
	}
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d errors, first: %v", failed.Load(), firstErr.Load())
	}
	b.ReportMetric(float64(allowed.Load())/float64(b.N), "allowed/op")
}
