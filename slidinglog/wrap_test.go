package slidinglog_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

// wrapM is the modulus of the sorted set's running counts (2^41, see
// slidinglog.lua).
const wrapM = 1 << 41

// TestCountWraps: a subject's running count of units wraps modulo 2^41;
// decisions, RetryAfter and refunds stay exact across the wrap. The
// sorted set is written as a subject that has recorded about 2^41 units
// leaves it: the base entry at M-3, a request entry at M-2 that left the
// window, then live entries at M-1 (1 unit) and 1 (2 units, across the
// wrap): 3 live units of a limit of 5 per second.
func TestCountWraps(t *testing.T) {
	backends := map[string]func(t *testing.T) (*redis.Client, string){
		"miniredis": func(t *testing.T) (*redis.Client, string) {
			_, rdb := conformance.Miniredis(t)
			return rdb, ""
		},
		"redis": func(t *testing.T) (*redis.Client, string) {
			return conformance.RealRedis(t), testredis.Prefix(t)
		},
	}
	type step struct {
		name      string
		advance   time.Duration
		op        string // allow, peek, refund
		n         int64
		allowed   bool
		remaining int64
		retry     time.Duration
	}
	steps := []step{
		{name: "peek: 3 live", op: "peek", allowed: true, remaining: 2},
		{name: "fourth unit", op: "allow", n: 1, allowed: true, remaining: 1},
		{name: "fifth unit", op: "allow", n: 1, allowed: true, remaining: 0},
		{name: "sixth: the unit at -500ms must leave", op: "allow", n: 1, remaining: 0, retry: 500 * time.Millisecond},
		{name: "three more: the units at -400ms must leave", op: "allow", n: 3, remaining: 0, retry: 600 * time.Millisecond},
		{name: "refund one", op: "refund", n: 1, allowed: true, remaining: 1},
		{name: "after the oldest left", advance: 500 * time.Millisecond, op: "allow", n: 2, allowed: true, remaining: 0},
		{name: "then full", op: "peek", remaining: 0, retry: 100 * time.Millisecond},
	}
	for bname, backend := range backends {
		t.Run(bname, func(t *testing.T) {
			rdb, prefix := backend(t)
			clock := conformance.NewClock(conformance.Epoch)
			st, err := slidinglog.New(rdb, strategy.PerSecond(5), strategy.WithClock(clock), strategy.WithPrefix(prefix))
			if err != nil {
				t.Fatal(err)
			}
			key := st.Key("k")
			now := float64(conformance.Epoch.UnixMilli())
			if err := rdb.ZAdd(ctx, key,
				redis.Z{Score: now - 3000, Member: -1 - (wrapM - 3)}, // the base entry
				redis.Z{Score: now - 1500, Member: wrapM - 2},
				redis.Z{Score: now - 500, Member: wrapM - 1},
				redis.Z{Score: now - 400, Member: 1},
			).Err(); err != nil {
				t.Fatal(err)
			}
			rdb.Expire(ctx, key, time.Minute)
			for _, s := range steps {
				clock.Advance(s.advance)
				var r strategy.Result
				var err error
				switch s.op {
				case "allow":
					r, err = st.AllowN(ctx, "k", s.n)
				case "peek":
					r, err = st.Peek(ctx, "k")
				case "refund":
					r, err = st.RefundN(ctx, "k", s.n)
				}
				if err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				if r.Allowed != s.allowed || r.Remaining != s.remaining || (!s.allowed && r.RetryAfter != s.retry) {
					t.Errorf("%s: got Allowed %v, Remaining %d, RetryAfter %v; want %v, %d, %v",
						s.name, r.Allowed, r.Remaining, r.RetryAfter, s.allowed, s.remaining, s.retry)
				}
			}
		})
	}
}
