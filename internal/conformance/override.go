package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// Overrides checks a strategy's per-call limits (strategy.LimitOverrider)
// on every backend of BackendNames and on the 3-master Redis Cluster: bad
// per-call limits are refused with
// one clear error and touch nothing, Result.Limit is the call's capacity,
// an upgrade gives the new headroom at once and a downgrade below what a
// subject used denies it until its usage has left the window.
func Overrides[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L]) {
	t.Helper()
	free := strategy.PerMinute(5)
	pro := strategy.PerMinute(20)
	for _, name := range append(BackendNames(), "cluster") {
		t.Run(name, func(t *testing.T) {
			build := func(t *testing.T) (strategy.LimitOverrider, strategy.Strategy, *Clock) {
				t.Helper()
				clock := NewClock(Epoch)
				var st strategy.Strategy
				if name == "cluster" {
					c, err := newRedis(testredis.SharedCluster(t).Client(t), free,
						strategy.WithClock(clock), strategy.WithPrefix(testredis.Prefix(t)))
					if err != nil {
						t.Fatal(err)
					}
					st = c
				} else {
					st = Backend(t, name, free, clock, newRedis, newLocal)
				}
				o, ok := st.(strategy.LimitOverrider)
				if !ok {
					t.Fatalf("%T does not implement strategy.LimitOverrider", st)
				}
				return o, st, clock
			}
			t.Run("invalid", func(t *testing.T) {
				o, st, _ := build(t)
				for _, c := range []struct {
					name  string
					lim   strategy.Limit
					field string
				}{
					{"another window", strategy.PerSecond(5), "Window"},
					{"negative limit", strategy.Limit{Limit: -1, Window: time.Minute}, "Limit"},
					{"negative burst", strategy.Limit{Limit: 5, Window: time.Minute, Burst: -1}, "Burst"},
					{"zero window", strategy.Limit{Limit: 5}, "Window"},
				} {
					for _, peek := range []bool{false, true} {
						var err error
						if peek {
							_, err = o.PeekWith(ctx, "user:1", c.lim)
						} else {
							_, err = o.AllowNWith(ctx, "user:1", 1, c.lim)
						}
						switch {
						case !errors.Is(err, strategy.ErrInvalidLimit):
							t.Errorf("%s (peek %v): err = %v, want ErrInvalidLimit", c.name, peek, err)
						case !strings.Contains(err.Error(), c.field):
							t.Errorf("%s (peek %v): %q does not name %s", c.name, peek, err, c.field)
						case strings.Count(err.Error(), "ratelimit: ") != 1:
							t.Errorf("%s (peek %v): %q: want exactly one package prefix", c.name, peek, err)
						}
					}
				}
				if r := peek(t, st, "user:1"); r.Remaining != 5 {
					t.Errorf("after refused calls: Remaining %d, want 5 (nothing recorded)", r.Remaining)
				}
			})
			t.Run("validate", func(t *testing.T) {
				// ValidateLimit says ahead what AllowNWith would say
				o, st, _ := build(t)
				v, ok := st.(strategy.LimitOverrider)
				if !ok {
					t.Fatalf("%T does not implement strategy.LimitOverrider", st)
				}
				for _, lim := range []strategy.Limit{free, pro, strategy.PerSecond(5), {Limit: -1, Window: time.Minute},
					{Limit: 5, Window: time.Minute, Burst: -1}, {Limit: 5}, {Limit: strategy.MaxUnits, Window: time.Minute}} {
					_, want := o.PeekWith(ctx, "user:1", lim)
					if got := v.ValidateLimit(lim); (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
						t.Errorf("ValidateLimit(%+v) = %v; want PeekWith's error, %v", lim, got, want)
					}
				}
			})
			t.Run("upgrade", func(t *testing.T) {
				o, st, _ := build(t)
				if r := allowN(t, st, "user:1", 5); !r.Allowed {
					t.Fatalf("5 of free's 5: %+v", r)
				}
				r, err := o.AllowNWith(ctx, "user:1", 15, pro)
				if err != nil {
					t.Fatal(err)
				}
				if !r.Allowed || r.Remaining != 0 || r.Limit != 20 {
					t.Errorf("15 more under pro after 5 under free: %+v, want allowed, Remaining 0, Limit 20", r)
				}
				if r, _ := o.PeekWith(ctx, "user:1", pro); r.Allowed || r.Remaining != 0 {
					t.Errorf("PeekWith(pro) after 20 used: %+v, want denied, Remaining 0", r)
				}
				if r := allowN(t, st, "user:1", 1); r.Allowed || r.Remaining != 0 || r.Limit != 5 {
					t.Errorf("the strategy's own call after 20 used: %+v, want denied, Remaining 0, Limit 5", r)
				}
			})
			t.Run("downgrade", func(t *testing.T) {
				o, st, clock := build(t)
				if r, err := o.AllowNWith(ctx, "user:1", 10, pro); err != nil || !r.Allowed || r.Remaining != 10 {
					t.Fatalf("10 of pro's 20: %+v, %v", r, err)
				}
				if r := peek(t, st, "user:1"); r.Allowed || r.Remaining != 0 || r.Limit != 5 {
					t.Errorf("free after 10 used: %+v, want denied, Remaining 0, Limit 5", r)
				}
				clock.Advance(10 * time.Second)
				if r := allowN(t, st, "user:1", 1); r.Allowed {
					t.Errorf("free a sixth of a window after 10 used: %+v, want denied", r)
				}
				clock.Advance(2 * time.Minute)
				if r := allowN(t, st, "user:1", 5); !r.Allowed {
					t.Errorf("free once the usage left the window: %+v, want allowed", r)
				}
			})
		})
	}
}

// OverrideAllocs checks that AllowNWith and PeekWith under the per-call
// limit lim allocate no more than AllowN and Peek under base, on a warm
// subject: the Redis strategy's own allocations (over a client that
// answers every script at once, so that neither the network nor a server
// in the test process counts) and the local twin's (none). Call it from a
// test built without the race detector, whose instrumentation allocates.
func OverrideAllocs[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L], base, lim strategy.Limit) {
	t.Helper()
	for _, name := range []string{"redis client", "local"} {
		t.Run(name, func(t *testing.T) {
			clock := NewClock(Epoch)
			var st strategy.Strategy
			var err error
			if name == "local" {
				st, err = newLocal(base, strategy.WithClock(clock))
			} else {
				st, err = newRedis(answering{}, base, strategy.WithClock(clock))
			}
			if err != nil {
				t.Fatal(err)
			}
			o := st.(strategy.LimitOverrider)
			allowN(t, st, "warm", 1)
			if _, err := o.AllowNWith(ctx, "warm", 1, lim); err != nil {
				t.Fatal(err)
			}
			own := testing.AllocsPerRun(500, func() { st.AllowN(ctx, "warm", 1); st.Peek(ctx, "warm") })
			with := testing.AllocsPerRun(500, func() { o.AllowNWith(ctx, "warm", 1, lim); o.PeekWith(ctx, "warm", lim) })
			t.Logf("AllowN+Peek: %v allocations; AllowNWith+PeekWith: %v", own, with)
			if with > own {
				t.Errorf("AllowNWith+PeekWith: %v allocations, AllowN+Peek: %v; want no more", with, own)
			}
			if name == "local" && with != 0 {
				t.Errorf("local AllowNWith+PeekWith on a warm subject: %v allocations, want 0", with)
			}
		})
	}
}

// answering is a redis.Scripter that answers every script with an allowed
// decision (the one-integer reply) without sending anything.
type answering struct{ redis.Scripter }

func (answering) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetVal(int64(1))
	return cmd
}

// BenchOverride measures AllowN under base against AllowNWith under lim on
// a warm subject, on the local twin and on a real Redis, serially; run with
// -benchmem to compare allocations.
func BenchOverride[R, L strategy.Strategy](b *testing.B, newRedis NewRedis[R], newLocal NewLocal[L], limit int64) {
	base := strategy.Limit{Limit: limit, Window: time.Hour}
	lim := strategy.Limit{Limit: 2 * limit, Window: time.Hour}
	for _, backend := range []string{"local", "redis"} {
		var st strategy.Strategy
		var err error
		if backend == "local" {
			st, err = newLocal(base)
		} else {
			st, err = newRedis(RealRedis(b), base, strategy.WithPrefix(testredis.Prefix(b)))
		}
		if err != nil {
			b.Fatal(err)
		}
		o := st.(strategy.LimitOverrider)
		calls := []struct {
			name string
			f    func() (strategy.Result, error)
		}{
			{"AllowN", func() (strategy.Result, error) { return st.AllowN(ctx, "warm", 1) }},
			{"AllowNWith", func() (strategy.Result, error) { return o.AllowNWith(ctx, "warm", 1, lim) }},
		}
		for _, c := range calls {
			b.Run(backend+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.f(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
