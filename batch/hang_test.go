package batch_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/internal/testredis"
)

// patience bounds every wait on something that must happen promptly: long
// enough for a loaded machine, short of a test that hangs.
const patience = 10 * time.Second

// pause stops s (SIGSTOP) until the test ends or resume is called.
func pause(t testing.TB, s *testredis.Server) (resume func()) {
	t.Helper()
	if err := s.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			if err := s.Signal(syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(resume)
	return resume
}

// eventually waits until cond holds, and fails t after patience.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", patience, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// queued waits until c has want calls queued.
func queued(t testing.TB, c *batch.Client, want int) {
	t.Helper()
	eventually(t, fmt.Sprintf("want %d calls queued", want), func() bool {
		n, _ := c.Queued()
		return n == want
	})
}

// waitErr waits for a caller's error, and fails t after patience.
func waitErr(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(patience):
		t.Fatalf("%s: still blocked after %v", what, patience)
		return nil
	}
}

// hung returns a server, a client of it with ContextTimeoutEnabled (as
// inline) whose connections are made and that never gives up on a read by
// itself, the batch client over it, and what it sends from now on.
func hung(t *testing.T, inline bool, opts ...batch.Option) (*testredis.Server, *redis.Client, *batch.Client, *pipes) {
	t.Helper()
	s := testredis.Start(t)
	raw := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: inline, ReadTimeout: -1, WriteTimeout: -1, PoolSize: 64})
	t.Cleanup(func() { raw.Close() })
	rdb := newClient(t, raw, opts...)
	ctx := context.Background()
	if err := echo.Load(ctx, raw).Err(); err != nil {
		t.Fatal(err)
	}
	hammer(t, rdb, testredis.Prefix(t), 4, 4) // connections made
	p := &pipes{}
	raw.AddHook(p)
	return s, raw, rdb, p
}

// sent waits until p has seen n sends (commands alone and pipelines).
func sent(t testing.TB, p *pipes, n int64) {
	t.Helper()
	eventually(t, fmt.Sprintf("want %d sends", n), func() bool { return p.singles.Load()+p.pipelines.Load() >= n })
}

// A call sent alone whose caller's deadline passes while Redis hangs
// fails with an error wrapping context.DeadlineExceeded, as go-redis's
// does, not with the bare i/o timeout that the socket's deadline gives.
func TestDeadlineWhileRedisHangs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		callers int
		opts    []batch.Option
	}{
		{"sent alone", batch.DefaultMaxInFlight, nil},
		{"one alone", 1, []batch.Option{batch.WithMaxInFlight(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, rdb, _ := hung(t, true, tc.opts...)
			pause(t, s)
			for round := range 5 {
				errs := make(chan error, tc.callers)
				for i := range tc.callers {
					go func() {
						ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
						defer cancel()
						errs <- echo.Run(ctx, rdb, []string{fmt.Sprintf("d%d:%d", round, i)}, "x").Err()
					}()
				}
				for i := range tc.callers {
					err := waitErr(t, "caller", errs)
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("%s: round %d caller %d: err = %v, want it to wrap context.DeadlineExceeded", tc.name, round, i, err)
					}
				}
			}
		})
	}
}

// Close returns while Redis hangs with pipelines in flight, and their
// callers, who have no deadline or a distant one, return with ErrClosed.
func TestCloseWhileRedisHangs(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"no deadline", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
		{"a distant deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Hour)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// without ContextTimeoutEnabled, every call with a done
			// channel goes through a pipeline
			s, _, rdb, p := hung(t, false, batch.WithMaxInFlight(2))
			pause(t, s)
			const callers = 16
			errs := make(chan error, callers)
			for i := range callers {
				ctx, cancel := tc.ctx()
				t.Cleanup(cancel)
				go func() { errs <- echo.Run(ctx, rdb, []string{"c" + strconv.Itoa(i)}, "x").Err() }()
			}
			sent(t, p, 1)
			closed := make(chan error, 1)
			go func() { closed <- rdb.Close() }()
			if err := waitErr(t, "Close with a pipeline in flight to a paused Redis", closed); err != nil {
				t.Fatalf("Close = %v", err)
			}
			for i := range callers {
				if err := waitErr(t, "a caller after Close", errs); !errors.Is(err, batch.ErrClosed) {
					t.Errorf("%s: caller %d after Close: err = %v, want ErrClosed", tc.name, i, err)
				}
			}
		})
	}
}

// Callers that left do not count against MaxQueue.
func TestQueueBoundIgnoresCallersThatLeft(t *testing.T) {
	s, _, rdb, p := hung(t, true, batch.WithMaxInFlight(1), batch.WithMaxQueue(4))
	resume := pause(t, s)
	blocker := make(chan error, 1)
	go func() { blocker <- echo.Run(context.Background(), rdb, []string{"blocker"}, "x").Err() }()
	sent(t, p, 1)
	type caller struct {
		cancel context.CancelFunc
		err    chan error
	}
	call := func(name string) caller {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		c := caller{cancel, make(chan error, 1)}
		go func() { c.err <- echo.Run(ctx, rdb, []string{name}, "x").Err() }()
		return c
	}
	var cs []caller
	for i := range 4 {
		cs = append(cs, call("q"+strconv.Itoa(i)))
		queued(t, rdb, i+1)
	}
	for _, c := range cs[:3] {
		c.cancel()
		if err := waitErr(t, "a caller that left", c.err); !errors.Is(err, context.Canceled) {
			t.Fatalf("a caller that left: err = %v, want context.Canceled", err)
		}
	}
	// 1 caller waits, 3 left: 3 more fit, the next one does not.
	for i := range 3 {
		cs = append(cs, call("r"+strconv.Itoa(i)))
	}
	eventually(t, "want 3 more calls queued beside 3 that left", func() bool {
		n, dropped := rdb.Queued()
		return n-dropped == 4
	})
	ctx := context.Background()
	if err := echo.Run(ctx, rdb, []string{"full"}, "x").Err(); !errors.Is(err, batch.ErrQueueFull) {
		t.Errorf("a 5th waiting call: err = %v, want ErrQueueFull", err)
	}
	resume()
	if err := waitErr(t, "the blocker", blocker); err != nil {
		t.Fatal(err)
	}
	for i, c := range cs[3:] {
		if err := waitErr(t, "a queued caller", c.err); err != nil {
			t.Errorf("queued caller %d: %v", i, err)
		}
	}
}
