package engine

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/strategy"
)

// Spec is an algorithm as the engine runs it: its scripts, how a limit
// becomes their arguments, and the pure decisions of its in-process twin.
// P is what the algorithm derives from a limit (its parameters, script
// arguments boxed once); S is one subject's state in the twin.
//
// own, where a function receives it, is the parameters of the strategy's
// own limit; p those of the limit in force (own, or a per-call limit's).
type Spec[P, S any] struct {
	Name  string    // the package's name, in errors
	Tag   string    // the key tag: <prefix><tag>:{<subject>}
	Burst bool      // the algorithm uses Limit.Burst; else Limit() reports Burst 0
	Lease LeaseRule // how a lease of the algorithm keeps its promise (package lease)

	// Script decides; Refund gives units back and then decides as a peek,
	// in one call.
	Script, Refund *redis.Script

	// Params checks lim (which passed strategy.Limit.Validate) and derives
	// P. own is nil for the strategy's own limit, and the strategy's
	// parameters for a per-call limit, whose Window is the strategy's.
	Params func(lim strategy.Limit, own *P) (P, error)
	// Capacity is the Result.Limit of decisions under p.
	Capacity func(p *P) int64
	// DenyAll, when set, reports a p that lets nothing pass, decided
	// without Redis.
	DenyAll func(p *P) bool
	// Args returns the decision script's ARGV for n units under p at now
	// (the NowArg); RefundArgs the refund script's, giving n units back.
	Args, RefundArgs func(p, own *P, n int64, now any) []any

	// Decide is the twin's decision on s: the decision script's, for the
	// same clock. It returns the Result and until when s matters (Unix ms;
	// 0: drop it).
	Decide func(s *S, p, own *P, now, n int64) (strategy.Result, int64)
	// Give is the twin's refund on s, as the refund script does it, then a
	// peek.
	Give func(s *S, own *P, now, n int64) (strategy.Result, int64)

	// Optional, for an algorithm over several keys (multilimit): Keys
	// returns the keys of subject's state under p (nil: the one key
	// strategy.KeyFor(prefix, Tag, subject, shard)); Sweep the twin's sweep
	// period (nil: the limit's Window). Such an algorithm may leave Decide
	// and Give nil and decide through Local.Update.
	Keys  func(p *P, prefix, subject string, shard int) []string
	Sweep func(p *P) time.Duration
}

// Op is what a request asks of a strategy.
type Op uint8

// The operations of a request.
const (
	OpAllow  Op = iota // decide n units (0: peek)
	OpRefund           // give n units back, then peek
	OpReset            // forget the subject
)

// Req is one request to a strategy of the engine, as a value.
type Req struct {
	Op    Op
	Key   string
	N     int64
	Limit strategy.Limit // With: the per-call limit that applies
	With  bool           // Limit applies rather than the strategy's own
	// Ahead > 0 (ms; OpAllow of a LeaseAhead algorithm only) records the
	// units Ahead ms after now; the script reads it as its fifth argument.
	Ahead int64
}

// Planner is implemented by the engine's Redis strategies (and their shard
// views): a request becomes one script call, for a caller that pipelines
// calls (sharded, compare) to send with Exec on Client.
type Planner interface {
	strategy.Strategy
	Client() redis.Scripter
	Plan(r Req) (Call, error)
}

// Sharder is implemented by the engine's strategies: Shard returns the
// strategy that decides for shard i of every subject, under keys of its
// own, from the same state store.
type Sharder interface {
	Shard(i int) strategy.Strategy
}

// Submitter is a client that takes calls as values rather than running
// them at once (package batch): Run hands it the call, and Submit returns
// c with its outcome once it has one, or with ctx's error once ctx is
// done.
type Submitter interface {
	Submit(ctx context.Context, c Call) Call
}

// maxCached is how many per-call limits a cache remembers: a few tiers,
// whatever a caller passes.
const maxCached = 16

// cache remembers the parameters of the few per-call limits a caller
// passes (tiers), so that a per-call decision allocates no more than one
// under the strategy's own limit. It holds at most maxCached limits,
// dropping the oldest. The zero cache is empty and ready; it is safe for
// concurrent use.
type cache[P any] struct {
	p atomic.Pointer[[]cached[P]]
}

type cached[P any] struct {
	lim strategy.Limit
	p   *P
}

// get returns the parameters of lim, deriving and remembering them when
// new (copy on write: concurrent puts may drop one, derived again later).
func (c *cache[P]) get(lim strategy.Limit, derive func(strategy.Limit, *P) (P, error), own *P) (*P, error) {
	old := c.p.Load()
	if old != nil {
		for i := range *old {
			if (*old)[i].lim == lim {
				return (*old)[i].p, nil
			}
		}
	}
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	p, err := derive(lim, own)
	if err != nil {
		return nil, err
	}
	var next []cached[P]
	if old != nil {
		next = append(next, *old...)
	}
	if len(next) >= maxCached {
		next = next[1:]
	}
	next = append(next, cached[P]{lim: lim, p: &p})
	c.p.Store(&next)
	return &p, nil
}

// initer is a pointer to an algorithm's Limiter or Local type, which embeds
// a Redis or Local of the engine and so has its Init.
type initer[T, P, S any] interface {
	*T
	Init(spec *Spec[P, S], rdb redis.Scripter, lim strategy.Limit, opts []strategy.Option) error
}

type localIniter[T, P, S any] interface {
	*T
	Init(spec *Spec[P, S], lim strategy.Limit, opts []strategy.Option) error
}

// New returns a T (an algorithm's Limiter) set up as spec's strategy on rdb.
func New[T any, PT initer[T, P, S], P, S any](spec *Spec[P, S], rdb redis.Scripter, lim strategy.Limit, opts []strategy.Option) (*T, error) {
	t := new(T)
	if err := PT(t).Init(spec, rdb, lim, opts); err != nil {
		return nil, err
	}
	return t, nil
}

// NewLocal returns a T (an algorithm's Local) set up as spec's twin.
func NewLocal[T any, PT localIniter[T, P, S], P, S any](spec *Spec[P, S], lim strategy.Limit, opts []strategy.Option) (*T, error) {
	t := new(T)
	if err := PT(t).Init(spec, lim, opts); err != nil {
		return nil, err
	}
	return t, nil
}
