package guard

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

// fn is a strategy whose AllowN calls itself.
type fn func(context.Context) (strategy.Result, error)

func (f fn) AllowN(ctx context.Context, _ string, _ int64) (strategy.Result, error) { return f(ctx) }
func (f fn) Peek(ctx context.Context, _ string) (strategy.Result, error)            { return f(ctx) }
func (f fn) Reset(ctx context.Context, _ string) error                              { _, err := f(ctx); return err }
func (f fn) Limit() strategy.Limit                                                  { return strategy.PerSecond(1) }

// start runs f on a worker of p.
func start(p *workers, ctx context.Context, f fn) *job {
	return p.start(ctx, f, Call{Op: Allow, Key: "k", N: 1})
}

// idleWorkers returns the workers idle in p.
func idleWorkers(p *workers) []*worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*worker(nil), p.idle...)
}

// waitIdle waits until p has want idle workers, and fails after a few
// seconds.
func waitIdle(t *testing.T, p *workers, want int) []*worker {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		idle := idleWorkers(p)
		if len(idle) == want {
			return idle
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d idle workers, want %d", len(idle), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWorkerIsReused(t *testing.T) {
	var p workers
	ctx := context.Background()
	answer := func(context.Context) (strategy.Result, error) {
		return strategy.Result{Allowed: true, Remaining: 7}, nil
	}
	var first *worker
	for i := range 3 {
		j := start(&p, ctx, answer)
		if rep := <-j.out; rep.err != nil || rep.r.Remaining != 7 {
			t.Fatalf("call %d: %+v", i, rep)
		}
		idle := waitIdle(t, &p, 1)
		if first == nil {
			first = idle[0]
		} else if idle[0] != first {
			t.Fatalf("call %d ran on a new worker; want the idle one reused", i)
		}
	}
}

func TestAbandonedWorkerExits(t *testing.T) {
	var p workers
	release := make(chan struct{})
	started := make(chan struct{})
	j := start(&p, context.Background(), func(context.Context) (strategy.Result, error) {
		close(started)
		<-release
		return strategy.Result{}, errors.New("late")
	})
	<-started
	if !j.abandon() {
		t.Fatal("abandon of a running call = false, want true")
	}
	close(release)
	// The worker must not come back to the pool, nor send a reply no one reads.
	time.Sleep(20 * time.Millisecond)
	if n := len(idleWorkers(&p)); n != 0 {
		t.Fatalf("%d idle workers after an abandoned call, want 0", n)
	}
	select {
	case rep := <-j.out:
		t.Fatalf("abandoned call replied %+v", rep)
	default:
	}
}

func TestAbandonAfterReplyKeepsTheReply(t *testing.T) {
	var p workers
	j := start(&p, context.Background(), func(context.Context) (strategy.Result, error) { return strategy.Result{Remaining: 3}, nil })
	waitIdle(t, &p, 1) // the reply is sent before the worker goes idle
	if j.abandon() {
		t.Fatal("abandon after the reply = true, want false")
	}
	if rep := <-j.out; rep.r.Remaining != 3 {
		t.Fatalf("reply %+v, want Remaining 3", rep)
	}
}

func TestIdleWorkersExit(t *testing.T) {
	var p workers
	ctx := context.Background()
	jobs := make([]*job, 3)
	release := make(chan struct{})
	for i := range jobs {
		jobs[i] = start(&p, ctx, func(context.Context) (strategy.Result, error) { <-release; return strategy.Result{}, nil })
	}
	close(release)
	for _, j := range jobs {
		<-j.out
	}
	waitIdle(t, &p, 3)
	// after workerIdle every one of them exits (waitIdle allows 5 s)
	waitIdle(t, &p, 0)
}
