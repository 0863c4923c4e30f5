package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/sharded"
	"github.com/ratekit/ratelimit/strategy"
)

// evictionSum is an Observer that adds up Decision.Evicted.
type evictionSum struct{ n atomic.Int64 }

func (e *evictionSum) Observe(_ context.Context, d ratelimit.Decision) { e.n.Add(d.Evicted) }

// downClient returns a client of a Redis that is down: every call fails at
// once (connection refused).
func downClient(t testing.TB) *redis.Client {
	t.Helper()
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		t.Fatal(err)
	}
	addr := mr.Addr()
	mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// eventually polls cond until it holds, failing after a minute: freeing runs on
// timers, and the test asserts that it happens, not when.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// The FailLocal twin frees idle subjects once their window has passed, with
// no further request: it used to keep them until their stripe was touched.
func TestFailLocalFreesIdleSubjects(t *testing.T) {
	t.Parallel() // its own servers and clock; it mostly waits
	ctx := context.Background()
	clock := conformance.NewClock(conformance.Epoch)
	for _, a := range strategy.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			l, err := ratelimit.New(downClient(t), ratelimit.Config{Algorithm: a, Limit: 5, Window: time.Second,
				OnFailure: ratelimit.FailLocal, Timeout: time.Second}, ratelimit.WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 500 {
				if r, err := l.Allow(ctx, fmt.Sprint("ip:", i)); err != nil || !r.Degraded || !r.Allowed {
					t.Fatalf("Allow with Redis down = %+v, %v; want allowed by the FailLocal twin", r, err)
				}
			}
			if n := ratelimit.FailLocalSubjects(l); n != 500 {
				t.Fatalf("the FailLocal twin holds %d subjects, want 500", n)
			}
			clock.Advance(3 * time.Second) // past every state's expiry; no request from here on
			eventually(t, func() bool { return ratelimit.FailLocalSubjects(l) == 0 }, "the FailLocal twin to free its idle subjects")
		})
	}
}

// WithMaxSubjects bounds the twins of NewLocal and FailLocal; an evicted
// subject starts fresh, and every eviction reaches the Observer once.
func TestMaxSubjectsBoundsTheTwins(t *testing.T) {
	t.Parallel() // its own servers and clock; it mostly waits
	ctx := context.Background()
	clock := conformance.NewClock(conformance.Epoch) // never advanced: nothing expires
	const bound, subjects = 64, 1000
	for _, build := range []struct {
		name string
		new  func(ratelimit.Config, ...ratelimit.Option) (*ratelimit.Limiter, error)
		held func(*ratelimit.Limiter) int
	}{
		{"in process", func(c ratelimit.Config, o ...ratelimit.Option) (*ratelimit.Limiter, error) {
			return ratelimit.New(nil, c, o...)
		}, func(l *ratelimit.Limiter) int {
			return ratelimit.StrategyOf(l).(interface{ Subjects() int }).Subjects()
		}},
		{"FailLocal", func(c ratelimit.Config, o ...ratelimit.Option) (*ratelimit.Limiter, error) {
			c.OnFailure, c.Timeout = ratelimit.FailLocal, time.Second
			return ratelimit.New(downClient(t), c, o...)
		}, ratelimit.FailLocalSubjects},
	} {
		for _, a := range strategy.Algorithms() {
			t.Run(build.name+"/"+string(a), func(t *testing.T) {
				var obs evictionSum
				l, err := build.new(ratelimit.Config{Algorithm: a, Limit: 1, Window: time.Hour, MaxSubjects: bound},
					ratelimit.WithClock(clock), ratelimit.WithObserver(&obs))
				if err != nil {
					t.Fatal(err)
				}
				if r, _ := l.Allow(ctx, "first"); !r.Allowed {
					t.Fatalf("first request of a subject denied: %+v", r)
				}
				if r, _ := l.Allow(ctx, "first"); r.Allowed {
					t.Fatalf("second request at limit 1 allowed: %+v", r)
				}
				for i := range subjects {
					l.Allow(ctx, fmt.Sprint("ip:", i))
					if n := build.held(l); n > bound {
						t.Fatalf("after %d subjects the twin holds %d, above the bound %d", i+2, n, bound)
					}
				}
				held := build.held(l)
				if want := uint64(subjects + 1 - held); ratelimit.Evicted(l) != want || obs.n.Load() != int64(want) {
					t.Fatalf("Evicted() = %d, Observer saw %d; want %d (every subject not held)", ratelimit.Evicted(l), obs.n.Load(), want)
				}
				// "first" was the least recently used: evicted, it starts fresh
				if r, _ := l.Allow(ctx, "first"); !r.Allowed {
					t.Fatalf("evicted subject denied: %+v; want a fresh start", r)
				}
			})
		}
	}
	var fe *ratelimit.FieldError
	if _, err := ratelimit.New(nil, ratelimit.Config{Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Second, MaxSubjects: -1}); err == nil ||
		!strings.Contains(err.Error(), "MaxSubjects must be >= 0 (0 means 1048576), got -1") ||
		strings.Count(err.Error(), "ratelimit:") != 1 || !errors.As(err, &fe) || fe.Field != "MaxSubjects" || fe.JSON != "max_subjects" {
		t.Errorf("MaxSubjects -1 = %v; want a *FieldError naming it, with one prefix", err)
	}
	if _, err := ratelimit.New(nil, ratelimit.Config{Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Second, MaxSubjects: 1 << 30}); err != nil {
		t.Errorf("MaxSubjects 2^30 = %v; a large bound costs nothing until used", err)
	}
	if _, err := ratelimit.New(nil, ratelimit.Config{Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := fixedwindow.NewLocal(strategy.PerSecond(1), strategy.WithMaxSubjects(-1)); err == nil || !strings.Contains(err.Error(), "MaxSubjects must be >= 1, got -1") {
		t.Errorf("strategy.WithMaxSubjects(-1) = %v; want an error naming MaxSubjects", err)
	}
}

// The denial cache evicts its least recently used subject when full and
// counts it.
func TestDenyCacheBoundCountsEvictions(t *testing.T) {
	ctx := context.Background()
	_, rdb := conformance.Miniredis(t)
	clock := conformance.NewClock(conformance.Epoch) // never advanced: no denial expires
	var obs evictionSum
	const bound, subjects = 16, 200
	l, err := ratelimit.New(rdb, ratelimit.Config{Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Minute, Timeout: 10 * time.Second},
		ratelimit.WithClock(clock), ratelimit.WithDenyCache(bound), ratelimit.WithObserver(&obs))
	if err != nil {
		t.Fatal(err)
	}
	for i := range subjects {
		key := fmt.Sprint("user:", i)
		l.Allow(ctx, key)
		if r, _ := l.Allow(ctx, key); r.Allowed {
			t.Fatalf("second unit of %s allowed", key)
		}
		if n := ratelimit.DenyCacheLen(l); n > bound {
			t.Fatalf("after %d denied subjects the cache holds %d, above %d", i+1, n, bound)
		}
	}
	held := ratelimit.DenyCacheLen(l)
	if want := uint64(subjects - held); held < bound/2 || ratelimit.Evicted(l) != want || obs.n.Load() != int64(want) {
		t.Fatalf("cache holds %d; Evicted() = %d, Observer saw %d; want %d", held, ratelimit.Evicted(l), obs.n.Load(), want)
	}
}

// Config.Shards is bounded by sharded.MaxShards: one Peek used to send a
// command per shard, 300,001 of them for a million shards.
func TestShardsBounded(t *testing.T) {
	for _, shards := range []int{sharded.MaxShards + 1, 1_000_000} {
		_, err := ratelimit.New(nil, ratelimit.Config{Algorithm: ratelimit.FixedWindow, Limit: 1 << 30, Window: time.Minute, Shards: shards})
		if want := fmt.Sprintf("Shards must be <= %d (sharded.MaxShards), got %d", sharded.MaxShards, shards); err == nil ||
			!strings.Contains(err.Error(), want) || !errors.Is(err, strategy.ErrInvalidOption) || strings.Count(err.Error(), "ratelimit:") != 1 {
			t.Errorf("Shards %d: %v; want an error saying %q", shards, err, want)
		}
	}
	if _, err := ratelimit.New(nil, ratelimit.Config{Algorithm: ratelimit.FixedWindow, Limit: 1 << 30, Window: time.Minute, Shards: sharded.MaxShards}); err != nil {
		t.Errorf("Shards = MaxShards: %v", err)
	}
}

// lastCached is an Observer that remembers whether the last decision came
// from the denial cache.
type lastCached struct{ cached atomic.Bool }

func (o *lastCached) Observe(_ context.Context, d ratelimit.Decision) { o.cached.Store(d.Cached) }

// A full denial cache evicts its least recently used subject: a subject
// whose repeats keep hitting the cache stays in it however many other
// subjects are denied. (It used to evict an arbitrary one, after a scan of
// the whole stripe.)
func TestDenyCacheKeepsTheRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	_, rdb := conformance.Miniredis(t)
	clock := conformance.NewClock(conformance.Epoch) // never advanced: no denial expires
	var obs lastCached
	l, err := ratelimit.New(rdb, ratelimit.Config{Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Hour, Timeout: 10 * time.Second},
		ratelimit.WithClock(clock), ratelimit.WithDenyCache(4*64), ratelimit.WithObserver(&obs))
	if err != nil {
		t.Fatal(err)
	}
	deny := func(key string) {
		t.Helper()
		l.Allow(ctx, key)
		if r, _ := l.Allow(ctx, key); r.Allowed {
			t.Fatalf("second unit of %s allowed", key)
		}
	}
	deny("hot")
	for i := range 3000 {
		deny(fmt.Sprint("ip:", i))
		if r, _ := l.Allow(ctx, "hot"); r.Allowed || !obs.cached.Load() {
			t.Fatalf("after %d other denials the hot subject's repeat = %+v, cached %v; want denied from the cache",
				i+1, r, obs.cached.Load())
		}
	}
	if ratelimit.Evicted(l) == 0 {
		t.Fatal("no eviction counted: the cache was never full")
	}
}
