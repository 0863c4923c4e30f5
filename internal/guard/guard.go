// Package guard bounds each call a Limiter makes to its strategy by a
// timeout, so that a decision returns on time whatever the backend does.
//
// A strategy whose calls return by their context's deadline
// (strategy.ContextHonourer) is called on the caller's goroutine under a
// context with that deadline; any other is called on a pooled worker
// goroutine, and the caller is released at the deadline.
package guard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

// Op is the operation a call makes: the one vocabulary of a Limiter's
// operations, from its methods to the Observer (ratelimit.Decision.Op is
// Op.String()).
type Op uint8

// The operations. Compare is not a call to a strategy: it names the
// decision of a Limiter's candidate (ratelimit.Config.Candidate) to the
// Observer.
const (
	Allow Op = iota
	Peek
	Reset
	Refund
	Compare
)

var opNames = [...]string{Allow: "allow", Peek: "peek", Reset: "reset", Refund: "refund", Compare: "compare"}

// String returns "allow", "peek", "reset", "refund" or "compare".
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", o)
}

// Call is one call to a strategy. Lim, when its Window is not zero, is the
// limit of this call (strategy.LimitOverrider).
type Call struct {
	Op  Op
	Key string
	N   int64
	Lim strategy.Limit
}

// Do makes c on st, on the caller's goroutine, without a timeout.
func Do(ctx context.Context, st strategy.Strategy, c Call) (strategy.Result, error) {
	switch c.Op {
	case Peek:
		if c.Lim.Window != 0 {
			if o, ok := st.(strategy.LimitOverrider); ok {
				return o.PeekWith(ctx, c.Key, c.Lim)
			}
		}
		return st.Peek(ctx, c.Key)
	case Reset:
		return strategy.Result{}, st.Reset(ctx, c.Key)
	case Refund:
		if r, ok := st.(strategy.Refunder); ok {
			return r.RefundN(ctx, c.Key, c.N)
		}
		return strategy.Result{}, fmt.Errorf("%w: the strategy cannot refund (it does not implement strategy.Refunder)", strategy.ErrInvalidOption)
	}
	if c.Lim.Window != 0 {
		if o, ok := st.(strategy.LimitOverrider); ok {
			return o.AllowNWith(ctx, c.Key, c.N, c.Lim)
		}
	}
	return st.AllowN(ctx, c.Key, c.N)
}

// slackOf is how much later than asked a shared deadline may fall for a
// timeout: calls within it of each other share one deadline context. A
// 256th of the timeout (at least 1 ms) keeps at most about 256 deadline
// contexts alive at once whatever the timeout (each lives until its
// deadline), at a precision of 0.4%.
func slackOf(timeout time.Duration) time.Duration {
	return max(timeout/256, time.Millisecond)
}

// A Guard calls one strategy under a timeout. It is safe for concurrent use.
type Guard struct {
	timeout time.Duration
	slack   time.Duration // see slackOf
	inline  bool
	shared  atomic.Pointer[deadline]
	pool    workers
}

// New returns a Guard that gives each call timeout, on the caller's
// goroutine when inline (the strategy honours its context's deadline).
func New(timeout time.Duration, inline bool) *Guard {
	return &Guard{timeout: timeout, slack: slackOf(timeout), inline: inline}
}

// Timeout returns the guard's timeout.
func (g *Guard) Timeout() time.Duration { return g.timeout }

// Inline reports whether calls run on the caller's goroutine.
func (g *Guard) Inline() bool { return g.inline }

// Call makes c on st with a deadline of the guard's timeout, or ctx's
// deadline when sooner, and returns by that deadline whatever st does. An
// error that the timeout caused wraps strategy.ErrBackend and
// context.DeadlineExceeded. One that the caller caused, because ctx was
// canceled or its deadline (sooner than the timeout) was reached, is an
// error of Ended's: it wraps ctx's error, never strategy.ErrBackend, even
// when the backend's error (an i/o timeout at that deadline) came first.
func (g *Guard) Call(ctx context.Context, st strategy.Strategy, c Call) (strategy.Result, error) {
	ctx2, l, callers := g.context(ctx)
	if g.inline {
		r, err := Do(ctx2, st, c)
		if l != nil {
			l.release(true)
		}
		return g.reply(ctx, callers, r, err)
	}
	if l != nil {
		// an abandoned job may still use ctx2: never reuse it
		defer l.release(false)
	}
	j := g.pool.start(ctx2, st, c)
	select {
	case rep := <-j.out:
		return g.reply(ctx, callers, rep.r, rep.err)
	case <-ctx2.Done():
		if !j.abandon() { // the reply came as the deadline passed
			rep := <-j.out
			return g.reply(ctx, callers, rep.r, rep.err)
		}
		if err := Ended(ctx, callers); err != nil {
			return strategy.Result{}, err
		}
		return strategy.Result{}, g.timedOut()
	}
}

// reply returns a call's reply, its error said to be the caller's when
// ctx ended it (see Ended), the timeout's when the guard's deadline did.
func (g *Guard) reply(ctx context.Context, callers bool, r strategy.Result, err error) (strategy.Result, error) {
	if err == nil {
		return r, nil
	}
	if e := Ended(ctx, callers); e != nil {
		return strategy.Result{}, e
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return strategy.Result{}, g.timedOut()
	}
	return r, err
}

// Ended returns the error of a call that ctx, the caller's context, ended,
// or nil while it has not: ctx.Err() once ctx reports it, or
// context.DeadlineExceeded once the clock has reached ctx's deadline when
// deadline says that deadline bounded the call (a socket's read deadline
// set to it fires a moment before ctx's own timer). The error wraps the
// context's, never strategy.ErrBackend: a caller that gave up says nothing
// about the backend. IsEnded tells it apart.
func Ended(ctx context.Context, deadline bool) error {
	if err := ctx.Err(); err != nil {
		return &ended{err: err}
	}
	if deadline {
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			return &ended{err: context.DeadlineExceeded}
		}
	}
	return nil
}

// IsEnded reports whether err is a call's that its caller ended (Ended).
func IsEnded(err error) bool {
	var e *ended
	return errors.As(err, &e)
}

// ended is the error of a call that its caller's context ended.
type ended struct{ err error }

func (e *ended) Error() string { return "ratelimit: no decision: " + e.err.Error() }
func (e *ended) Unwrap() error { return e.err }

// timedOut is the error of a call that got no reply within the timeout:
// it wraps strategy.ErrBackend and context.DeadlineExceeded.
func (g *Guard) timedOut() error {
	return fmt.Errorf("%w: no reply within Timeout %s: %w", strategy.ErrBackend, g.timeout, context.DeadlineExceeded)
}

// context returns ctx with the guard's deadline, the linked context to
// release after the call (nil when there is none), and whether the
// deadline is the caller's.
//
// A caller's context that ends sooner is used as is. Any other shares a
// deadline with the calls made within slack of it, so that no timer is
// made per call. One that cannot be canceled (no Done channel: Background,
// or values on it) is wrapped to keep its values: one small allocation
// instead of the five of context.WithDeadline. One that can be canceled
// gets a linked context, taken from a pool, that ends at the earlier of
// the caller's cancellation and the shared deadline: the two allocations
// of context.AfterFunc.
func (g *Guard) context(ctx context.Context) (context.Context, *linked, bool) {
	want := time.Now().Add(g.timeout)
	if d, ok := ctx.Deadline(); ok && !d.After(want) {
		return ctx, nil, true
	}
	d := g.shared.Load()
	if d == nil || d.at.Before(want) || d.at.Sub(want) > g.slack {
		nd := newDeadline(want.Add(g.slack))
		g.shared.CompareAndSwap(d, nd) // when another caller won, ours still serves us
		d = nd
	}
	if ctx.Done() == nil {
		return &sharedCtx{Context: ctx, d: d}, nil, false
	}
	l := linkedPool.Get().(*linked)
	l.parent, l.d = ctx, d
	l.stop = context.AfterFunc(ctx, l.onCancel)
	d.link(l)
	return l, l, false
}

// deadline is a context that ends at at, shared by many calls; it is never
// canceled before at, and its timer frees it then. At at it also ends the
// linked contexts still registered with it.
type deadline struct {
	at     time.Time
	ctx    context.Context
	cancel context.CancelFunc // kept for vet; the deadline ends it

	mu     sync.Mutex
	fired  bool
	linked []*linked
}

// newDeadline returns a deadline at at.
func newDeadline(at time.Time) *deadline {
	d := &deadline{at: at}
	d.ctx, d.cancel = context.WithDeadline(context.Background(), at)
	context.AfterFunc(d.ctx, d.fire)
	return d
}

// fire ends every linked context still registered.
func (d *deadline) fire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fired = true
	for _, l := range d.linked {
		l.end(context.DeadlineExceeded)
	}
	d.linked = nil
}

// link registers l, or ends it when the deadline has passed.
func (d *deadline) link(l *linked) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fired {
		l.end(context.DeadlineExceeded)
		return
	}
	l.idx = len(d.linked)
	d.linked = append(d.linked, l)
}

// unlink removes l unless the deadline fired.
func (d *deadline) unlink(l *linked) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fired || l.idx >= len(d.linked) || d.linked[l.idx] != l {
		return
	}
	last := d.linked[len(d.linked)-1]
	d.linked[l.idx], last.idx = last, l.idx
	d.linked[len(d.linked)-1] = nil
	d.linked = d.linked[:len(d.linked)-1]
}

// sharedCtx is a caller's context that cannot be canceled, with a shared
// deadline: values from the caller's, the rest from the deadline's.
type sharedCtx struct {
	context.Context
	d *deadline
}

func (c *sharedCtx) Deadline() (time.Time, bool) { return c.d.at, true }
func (c *sharedCtx) Done() <-chan struct{}       { return c.d.ctx.Done() }
func (c *sharedCtx) Err() error                  { return c.d.ctx.Err() }

// linked is a caller's cancelable context with a shared deadline: values
// from the caller's, ended by the caller's cancellation or the deadline,
// whichever comes first. It is valid for one call: once released, one
// that did not end goes back to the pool, its channel still open.
type linked struct {
	parent   context.Context
	d        *deadline
	done     chan struct{}
	err      atomic.Pointer[error] // set once, just before done is closed
	stop     func() bool           // stops the AfterFunc on parent
	onCancel func()                // l.end(parent.Err()), bound once
	idx      int                   // in d.linked
}

var linkedPool = sync.Pool{New: func() any {
	l := &linked{done: make(chan struct{})}
	l.onCancel = func() { l.end(l.parent.Err()) }
	return l
}}

// errCanceled and errDeadline are the errors of a linked context, boxed
// once; a parent's other error (a cause) is boxed when it ends one.
var errCanceled, errDeadline = context.Canceled, context.DeadlineExceeded

// end ends l with err, once.
func (l *linked) end(err error) {
	p := &err
	switch err {
	case context.Canceled:
		p = &errCanceled
	case context.DeadlineExceeded:
		p = &errDeadline
	}
	if l.err.CompareAndSwap(nil, p) {
		close(l.done)
	}
}

// release unregisters l after its call and, when reuse and l did not end,
// puts it back in the pool.
func (l *linked) release(reuse bool) {
	stopped := l.stop()
	l.d.unlink(l)
	if !reuse || !stopped || l.err.Load() != nil {
		return
	}
	linkedPool.Put(l) // parent and d stay readable until reuse
}

func (l *linked) Deadline() (time.Time, bool) { return l.d.at, true }
func (l *linked) Done() <-chan struct{}       { return l.done }
func (l *linked) Value(key any) any           { return l.parent.Value(key) }
func (l *linked) Err() error {
	if p := l.err.Load(); p != nil {
		return *p
	}
	return nil
}
