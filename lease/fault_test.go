package lease_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/lease"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

// TestRedisPaused: with Redis paused, the lease serves the units it holds;
// then the backend's error comes back (for the caller's failure policy);
// once Redis answers again, leases are taken again.
func TestRedisPaused(t *testing.T) {
	srv := testredis.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 150 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	lim := strategy.Limit{Limit: 1_000_000, Window: 100 * time.Second}
	l, err := lease.New(lim, func(lim strategy.Limit) (strategy.Strategy, error) {
		return slidinglog.New(rdb, lim)
	}, lease.WithLifetime(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	ctx := context.Background()
	// demand enough for leases of many units
	var held int64
	for range 5000 {
		res, err := l.AllowN(ctx, "k", 1)
		if err != nil || !res.Allowed {
			t.Fatalf("AllowN = %+v, %v; want allowed", res, err)
		}
		held = res.Remaining
	}
	if held < 2 {
		t.Fatalf("the lease holds %d units after 5000 decisions; want a few", held)
	}
	if err := srv.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := srv.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(resume)
	for i := range held {
		res, err := l.AllowN(ctx, "k", 1)
		if err != nil || !res.Allowed {
			t.Fatalf("paused, decision %d of the %d units held: %+v, %v; want allowed from the lease", i, held, res, err)
		}
	}
	if res, err := l.AllowN(ctx, "k", 1); !errors.Is(err, strategy.ErrBackend) {
		t.Fatalf("paused, the lease spent: %+v, %v; want an error wrapping ErrBackend", res, err)
	}
	resume()
	if res, err := l.AllowN(ctx, "k", 1); err != nil || !res.Allowed {
		t.Fatalf("resumed: %+v, %v; want allowed", res, err)
	}
}

// TestDeadProcess: a process that stops without Close loses only its
// lease: its unspent units stay counted (under-admission), no other
// process gets more than the limit, and the others get the rest but for
// less than one of their blocks (a block is leased whole or not at all).
func TestDeadProcess(t *testing.T) {
	srv := testredis.Shared(t)
	prefix := testredis.Prefix(t)
	lim := strategy.Limit{Limit: 100, Window: time.Minute}
	mk := func() *lease.Limiter {
		rdb := srv.Client(t)
		l, err := lease.New(lim, func(lim strategy.Limit) (strategy.Strategy, error) {
			return slidinglog.New(rdb, lim, strategy.WithPrefix(prefix))
		}, lease.WithShare(2))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	ctx := context.Background()
	dead := mk()
	spent := int64(0)
	var held int64
	for range 60 {
		res, err := dead.AllowN(ctx, "k", 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			spent++
			held = res.Remaining
		}
	}
	// dead stops here: no Close, its lease's held units are lost
	alive := mk()
	t.Cleanup(func() { alive.Close(ctx); dead.Close(ctx) })
	got := int64(0)
	for range 200 {
		res, err := alive.AllowN(ctx, "k", 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			got++
		}
	}
	if spent+got > lim.Limit {
		t.Errorf("the dead process spent %d and the live one %d: more than the limit %d", spent, got, lim.Limit)
	}
	// beyond the dead lease, what is lost is what the live process could
	// not lease whole: less than one of its blocks (capacity/2 here)
	if lost := lim.Limit - spent - got - held; lost >= lim.Limit/2 {
		t.Errorf("spent %d + %d, the dead lease held %d: %d units lost beyond the dead lease, want < %d", spent, got, held, lost, lim.Limit/2)
	}
	t.Logf("dead process spent %d, held %d unspent; the live one got %d of the limit %d", spent, held, got, lim.Limit)
}

// TestRedisRestartsEmpty: Redis restarting without its data forgets every
// count, as it does without leases: subjects start afresh. What the
// leases held at the restart is spent on top (their units were counted by
// the Redis that forgot them), so after the restart a window holds at
// most the limit plus those units; then leases are taken from the new
// Redis as before, without an error once it answers.
func TestRedisRestartsEmpty(t *testing.T) {
	for _, a := range []algorithm{algorithms[0], algorithms[2]} { // a log and a bucket
		t.Run(a.name, func(t *testing.T) {
			srv := testredis.Start(t)
			rdb := srv.Client(t)
			lim := strategy.Limit{Limit: 100, Window: time.Minute}
			l, err := lease.New(lim, func(lim strategy.Limit) (strategy.Strategy, error) {
				return a.build(rdb, lim)
			}, lease.WithLifetime(6*time.Second), lease.WithShare(4))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close(context.Background()) })
			ctx := context.Background()
			var held int64
			for range 60 {
				res, err := l.AllowN(ctx, "k", 1)
				if err != nil || !res.Allowed {
					t.Fatalf("before the restart: %+v, %v; want allowed", res, err)
				}
				held = res.Remaining
			}
			if held == 0 {
				t.Fatal("the lease holds nothing at the restart; the test needs some")
			}
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			var allowed, failed int64
			for range 300 {
				res, err := l.AllowN(ctx, "k", 1)
				switch {
				case err != nil:
					failed++ // the connections the restart broke
				case res.Allowed:
					allowed++
				}
			}
			t.Logf("held %d at the restart; after it %d allowed, %d failed; %+v", held, allowed, failed, l.Stats())
			if allowed > lim.Capacity()+held {
				t.Errorf("after the restart %d allowed: more than the limit %d and the %d the lease held", allowed, lim.Capacity(), held)
			}
			// the new Redis counts afresh: all but less than one block
			if want := lim.Capacity() + held - lim.Capacity()/4; allowed < want {
				t.Errorf("after the restart %d allowed, want at least %d: the subject did not start afresh", allowed, want)
			}
			if failed > 3 {
				t.Errorf("%d decisions failed after the restart; want the few on broken connections at most", failed)
			}
		})
	}
}
