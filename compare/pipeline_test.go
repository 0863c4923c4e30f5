package compare_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/compare"
	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// sends counts what a client sends: single commands and pipelines.
type sends struct{ singles, pipelines atomic.Int64 }

func (s *sends) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *sends) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.singles.Add(1)
		return next(ctx, cmd)
	}
}
func (s *sends) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		s.pipelines.Add(1)
		return next(ctx, cmds)
	}
}

// TestPipelinedTierAndRefund: pipelined, a decision under a per-call limit
// (AllowNWith) and a refund are each one script call deciding both
// strategies' requests, and each strategy ends where it would alone.
func TestPipelinedTierAndRefund(t *testing.T) {
	s := testredis.Shared(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	must(0, rdb.Ping(ctx).Err()) // connected: the handshake is not counted
	var sent sends
	rdb.AddHook(&sent)
	clock := conformance.NewClock(epoch)
	prefix := testredis.Prefix(t)
	lim := strategy.Limit{Limit: 10, Window: time.Minute}
	e := must(fixedwindow.New(rdb, lim, strategy.WithClock(clock), strategy.WithPrefix(prefix)))
	c := must(fixedwindow.New(rdb, lim, strategy.WithClock(clock), strategy.WithPrefix(prefix+"c:")))
	l := must(compare.New(e, c, compare.WithPipeline()))
	tier := strategy.Limit{Limit: 4, Window: time.Minute}
	must(l.AllowNWith(ctx, "warm", 1, tier)) // loads the scripts
	must(l.RefundN(ctx, "warm", 1))
	sent.singles.Store(0)
	sent.pipelines.Store(0)
	for i, want := range []bool{true, true, false} {
		r := must(l.AllowNWith(ctx, "k", 2, tier))
		if r.Allowed != want || r.Limit != 4 {
			t.Fatalf("request %d under the tier: %+v, want Allowed %v, Limit 4", i, r, want)
		}
	}
	if got := l.Agreement(); got.BothAllow != 3 || got.BothDeny != 1 || got.Compared() != 4 {
		t.Errorf("Agreement() = %+v, want 3 both allow (one warming up), 1 both deny", got)
	}
	r := must(l.RefundN(ctx, "k", 3))
	if r.Remaining != 9 {
		t.Errorf("after a refund of 3: %+v, want Remaining 9 of the strategy's own 10", r)
	}
	// both strategies' calls of one algorithm go as one script call
	if got := sent.singles.Load(); got != 4 || sent.pipelines.Load() != 0 {
		t.Errorf("%d single commands, %d pipelines; want 4 script calls (3 decisions, 1 refund), each both strategies' calls in one", got, sent.pipelines.Load())
	}
	for name, st := range map[string]strategy.Strategy{"enforced": e, "candidate": c} {
		if p := must(st.Peek(ctx, "k")); p.Remaining != 9 {
			t.Errorf("%s Peek after the refund = %+v, want Remaining 9", name, p)
		}
	}
}
