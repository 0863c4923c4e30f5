package lease

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/strategy"
)

// Limiter decides through leases taken from the strategy it wraps (see
// the package doc). It implements strategy.Strategy and is safe for
// concurrent use. It runs no goroutine of its own but a sweep's refunds
// (a few round trips, one sweep's at a time): a Limiter dropped without
// Close leaks nothing (see Close).
type Limiter struct {
	inner strategy.Strategy
	rule  engine.LeaseRule
	lim   strategy.Limit
	cap   int64 // the capacity callers see: inner's Limit().Capacity()

	life     time.Duration // a lease's lifetime
	maxBlock int64         // the most units one lease takes (unless one request costs more)
	leasing  bool          // false: every decision goes to inner

	ahead interface {
		AllowAhead(ctx context.Context, key string, n int64, ahead time.Duration) (strategy.Result, error)
	}
	refund strategy.Refunder

	clock       strategy.Clock
	maxSubjects int64
	obs         func(Event)

	subjects sync.Map // string -> *subject
	count    atomic.Int64
	closed   atomic.Bool
	sweepAt  atomic.Int64 // Unix ns (the limiter's clock): the next sweep is due then
	// a sweep's refunds, on a goroutine of their own: at most one at a time
	refunding atomic.Bool
	refunds   sync.WaitGroup

	stats counters
}

var _ strategy.Strategy = (*Limiter)(nil)

// subject is one subject's lease in this process.
type subject struct {
	mu      sync.Mutex
	left    int64 // units the lease still holds
	expires int64 // Unix ns (the limiter's clock): the lease serves while now < expires
	// a denial, served locally until denyUntil (Unix ns)
	denyUntil int64
	deny      strategy.Result
	fill      chan struct{} // non-nil while a lease is being taken; closed when done
	// demand: an EWMA of units asked per ns, the units asked since mark
	rate  float64
	asked int64
	mark  int64
	// windowEnd: the end of the last aligned window leased from (Unix ns)
	windowEnd int64
	// full (the bucket's rule): no earlier than when the lease's units
	// would all have come back by refill, had none been spent (Unix ns)
	full    int64
	lastUse int64
	dead    bool // removed from the map: look the key up again
}

// ErrNoLease: the strategy given to New has no lease rule (package
// lease's doc lists the algorithms that do).
var ErrNoLease = errors.New("lease: the strategy cannot be leased")

// New returns a Limiter that enforces lim through leases of the strategy
// build returns, an algorithm of this module on Redis (slidinglog,
// compactlog, fixedwindow, slidingcounter, tokenbucket, gcra: their New)
// or the local twin of fixedwindow, slidingcounter, tokenbucket or gcra
// (the logs' twins record nothing ahead). build is called once with lim, and
// for the token bucket and GCRA once more with the burst a lease decides
// under (see the package doc). Another strategy is an error wrapping
// ErrNoLease; build's error is returned as is; an invalid option is an
// error wrapping strategy.ErrInvalidOption. When lim leaves no room for a
// lease (a Limit of 0, a burst below the refill of one lifetime), every
// decision goes to the strategy, as without leases.
func New(lim strategy.Limit, build func(strategy.Limit) (strategy.Strategy, error), opts ...Option) (*Limiter, error) {
	if build == nil {
		return nil, fmt.Errorf("%w: lease: build is nil", strategy.ErrInvalidOption)
	}
	o := options{share: 8, maxSubjects: 10000, clock: strategy.ClockFunc(time.Now)}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.err != nil {
		return nil, o.err
	}
	s, err := build(lim)
	if err != nil {
		return nil, err
	}
	r, ok := s.(interface{ LeaseRule() engine.LeaseRule })
	if !ok || r.LeaseRule() == engine.LeaseNone {
		return nil, fmt.Errorf("%w: %T", ErrNoLease, s)
	}
	l := &Limiter{inner: s, rule: r.LeaseRule(), lim: s.Limit(), clock: o.clock, maxSubjects: int64(o.maxSubjects), obs: o.observer}
	l.cap = l.lim.Capacity()
	w := l.lim.Window
	l.life = o.life
	if l.life == 0 {
		l.life = min(w/50, 2*time.Second)
	}
	l.life = min(l.life, w).Truncate(time.Millisecond)
	capacity := l.lim.Limit
	switch l.rule {
	case engine.LeaseAhead:
		a, ok := s.(interface {
			AllowAhead(ctx context.Context, key string, n int64, ahead time.Duration) (strategy.Result, error)
		})
		if !ok {
			return nil, fmt.Errorf("%w: %T records no units ahead", ErrNoLease, s)
		}
		l.ahead = a
	case engine.LeaseBurst:
		// the most a bucket refills in a lifetime, rounded up: a lease
		// decides under the burst less that
		wms := l.lim.Window.Milliseconds()
		refill := (l.lim.Limit*l.life.Milliseconds() + wms - 1) / wms
		capacity = l.lim.Capacity() - refill
		if capacity < 1 || l.life < time.Millisecond {
			break // no room: every decision goes to s
		}
		reduced := strategy.Limit{Limit: l.lim.Limit, Window: l.lim.Window, Burst: capacity}
		rs, err := build(reduced)
		if err != nil {
			return nil, err
		}
		f, ok := rs.(strategy.Refunder)
		if !ok {
			return nil, fmt.Errorf("%w: %T cannot refund", ErrNoLease, rs)
		}
		l.inner, l.refund = rs, f
	}
	l.maxBlock = max(capacity/o.share, 1)
	l.leasing = l.life >= time.Millisecond && capacity >= 1
	if l.leasing {
		l.sweepAt.Store(l.clock.Now().UnixNano() + int64(l.life))
	}
	return l, nil
}

// Limit returns the wrapped strategy's limit.
func (l *Limiter) Limit() strategy.Limit { return l.lim }

// Lifetime returns a lease's lifetime, 0 when the limiter does not lease
// (every decision goes to the wrapped strategy).
func (l *Limiter) Lifetime() time.Duration {
	if !l.leasing {
		return 0
	}
	return l.life
}

// Peek reports the wrapped strategy's state of key: the units leased by
// any process and not yet spent count as used.
func (l *Limiter) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return l.inner.Peek(ctx, key)
}

// Reset forgets this process's lease of key (its units are not given
// back) and resets key in the wrapped strategy.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if v, ok := l.subjects.Load(key); ok {
		s := v.(*subject)
		s.mu.Lock()
		l.drop(key, s)
		s.mu.Unlock()
	}
	return l.inner.Reset(ctx, key)
}

// drop removes s (locked) from the map.
func (l *Limiter) drop(key string, s *subject) {
	if s.dead {
		return
	}
	s.dead = true
	if s.left > 0 {
		l.strand(s.left, nil)
		s.left = 0
	}
	if l.subjects.CompareAndDelete(key, s) {
		l.count.Add(-1)
	}
}

// get returns key's subject, nil when the limiter holds as many as it may.
func (l *Limiter) get(key string) *subject {
	if v, ok := l.subjects.Load(key); ok {
		return v.(*subject)
	}
	if l.count.Load() >= l.maxSubjects {
		return nil
	}
	v, loaded := l.subjects.LoadOrStore(key, &subject{})
	if !loaded {
		l.count.Add(1)
	}
	return v.(*subject)
}

// AllowN decides n units for key: from this process's lease when it holds
// them, else from a new lease (one call to the wrapped strategy). A
// decision from the lease reports Remaining as the units the lease still
// holds. A denial is served from this process for up to a lifetime (or
// its RetryAfter, if shorter) without a call. n = 0 is Peek.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	res, _, err := l.allow(ctx, key, n)
	return res, err
}

// AllowLocal decides n units for key in process only, as AllowN does
// from a lease that holds them or a denial it serves: ok false, and
// nothing counted, when the decision needs the wrapped strategy (no such
// lease, n <= 0, a key that never leased, a Limiter that does not lease
// or is closed); then call AllowN. It makes no call and allocates
// nothing. ratelimit.Limiter decides through it first, to tell its
// Observer which decisions were made in process (Decision.Cached).
func (l *Limiter) AllowLocal(ctx context.Context, key string, n int64) (res strategy.Result, ok bool) {
	if n <= 0 || !l.leasing || l.closed.Load() {
		return strategy.Result{}, false
	}
	v, found := l.subjects.Load(key) // a key is stored valid, or not at all
	if !found {
		return strategy.Result{}, false
	}
	s := v.(*subject)
	s.mu.Lock()
	now := l.clock.Now().UnixNano()
	if !s.dead {
		if res, ok = l.local(s, now, n); ok {
			s.asked += n
		}
	}
	s.mu.Unlock()
	if !ok {
		return strategy.Result{}, false
	}
	l.stats.local.Add(1)
	if now >= l.sweepAt.Load() {
		l.sweepDue(ctx, now)
	}
	return res, true
}

// allow is AllowN; it also returns when the decision was made (Unix ns on
// the limiter's clock): when the lease decided, the time it read; when
// the wrapped strategy did, the time of its reply (it decided before).
func (l *Limiter) allow(ctx context.Context, key string, n int64) (strategy.Result, int64, error) {
	if n == 0 {
		return l.direct(ctx, key, 0)
	}
	if !l.leasing || l.closed.Load() {
		return l.direct(ctx, key, n)
	}
	if err := strategy.ValidateKey(key); err != nil {
		return strategy.Result{}, 0, err
	}
	if err := strategy.ValidateCost(n); err != nil {
		return strategy.Result{}, 0, err
	}
	res, at, err := l.leased(ctx, key, n)
	if at >= l.sweepAt.Load() { // one atomic load per decision: a sweep is rarely due
		l.sweepDue(ctx, at)
	}
	return res, at, err
}

// leased is allow for a valid key and cost n > 0 on a leasing limiter.
func (l *Limiter) leased(ctx context.Context, key string, n int64) (strategy.Result, int64, error) {
	s := l.get(key)
	if s == nil {
		return l.direct(ctx, key, n)
	}
	counted := false
	for {
		s.mu.Lock()
		if s.dead {
			s.mu.Unlock()
			if s = l.get(key); s == nil {
				return l.direct(ctx, key, n)
			}
			continue
		}
		now := l.clock.Now().UnixNano()
		if !counted {
			s.asked += n
			counted = true
		}
		if res, ok := l.local(s, now, n); ok {
			s.mu.Unlock()
			l.stats.local.Add(1)
			return res, now, nil
		}
		if ch := s.fill; ch != nil {
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return strategy.Result{}, 0, fmt.Errorf("ratelimit: no decision: %w", ctx.Err())
			}
		}
		// take a new lease; what the old one holds goes back (or is
		// stranded, by the rule)
		back := giveBackReq{key, s.left, s.full}
		s.left, s.expires = 0, 0
		ch := make(chan struct{})
		s.fill = ch
		b := l.size(s, now, n)
		s.mu.Unlock()

		l.giveBack(ctx, back)
		start := l.clock.Now().UnixNano()
		res, got, err := l.take(ctx, key, b)
		at := l.clock.Now().UnixNano()

		s.mu.Lock()
		s.fill = nil
		close(ch)
		if err != nil {
			s.mu.Unlock()
			return res, at, err
		}
		res.Limit = l.cap
		if !res.Allowed {
			if res.RetryAfter > 0 {
				s.denyUntil = start + int64(min(res.RetryAfter, l.life))
				s.deny = res
			}
			s.mu.Unlock()
			return res, at, nil
		}
		life := l.life
		if end, ok := l.windowEnd(res); ok {
			life = min(life, end)
			s.windowEnd = start + int64(end)
		}
		s.left, s.expires = got-n, start+int64(life)
		// the bucket refills the lease's units last, by ResetAfter (a
		// ceiling in ms) after a decision made at or after start
		s.full = start + int64(res.ResetAfter) - int64(time.Millisecond)
		s.lastUse = start
		res.Remaining = s.left
		s.mu.Unlock()
		return res, at, nil
	}
}

// local decides n units of s (locked) at now in process: from its lease
// when it holds them, or the denial it serves; false when that takes a
// call.
func (l *Limiter) local(s *subject, now, n int64) (strategy.Result, bool) {
	if s.left >= n && now < s.expires {
		s.left -= n
		s.lastUse = now
		return strategy.Result{Allowed: true, Limit: l.cap, Remaining: s.left}, true
	}
	if now < s.denyUntil {
		r := s.deny
		r.RetryAfter = min(r.RetryAfter, time.Duration(s.denyUntil-now))
		return r, true
	}
	return strategy.Result{}, false
}

// windowEnd returns, for the aligned windows' rules, how long after an
// allowed lease decision res its window ends, and false for the others.
func (l *Limiter) windowEnd(res strategy.Result) (time.Duration, bool) {
	switch l.rule {
	case engine.LeaseWindow:
		return res.ResetAfter, true
	case engine.LeaseCounter: // ResetAfter is the next window's end
		return res.ResetAfter - l.lim.Window, true
	}
	return 0, false
}

// direct decides n units of key through the wrapped strategy.
func (l *Limiter) direct(ctx context.Context, key string, n int64) (strategy.Result, int64, error) {
	var res strategy.Result
	var err error
	if n == 0 {
		res, err = l.inner.Peek(ctx, key)
	} else {
		res, err = l.inner.AllowN(ctx, key, n)
	}
	return res, l.clock.Now().UnixNano(), err
}

// size returns the units of the next lease for a request of n at now (s
// locked): the demand of the last lifetimes over half a lifetime (or what
// is left of an aligned window), at least n, at most maxBlock (or n).
func (l *Limiter) size(s *subject, now, n int64) int64 {
	if s.mark != 0 {
		// over at least a quarter lifetime: callers that queued behind
		// one call are not a burst of demand
		inst := float64(s.asked) / float64(max(now-s.mark, int64(l.life/4)))
		if now-s.mark > int64(4*l.life) {
			s.rate = inst // idle: forget what came before
		} else {
			s.rate = (s.rate + inst) / 2
		}
	}
	s.asked, s.mark = 0, now
	life := l.life
	if s.windowEnd > now {
		life = min(life, time.Duration(s.windowEnd-now)) // an aligned window's lease ends with it
	}
	// half the demand of a lifetime: the lease runs out about half-way, so
	// that steady demand strands little when it ends
	b := int64(math.Ceil(s.rate * float64(life) / 2))
	if b > l.maxBlock {
		b = l.maxBlock
	}
	return max(b, n)
}

// take leases b units of key, all or none. A block is never cut
// down to what is left: under contention a process of small demand, which
// asks for small blocks, passes before one whose large block must wait
// (the fairness rule, see the package doc).
func (l *Limiter) take(ctx context.Context, key string, b int64) (strategy.Result, int64, error) {
	res, err := l.decide(ctx, key, b)
	l.observe(Event{Op: OpTake, Units: b, Allowed: err == nil && res.Allowed, Err: err})
	if err != nil || !res.Allowed {
		return res, 0, err
	}
	l.stats.leases.Add(1)
	l.stats.taken.Add(b)
	return res, b, nil
}

// decide is one lease decision of b units by the rule.
func (l *Limiter) decide(ctx context.Context, key string, b int64) (strategy.Result, error) {
	switch l.rule {
	case engine.LeaseAhead:
		return l.ahead.AllowAhead(ctx, key, b, l.life)
	}
	return l.inner.AllowN(ctx, key, b)
}

// giveBack returns the units of an ended lease: under the bucket's rule
// it refunds those the bucket has not refilled since, and strands the
// rest, as the other rules strand them all (see the package doc).
func (l *Limiter) giveBack(ctx context.Context, b giveBackReq) {
	if b.units <= 0 {
		return
	}
	if l.rule != engine.LeaseBurst {
		l.strand(b.units, nil)
		return
	}
	k := l.owed(b, l.clock.Now().UnixNano())
	if k < b.units {
		l.strand(b.units-k, nil) // refilled while the lease held them
	}
	if k == 0 {
		return
	}
	if _, err := l.refund.RefundN(ctx, b.key, k); err != nil {
		l.strand(k, err) // under-admission only
		return
	}
	l.stats.returned.Add(k)
	l.observe(Event{Op: OpGiveBack, Units: k})
}

// owed returns how many of b's units a refund at now may give back: at
// most those the bucket would still miss at now had the lease spent
// none. The bucket refills a lease's units after every unit taken before
// them, so by b.full they are all back; a refund of units already
// refilled would put them in the bucket twice (over the limit).
func (l *Limiter) owed(b giveBackReq, now int64) int64 {
	d := b.full - now
	if d <= 0 {
		return 0
	}
	// floor(d × Limit / Window): the units the bucket refills in d
	hi, lo := bits.Mul64(uint64(d), uint64(l.lim.Limit))
	w := uint64(l.lim.Window)
	if hi >= w {
		return b.units
	}
	q, _ := bits.Div64(hi, lo, w)
	return int64(min(q, uint64(b.units)))
}

// strand counts k leased units that were neither spent nor given back.
func (l *Limiter) strand(k int64, err error) {
	l.stats.stranded.Add(k)
	l.observe(Event{Op: OpStrand, Units: k, Err: err})
}

// observe tells the observer of ev, if there is one.
func (l *Limiter) observe(ev Event) {
	if l.obs != nil {
		l.obs(ev)
	}
}

// The bounds of one sweep's work: the subjects it looks at, and the
// refunds (calls to the wrapped strategy) it makes, and how long they may
// take. A lease a sweep leaves is given back by a later one, or by its
// subject's next lease.
const (
	sweepSubjects = 1024
	sweepRefunds  = 4
	sweepTimeout  = time.Second
)

// sweepDue sweeps if no other call has since the sweep became due at
// now: the one call that moves sweepAt on by a lifetime sweeps.
func (l *Limiter) sweepDue(ctx context.Context, now int64) {
	at := l.sweepAt.Load()
	if now < at || !l.sweepAt.CompareAndSwap(at, now+int64(l.life)) {
		return
	}
	l.sweep(ctx, now)
}

// giveBackReq is what an ended lease of key holds: its unspent units,
// and when the bucket would have refilled them (subject.full).
type giveBackReq struct {
	key   string
	units int64
	full  int64
}

// sweep gives back what ended leases hold and drops subjects idle for
// four lifetimes, at most sweepSubjects of them. For the bucket's rule,
// at most sweepRefunds refunds, made on a goroutine of their own (one at
// a time, none while the last sweep's still run), so that the caller that
// swept does not wait for them and its cancellation does not strand
// them: under ctx's values but not its deadline, each sweepTimeout at
// most (a refund that fails strands its units: under-admission only).
func (l *Limiter) sweep(ctx context.Context, now int64) {
	idle := int64(4 * l.life)
	burst := l.rule == engine.LeaseBurst
	// false while the last sweep's refunds still run: leave the leases to
	// the next sweep
	mayRefund := burst && l.refunding.CompareAndSwap(false, true)
	var backs []giveBackReq
	seen := 0
	l.subjects.Range(func(k, v any) bool {
		key, s := k.(string), v.(*subject)
		s.mu.Lock()
		back := giveBackReq{key: key, full: s.full}
		if s.fill == nil && now >= s.expires && s.left > 0 && (!burst || (mayRefund && len(backs) < sweepRefunds)) {
			back.units, s.left = s.left, 0
		}
		if s.fill == nil && s.left == 0 && now-s.lastUse > idle && now >= s.denyUntil {
			l.drop(key, s)
		}
		s.mu.Unlock()
		switch {
		case back.units > 0 && burst:
			backs = append(backs, back)
		case back.units > 0:
			l.giveBack(ctx, back) // strands: no call
		}
		seen++
		return seen < sweepSubjects
	})
	if len(backs) == 0 {
		if mayRefund {
			l.refunding.Store(false)
		}
		return
	}
	l.refunds.Add(1)
	go func() {
		defer l.refunds.Done()
		defer l.refunding.Store(false)
		rctx := context.WithoutCancel(ctx)
		for _, b := range backs {
			c, cancel := context.WithTimeout(rctx, sweepTimeout)
			l.giveBack(c, b)
			cancel()
		}
	}()
}

// Close gives back what every lease holds (under the bucket's rule; see
// the package doc), under ctx, and waits for a sweep's refunds that still
// run. It is optional: a Limiter dropped without Close holds no goroutine
// (but for a sweep's refunds, for a few round trips), and its leases simply end, their unspent units
// lost to under-admission (at most one lease per subject). Decisions after
// Close go to the wrapped strategy, one call each. It returns ctx's error
// when ctx ended before every lease was given back.
func (l *Limiter) Close(ctx context.Context) error {
	if l.closed.Swap(true) || !l.leasing {
		return nil
	}
	l.subjects.Range(func(k, v any) bool {
		key, s := k.(string), v.(*subject)
		s.mu.Lock()
		back := giveBackReq{key, s.left, s.full}
		s.left, s.expires = 0, 0
		for s.fill != nil { // a lease being taken: wait for it
			ch := s.fill
			s.mu.Unlock()
			<-ch
			s.mu.Lock()
			back.units += s.left
			back.full = s.full
			s.left, s.expires = 0, 0
		}
		s.dead = true
		if l.subjects.CompareAndDelete(key, s) {
			l.count.Add(-1)
		}
		s.mu.Unlock()
		l.giveBack(ctx, back)
		return true
	})
	// and the last sweep's refunds, if they still run
	done := make(chan struct{})
	go func() { l.refunds.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return ctx.Err()
}

// HonoursContext reports whether every call returns by its context's
// deadline or cancellation: whether the wrapped strategy does (see
// strategy.ContextHonourer). A wait for another caller's lease honours
// the caller's own context.
func (l *Limiter) HonoursContext() bool {
	h, ok := l.inner.(strategy.ContextHonourer)
	return ok && h.HonoursContext()
}
