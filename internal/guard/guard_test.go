package guard

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

type ctxKey struct{}

func TestContext(t *testing.T) {
	g := New(time.Hour, true)
	valued := context.WithValue(context.Background(), ctxKey{}, "v")

	t.Run("no cancellation: shared deadline, caller's values", func(t *testing.T) {
		before := time.Now()
		ctx, l, _ := g.context(valued)
		if l != nil {
			t.Error("a linked context for a caller that cannot cancel, want a shared deadline")
		}
		if got := ctx.Value(ctxKey{}); got != "v" {
			t.Errorf("Value = %v, want the caller's v", got)
		}
		d, ok := ctx.Deadline()
		if !ok || d.Before(before.Add(time.Hour)) || d.After(time.Now().Add(time.Hour+g.slack)) {
			t.Errorf("Deadline = %v, %v; want within [now+1h, now+1h+%s]", d, ok, g.slack)
		}
		if ctx.Err() != nil || ctx.Done() == nil {
			t.Errorf("Err = %v, Done = %v; want nil and a channel", ctx.Err(), ctx.Done())
		}
		ctx2, _, _ := g.context(valued)
		if ctx2.(*sharedCtx).d != ctx.(*sharedCtx).d {
			t.Error("two calls within slack got two deadline contexts, want one shared")
		}
	})
	t.Run("shared deadline ends", func(t *testing.T) {
		g := New(time.Millisecond, true)
		ctx, _, _ := g.context(valued)
		<-ctx.Done() // must close, at its deadline
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Errorf("Err = %v, want DeadlineExceeded", ctx.Err())
		}
	})
	t.Run("sooner deadline of the caller's", func(t *testing.T) {
		parent, cancel := context.WithTimeout(valued, time.Minute)
		defer cancel()
		ctx, c, _ := g.context(parent)
		if ctx != parent || c != nil {
			t.Errorf("got %v, want the caller's context as is", ctx)
		}
	})
	t.Run("cancelable caller", func(t *testing.T) {
		parent, cancel := context.WithCancel(valued)
		ctx, l, _ := g.context(parent)
		if l == nil {
			t.Fatal("linked = nil, want a context of its own")
		}
		defer l.release(true)
		if got := ctx.Value(ctxKey{}); got != "v" {
			t.Errorf("Value = %v, want the caller's v", got)
		}
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > time.Hour+g.slack {
			t.Errorf("Deadline = %v, %v; want within an hour and %s", d, ok, g.slack)
		}
		cancel()
		<-ctx.Done() // the caller's cancellation reaches it
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Errorf("Err = %v, want Canceled", ctx.Err())
		}
	})
	t.Run("cancelable caller, deadline ends it", func(t *testing.T) {
		g := New(time.Millisecond, true)
		parent, cancel := context.WithCancel(valued)
		defer cancel()
		ctx, l, _ := g.context(parent)
		defer l.release(true)
		<-ctx.Done() // must close, at the shared deadline
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) || parent.Err() != nil {
			t.Errorf("Err = %v (caller's %v), want DeadlineExceeded and the caller's untouched", ctx.Err(), parent.Err())
		}
	})
	t.Run("a released linked context is reused open", func(t *testing.T) {
		parent, cancel := context.WithCancel(valued)
		defer cancel()
		for range 100 {
			ctx, l, _ := g.context(parent)
			if ctx.Err() != nil {
				t.Fatalf("a fresh linked context has Err %v", ctx.Err())
			}
			select {
			case <-ctx.Done():
				t.Fatal("a fresh linked context is done")
			default:
			}
			l.release(true)
		}
	})
}

// TestCallTimesOut checks both paths release the caller at the timeout of
// a strategy that never answers, with an error that says so.
func TestCallTimesOut(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	hang := fn(func(ctx context.Context) (strategy.Result, error) {
		select {
		case <-ctx.Done():
			return strategy.Result{}, ctx.Err()
		case <-block:
			return strategy.Result{}, nil
		}
	})
	for _, inline := range []bool{true, false} {
		g := New(10*time.Millisecond, inline)
		_, err := g.Call(context.Background(), hang, Call{Op: Allow, Key: "k", N: 1})
		if !errors.Is(err, strategy.ErrBackend) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("inline %v: err = %v, want ErrBackend and DeadlineExceeded", inline, err)
		}
	}
}

// lateCtx has reached its deadline by the clock but does not report it
// yet, as between a socket's read deadline and the context's own timer.
type lateCtx struct {
	context.Context
	d time.Time
}

func (c lateCtx) Deadline() (time.Time, bool) { return c.d, true }

// TestCallerEnds checks that a call its caller's context ended returns
// that context's error, never ErrBackend, on both paths.
func TestCallerEnds(t *testing.T) {
	ioTimeout := fn(func(ctx context.Context) (strategy.Result, error) {
		if d, ok := ctx.Deadline(); ok {
			time.Sleep(time.Until(d))
		}
		return strategy.Result{}, fmt.Errorf("%w: read tcp: i/o timeout", strategy.ErrBackend)
	})
	untilDone := fn(func(ctx context.Context) (strategy.Result, error) {
		<-ctx.Done()
		return strategy.Result{}, fmt.Errorf("%w: %w", strategy.ErrBackend, ctx.Err())
	})
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		st   fn
		want error
	}{
		{"canceled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(5*time.Millisecond, cancel)
			return ctx, cancel
		}, untilDone, context.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 5*time.Millisecond)
		}, untilDone, context.DeadlineExceeded},
		{"i/o timeout before the context reports its deadline", func() (context.Context, context.CancelFunc) {
			return lateCtx{context.Background(), time.Now().Add(5 * time.Millisecond)}, func() {}
		}, ioTimeout, context.DeadlineExceeded},
	} {
		for _, inline := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/inline=%v", tc.name, inline), func(t *testing.T) {
				g := New(time.Hour, inline)
				ctx, cancel := tc.ctx()
				defer cancel()
				_, err := g.Call(ctx, tc.st, Call{Op: Allow, Key: "k", N: 1})
				if !errors.Is(err, tc.want) || errors.Is(err, strategy.ErrBackend) || !IsEnded(err) {
					t.Errorf("err = %v, want %v, not ErrBackend, IsEnded", err, tc.want)
				}
			})
		}
	}
}

// TestSharedDeadlineIsNearTheAskedOne checks, by the deadline the strategy
// sees, that a shared deadline falls within a small slack of the one asked
// for (the guard's timeout from the call): timeout/256, at least 1 ms.
func TestSharedDeadlineIsNearTheAskedOne(t *testing.T) {
	var seen time.Time
	record := fn(func(ctx context.Context) (strategy.Result, error) {
		seen, _ = ctx.Deadline()
		return strategy.Result{}, nil
	})
	valued := context.WithValue(context.Background(), ctxKey{}, "v")
	for _, timeout := range []time.Duration{10 * time.Millisecond, time.Second, 250 * time.Millisecond, time.Minute} {
		for _, inline := range []bool{true, false} {
			t.Run(fmt.Sprintf("timeout=%v/inline=%v", timeout, inline), func(t *testing.T) {
				slack := max(timeout/256, time.Millisecond)
				g := New(timeout, inline)
				for i := range 3 { // the first call makes the shared deadline, the others may share it
					before := time.Now()
					if _, err := g.Call(valued, record, Call{Op: Allow, Key: "k", N: 1}); err != nil {
						t.Fatal(err)
					}
					after := time.Now()
					if lo, hi := before.Add(timeout), after.Add(timeout+slack); seen.Before(lo) || seen.After(hi) {
						t.Errorf("timeout %v call %d: deadline %v after the call began, want within [%v, %v]",
							timeout, i, seen.Sub(before), timeout, after.Sub(before)+timeout+slack)
					}
				}
			})
		}
	}
}
