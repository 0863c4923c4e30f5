package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/quote"
	"github.com/ratekit/ratelimit/strategy"
)

// FailurePolicy is what a Limiter built by New decides when Redis cannot: it
// is down, too slow (see Config.Timeout), refuses (maxmemory, WRONGTYPE on a
// subject's key), or its circuit breaker is open (see Breaker). Every such
// decision is a Result with Degraded set, and no error, so that a call site
// that does not look at Degraded still gets the policy its owner chose; it is
// reported to the Observer with the cause (Decision.Degraded, Decision.Cause).
//
// The caller's own context is not Redis failing: when it is canceled, or its
// deadline (shorter than Timeout) passes before Redis answers, the decision
// returns promptly with an error wrapping ctx.Err() and no policy applies.
//
// The zero value "" means FailOpen: an outage of the limiter's store must not
// become an outage of every service that imports the limiter unless its owner
// chose so. Choose FailClosed for endpoints where an unenforced limit costs
// more than refusing service (logins, password resets, paid APIs), and
// FailLocal to keep an approximate limit per process.
//
// Each call to Redis runs under Config.Timeout, off the caller's goroutine
// (on a pooled worker) unless the client stops at the context's deadline
// itself, so a decision returns on time whatever the client's settings. Build the
// go-redis client with ContextTimeoutEnabled so that it, too, stops at that
// deadline and frees the connection (without it an abandoned call holds its
// connection until the client's ReadTimeout), and keep ReadTimeout at least
// Timeout or set MaxRetries to -1: go-redis re-sends a command whose read
// timed out, and a script that timed out may have run. EVAL is sent only
// after Redis replied NOSCRIPT, never after a timeout.
type FailurePolicy string

// The failure policies.
const (
	// FailOpen allows the request, records nothing and reports it not
	// enforced: Allowed true, Remaining the full capacity, Degraded true.
	// A request whose cost exceeds the capacity, which Redis would deny
	// whatever its state, is still denied with RetryAfter Never.
	FailOpen FailurePolicy = "open"
	// FailClosed denies the request: Allowed false, Remaining 0, RetryAfter
	// (and ResetAfter) the time until Redis is next tried (the rest of the
	// breaker's cool-down, or the whole cool-down), Degraded true.
	FailClosed FailurePolicy = "closed"
	// FailLocal decides with the algorithm's in-process twin, which
	// enforces Config.LocalShare of Limit and Burst in this process alone,
	// so that N processes sharing one Redis together allow about the limit
	// (LocalShare = 1/N) rather than N times it. The twin starts empty at
	// the outage (units recorded in Redis before it are unknown to it) and
	// its state lives as long as the window after Redis is back, then is
	// freed within about a window even when no request arrives. It holds
	// at most WithMaxSubjects subjects (strategy.DefaultMaxSubjects by
	// default), evicting the least recently used: see WithMaxSubjects.
	FailLocal FailurePolicy = "local"
)

// DefaultTimeout is the longest a decision waits on Redis when
// Config.Timeout is 0. A healthy Redis answers in well under a millisecond
// on a LAN, but a decision may have to dial (and TLS-handshake) a new
// connection, or meet a GC pause on either side; a decision that runs out
// of time is made by the failure policy, so the default leaves room for
// those. It is also what a hung Redis adds to the few requests that find the
// breaker closed or probing; services with a tight latency budget set a
// shorter Timeout.
const DefaultTimeout = 250 * time.Millisecond

// MaxTimeout is the longest Config.Timeout accepted.
const MaxTimeout = time.Minute

// ErrCircuitOpen is the cause of decisions made while the circuit breaker is
// open (Decision.Cause) and the error Reset returns then, wrapped with
// strategy.ErrBackend.
var ErrCircuitOpen = errors.New("ratelimit: circuit breaker open, Redis not called")

// errBreakerOpen is ErrCircuitOpen as a backend failure, made once.
var errBreakerOpen = fmt.Errorf("%w: %w", strategy.ErrBackend, ErrCircuitOpen)

// WithBreaker makes the limiter use b, which other limiters may share, instead
// of a Breaker of its own with the defaults. A nil b is ignored. It has no
// effect on NewLocal.
func WithBreaker(b *Breaker) Option {
	return func(o *options) {
		if b != nil {
			o.breaker = b
		}
	}
}

// WithDenyCache turns on a local cache of denials holding at most
// maxSubjects subjects (New only; off by default). Once Redis denies a
// subject a request of cost n with RetryAfter r, requests of cost n or more
// for the subject are denied in this process, without a round trip, until r
// has passed. The cache never denies a request that Redis would allow,
// except after the subject is reset by another process or Limiter (Reset on
// this Limiter clears its entry): then for at most r. It costs about 130
// bytes per subject plus the key. Its clock is the limiter's client clock
// (WithClock) when set, the monotonic clock otherwise. maxSubjects must be
// > 0. When maxSubjects are held, a new denial evicts the least recently
// used subject of the 1/64 that share its stripe, in O(1) (counted in
// Decision.Evicted): that subject's next request goes to Redis. Denials are
// freed once their RetryAfter has passed, within about a window even when
// no request arrives. It is not used when Config.Shards > 1: a sharded
// subject denied on the shards one request tried may still have room on
// the others.
func WithDenyCache(maxSubjects int) Option {
	return func(o *options) {
		if maxSubjects <= 0 && o.err == nil {
			o.err = fmt.Errorf("%w: WithDenyCache: maxSubjects must be > 0, got %d", strategy.ErrInvalidOption, maxSubjects)
		}
		o.denyCache = maxSubjects
	}
}

// checkFailure validates the failure settings of cfg and the options.
func checkFailure(cfg Config, o *options) error {
	if o.err != nil {
		return o.err
	}
	switch cfg.OnFailure {
	case "", FailOpen, FailClosed, FailLocal:
	default:
		return fmt.Errorf("%w: ratelimit: OnFailure must be %q, %q or %q (empty means %q), got %s",
			strategy.ErrInvalidOption, FailOpen, FailClosed, FailLocal, FailOpen, quote.Value(string(cfg.OnFailure)))
	}
	if s := cfg.LocalShare; math.IsNaN(s) || s < 0 || s > 1 {
		return fmt.Errorf("%w: ratelimit: LocalShare must be in [0, 1] (0 means 1), got %v", strategy.ErrInvalidOption, s)
	}
	switch {
	case cfg.Timeout < 0:
		return fmt.Errorf("%w: ratelimit: Timeout must be >= 0 (0 means %s), got %s", strategy.ErrInvalidOption, DefaultTimeout, cfg.Timeout)
	case cfg.Timeout > MaxTimeout:
		return fmt.Errorf("%w: ratelimit: Timeout must be <= %s, got %s", strategy.ErrInvalidOption, MaxTimeout, cfg.Timeout)
	}
	return nil
}

// failure is what a Redis-backed Limiter adds around its strategy: timeout,
// breaker, policy and denial cache.
type failure struct {
	policy   FailurePolicy
	timeout  time.Duration
	breaker  *Breaker
	local    strategy.Strategy // FailLocal: the twin with LocalShare of the limit
	deny     *denyCache        // nil when off
	capacity int64             // the capacity a Result reports
	inline   bool              // the client stops at the context's deadline: call it on the caller's goroutine
}

// ContextHonourer is implemented by a client that can tell whether each of
// its calls returns by its context's deadline or cancellation, whatever
// happens on the network (batch.Client implements it). New calls such a
// client on the caller's goroutine; it calls every other client, except a
// *redis.Client built with ContextTimeoutEnabled, on a worker goroutine so
// that Config.Timeout holds.
type ContextHonourer interface {
	HonoursContext() bool
}

// honoursDeadlines reports whether rdb says it honours contexts (see
// ContextHonourer), or is a *redis.Client built with
// ContextTimeoutEnabled: it then stops reading and writing at the context's
// deadline itself, and dials and waits for a pooled connection under the
// same context, so a decision can call it on the caller's goroutine and
// still return by the deadline. Other clients (a ClusterClient, whose slot
// loading is not bound by the call's context, a Ring, or a Client without
// the option) are called on a worker goroutine (see workers).
func honoursDeadlines(rdb redis.Scripter) bool {
	if h, ok := rdb.(ContextHonourer); ok {
		return h.HonoursContext()
	}
	c, ok := rdb.(*redis.Client)
	return ok && c.Options().ContextTimeoutEnabled
}

// setupFailure equips l, built by New, with its failure handling.
func (l *Limiter) setupFailure(rdb redis.Scripter, opts []Option) error {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if err := checkFailure(l.cfg, &o); err != nil {
		return err
	}
	a := algorithms[l.cfg.Algorithm]
	f := &failure{policy: l.cfg.OnFailure, timeout: l.cfg.Timeout, breaker: o.breaker, inline: honoursDeadlines(rdb)}
	if f.policy == "" {
		f.policy = FailOpen
	}
	if f.timeout == 0 {
		f.timeout = DefaultTimeout
	}
	if f.breaker == nil {
		f.breaker, _ = NewBreaker(0, 0)
	}
	clock := strategy.WithClock(o.clock)
	// The capacity is what the algorithm's twin reports for a fresh subject
	// (Burst counts for some algorithms only).
	twin, err := a.newLocal(l.cfg.limit(), clock)
	if err != nil {
		return fmt.Errorf("ratelimit: %w", err)
	}
	r, err := twin.Peek(context.Background(), "capacity")
	if err != nil {
		return fmt.Errorf("ratelimit: %w", err)
	}
	f.capacity = r.Limit
	if f.policy == FailLocal {
		if f.local, err = a.newLocal(l.cfg.localLimit(), append(l.twinBound(o), clock)...); err != nil {
			return fmt.Errorf("ratelimit: %w", err)
		}
	}
	// A sharded denial says that the shards tried are full, not that the
	// next request, which may land on another shard, would be denied.
	if o.denyCache > 0 && l.cfg.Shards <= 1 {
		f.deny = newDenyCache(o.denyCache, o.clock, l.cfg.Window, l.ev.add)
	}
	l.fail = f
	return nil
}

// localLimit is the limit one process enforces under FailLocal: LocalShare
// of Limit and Burst, rounded up so that a process allows at least one unit
// of a non-zero limit.
func (c Config) localLimit() strategy.Limit {
	lim := c.limit()
	share := c.LocalShare
	if share == 0 || share == 1 {
		return lim
	}
	scale := func(v int64) int64 {
		if v == 0 {
			return 0
		}
		return max(1, int64(math.Ceil(float64(v)*share-1e-9)))
	}
	lim.Limit, lim.Burst = scale(lim.Limit), scale(lim.Burst)
	return lim
}

// The operations of a Limiter, as Decision.Op names them.
const (
	opAllow = "allow"
	opPeek  = "peek"
	opReset = "reset"
)

// outcome is what a decision tells the Observer beyond its Result.
type outcome struct {
	degraded bool
	cached   bool
	cause    error
}

// decide makes one decision (AllowN, or Peek when op is opPeek) and reports
// it to the Observer.
func (l *Limiter) decide(ctx context.Context, op, key string, n int64) (Result, error) {
	var start time.Time
	if l.obs != nil {
		start = time.Now()
	}
	var (
		r   Result
		err error
		out outcome
	)
	switch {
	case l.fail != nil:
		r, out, err = l.fail.decide(ctx, l.st, op, key, n)
	case op == opPeek:
		r, err = l.st.Peek(ctx, key)
	default:
		r, err = l.st.AllowN(ctx, key, n)
	}
	if l.obs != nil {
		l.report(ctx, op, n, r, err, out, start)
	}
	return r, err
}

// report tells the Observer of a decision.
func (l *Limiter) report(ctx context.Context, op string, n int64, r Result, err error, out outcome, start time.Time) {
	d := Decision{Policy: l.cfg.Name, Algorithm: l.cfg.Algorithm, Op: op, N: n,
		Result: r, Err: err, Start: start, Duration: time.Since(start),
		Degraded: out.degraded, Cause: out.cause, Cached: out.cached, Evicted: l.ev.take()}
	if l.fail != nil {
		d.Breaker = l.fail.breaker.State()
	}
	l.obs.Observe(ctx, d)
}

// reset is Limiter.Reset: local state first, then Redis.
func (l *Limiter) reset(ctx context.Context, key string) error {
	var start time.Time
	if l.obs != nil {
		start = time.Now()
	}
	var err error
	if l.fail == nil {
		err = l.st.Reset(ctx, key)
	} else {
		err = l.fail.reset(ctx, l.st, key)
	}
	if l.obs != nil {
		l.report(ctx, opReset, 0, Result{}, err, outcome{}, start)
	}
	return err
}

func (f *failure) decide(ctx context.Context, st strategy.Strategy, op, key string, n int64) (Result, outcome, error) {
	// Bad input is the caller's error, never a degraded decision.
	if err := strategy.ValidateKey(key); err != nil {
		return Result{}, outcome{}, err
	}
	if err := strategy.ValidateCost(n); err != nil {
		return Result{}, outcome{}, err
	}
	if op == opAllow && n == 0 {
		op = opPeek // n = 0 behaves as Peek
	}
	// A caller that has given up gets its context's error, as from any Go
	// call: that is not a failure of Redis, and no policy applies.
	if err := ctx.Err(); err != nil {
		return Result{}, outcome{}, fmt.Errorf("%w: %w", strategy.ErrBackend, err)
	}
	cache := f.deny != nil && op == opAllow
	if cache {
		if r, ok := f.deny.lookup(key, n); ok {
			return r, outcome{cached: true}, nil
		}
	}
	ok, probe := f.breaker.allow()
	if !ok {
		return f.degrade(ctx, op, key, n), outcome{degraded: true, cause: errBreakerOpen}, nil
	}
	var gen uint64
	var sent int64
	if cache {
		gen, sent = f.deny.begin()
	}
	r, err := f.call(ctx, func(ctx context.Context) (Result, error) {
		if op == opPeek {
			return st.Peek(ctx, key)
		}
		return st.AllowN(ctx, key, n)
	})
	f.breaker.done(probe, classify(ctx, err))
	if err != nil && ctx.Err() != nil {
		// the caller's own deadline or cancellation ended the wait
		return Result{}, outcome{cause: err}, err
	}
	if err != nil {
		return f.degrade(ctx, op, key, n), outcome{degraded: true, cause: err}, nil
	}
	if cache && !r.Allowed {
		f.deny.put(key, n, r, gen, sent)
	}
	return r, outcome{}, nil
}

func (f *failure) reset(ctx context.Context, st strategy.Strategy, key string) error {
	if err := strategy.ValidateKey(key); err != nil {
		return err
	}
	if f.local != nil {
		f.local.Reset(context.WithoutCancel(ctx), key)
	}
	if f.deny != nil {
		f.deny.invalidate(key)
		// and again once Redis has forgotten the subject, for denials that
		// Redis made before the reset but that arrive after the first call
		defer f.deny.invalidate(key)
	}
	ok, probe := f.breaker.allow()
	if !ok {
		return errBreakerOpen
	}
	_, err := f.call(ctx, func(ctx context.Context) (Result, error) {
		return Result{}, st.Reset(ctx, key)
	})
	f.breaker.done(probe, classify(ctx, err))
	return err
}

// degrade makes the decision of the failure policy.
func (f *failure) degrade(ctx context.Context, op, key string, n int64) Result {
	if f.policy == FailLocal {
		var r Result
		var err error
		if op == opPeek {
			r, err = f.local.Peek(context.WithoutCancel(ctx), key)
		} else {
			r, err = f.local.AllowN(context.WithoutCancel(ctx), key, n)
		}
		if err == nil {
			if r.RetryAfter == strategy.Never && max(n, 1) <= f.capacity {
				// beyond this process's share, not beyond the limit
				r.RetryAfter = f.breaker.retryIn()
			}
			r.Degraded = true
			return r
		}
		// the twin cannot fail on valid input; deny if it ever does
	}
	if max(n, 1) > f.capacity { // Redis would deny it whatever its state
		r := Result{Limit: f.capacity, RetryAfter: strategy.Never, Degraded: true}
		if f.policy == FailOpen {
			r.Remaining = f.capacity
		}
		return r
	}
	if f.policy == FailOpen {
		return Result{Allowed: true, Limit: f.capacity, Remaining: f.capacity, Degraded: true}
	}
	retry := f.breaker.retryIn()
	return Result{Limit: f.capacity, RetryAfter: retry, ResetAfter: retry, Degraded: true}
}

type reply struct {
	r   Result
	err error
}

// call runs fn with a deadline of f.timeout (or the caller's, when sooner)
// and returns by that deadline whatever fn does. go-redis bounds a command
// by the context's deadline only when the client was built with
// ContextTimeoutEnabled (otherwise by its ReadTimeout, 5s by default), and
// even then not every path (dialing, cluster slot loading) honours it; so fn
// runs on a worker goroutine (see workers), and the caller is released at the
// deadline.
// An abandoned fn ends when go-redis gives up: at once with
// ContextTimeoutEnabled, after ReadTimeout otherwise; its context is
// cancelled, so go-redis neither waits for a pooled connection nor retries.
func (f *failure) call(ctx context.Context, fn func(context.Context) (Result, error)) (Result, error) {
	ctx2, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if f.inline {
		r, err := fn(ctx2)
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return Result{}, f.timedOut(err)
		}
		return r, err
	}
	j := pool.start(ctx2, fn)
	select {
	case rep := <-j.out:
		return rep.r, rep.err
	case <-ctx2.Done():
		if !j.abandon() { // the reply came as the deadline passed
			rep := <-j.out
			return rep.r, rep.err
		}
		if err := ctx.Err(); err != nil {
			return Result{}, fmt.Errorf("%w: %w", strategy.ErrBackend, err)
		}
		return Result{}, f.timedOut(context.DeadlineExceeded)
	}
}

// timedOut is the error of a call that Redis did not answer within Timeout.
func (f *failure) timedOut(cause error) error {
	return fmt.Errorf("%w: ratelimit: no reply from Redis within Timeout %s: %w",
		strategy.ErrBackend, f.timeout, cause)
}

// classify tells the breaker what err says about Redis. ctx is the caller's.
func classify(ctx context.Context, err error) callOutcome {
	if err == nil {
		return callAnswered
	}
	if ctx.Err() != nil {
		return callAbandoned
	}
	var re redis.Error
	if errors.As(err, &re) {
		for _, p := range []string{"LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY"} {
			if redis.HasErrorPrefix(err, p) {
				return callFailed
			}
		}
		return callAnswered // WRONGTYPE, OOM...: Redis serves, this call failed
	}
	return callFailed
}
