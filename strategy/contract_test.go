package strategy_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/gcra"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/settings"
	"github.com/ratekit/ratelimit/multilimit"
	"github.com/ratekit/ratelimit/sharded"
	"github.com/ratekit/ratelimit/slidingcounter"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
	"github.com/ratekit/ratelimit/tokenbucket"
)

// constructor builds one strategy of the module on rdb (ignored by twins).
type constructor struct {
	name  string
	burst bool // the algorithm uses Burst
	new   func(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (strategy.Strategy, error)
}

func redisOf[S strategy.Strategy](f func(redis.Scripter, strategy.Limit, ...strategy.Option) (S, error)) func(redis.Scripter, strategy.Limit, ...strategy.Option) (strategy.Strategy, error) {
	return func(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (strategy.Strategy, error) {
		return f(rdb, lim, opts...)
	}
}

func localOf[S strategy.Strategy](f func(strategy.Limit, ...strategy.Option) (S, error)) func(redis.Scripter, strategy.Limit, ...strategy.Option) (strategy.Strategy, error) {
	return func(_ redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (strategy.Strategy, error) {
		return f(lim, opts...)
	}
}

// constructors are every algorithm, on Redis and in process, sharded and
// as a multilimit rule.
var constructors = []constructor{
	{"slidinglog", false, redisOf(slidinglog.New)},
	{"slidinglog twin", false, localOf(slidinglog.NewLocal)},
	{"compactlog", false, redisOf(compactlog.New)},
	{"compactlog twin", false, localOf(compactlog.NewLocal)},
	{"fixedwindow", false, redisOf(fixedwindow.New)},
	{"fixedwindow twin", false, localOf(fixedwindow.NewLocal)},
	{"slidingcounter", false, redisOf(slidingcounter.New)},
	{"slidingcounter twin", false, localOf(slidingcounter.NewLocal)},
	{"tokenbucket", true, redisOf(tokenbucket.New)},
	{"tokenbucket twin", true, localOf(tokenbucket.NewLocal)},
	{"gcra", true, redisOf(gcra.New)},
	{"gcra twin", true, localOf(gcra.NewLocal)},
	{"sharded slidinglog", false, func(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (strategy.Strategy, error) {
		return sharded.New(3, lim, func(l strategy.Limit) (strategy.Strategy, error) { return slidinglog.New(rdb, l, opts...) })
	}},
	{"sharded tokenbucket twin", true, func(_ redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (strategy.Strategy, error) {
		return sharded.New(3, lim, func(l strategy.Limit) (strategy.Strategy, error) { return tokenbucket.NewLocal(l, opts...) })
	}},
	{"multilimit", false, func(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (strategy.Strategy, error) {
		return multilimit.New(rdb, []multilimit.Rule{{Algorithm: strategy.SlidingLog, Limit: lim}}, opts...)
	}},
	{"multilimit twin", false, func(_ redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (strategy.Strategy, error) {
		return multilimit.NewLocal([]multilimit.Rule{{Algorithm: strategy.FixedWindow, Limit: lim}}, opts...)
	}},
}

// TestOnePrefix: whatever the strategy and whatever is wrong, an error
// reads "ratelimit: ..." once, never behind another package's prefix.
func TestOnePrefix(t *testing.T) {
	_, rdb := conformance.Miniredis(t)
	bad := []struct {
		name string
		lim  strategy.Limit
		opts []strategy.Option
		want error
	}{
		{"zero window", strategy.Limit{Limit: 1}, nil, strategy.ErrInvalidLimit},
		{"negative limit", strategy.Limit{Limit: -1, Window: time.Second}, nil, strategy.ErrInvalidLimit},
		{"negative burst", strategy.Limit{Limit: 1, Window: time.Second, Burst: -1}, nil, strategy.ErrInvalidLimit},
		{"too many units", strategy.Limit{Limit: strategy.MaxUnits + 1, Window: time.Second}, nil, strategy.ErrInvalidLimit},
		// beyond the bounds of compactlog, slidingcounter, gcra, tokenbucket
		{"own bounds", strategy.Limit{Limit: strategy.MaxUnits - 1, Window: strategy.MaxWindow - time.Millisecond}, nil, strategy.ErrInvalidLimit},
		{"braces in prefix", strategy.PerSecond(1), []strategy.Option{strategy.WithPrefix("{x}")}, strategy.ErrInvalidOption},
		{"max subjects", strategy.PerSecond(1), []strategy.Option{strategy.WithMaxSubjects(0)}, strategy.ErrInvalidOption},
	}
	for _, c := range constructors {
		for _, b := range bad {
			if b.name == "max subjects" && !strings.Contains(c.name, "twin") {
				continue // Redis strategies ignore it
			}
			t.Run(c.name+"/"+b.name, func(t *testing.T) {
				_, err := c.new(rdb, b.lim, b.opts...)
				if b.name == "own bounds" && err == nil && !strings.ContainsAny(c.name[:1], "cgt") && !strings.HasPrefix(c.name, "slidingc") {
					return // slidinglog, fixedwindow, multilimit accept it
				}
				if !errors.Is(err, b.want) {
					t.Fatalf("err = %v, want %v", err, b.want)
				}
				t.Log(err)
				if n := strings.Count(err.Error(), "ratelimit:"); n != 1 || !strings.HasPrefix(err.Error(), "ratelimit: ") {
					t.Errorf("err = %q: want one \"ratelimit:\" prefix, at the start (got %d)", err, n)
				}
			})
		}
	}
	t.Run("message", func(t *testing.T) {
		_, err := slidinglog.New(rdb, strategy.Limit{Limit: 1})
		if want := "ratelimit: invalid limit: Window must be > 0, got 0s"; err == nil || err.Error() != want {
			t.Errorf("err = %v, want %q", err, want)
		}
	})
}

// TestLimitIsTheCapacity: Limit() returns what the strategy enforces, with
// Burst 0 for algorithms without one, so Limit().Capacity() is the
// Result.Limit of every decision.
func TestLimitIsTheCapacity(t *testing.T) {
	_, rdb := conformance.Miniredis(t)
	ctx := context.Background()
	for _, lim := range []strategy.Limit{
		{Limit: 10, Window: time.Second},
		{Limit: 10, Window: time.Second, Burst: 25},
		{Limit: 12, Window: time.Minute, Burst: 4},
	} {
		for _, c := range constructors {
			t.Run(c.name+"/"+lim.String(), func(t *testing.T) {
				st, err := c.new(rdb, lim, strategy.WithPrefix("cap:"+c.name+":"))
				if err != nil {
					t.Fatal(err)
				}
				got := st.Limit()
				want := lim
				if !c.burst {
					want.Burst = 0
				}
				if got != want {
					t.Errorf("Limit() = %v, want %v", got, want)
				}
				r, err := st.Peek(ctx, "user:"+lim.String())
				if err != nil {
					t.Fatal(err)
				}
				if r.Limit != got.Capacity() {
					t.Errorf("Peek().Limit = %d, want Limit().Capacity() = %d", r.Limit, got.Capacity())
				}
				if _, ok := st.(strategy.ContextHonourer); !ok {
					t.Errorf("%T does not implement strategy.ContextHonourer", st)
				}
			})
		}
	}
	t.Run("multilimit: the most restrictive rule", func(t *testing.T) {
		ml, err := multilimit.NewLocal([]multilimit.Rule{
			{Algorithm: strategy.SlidingLog, Limit: strategy.PerSecond(10)},
			{Algorithm: strategy.FixedWindow, Limit: strategy.PerHour(5)},
			{Algorithm: strategy.SlidingLog, Limit: strategy.PerMinute(5)},
			{Algorithm: strategy.SlidingLog, Limit: strategy.Limit{Limit: 100, Window: 2 * time.Hour, Burst: 7}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := ml.Limit(), strategy.PerHour(5); got != want {
			t.Errorf("Limit() = %v, want %v", got, want)
		}
	})
}

// TestDefaultPrefix: the internal default is the documented one.
func TestDefaultPrefix(t *testing.T) {
	if got := settings.Apply[strategy.Option](nil).Prefix; got != strategy.DefaultPrefix {
		t.Errorf("default prefix = %q, want strategy.DefaultPrefix %q", got, strategy.DefaultPrefix)
	}
}
