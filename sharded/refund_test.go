package sharded

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/gcra"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
	"github.com/ratekit/ratelimit/tokenbucket"
)

// shardedOf returns the constructors of a 3-shard wrapper over newRedis
// and newLocal, for the conformance suites.
func shardedOf[R, L strategy.Strategy](newRedis conformance.NewRedis[R], newLocal conformance.NewLocal[L]) (conformance.NewRedis[*Limiter], conformance.NewLocal[*Limiter]) {
	r := func(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (*Limiter, error) {
		return New(3, lim, func(s strategy.Limit) (strategy.Strategy, error) { return newRedis(rdb, s, opts...) })
	}
	l := func(lim strategy.Limit, opts ...strategy.Option) (*Limiter, error) {
		return New(3, lim, func(s strategy.Limit) (strategy.Strategy, error) { return newLocal(s, opts...) })
	}
	return r, l
}

func TestRefunds(t *testing.T) {
	lim := strategy.Limit{Limit: 10, Window: time.Minute}
	t.Run("slidinglog", func(t *testing.T) {
		r, l := shardedOf(slidinglog.New, slidinglog.NewLocal)
		conformance.RefundsSharded(t, lim, r, l)
	})
	t.Run("tokenbucket", func(t *testing.T) {
		r, l := shardedOf(tokenbucket.New, tokenbucket.NewLocal)
		conformance.RefundsSharded(t, strategy.Limit{Limit: 10, Window: time.Minute, Burst: 12}, r, l)
	})
	t.Run("gcra", func(t *testing.T) {
		r, l := shardedOf(gcra.New, gcra.NewLocal)
		conformance.RefundsSharded(t, lim, r, l)
	})
}

// TestRefundMostSpentFirst: the units go to the most spent shards first,
// each at most what it spent, never above a shard's capacity.
func TestRefundMostSpentFirst(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	l := mustNew(t, 3, strategy.Limit{Limit: 9, Window: time.Second}, localLog(clock))
	shard := func(i int) strategy.Result {
		t.Helper()
		r, err := l.call(context.Background(), i, "s", peek)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// shard 0 spends 3, shard 1 spends 1, shard 2 nothing
	for i, n := range []int64{3, 1} {
		if r, err := l.call(context.Background(), i, "s", allowN(n)); err != nil || !r.Allowed {
			t.Fatalf("shard %d AllowN(%d) = %+v, %v", i, n, r, err)
		}
	}
	got, err := l.RefundN(context.Background(), "s", 2)
	if err != nil {
		t.Fatal(err)
	}
	if got.Remaining != 7 || got.Limit != 9 || !got.Allowed {
		t.Errorf("RefundN(2) = %+v, want Allowed, Limit 9, Remaining 7", got)
	}
	if r0, r1 := shard(0), shard(1); r0.Remaining != 2 || r1.Remaining != 2 {
		t.Errorf("after RefundN(2) shards' Remaining = %d, %d, want 2 (most spent, given 2), 2 (untouched)", r0.Remaining, r1.Remaining)
	}
	if got, err = l.RefundN(context.Background(), "s", 100); err != nil {
		t.Fatal(err)
	}
	if got.Remaining != 9 {
		t.Errorf("RefundN(100) = %+v, want Remaining 9 (the capacity, no more)", got)
	}
	for i := range 3 {
		if r := shard(i); r.Remaining != 3 {
			t.Errorf("shard %d Remaining = %d after a refund of everything, want its capacity 3", i, r.Remaining)
		}
	}
}

// plain is a Strategy that cannot refund.
type plain struct{ strategy.Strategy }

func TestRefundNeedsRefunders(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	l := mustNew(t, 2, strategy.Limit{Limit: 4, Window: time.Second}, func(s strategy.Limit) (strategy.Strategy, error) {
		st, err := slidinglog.NewLocal(s, strategy.WithClock(clock))
		return plain{st}, err
	})
	if _, err := l.AllowN(context.Background(), "p", 1); err != nil {
		t.Fatal(err)
	}
	before, _ := l.Peek(context.Background(), "p")
	_, err := l.RefundN(context.Background(), "p", 1)
	if !errors.Is(err, strategy.ErrNoRefund) {
		t.Fatalf("RefundN over a strategy without RefundN: error = %v, want ErrNoRefund", err)
	}
	if after, _ := l.Peek(context.Background(), "p"); after != before {
		t.Errorf("a failed refund changed the state: Peek %+v, was %+v", after, before)
	}
}

func TestRefundCluster(t *testing.T) {
	lim := strategy.Limit{Limit: 9, Window: time.Minute}
	for _, c := range []struct {
		name string
		new  func(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (strategy.Strategy, error)
	}{
		{"slidinglog", func(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (strategy.Strategy, error) {
			return slidinglog.New(rdb, lim, opts...)
		}},
		{"tokenbucket", func(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (strategy.Strategy, error) {
			return tokenbucket.New(rdb, lim, opts...)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			conformance.RefundCluster(t, lim, c.new)
			r, _ := shardedOf(c.new, func(strategy.Limit, ...strategy.Option) (strategy.Strategy, error) { return nil, nil })
			t.Run("sharded", func(t *testing.T) { conformance.RefundCluster(t, lim, r) })
		})
	}
}
