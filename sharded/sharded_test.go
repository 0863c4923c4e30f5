package sharded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

func TestMain(m *testing.M) { os.Exit(testredis.Main(m)) }

var ctx = context.Background()

// localLog builds sliding-log local twins on clock.
func localLog(clock strategy.Clock) func(strategy.Limit) (strategy.Strategy, error) {
	return func(l strategy.Limit) (strategy.Strategy, error) {
		return slidinglog.NewLocal(l, strategy.WithClock(clock))
	}
}

// burstLog stands for a strategy whose capacity is Burst (token bucket,
// GCRA): a sliding log of Burst units per Window.
type burstLog struct{ *slidinglog.Local }

func newBurstLog(clock strategy.Clock) func(strategy.Limit) (strategy.Strategy, error) {
	return func(l strategy.Limit) (strategy.Strategy, error) {
		st, err := slidinglog.NewLocal(strategy.Limit{Limit: l.Capacity(), Window: l.Window}, strategy.WithClock(clock))
		return burstLog{st}, err
	}
}

func mustNew(t *testing.T, shards int, lim strategy.Limit, build func(strategy.Limit) (strategy.Strategy, error), opts ...Option) *Limiter {
	t.Helper()
	l, err := New(shards, lim, build, opts...)
	if err != nil {
		t.Fatalf("New(%d, %v): %v", shards, lim, err)
	}
	return l
}

func TestShares(t *testing.T) {
	for _, c := range []struct {
		total int64
		n     int
		want  []int64
	}{
		{10, 1, []int64{10}},
		{10, 2, []int64{5, 5}},
		{10, 3, []int64{4, 3, 3}},
		{10, 4, []int64{3, 3, 2, 2}},
		{7, 7, []int64{1, 1, 1, 1, 1, 1, 1}},
		{1000, 6, []int64{167, 167, 167, 167, 166, 166}},
		{0, 1, []int64{0}},
		{strategy.MaxUnits, 3, []int64{366503875926, 366503875925, 366503875925}},
	} {
		t.Run(fmt.Sprintf("%d over %d", c.total, c.n), func(t *testing.T) {
			got := splitShares(c.total, c.n)
			if !slices.Equal(got, c.want) {
				t.Fatalf("splitShares(%d, %d) = %v, want %v", c.total, c.n, got, c.want)
			}
			var sum int64
			for _, s := range got {
				sum += s
			}
			if sum != c.total {
				t.Fatalf("splitShares(%d, %d) sum to %d", c.total, c.n, sum)
			}
		})
	}
}

func TestShardCount(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	for _, c := range []struct {
		name   string
		shards int
		lim    strategy.Limit
		want   int
		limits []strategy.Limit
	}{
		{"as asked", 4, strategy.PerMinute(10), 4, []strategy.Limit{
			{Limit: 3, Window: time.Minute}, {Limit: 3, Window: time.Minute}, {Limit: 2, Window: time.Minute}, {Limit: 2, Window: time.Minute}}},
		{"reduced to Limit", 6, strategy.PerMinute(4), 4, nil},
		{"reduced to Burst", 6, strategy.Limit{Limit: 100, Window: time.Second, Burst: 3}, 3, []strategy.Limit{
			{Limit: 34, Window: time.Second, Burst: 1}, {Limit: 33, Window: time.Second, Burst: 1}, {Limit: 33, Window: time.Second, Burst: 1}}},
		{"burst shares too", 2, strategy.Limit{Limit: 5, Window: time.Second, Burst: 9}, 2, []strategy.Limit{
			{Limit: 3, Window: time.Second, Burst: 5}, {Limit: 2, Window: time.Second, Burst: 4}}},
		{"limit 1", 6, strategy.PerMinute(1), 1, nil},
		{"limit 0 keeps one shard", 6, strategy.Limit{Limit: 0, Window: time.Second}, 1, nil},
		{"one shard", 1, strategy.PerMinute(100), 1, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := shardCount(c.shards, c.lim); got != c.want {
				t.Fatalf("shardCount(%d, %v) = %d, want %d", c.shards, c.lim, got, c.want)
			}
			l := mustNew(t, c.shards, c.lim, localLog(clock))
			if l.Shards() != c.want {
				t.Fatalf("Shards() = %d, want %d", l.Shards(), c.want)
			}
			lims := l.Limits()
			var sumL, sumB int64
			for i, s := range lims {
				if s.Limit == 0 && c.lim.Limit > 0 || c.lim.Burst > 0 && s.Burst == 0 {
					t.Fatalf("shard %d has an empty share: %v", i, s)
				}
				sumL += s.Limit
				sumB += s.Burst
			}
			if sumL != c.lim.Limit || sumB != c.lim.Burst {
				t.Fatalf("Limits() = %v sum to %d burst %d, want %d burst %d", lims, sumL, sumB, c.lim.Limit, c.lim.Burst)
			}
			if c.limits != nil && !slices.Equal(lims, c.limits) {
				t.Fatalf("Limits() = %v, want %v", lims, c.limits)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	boom := errors.New("boom")
	for _, c := range []struct {
		name   string
		shards int
		lim    strategy.Limit
		build  func(strategy.Limit) (strategy.Strategy, error)
		opts   []Option
		want   error
		says   string
	}{
		{"zero shards", 0, strategy.PerMinute(5), localLog(clock), nil, strategy.ErrInvalidOption, "shards must be >= 1, got 0"},
		{"negative shards", -2, strategy.PerMinute(5), localLog(clock), nil, strategy.ErrInvalidOption, "shards must be >= 1, got -2"},
		{"nil build", 2, strategy.PerMinute(5), nil, nil, strategy.ErrInvalidOption, "build"},
		{"invalid limit", 2, strategy.Limit{Limit: -1, Window: time.Second}, localLog(clock), nil, strategy.ErrInvalidLimit, "Limit"},
		{"zero probes", 2, strategy.PerMinute(5), localLog(clock), []Option{WithProbes(0)}, strategy.ErrInvalidOption, "probes"},
		{"build fails", 2, strategy.PerMinute(5), func(strategy.Limit) (strategy.Strategy, error) { return nil, boom }, nil, boom, "shard 0"},
		{"build returns nil", 2, strategy.PerMinute(5), func(strategy.Limit) (strategy.Strategy, error) { return nil, nil }, nil, strategy.ErrInvalidOption, "nil"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.shards, c.lim, c.build, c.opts...)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("New: err = %v, want %v saying %q", err, c.want, c.says)
			}
		})
	}
	if _, err := New(2, strategy.PerMinute(5), localLog(clock), nil, WithProbes(5)); err != nil {
		t.Fatalf("New with a nil option and probes above the shard count: %v", err)
	}
}

func TestBuildOncePerShare(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	var got []strategy.Limit
	mustNew(t, 4, strategy.Limit{Limit: 10, Window: time.Second, Burst: 15}, func(l strategy.Limit) (strategy.Strategy, error) {
		got = append(got, l)
		return localLog(clock)(l)
	})
	want := []strategy.Limit{{Limit: 3, Window: time.Second, Burst: 4}, {Limit: 2, Window: time.Second, Burst: 4}, {Limit: 2, Window: time.Second, Burst: 3}}
	if !slices.Equal(got, want) {
		t.Fatalf("build called with %v, want %v", got, want)
	}
}

func TestConformance(t *testing.T) {
	for _, shards := range []int{2, 3} {
		t.Run(fmt.Sprintf("local/%d shards", shards), func(t *testing.T) {
			conformance.Run(t, conformance.Subject{ExactRetry: true, Shards: shards, New: func(t *testing.T, lim strategy.Limit, c *conformance.Clock) (strategy.Strategy, error) {
				return New(shards, lim, localLog(c), WithProbes(shards))
			}})
		})
	}
	t.Run("local burst capacity/3 shards", func(t *testing.T) {
		conformance.Run(t, conformance.Subject{ExactRetry: true, UsesBurst: true, Shards: 3, New: func(t *testing.T, lim strategy.Limit, c *conformance.Clock) (strategy.Strategy, error) {
			return New(3, lim, newBurstLog(c), WithProbes(3))
		}})
	})
	// Redis: a real server (miniredis runs Lua too slowly under -race for
	// the hammering cases; TestKeys and TestNeverAboveTheLimit use it).
	for _, shards := range []int{2, 3} {
		t.Run(fmt.Sprintf("redis/%d shards", shards), func(t *testing.T) {
			conformance.Run(t, conformance.Subject{ExactRetry: true, Shards: shards, New: func(t *testing.T, lim strategy.Limit, c *conformance.Clock) (strategy.Strategy, error) {
				rdb := testredis.Shared(t).Client(t)
				prefix := testredis.Prefix(t)
				return New(shards, lim, func(l strategy.Limit) (strategy.Strategy, error) {
					return slidinglog.New(rdb, l, strategy.WithClock(c), strategy.WithPrefix(prefix))
				}, WithProbes(shards))
			}})
		})
	}
}

// TestKeys checks the key of each shard on miniredis, and that no subject,
// sharded or not, can reach another's key, whatever bytes it holds.
func TestKeys(t *testing.T) {
	mr, rdb := conformance.Miniredis(t)
	clock := conformance.NewClock(conformance.Epoch)
	build := func(l strategy.Limit) (strategy.Strategy, error) {
		return slidinglog.New(rdb, l, strategy.WithClock(clock))
	}
	l := mustNew(t, 4, strategy.PerMinute(8), build)
	for range 8 {
		if r, err := l.AllowN(ctx, "user:42", 1); err != nil || !r.Allowed {
			t.Fatalf("AllowN: %+v, %v", r, err)
		}
	}
	want := []string{"rl:sl:{user:42#0}", "rl:sl:{user:42#1}", "rl:sl:{user:42#2}", "rl:sl:{user:42#3}"}
	if got := mr.Keys(); !slices.Equal(got, want) {
		t.Fatalf("keys = %v, want %v", got, want)
	}
	for _, k := range want {
		if n, _ := mr.ZMembers(k); len(n) != 2 {
			t.Fatalf("%s holds %d entries, want 2 (the share of each shard)", k, len(n))
		}
	}
	if err := l.Reset(ctx, "user:42"); err != nil {
		t.Fatal(err)
	}
	if got := mr.Keys(); len(got) != 0 {
		t.Fatalf("keys after Reset = %v, want none", got)
	}

	// Subjects that look like another's shard key, sharded and not, on one
	// prefix: each has its full capacity.
	plain, _ := slidinglog.New(rdb, strategy.PerMinute(4), strategy.WithClock(clock))
	subjects := []string{"a", "a#0", "a#1", "a%230", "{a#1}", "a}", "#", "a\x00#1"}
	for _, k := range subjects {
		for i := 0; i < 4; i++ {
			if r, _ := l.AllowN(ctx, k, 1); !r.Allowed {
				t.Fatalf("sharded subject %q: unit %d denied: it shares a key", k, i+1)
			}
		}
		for i := 0; i < 4; i++ {
			if r, _ := plain.AllowN(ctx, k, 1); !r.Allowed {
				t.Fatalf("unsharded subject %q: unit %d denied: it shares a key with a shard", k, i+1)
			}
		}
	}
	for _, k := range subjects {
		if p, _ := l.Peek(ctx, k); p.Remaining != 4 {
			t.Fatalf("sharded subject %q: Peek = %+v, want Remaining 4 (8 minus its own 4)", k, p)
		}
	}
}

// TestNested wraps a sharded limiter in another: the 4 inner shards of a
// subject have 4 distinct keys.
func TestNested(t *testing.T) {
	mr, rdb := conformance.Miniredis(t)
	clock := conformance.NewClock(conformance.Epoch)
	outer := mustNew(t, 2, strategy.PerMinute(8), func(lim strategy.Limit) (strategy.Strategy, error) {
		return New(2, lim, func(lim strategy.Limit) (strategy.Strategy, error) {
			return slidinglog.New(rdb, lim, strategy.WithClock(clock))
		}, WithProbes(2))
	}, WithProbes(2))
	for i := 0; i < 8; i++ {
		if r, _ := outer.AllowN(ctx, "k", 1); !r.Allowed {
			t.Fatalf("unit %d of 8 denied", i+1)
		}
	}
	if r, _ := outer.AllowN(ctx, "k", 1); r.Allowed {
		t.Fatal("unit 9 of 8 allowed")
	}
	want := []string{"rl:sl:{k%230#0}", "rl:sl:{k%230#1}", "rl:sl:{k%231#0}", "rl:sl:{k%231#1}"}
	if got := mr.Keys(); !slices.Equal(got, want) {
		t.Fatalf("keys = %q, want %q", got, want)
	}
}

// foreign is a strategy of another module: it has no shard views. It
// records the keys it sees.
type foreign struct {
	strategy.Strategy
	mu   *sync.Mutex
	seen map[string]bool
}

func (f foreign) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	f.mu.Lock()
	f.seen[key] = true
	f.mu.Unlock()
	return f.Strategy.AllowN(ctx, key, n)
}

func TestForeignStrategy(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	var mu sync.Mutex
	seen := map[string]bool{}
	// one store for all shards: only the key tells the shards apart
	inner, _ := slidinglog.NewLocal(strategy.PerMinute(2), strategy.WithClock(clock))
	l := mustNew(t, 3, strategy.PerMinute(6), func(lim strategy.Limit) (strategy.Strategy, error) {
		return foreign{Strategy: noShard{inner}, mu: &mu, seen: seen}, nil
	}, WithProbes(3))
	for _, k := range []string{"k", "k#1"} {
		for i := 0; i < 6; i++ {
			if r, err := l.AllowN(ctx, k, 1); err != nil || !r.Allowed {
				t.Fatalf("%q unit %d: %+v, %v; want allowed", k, i+1, r, err)
			}
		}
		if r, _ := l.AllowN(ctx, k, 1); r.Allowed {
			t.Fatalf("%q unit 7 of 6 allowed", k)
		}
	}
	var keys []string
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"k#0", "k#1", "k#1#0", "k#1#1", "k#1#2", "k#2"}
	if !slices.Equal(keys, want) {
		t.Fatalf("foreign strategy saw keys %q, want %q", keys, want)
	}
}

// noShard hides the wrapped strategy's shard views (engine.Sharder).
type noShard struct{ st strategy.Strategy }

func (n noShard) AllowN(ctx context.Context, key string, c int64) (strategy.Result, error) {
	return n.st.AllowN(context.Background(), key, c)
}
func (n noShard) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return n.st.Peek(context.Background(), key)
}
func (n noShard) Reset(ctx context.Context, key string) error {
	return n.st.Reset(context.Background(), key)
}
func (n noShard) Limit() strategy.Limit { return n.st.Limit() }

// TestResultsForTheSubject checks how the subject's Result is derived from
// the shards tried.
func TestResultsForTheSubject(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	t.Run("limit", func(t *testing.T) {
		// 12 over 3 shards of 4; round robin: one unit on each shard in turn
		l := mustNew(t, 3, strategy.PerMinute(12), localLog(clock), WithProbes(1))
		r, _ := l.AllowN(ctx, "k", 1)
		// the shard has 3 of 4 left: scaled to the subject, 9 of 12
		want := strategy.Result{Allowed: true, Limit: 12, Remaining: 9, ResetAfter: time.Minute}
		if r != want {
			t.Fatalf("first unit = %+v, want %+v", r, want)
		}
		for range 2 {
			l.AllowN(ctx, "k", 1)
		}
		if p, _ := l.Peek(ctx, "k"); p.Remaining != 9 || p.Limit != 12 {
			t.Fatalf("Peek after 3 units = %+v, want the exact sum: Remaining 9", p)
		}
		// a cost above the largest share can never pass
		r, _ = l.AllowN(ctx, "k", 5)
		if r.Allowed || r.RetryAfter != strategy.Never || r.Remaining != 9 {
			t.Fatalf("AllowN(5) with shares of 4 = %+v, want denied, Never, Remaining 9", r)
		}
	})
	t.Run("burst", func(t *testing.T) {
		lim := strategy.Limit{Limit: 4, Window: time.Second, Burst: 5}
		l := mustNew(t, 2, lim, newBurstLog(clock)) // burst shares 3 and 2
		for i := 0; i < 5; i++ {
			r, _ := l.AllowN(ctx, "k", 1)
			if !r.Allowed || r.Limit != 5 {
				t.Fatalf("unit %d = %+v, want allowed with Limit 5, the Burst", i+1, r)
			}
		}
		if r, _ := l.AllowN(ctx, "k", 1); r.Allowed || r.Limit != 5 || r.Remaining != 0 {
			t.Fatalf("unit 6 = %+v, want denied, Limit 5, Remaining 0", r)
		}
		// a strategy that ignores Burst reports Limit
		l2 := mustNew(t, 2, lim, localLog(clock))
		if r, _ := l2.AllowN(ctx, "k", 1); r.Limit != 4 {
			t.Fatalf("sliding log with Burst set: Limit = %d, want 4", r.Limit)
		}
	})
	t.Run("retry and reset", func(t *testing.T) {
		clock := conformance.NewClock(conformance.Epoch)
		l := mustNew(t, 2, strategy.PerSecond(2), localLog(clock))
		l.AllowN(ctx, "k", 1)
		clock.Advance(300 * time.Millisecond)
		l.AllowN(ctx, "k", 1)
		r, _ := l.AllowN(ctx, "k", 1)
		// both shards tried: the first frees at 1000ms, the second at 1300ms
		want := strategy.Result{Allowed: false, Limit: 2, Remaining: 0, RetryAfter: 700 * time.Millisecond, ResetAfter: time.Second}
		if r != want {
			t.Fatalf("third unit = %+v, want %+v", r, want)
		}
		if p, _ := l.Peek(ctx, "k"); p != want {
			t.Fatalf("Peek = %+v, want %+v", p, want)
		}
	})
}

// TestSpread checks that round robin gives every shard its exact share of
// consecutive requests, and that the counters of two subjects are apart.
func TestSpread(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	for _, lim := range []strategy.Limit{strategy.PerMinute(600), strategy.PerMinute(1000), strategy.PerMinute(7)} {
		t.Run(lim.String(), func(t *testing.T) {
			l := mustNew(t, 6, lim, localLog(clock), WithProbes(1))
			counts := make([]int64, l.Shards())
			for range lim.Limit {
				counts[l.first("hot", l.Shards())]++
			}
			for i, s := range l.Limits() {
				if counts[i] != s.Limit {
					t.Fatalf("over %d picks shard %d got %d, want its share %d (all: %v)", lim.Limit, i, counts[i], s.Limit, counts)
				}
			}
			// and end to end: a burst of exactly the limit fills every shard
			for range lim.Limit {
				if r, _ := l.AllowN(ctx, "hot", 1); !r.Allowed {
					t.Fatalf("burst of %d: denied before the limit with one probe", lim.Limit)
				}
			}
			if p, _ := l.Peek(ctx, "hot"); p.Remaining != 0 {
				t.Fatalf("after a burst of the limit: Peek = %+v, want Remaining 0", p)
			}
		})
	}
	t.Run("order interleaved", func(t *testing.T) {
		l := mustNew(t, 3, strategy.PerMinute(30), localLog(clock))
		var seq []int
		for range 6 {
			seq = append(seq, l.first("k", 3))
		}
		for i := 1; i < len(seq); i++ {
			if seq[i] != (seq[i-1]+1)%3 {
				t.Fatalf("consecutive picks %v, want each shard in turn", seq)
			}
		}
	})
	t.Run("random start per limiter", func(t *testing.T) {
		starts := map[int]bool{}
		for range 50 {
			l := mustNew(t, 6, strategy.PerMinute(600), localLog(clock))
			starts[l.first("k", 6)] = true
		}
		if len(starts) < 3 {
			t.Fatalf("50 limiters started at shards %v: hosts would fall into step", starts)
		}
	})
}

// TestLocalTwinShardsApart checks that local twins keep each shard's state
// under its own localstore key.
func TestLocalTwinShardsApart(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	var st *slidinglog.Local
	l := mustNew(t, 3, strategy.PerMinute(3), func(lim strategy.Limit) (strategy.Strategy, error) {
		var err error
		st, err = slidinglog.NewLocal(lim, strategy.WithClock(clock))
		return st, err
	}, WithProbes(1))
	for range 3 {
		if r, _ := l.AllowN(ctx, "k", 1); !r.Allowed {
			t.Fatal("denied before the limit")
		}
	}
	if n := st.Subjects(); n != 3 {
		t.Fatalf("the one twin behind 3 shards of 1 holds %d states, want 3 (one per shard)", n)
	}
	if r, _ := l.AllowN(ctx, "k", 1); r.Allowed {
		t.Fatal("allowed above the limit")
	}
}

// TestNeverAboveTheLimit: 24 goroutines on one sharded subject, the clock
// frozen so nothing refills: never more than the limit, and all of it when
// the burst is twice the limit.
func TestNeverAboveTheLimit(t *testing.T) {
	const limit = 120
	lim := strategy.PerMinute(limit)
	frozen := strategy.ClockFunc(func() time.Time { return conformance.Epoch })
	for _, c := range []struct {
		name  string
		build func(t *testing.T) func(strategy.Limit) (strategy.Strategy, error)
	}{
		{"local", func(t *testing.T) func(strategy.Limit) (strategy.Strategy, error) { return localLog(frozen) }},
		{"miniredis", func(t *testing.T) func(strategy.Limit) (strategy.Strategy, error) {
			_, rdb := conformance.Miniredis(t)
			return func(l strategy.Limit) (strategy.Strategy, error) {
				return slidinglog.New(rdb, l, strategy.WithClock(frozen))
			}
		}},
		{"redis", func(t *testing.T) func(strategy.Limit) (strategy.Strategy, error) {
			srv := testredis.Shared(t)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 16})
			t.Cleanup(func() { rdb.Close() })
			prefix := testredis.Prefix(t)
			return func(l strategy.Limit) (strategy.Strategy, error) {
				return slidinglog.New(rdb, l, strategy.WithClock(frozen), strategy.WithPrefix(prefix))
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := mustNew(t, 6, lim, c.build(t))
			got := conformance.Hammer(t, []strategy.Strategy{l}, "hot", 24, 2*limit/24)
			if got != limit {
				t.Fatalf("24 goroutines, %d requests: allowed %d, want exactly the limit %d", 2*limit, got, limit)
			}
			if p, _ := l.Peek(ctx, "hot"); p.Remaining != 0 {
				t.Fatalf("Peek after = %+v, want Remaining 0", p)
			}
			// a burst of exactly the limit on a fresh subject: never above, close to it
			got = conformance.Hammer(t, []strategy.Strategy{l}, "fresh", 24, limit/24)
			if got > limit || got < limit*95/100 {
				t.Fatalf("burst of exactly the limit: allowed %d, want within [%d, %d]", got, limit*95/100, limit)
			}
		})
	}
}
