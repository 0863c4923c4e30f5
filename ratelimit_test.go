package ratelimit_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

func TestNewValidates(t *testing.T) {
	_, rdb := conformance.Miniredis(t)
	valid := ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 10, Window: time.Second}
	for _, c := range []struct {
		name  string
		edit  func(*ratelimit.Config)
		field string
	}{
		{"unknown algorithm", func(c *ratelimit.Config) { c.Algorithm = "leaky" }, `Algorithm must be one of "compact_log", "fixed_window", "gcra", "sliding_counter", "sliding_log", "token_bucket"`},
		{"empty algorithm", func(c *ratelimit.Config) { c.Algorithm = "" }, "Algorithm"},
		{"negative limit", func(c *ratelimit.Config) { c.Limit = -1 }, "Limit"},
		{"zero window", func(c *ratelimit.Config) { c.Window = 0 }, "Window"},
		{"negative burst", func(c *ratelimit.Config) { c.Burst = -3 }, "Burst"},
		{"negative shards", func(c *ratelimit.Config) { c.Shards = -1 }, "Shards"},
		{"braces in prefix", func(c *ratelimit.Config) { c.Prefix = "{x}" }, "prefix"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := valid
			c.edit(&cfg)
			if _, err := ratelimit.New(rdb, cfg); err == nil || !strings.Contains(err.Error(), c.field) {
				t.Errorf("New: err = %v, want one naming %s", err, c.field)
			}
			if _, err := ratelimit.New(nil, cfg); err == nil || !strings.Contains(err.Error(), c.field) {
				t.Errorf("NewLocal: err = %v, want one naming %s", err, c.field)
			}
		})
	}
	// no client: in process, without failure handling
	if l, err := ratelimit.New(nil, valid); err != nil {
		t.Errorf("New(nil): err = %v, want an in-process Limiter", err)
	} else if r, err := l.Allow(context.Background(), "u"); err != nil || !r.Allowed || r.Degraded || ratelimit.Inline(l) {
		t.Errorf("New(nil): Allow = %+v, %v; want allowed in process, no failure handling", r, err)
	}
}

func TestEveryAlgorithmThroughTheFacade(t *testing.T) {
	for _, a := range strategy.Algorithms() {
		for _, local := range []bool{false, true} {
			name := string(a)
			if local {
				name += "/local"
			}
			t.Run(name, func(t *testing.T) {
				clock := conformance.NewClock(conformance.Epoch)
				// Timeout: a first EVAL on a loaded machine can outlast the 250ms default
				cfg := ratelimit.Config{Algorithm: a, Limit: 3, Window: time.Second, Prefix: "t:", Timeout: 10 * time.Second}
				var l *ratelimit.Limiter
				var err error
				if local {
					l, err = ratelimit.New(nil, cfg, ratelimit.WithClock(clock))
				} else {
					_, rdb := conformance.Miniredis(t)
					l, err = ratelimit.New(rdb, cfg, ratelimit.WithClock(clock))
				}
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				for i := 0; i < 3; i++ {
					if r, err := l.Allow(ctx, "k"); err != nil || !r.Allowed {
						t.Fatalf("request %d: %+v, %v; want allowed", i+1, r, err)
					}
				}
				r, err := l.Allow(ctx, "k")
				if err != nil || r.Allowed || r.RetryAfter <= 0 {
					t.Fatalf("request 4: %+v, %v; want denied with RetryAfter > 0", r, err)
				}
				if p, _ := l.Peek(ctx, "k"); p.Remaining != 0 {
					t.Fatalf("Peek = %+v, want Remaining 0", p)
				}
				if err := l.Reset(ctx, "k"); err != nil {
					t.Fatal(err)
				}
				if p, _ := l.Peek(ctx, "k"); p.Remaining != 3 {
					t.Fatalf("Peek after Reset = %+v, want Remaining 3", p)
				}
				if got := l.Config(); !reflect.DeepEqual(got, cfg) {
					t.Fatalf("Config() = %+v, want %+v", got, cfg)
				}
			})
		}
	}
}

// Switching an endpoint's algorithm on the same prefix and subject must never
// meet the old algorithm's key (WRONGTYPE): every pair, both orders.
func TestSwitchingAlgorithmsNeverHitsWrongType(t *testing.T) {
	_, rdb := conformance.Miniredis(t)
	srv := testredis.Shared(t)
	real := srv.Client(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		rdb  redis.Scripter
	}{{"miniredis", rdb}, {"redis", real}} {
		t.Run(c.name, func(t *testing.T) {
			prefix := testredis.Prefix(t)
			for _, a := range strategy.Algorithms() {
				for _, b := range strategy.Algorithms() {
					for _, alg := range []strategy.Algorithm{a, b} {
						// a long Timeout: the first EVAL of each script on a
						// loaded machine can outlast the default 250ms, and a
						// degraded decision would hide what Redis answered
						l, err := ratelimit.New(c.rdb, ratelimit.Config{Algorithm: alg, Limit: 100, Window: time.Minute, Prefix: prefix, Timeout: 10 * time.Second})
						if err != nil {
							t.Fatal(err)
						}
						r, err := l.Allow(ctx, "user:42")
						if err != nil || r.Degraded || !r.Allowed {
							t.Fatalf("%s after %s on the same subject: %+v, %v; want allowed, not degraded", alg, a, r, err)
						}
					}
				}
			}
		})
	}
}

// The facade builds exactly the algorithms strategy.Algorithms names, so
// that a list read from it (tests, the benchmarks, a user's) is complete.
func TestAlgorithmTable(t *testing.T) {
	if got, want := ratelimit.AlgorithmTable(), strategy.Algorithms(); !reflect.DeepEqual(got, want) {
		t.Errorf("the facade builds %q; strategy.Algorithms() = %q", got, want)
	}
}
