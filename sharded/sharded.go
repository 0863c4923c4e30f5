package sharded

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/fielderr"
	"github.com/ratekit/ratelimit/strategy"
)

// MaxShards is the most shards New (and Config.Shards of the facade)
// accepts. Peek and Reset read or write every shard; past a few times the
// number of cluster nodes more shards only add work, and a bound keeps one
// call's cost bounded whatever the configuration says.
const MaxShards = 1024

// DefaultProbes is the number of shards a request tries by default: the one
// picked, then one more when the first denies.
const DefaultProbes = 2

// Option configures a Limiter.
type Option func(*options)

type options struct {
	probes int
	err    error
}

// WithProbes sets how many shards a request tries before it is denied: 1
// tries only the shard picked, 2 (the default) tries one more when the
// first denies, and any value >= the shard count tries them all. More
// probes allow closer to the limit under uneven load and cost one more
// round trip per extra shard tried, on the denied path only. p < 1 is an
// error.
func WithProbes(p int) Option {
	return func(o *options) {
		if p < 1 && o.err == nil {
			o.err = fmt.Errorf("%w: sharded: probes must be >= 1, got %d", strategy.ErrInvalidOption, p)
		}
		o.probes = p
	}
}

// pickMode is how the first shard of a request is chosen. Only
// pickRoundRobin is offered; pickRandom stays for the measurements in the
// tests.
type pickMode int

const (
	pickRoundRobin pickMode = iota // a counter per stripe of subjects, random start
	pickRandom                     // independently at random per request
)

// rrStripes is the number of round-robin counters of a Limiter; subjects
// are spread over them by hash, so a hot subject mostly has one to itself.
const rrStripes = 64

type rrCounter struct {
	atomic.Uint64
	_ [56]byte // one cache line each
}

// Limiter spreads each subject over several shards, each an instance of the
// wrapped strategy holding a share of the limit under a key of its own. It
// is safe for concurrent use.
type Limiter struct {
	lim        strategy.Limit // Burst 0 when the wrapped strategies have none
	limShare   []int64        // Limit share of each shard; sums to lim.Limit
	burstShare []int64        // Burst share (Limit share when Burst is 0); sums to lim.Capacity()
	burst      bool           // New was given a Burst: the shards are built with Burst shares
	capShare   []int64        // st[i].Limit().Capacity(): the units shard i can hold
	capacity   int64          // the sum of capShare: the subject's capacity
	sorted     bool           // capShare never grows with the index
	// st[i] decides for shard i: the shard's own view of a strategy of
	// this module (engine.Sharder; view[i]), or a strategy from elsewhere,
	// given the subject with "#i" appended
	st      []strategy.Strategy
	view    []bool
	honours bool // every st[i] honours contexts (strategy.ContextHonourer)
	probes  int
	pick    pickMode
	seed    maphash.Seed
	rr      [rrStripes]rrCounter
}

// A Limiter is deliberately not a shard view maker (engine.Sharder):
// wrapped in another, it receives the outer shard in its subject
// ("subject#i") and adds its own shard through its strategies' views, so
// nested shards never share a key.
var (
	_ strategy.Strategy        = (*Limiter)(nil)
	_ strategy.ContextHonourer = (*Limiter)(nil)
)

// shardCount returns the number of shards New uses for shards requested of
// lim: shards, reduced so that no shard gets a share of 0 of Limit or Burst
// (at most Limit shards, at most Burst when it is set), and at least 1.
func shardCount(shards int, lim strategy.Limit) int {
	n := int64(shards)
	n = min(n, lim.Limit)
	if lim.Burst > 0 {
		n = min(n, lim.Burst)
	}
	return int(max(n, 1))
}

// splitShares splits total over n shards: total/n each, and one more for
// the first total%n shards, so that the shares sum exactly to total.
func splitShares(total int64, n int) []int64 {
	s := make([]int64, n)
	q, r := total/int64(n), total%int64(n)
	for i := range s {
		s[i] = q
		if int64(i) < r {
			s[i]++
		}
	}
	return s
}

// New returns a Limiter that spreads each subject over shards keys, shard i
// enforcing the limit build receives for it: its share of lim.Limit and of
// lim.Burst (see the package doc). When lim allows fewer units than shards,
// the shard count is reduced so that no shard gets 0; Shards reports the
// count in use. shards < 1 or > MaxShards is an error.
//
// build is called once per distinct share (at most four times) and its
// strategies are reused for every shard with that share. Strategies of this
// module decide each shard on a view of their own (the shard index a
// value of the view), which puts it in their key
// (<prefix><tag>:{<subject>#<i>}), which spreads the shards of one subject
// over the nodes of a Redis Cluster. A strategy from elsewhere receives the
// subject with "#<i>" appended instead; the wrapper's keys stay distinct as
// long as every subject of that strategy's key space goes through the
// wrapper. Each shard's capacity is its strategy's Limit().Capacity().
func New(shards int, lim strategy.Limit, build func(strategy.Limit) (strategy.Strategy, error), opts ...Option) (*Limiter, error) {
	if shards < 1 {
		return nil, fmt.Errorf("%w: sharded: shards must be >= 1, got %d", strategy.ErrInvalidOption, shards)
	}
	if shards > MaxShards {
		return nil, fmt.Errorf("%w: sharded: shards must be <= %d (MaxShards), got %d", strategy.ErrInvalidOption, MaxShards, shards)
	}
	if build == nil {
		return nil, fmt.Errorf("%w: sharded: build must not be nil", strategy.ErrInvalidOption)
	}
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	o := options{probes: DefaultProbes}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.err != nil {
		return nil, o.err
	}
	n := shardCount(shards, lim)
	l := &Limiter{
		lim:        lim,
		limShare:   splitShares(lim.Limit, n),
		burstShare: splitShares(lim.Capacity(), n),
		burst:      lim.Burst > 0,
		capShare:   make([]int64, n),
		sorted:     true,
		st:         make([]strategy.Strategy, n),
		view:       make([]bool, n),
		honours:    true,
		probes:     min(o.probes, n),
	}
	burst := false // some shard's strategy has a burst
	built := map[strategy.Limit]strategy.Strategy{}
	for i := range n {
		share := strategy.Limit{Limit: l.limShare[i], Window: lim.Window}
		if lim.Burst > 0 {
			share.Burst = l.burstShare[i]
		}
		st, ok := built[share]
		if !ok {
			var err error
			if st, err = build(share); err != nil {
				if fe := (*fielderr.Error)(nil); errors.As(err, &fe) { // keep the field at fault
					return nil, fielderr.New(fe.Sentinel, fe.Scope, fe.Field, func(name func(string) string) string {
						return fmt.Sprintf("%s (sharded: shard %d, limit %v)", fe.Text(name), i, share)
					})
				}
				return nil, fmt.Errorf("%w (sharded: shard %d, limit %v)", err, i, share)
			}
			if st == nil {
				return nil, fmt.Errorf("%w: sharded: build returned a nil strategy for %v", strategy.ErrInvalidOption, share)
			}
			built[share] = st
		}
		l.st[i] = st
		if sh, ok := st.(engine.Sharder); ok {
			l.st[i], l.view[i] = sh.Shard(i), true
		}
		if h, ok := st.(strategy.ContextHonourer); !ok || !h.HonoursContext() {
			l.honours = false
		}
		sl := st.Limit()
		burst = burst || sl.Burst > 0
		l.capShare[i] = sl.Capacity()
		l.capacity += l.capShare[i]
		if i > 0 && l.capShare[i] > l.capShare[i-1] {
			l.sorted = false
		}
	}
	if !burst {
		l.lim.Burst = 0
	}
	l.seed = maphash.MakeSeed()
	for i := range l.rr {
		l.rr[i].Store(rand.Uint64())
	}
	return l, nil
}

// Shards returns the number of shards in use: the shards asked of New,
// reduced when the limit is smaller.
func (l *Limiter) Shards() int { return len(l.st) }

// Limits returns the limit each shard was built with; they sum to the
// Limiter's.
func (l *Limiter) Limits() []strategy.Limit {
	out := make([]strategy.Limit, len(l.st))
	for i := range out {
		out[i] = strategy.Limit{Limit: l.limShare[i], Window: l.lim.Window}
		if l.burst {
			out[i].Burst = l.burstShare[i]
		}
	}
	return out
}

// Limit returns the limit the Limiter enforces for each subject as a
// whole: the lim given to New, with Burst 0 when the wrapped strategies
// report none (their Limit().Burst is 0).
func (l *Limiter) Limit() strategy.Limit { return l.lim }

// HonoursContext reports whether every wrapped strategy honours contexts
// (see strategy.ContextHonourer); false when one does not implement it.
func (l *Limiter) HonoursContext() bool { return l.honours }

// eligible returns how many shards, from the first, can ever take n
// units: all but those whose capacity is below n, when capacities never
// grow with the index (always with the strategies of this module).
func (l *Limiter) eligible(n int64) int {
	m := len(l.capShare)
	if !l.sorted {
		return m
	}
	for m > 1 && l.capShare[m-1] < n {
		m--
	}
	return m
}

// first returns the shard a request for key starts at, among the first m
// shards. Requests go round robin over the units of Limit, interleaved
// (0, 1, ..., n-1, 0, 1, ...), so that shard i gets exactly its share of
// every Limit consecutive picks; the counter is one of rrStripes chosen by
// the subject's hash and starts at random, so that neither two subjects
// nor two hosts fall into step.
func (l *Limiter) first(key string, m int) int {
	if m == 1 {
		return 0
	}
	var u uint64
	if l.pick == pickRandom {
		u = rand.Uint64()
	} else {
		u = l.rr[maphash.String(l.seed, key)%rrStripes].Add(1)
	}
	if m < len(l.st) { // the first m shards have equal shares
		return int(u % uint64(m))
	}
	total := uint64(l.lim.Limit)
	n := uint64(len(l.st))
	u %= total
	if q := total / n; u < q*n {
		return int(u % n)
	} else {
		return int(u - q*n) // one of the first total%n shards, which hold one more
	}
}

// call runs f on shard i: on the shard's own view, or with "#i" appended
// to the subject of a strategy from elsewhere.
func (l *Limiter) call(ctx context.Context, i int, key string, f func(st strategy.Strategy, ctx context.Context, key string) (strategy.Result, error)) (strategy.Result, error) {
	if l.view[i] {
		return f(l.st[i], ctx, key)
	}
	return f(l.st[i], ctx, key+"#"+strconv.Itoa(i))
}

func peek(st strategy.Strategy, ctx context.Context, key string) (strategy.Result, error) {
	return st.Peek(ctx, key)
}

func allowN(n int64) func(strategy.Strategy, context.Context, string) (strategy.Result, error) {
	return func(st strategy.Strategy, ctx context.Context, key string) (strategy.Result, error) {
		return st.AllowN(ctx, key, n)
	}
}

// AllowN tries the request on one shard, picked round robin in proportion
// to the shards' shares (see the package doc); when that shard denies, it
// tries the next shards in turn, up to the probe count (see WithProbes),
// and records n units on the first that allows. A request is one round trip when the first shard
// allows. n must fit in one shard: a cost above the largest share (the
// first shard's) is denied with RetryAfter strategy.Never. n = 0 is Peek.
//
// The Result speaks for the subject as a whole, estimated from the shards
// tried (exact when all were tried):
//   - Limit is the subject's capacity (the sum of the shards');
//   - Remaining is the shards' remaining units scaled from the capacity of
//     the shards tried to the subject's, rounded down;
//   - RetryAfter, when denied, is the shortest of the shards tried (Never
//     when none of them can ever take n units);
//   - ResetAfter is the longest of the shards tried.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	if err := strategy.ValidateKey(key); err != nil {
		return strategy.Result{}, err
	}
	if err := strategy.ValidateCost(n); err != nil {
		return strategy.Result{}, err
	}
	if n == 0 {
		return l.Peek(ctx, key)
	}
	var triedBuf [8]int
	var resBuf [8]strategy.Result
	tried, res := triedBuf[:0], resBuf[:0]
	i := l.first(key, l.eligible(n))
	for budget := l.probes; ; {
		r, err := l.call(ctx, i, key, allowN(n))
		if err != nil {
			return strategy.Result{}, err
		}
		tried, res = append(tried, i), append(res, r)
		if r.Allowed {
			break
		}
		next := (i + 1) % len(l.st)
		if r.RetryAfter == strategy.Never {
			// Shard i can never take n. Shard 0 holds the largest share:
			// try it unless it was tried, without counting against the
			// probes, since the first pick did not know i was too small.
			if i == 0 || !l.fits(0, n) {
				break
			}
			next = 0
		} else if budget--; budget == 0 {
			break
		}
		if containsInt(tried, next) {
			break
		}
		i = next
	}
	return l.combine(tried, res), nil
}

// fits reports whether n units can ever fit in shard i.
func (l *Limiter) fits(i int, n int64) bool { return n <= l.capShare[i] }

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// combine turns the results of the shards tried into the subject's.
func (l *Limiter) combine(tried []int, res []strategy.Result) strategy.Result {
	var out strategy.Result
	var remSum, capSum int64
	retry := strategy.Never
	for j, r := range res {
		remSum += r.Remaining
		capSum += l.capShare[tried[j]]
		out.ResetAfter = max(out.ResetAfter, r.ResetAfter)
		if r.Allowed {
			out.Allowed = true
		}
		if r.RetryAfter != strategy.Never && (retry == strategy.Never || r.RetryAfter < retry) {
			retry = r.RetryAfter
		}
	}
	out.Limit = capSum
	out.Remaining = remSum
	if len(tried) < len(l.st) {
		out.Limit = l.capacity
		if capSum > 0 {
			out.Remaining = mulDiv(min(remSum, capSum), out.Limit, capSum)
		}
	}
	if !out.Allowed {
		out.RetryAfter = retry
	}
	return out
}

// mulDiv returns a*b/c rounded down for a, b >= 0 and c > 0, without
// overflow; a quotient above math.MaxInt64 saturates.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(min(q, math.MaxInt64))
}

// Peek reads every shard and reports the subject as a whole: Remaining
// and Limit are the sums over the shards, Allowed whether some shard would
// take one unit, RetryAfter the shortest wait until one would (0 when
// Allowed), ResetAfter the longest of the shards'. With the strategies of
// this module on Redis it sends one pipeline (one per node on a Redis
// Cluster); other strategies are read concurrently, one call per shard.
func (l *Limiter) Peek(ctx context.Context, key string) (strategy.Result, error) {
	if err := strategy.ValidateKey(key); err != nil {
		return strategy.Result{}, err
	}
	res := make([]strategy.Result, len(l.st))
	if err := l.all(ctx, key, res); err != nil {
		return strategy.Result{}, err
	}
	tried := make([]int, len(l.st))
	for i := range tried {
		tried[i] = i
	}
	out := l.combine(tried, res)
	if out.Allowed {
		out.RetryAfter = 0
	}
	return out, nil
}

// Reset forgets the subject on every shard: in one pipeline (one per node
// on a Redis Cluster) with the strategies of this module on Redis,
// concurrently, one call per shard, with others.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if err := strategy.ValidateKey(key); err != nil {
		return err
	}
	return l.all(ctx, key, nil)
}

// all runs Peek of key on every shard, putting the Results in res, or Reset
// when res is nil, and returns the errors joined. The calls of shards on
// Redis are planned and sent together (one pipeline per client, see
// execPlanned); the others run concurrently.
func (l *Limiter) all(ctx context.Context, key string, res []strategy.Result) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ratelimit: no decision: %w", err)
	}
	errs := make([]error, len(l.st))
	planned := l.plan(key, res == nil, errs)
	var wg sync.WaitGroup
	for i := range l.st {
		if planned[i] != nil || errs[i] != nil {
			continue
		}
		wg.Go(func() {
			r, err := l.call(ctx, i, key, func(st strategy.Strategy, ctx context.Context, key string) (strategy.Result, error) {
				if res == nil {
					return strategy.Result{}, st.Reset(ctx, key)
				}
				return st.Peek(ctx, key)
			})
			errs[i] = err
			if res != nil {
				res[i] = r
			}
		})
	}
	l.execPlanned(ctx, planned)
	wg.Wait()
	for i, c := range planned {
		if c != nil {
			errs[i] = c.Err
			if res != nil {
				res[i] = c.Result
			}
		}
	}
	return errors.Join(errs...)
}

// plan returns the script call of a Peek (or a Reset) of key on each shard
// that is an engine strategy on Redis (engine.Planner), nil for the
// others; invalid input goes to errs.
func (l *Limiter) plan(key string, reset bool, errs []error) []*engine.Call {
	out := make([]*engine.Call, len(l.st))
	q := engine.Req{Op: engine.OpAllow, Key: key}
	if reset {
		q.Op = engine.OpReset
	}
	for i, st := range l.st {
		p, ok := st.(engine.Planner)
		if !ok || !l.view[i] {
			continue
		}
		c, err := p.Plan(q)
		if err != nil {
			errs[i] = err
			continue
		}
		out[i] = &c
	}
	return out
}

// execPlanned sends the planned calls, one pipeline per client (one per
// node on a Redis Cluster, which splits it).
func (l *Limiter) execPlanned(ctx context.Context, planned []*engine.Call) {
	var byClient map[redis.Scripter][]*engine.Call
	for i, c := range planned {
		if c == nil {
			continue
		}
		if byClient == nil {
			byClient = map[redis.Scripter][]*engine.Call{}
		}
		rdb := l.st[i].(engine.Planner).Client()
		byClient[rdb] = append(byClient[rdb], c)
	}
	for rdb, cs := range byClient {
		engine.Exec(ctx, rdb, cs)
	}
}
