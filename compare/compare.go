package compare

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/fielderr"
	"github.com/ratekit/ratelimit/strategy"
)

// Defaults of the options.
const (
	// DefaultMaxInFlight is the most candidate decisions a Limiter runs
	// at once in the background; a comparison beyond it is dropped and
	// counted (Agreement.Dropped).
	DefaultMaxInFlight = 64
	// DefaultTimeout bounds each candidate decision run in the
	// background.
	DefaultTimeout = time.Second

	maxInFlight = 1 << 16
)

// Outcome is how one request's two decisions compared.
type Outcome uint8

// The outcomes of a request, in the order Agreement lists them.
const (
	// BothAllow: the enforced and the candidate strategy both allowed.
	BothAllow Outcome = iota
	// BothDeny: both denied.
	BothDeny
	// EnforcedOnlyDeny: the enforced strategy denied, the candidate would
	// have allowed (the candidate is more lenient here).
	EnforcedOnlyDeny
	// CandidateOnlyDeny: the enforced strategy allowed, the candidate
	// would have denied (the candidate is stricter here).
	CandidateOnlyDeny
	// CandidateError: the candidate returned an error; there is nothing
	// to compare.
	CandidateError
	// Dropped: the candidate was not run, because the Limiter was closed
	// or (in the background) MaxInFlight candidate decisions were already
	// running.
	Dropped
)

// String returns the outcome's name in snake case, e.g. "both_allow", fit
// for a metric attribute.
func (o Outcome) String() string {
	switch o {
	case BothAllow:
		return "both_allow"
	case BothDeny:
		return "both_deny"
	case EnforcedOnlyDeny:
		return "enforced_only_deny"
	case CandidateOnlyDeny:
		return "candidate_only_deny"
	case CandidateError:
		return "candidate_error"
	case Dropped:
		return "dropped"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// OutcomeOf returns the outcome of an enforced and a candidate decision
// (BothAllow, BothDeny, EnforcedOnlyDeny or CandidateOnlyDeny).
func OutcomeOf(enforcedAllowed, candidateAllowed bool) Outcome {
	switch {
	case enforcedAllowed && candidateAllowed:
		return BothAllow
	case !enforcedAllowed && !candidateAllowed:
		return BothDeny
	case !enforcedAllowed:
		return EnforcedOnlyDeny
	default:
		return CandidateOnlyDeny
	}
}

// Agreement is the agreement matrix: how many requests had each outcome
// since the Limiter was built. Compared() is the four decisions cells'
// sum; CandidateErrors and Dropped are counted apart.
type Agreement struct {
	BothAllow         uint64
	BothDeny          uint64
	EnforcedOnlyDeny  uint64
	CandidateOnlyDeny uint64
	CandidateErrors   uint64
	Dropped           uint64
}

// Compared returns the number of requests whose two decisions were
// compared: BothAllow + BothDeny + EnforcedOnlyDeny + CandidateOnlyDeny.
func (a Agreement) Compared() uint64 {
	return a.BothAllow + a.BothDeny + a.EnforcedOnlyDeny + a.CandidateOnlyDeny
}

// Agreed returns the share of compared requests on which the two
// strategies decided the same, in [0, 1]; 1 when none was compared.
func (a Agreement) Agreed() float64 {
	n := a.Compared()
	if n == 0 {
		return 1
	}
	return float64(a.BothAllow+a.BothDeny) / float64(n)
}

// Add counts one request of outcome o.
func (a *Agreement) Add(o Outcome) {
	switch o {
	case BothAllow:
		a.BothAllow++
	case BothDeny:
		a.BothDeny++
	case EnforcedOnlyDeny:
		a.EnforcedOnlyDeny++
	case CandidateOnlyDeny:
		a.CandidateOnlyDeny++
	case CandidateError:
		a.CandidateErrors++
	case Dropped:
		a.Dropped++
	}
}

// ReportFunc receives each request's outcome (see WithReport): n is the
// request's cost, the n of AllowN; candidate is the zero Result when o is
// CandidateError or Dropped.
type ReportFunc func(ctx context.Context, n int64, enforced, candidate strategy.Result, o Outcome)

// Option configures a Limiter.
type Option func(*options)

type options struct {
	mode     mode
	inFlight int
	timeout  time.Duration
	report   ReportFunc
	err      error
}

// mode is where the candidate runs.
type mode uint8

const (
	modeAuto       mode = iota // pipeline when both strategies can, else background
	modeBackground             // a goroutine of its own, not waited for
	modeInline                 // the caller's goroutine, after the enforced call
	modePipeline               // the enforced call's pipeline
)

func (o *options) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// By default a Limiter whose two strategies are Redis strategies of this
// module (slidinglog, compactlog, slidingcounter, fixedwindow, tokenbucket,
// gcra, not sharded) sends the candidate's script in the enforced call's
// pipeline when their client can (see WithPipeline), and runs any other
// candidate in the background (see WithBackground). WithInline, WithPipeline and
// WithBackground choose instead; the last one given wins.

// WithInline makes the Limiter run the candidate on the caller's
// goroutine, right after the enforced decision, and return once both are
// done. Nothing is ever dropped and the candidate sees the requests of
// one caller in their order, so its decisions are exactly those it would
// make alone. Use it when the candidate is a local twin (a microsecond or
// less, cheaper than a goroutine) or in tests; with a Redis candidate it
// adds the candidate's round trip to every request.
func WithInline() Option {
	return func(o *options) { o.mode = modeInline }
}

// WithPipeline makes the Limiter send the enforced and the candidate
// decision together, in one pipeline of two script calls on the caller's
// goroutine: one round trip, exact like WithInline (the candidate sees
// each caller's requests in order, nothing is dropped); the caller waits
// for the candidate's script too, a few microseconds of Redis time. Both
// strategies must be Redis strategies of this module, unsharded, or New
// fails; it is the default for such a pair. A call is pipelined when both
// strategies' client is the same *redis.Client, *redis.ClusterClient or
// *redis.Ring; on any other client (a batch.Client, which pipelines
// concurrent calls itself, or two different clients) the enforced call
// runs alone and the candidate in the background (see WithBackground).
func WithPipeline() Option {
	return func(o *options) { o.mode = modePipeline }
}

// WithBackground makes the Limiter run the candidate on a goroutine of
// its own, started after the enforced decision and not waited for,
// bounded by WithMaxInFlight and WithTimeout. It is the default when the
// strategies cannot share a pipeline. Concurrent requests of one subject
// may reach the candidate in another order than the enforced strategy.
func WithBackground() Option {
	return func(o *options) { o.mode = modeBackground }
}

// WithMaxInFlight sets the most candidate decisions run at once in the
// background, in [1, 65536]; default DefaultMaxInFlight. A request that
// finds them all busy is not compared (Dropped): the candidate must never
// slow the enforced path or pile up goroutines when its backend is slow.
// Used in the background mode only.
func WithMaxInFlight(n int) Option {
	return func(o *options) {
		if n < 1 || n > maxInFlight {
			o.fail(fmt.Errorf("%w: compare: MaxInFlight must be in [1, %d], got %d", strategy.ErrInvalidOption, maxInFlight, n))
		}
		o.inFlight = n
	}
}

// WithTimeout bounds each background candidate decision to d (> 0);
// default DefaultTimeout. The candidate runs under the caller's context
// values but not its cancellation (the caller's request usually ends
// before the candidate does), so this is what bounds it. Used in the
// background mode only; inline and pipelined, the caller's context applies.
func WithTimeout(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.fail(fmt.Errorf("%w: compare: Timeout must be > 0, got %s", strategy.ErrInvalidOption, d))
		}
		o.timeout = d
	}
}

// WithReport makes the Limiter call f once per request that has an
// enforced decision and a cost n > 0, with the request's outcome (e.g. to
// count it in a metric). f runs on the goroutine that ran the candidate,
// under the context the candidate ran with; it must be quick and safe for
// concurrent use. A nil f is ignored.
func WithReport(f ReportFunc) Option {
	return func(o *options) {
		if f != nil {
			o.report = f
		}
	}
}

// Limiter enforces one strategy's decisions and runs a candidate
// strategy beside it in shadow: see the package doc. It is safe for
// concurrent use.
type Limiter struct {
	enforced, candidate strategy.Strategy
	lim                 strategy.Limit
	mode                mode
	max                 int64
	timeout             time.Duration
	report              ReportFunc

	// pipelined mode: the strategies' planners, their go-redis clients
	// (under the batching a constructor puts in front by default: a pair
	// shares a pipeline on the client itself), whether their calls share a
	// pipeline (together), and whether the candidate's client pipelines
	// (alone, for CompareN)
	ep, cp          engine.Planner
	eRaw, cRaw      redis.Scripter
	together, alone bool

	counts  [Dropped + 1]atomic.Uint64
	stopped atomic.Bool // Close was called

	mu     sync.Mutex
	idle   *sync.Cond // signalled when running drops to 0
	run    int64      // background candidate decisions running
	closed bool
}

var _ strategy.Strategy = (*Limiter)(nil)

// limiter is a Strategy that reports the limit it enforces.
type limiter interface{ Limit() strategy.Limit }

// honourer is a Strategy that tells whether it honours contexts.
type honourer interface{ HonoursContext() bool }

// New returns a Limiter whose decisions are enforced's, with candidate
// deciding every request too, in shadow, on its own keys. Give the two
// strategies the same key prefix and clock: the candidate then builds the
// state the enforced policy would have under its algorithm, and a
// strategy built later like the candidate takes over without a cold start
// (see the package doc). Two strategies of the same algorithm on Redis
// need distinct prefixes, or they share keys. Bad options are reported naming the option.
func New(enforced, candidate strategy.Strategy, opts ...Option) (*Limiter, error) {
	switch {
	case enforced == nil:
		return nil, fmt.Errorf("%w: compare: enforced strategy must not be nil", strategy.ErrInvalidOption)
	case candidate == nil:
		return nil, fmt.Errorf("%w: compare: candidate strategy must not be nil", strategy.ErrInvalidOption)
	}
	o := options{inFlight: DefaultMaxInFlight, timeout: DefaultTimeout}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.err != nil {
		return nil, o.err
	}
	ep, eq := enforced.(engine.Planner)
	cp, cq := candidate.(engine.Planner)
	switch {
	case o.mode == modePipeline && (!eq || !cq):
		return nil, fmt.Errorf("%w: compare: WithPipeline needs two Redis strategies of this module, got %T and %T", strategy.ErrInvalidOption, enforced, candidate)
	case o.mode == modeAuto && eq && cq:
		o.mode = modePipeline
	case o.mode == modeAuto:
		o.mode = modeBackground
	}
	l := &Limiter{enforced: enforced, candidate: candidate, mode: o.mode,
		max: int64(o.inFlight), timeout: o.timeout, report: o.report}
	if el, ok := enforced.(limiter); ok {
		l.lim = el.Limit()
	}
	if l.mode == modePipeline {
		l.ep, l.cp = ep, cp
		l.eRaw, l.cRaw = unbatched(ep.Client()), unbatched(cp.Client())
		l.together, l.alone = pipelines(l.eRaw, l.cRaw), pipelines(l.cRaw, l.cRaw)
	}
	l.idle = sync.NewCond(&l.mu)
	return l, nil
}

// Enforced returns the strategy whose decisions the Limiter returns.
func (l *Limiter) Enforced() strategy.Strategy { return l.enforced }

// Candidate returns the candidate strategy. To promote it, use it (or a
// strategy built like it on the same Redis keys) in place of the Limiter:
// it holds the state it built in shadow, so the swap lets no burst
// through.
func (l *Limiter) Candidate() strategy.Strategy { return l.candidate }

// Limit returns the limit the enforced strategy enforces (the zero Limit
// when it does not report one).
func (l *Limiter) Limit() strategy.Limit { return l.lim }

// HonoursContext reports whether every call returns by its context's
// deadline or cancellation: the enforced strategy's answer (false when it
// does not say), and inline or pipelined the candidate's too. A background
// candidate is bounded by WithTimeout instead.
func (l *Limiter) HonoursContext() bool {
	ok := honours(l.enforced)
	if l.mode != modeBackground {
		ok = ok && honours(l.candidate)
	}
	return ok
}

func honours(st strategy.Strategy) bool {
	h, ok := st.(honourer)
	return ok && h.HonoursContext()
}

// AllowN returns the enforced strategy's decision, and has the candidate
// decide the same request on its own keys: in the same pipeline, in the
// background or inline (see the options). The candidate's decision never
// reaches the caller. It is not run when the enforced strategy returns an
// error (there is no decision to compare) or when n = 0 (a Peek).
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	return l.allow(ctx, key, n, strategy.Limit{})
}

// AllowNWith is AllowN under lim for this one call (a per-subject tier,
// see strategy.LimitOverrider): the enforced strategy decides under lim,
// and so does the candidate when it implements strategy.LimitOverrider
// (under its own Limit otherwise). It fails as AllowN of a strategy that
// cannot when the enforced one does not implement the interface.
func (l *Limiter) AllowNWith(ctx context.Context, key string, n int64, lim strategy.Limit) (strategy.Result, error) {
	if _, ok := l.enforced.(strategy.LimitOverrider); !ok {
		return strategy.Result{}, errNoOverride
	}
	return l.allow(ctx, key, n, lim)
}

// PeekWith is Peek under lim (see AllowNWith).
func (l *Limiter) PeekWith(ctx context.Context, key string, lim strategy.Limit) (strategy.Result, error) {
	o, ok := l.enforced.(strategy.LimitOverrider)
	if !ok {
		return strategy.Result{}, errNoOverride
	}
	return o.PeekWith(ctx, key, lim)
}

// ValidateLimit returns the error AllowNWith would return for lim, or nil
// (see strategy.LimitOverrider): the enforced strategy's verdict when it
// implements strategy.LimitOverrider, and errNoOverride when it cannot
// decide under another limit at all. A candidate that decides under lim
// too (it implements strategy.LimitOverrider and has lim's Window) must
// accept it as well, or each of its comparisons under lim would be a
// CandidateError; its error says "candidate".
func (l *Limiter) ValidateLimit(lim strategy.Limit) error {
	if _, ok := l.enforced.(strategy.LimitOverrider); !ok {
		return errNoOverride
	}
	if err := l.enforced.(strategy.LimitOverrider).ValidateLimit(lim); err != nil {
		return err
	}
	if v, ok := l.candidate.(strategy.LimitOverrider); ok && l.candidate.Limit().Window == lim.Window {
		if err := v.ValidateLimit(lim); err != nil {
			if fe := (*fielderr.Error)(nil); errors.As(err, &fe) { // keep the field at fault
				return fielderr.New(fe.Sentinel, fe.Scope, fe.Field, func(name func(string) string) string {
					return fe.Text(name) + " (candidate)"
				})
			}
			return fmt.Errorf("%w (candidate)", err)
		}
	}
	return nil
}

var _ strategy.LimitOverrider = (*Limiter)(nil)

var errNoOverride = fmt.Errorf("%w: compare: the enforced strategy cannot decide under another limit (it does not implement strategy.LimitOverrider)", strategy.ErrInvalidOption)

// RefundN gives back up to n units of key on the enforced strategy, and on
// the candidate too when it can refund, so that it keeps the state the
// enforced policy would have under its algorithm; it returns the enforced
// strategy's Result. A candidate's refund error is not returned.
// Pipelined, the two refunds are one pipeline, as a decision's are.
func (l *Limiter) RefundN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	r, ok := l.enforced.(strategy.Refunder)
	if !ok {
		return strategy.Result{}, fmt.Errorf("%w: compare: the enforced strategy cannot refund (it does not implement strategy.Refunder)", strategy.ErrInvalidOption)
	}
	if l.mode == modePipeline {
		var e engine.Call
		_, pipelined, err := l.send(ctx, engine.Req{Op: engine.OpRefund, Key: key, N: n}, &e)
		if err != nil || pipelined {
			return e.Result, err
		}
		if c, ok := l.candidate.(strategy.Refunder); ok {
			c.RefundN(ctx, key, n)
		}
		return e.Result, nil
	}
	res, err := r.RefundN(ctx, key, n)
	if err != nil {
		return res, err
	}
	if c, ok := l.candidate.(strategy.Refunder); ok {
		c.RefundN(ctx, key, n)
	}
	return res, nil
}

// CompareN has the candidate alone decide a request of cost n whose
// enforced decision, enforced, was made without the Limiter (a denial
// answered from a cache, say), and counts and reports its outcome as AllowN
// would: the candidate then sees every request, and its state stays the
// one it would build alone. It runs where AllowN runs the candidate, as one
// script call of the candidate alone: on the caller's goroutine under ctx
// inline and pipelined (in the background when the client cannot
// pipeline), in the background otherwise. The candidate decides under lim
// as in AllowNWith when lim.Window is not 0 and it can. Nothing is run
// when n is 0; the request is counted Dropped once the Limiter is closed.
func (l *Limiter) CompareN(ctx context.Context, key string, n int64, lim strategy.Limit, enforced strategy.Result) {
	switch {
	case n == 0:
		return
	case l.stopped.Load():
		l.outcome(ctx, n, enforced, strategy.Result{}, Dropped)
	case l.mode == modeInline:
		l.compare(ctx, key, n, lim, enforced)
	case l.mode == modePipeline:
		l.pipelined(ctx, key, n, lim, &enforced)
	default:
		l.inBackground(ctx, key, n, lim, enforced)
	}
}

// decide is AllowN of st, under lim when lim is set and st can.
func decide(ctx context.Context, st strategy.Strategy, key string, n int64, lim strategy.Limit) (strategy.Result, error) {
	if lim.Window != 0 {
		if o, ok := st.(strategy.LimitOverrider); ok {
			return o.AllowNWith(ctx, key, n, lim)
		}
	}
	return st.AllowN(ctx, key, n)
}

func (l *Limiter) allow(ctx context.Context, key string, n int64, lim strategy.Limit) (strategy.Result, error) {
	stopped := l.stopped.Load()
	if l.mode == modePipeline && n != 0 && !stopped {
		return l.pipelined(ctx, key, n, lim, nil)
	}
	res, err := decide(ctx, l.enforced, key, n, lim)
	if err != nil || n == 0 {
		return res, err
	}
	if stopped {
		l.outcome(ctx, n, res, strategy.Result{}, Dropped)
		return res, nil
	}
	if l.mode == modeInline {
		l.compare(ctx, key, n, lim, res)
		return res, nil
	}
	l.inBackground(ctx, key, n, lim, res)
	return res, nil
}

// pipelined decides a request of n units of key (under lim when set) on
// the candidate, and on the enforced strategy too unless its decision is
// given (CompareN), sending their script calls in one pipeline when their
// client can, and records the outcome. When it cannot, the enforced call
// runs alone and the candidate in the background.
func (l *Limiter) pipelined(ctx context.Context, key string, n int64, lim strategy.Limit, given *strategy.Result) (strategy.Result, error) {
	q := engine.Req{Op: engine.OpAllow, Key: key, N: n, Limit: lim, With: lim.Window != 0}
	var e engine.Call
	ec := &e
	if given != nil {
		ec = nil
	}
	c, pipelined, err := l.send(ctx, q, ec)
	if err != nil {
		return strategy.Result{}, err
	}
	res := e.Result
	if given != nil {
		res = *given
	}
	switch {
	case !pipelined:
		// e.g. a batch.Client, which pipelines concurrent calls itself:
		// the candidate's call is made again in the background
		l.inBackground(ctx, key, n, lim, res)
	case c.Err != nil:
		l.outcome(ctx, n, res, strategy.Result{}, CandidateError)
	default:
		l.outcome(ctx, n, res, c.Result, OutcomeOf(res.Allowed, c.Result.Allowed))
	}
	return res, nil
}

// send plans q on the enforced strategy into e (unless e is nil) and on
// the candidate, and sends the two calls in one pipeline (engine.Exec).
// When the candidate's call cannot share the pipeline (pipelined false),
// the enforced call is sent alone and the candidate's is not sent. err is
// the enforced strategy's (bad input or a failure); the candidate's is in
// the returned call.
func (l *Limiter) send(ctx context.Context, q engine.Req, e *engine.Call) (c engine.Call, pipelined bool, err error) {
	var buf [2]*engine.Call
	calls := buf[:0]
	rdb, shared := l.cRaw, l.alone
	if e != nil {
		if *e, err = l.ep.Plan(q); err != nil {
			return c, false, err
		}
		if e.Done { // decided without Redis: the candidate's call goes alone
			shared = true
		} else {
			calls = append(calls, e)
			rdb, shared = l.eRaw, l.together
		}
	}
	c, cerr := l.cp.Plan(q)
	switch {
	case cerr != nil:
		c.Err = cerr
	case c.Done:
	case !shared: // the enforced call, if any, alone on its own client
		engine.Exec(ctx, l.ep.Client(), calls)
		if e != nil {
			err = e.Err
		}
		return c, false, err
	default:
		calls = append(calls, &c)
	}
	engine.Exec(ctx, rdb, calls)
	if e != nil {
		err = e.Err
	}
	return c, true, err
}

// unbatched returns the go-redis client under the Batcher a strategy's
// constructor put in front of it by default, rdb itself otherwise (a
// batch.Client the caller chose stays).
func unbatched(rdb redis.Scripter) redis.Scripter {
	if b, ok := rdb.(*engine.Batcher); ok {
		return b.Unwrap()
	}
	return rdb
}

// pipelines reports whether calls on a and b can share one pipeline: the
// same go-redis client, of a kind that pipelines.
func pipelines(a, b redis.Scripter) bool {
	switch a := a.(type) {
	case *redis.Client:
		b, ok := b.(*redis.Client)
		return ok && a == b
	case *redis.ClusterClient:
		b, ok := b.(*redis.ClusterClient)
		return ok && a == b
	case *redis.Ring:
		b, ok := b.(*redis.Ring)
		return ok && a == b
	}
	return false
}

// inBackground starts the candidate's decision on a goroutine, or counts
// it dropped.
func (l *Limiter) inBackground(ctx context.Context, key string, n int64, lim strategy.Limit, enforced strategy.Result) {
	if !l.start() {
		l.outcome(ctx, n, enforced, strategy.Result{}, Dropped)
		return
	}
	go l.background(context.WithoutCancel(ctx), key, n, lim, enforced)
}

// background runs the candidate's decision under its own timeout.
func (l *Limiter) background(ctx context.Context, key string, n int64, lim strategy.Limit, enforced strategy.Result) {
	defer l.done()
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	l.compare(ctx, key, n, lim, enforced)
}

// compare runs the candidate's decision and records the outcome.
func (l *Limiter) compare(ctx context.Context, key string, n int64, lim strategy.Limit, enforced strategy.Result) {
	cres, err := decide(ctx, l.candidate, key, n, lim)
	if err != nil {
		l.outcome(ctx, n, enforced, strategy.Result{}, CandidateError)
		return
	}
	l.outcome(ctx, n, enforced, cres, OutcomeOf(enforced.Allowed, cres.Allowed))
}

func (l *Limiter) outcome(ctx context.Context, n int64, enforced, candidate strategy.Result, o Outcome) {
	l.counts[o].Add(1)
	if l.report != nil {
		l.report(ctx, n, enforced, candidate, o)
	}
}

// start reserves a background slot, or reports that none is free.
func (l *Limiter) start() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.run >= l.max {
		return false
	}
	l.run++
	return true
}

func (l *Limiter) done() {
	l.mu.Lock()
	l.run--
	if l.run == 0 {
		l.idle.Broadcast()
	}
	l.mu.Unlock()
}

// Peek reports the enforced strategy's state of key; the candidate is
// not consulted (use Candidate().Peek for its state).
func (l *Limiter) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return l.enforced.Peek(ctx, key)
}

// Reset forgets the subject in both strategies. The candidate is reset
// even when the enforced strategy fails; the errors are joined.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	return errors.Join(l.enforced.Reset(ctx, key), l.candidate.Reset(ctx, key))
}

// Agreement returns the counts of each outcome so far. The counts are
// read one by one while comparisons may still be running: call Wait
// first for a consistent snapshot.
func (l *Limiter) Agreement() Agreement {
	return Agreement{
		BothAllow:         l.counts[BothAllow].Load(),
		BothDeny:          l.counts[BothDeny].Load(),
		EnforcedOnlyDeny:  l.counts[EnforcedOnlyDeny].Load(),
		CandidateOnlyDeny: l.counts[CandidateOnlyDeny].Load(),
		CandidateErrors:   l.counts[CandidateError].Load(),
		Dropped:           l.counts[Dropped].Load(),
	}
}

// Wait returns once no background candidate decision is running (those
// started before and during the call included).
func (l *Limiter) Wait() {
	l.mu.Lock()
	for l.run > 0 {
		l.idle.Wait()
	}
	l.mu.Unlock()
}

// Close stops comparing: later requests are still decided by the
// enforced strategy, but their comparison is dropped. It returns once the
// background candidate decisions already started have finished (each is
// bounded by WithTimeout). It closes neither strategy and is safe to call
// more than once.
func (l *Limiter) Close() error {
	l.stopped.Store(true)
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.Wait()
	return nil
}
