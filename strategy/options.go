package strategy

import (
	"fmt"
	"strings"
	"time"

	"github.com/ratekit/ratelimit/internal/fielderr"
	"github.com/ratekit/ratelimit/internal/quote"
)

// DefaultPrefix is the key namespace used when WithPrefix is not given.
const DefaultPrefix = "rl:"

// DefaultMaxSubjects is the most subjects a local twin holds at once when
// WithMaxSubjects is not given: 2^20 = 1,048,576, about 140 MB for a twin
// whose state is one or two integers and 210 MB for a sliding log of one
// request per subject (measured; see docs/bounds.md).
const DefaultMaxSubjects = 1 << 20

// Clock tells the time. A client clock replaces the Redis server's TIME.
// It must be safe for concurrent use: a limiter calls Now from every
// goroutine that calls it and from goroutines of its own (a local twin's
// idle sweep), so a test clock that is stepped while the limiter runs needs
// a mutex or an atomic (time.Now is safe).
type Clock interface {
	Now() time.Time
}

// ClockFunc adapts a function to a Clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

// Options are the settings every strategy shares, as the options set
// them (Apply): a strategy of your own reads them the way this module's
// do.
type Options struct {
	// Prefix is the key namespace; default DefaultPrefix.
	Prefix string
	// Clock is the client clock, or nil: Redis strategies then read the
	// server's TIME, local twins time.Now.
	Clock Clock
	// MaxSubjects bounds the subjects a local twin holds at once; 0 means
	// DefaultMaxSubjects. Redis strategies ignore it.
	MaxSubjects int
	// OnEvict is called by a local twin for each subject it evicts to make
	// room for another, or nil. Redis strategies ignore it.
	OnEvict func()
	// Replicas, when > 0, is the durability mode (WithReplicas): a
	// decision that records units is acknowledged only once at least
	// Replicas replicas have it, waiting at most ReplicaTimeout. Local
	// twins ignore it.
	Replicas       int
	ReplicaTimeout time.Duration
	// Unbatched (WithoutBatching) makes a Redis strategy call its client
	// as given instead of through the batching client shared by every
	// strategy on it.
	Unbatched bool
	err       error // the first invalid option seen
}

// Apply returns the Options that opts set, with defaults for the rest, or
// the first invalid option's error. nil options are ignored.
func Apply(opts []Option) (Options, error) {
	o := Options{Prefix: DefaultPrefix}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o, o.err
}

// Option sets one of the settings every strategy shares: the key prefix,
// the clock, and a local twin's subject bound. Build them with WithPrefix,
// WithClock, WithMaxSubjects and WithOnEvict; a constructor reports an
// invalid one. nil options are ignored.
type Option func(*Options)

// WithPrefix sets the key namespace, e.g. "rl:login:". It must not contain
// '{' or '}', which would change the Redis Cluster hash tag of every key.
func WithPrefix(prefix string) Option {
	return func(o *Options) {
		if strings.ContainsAny(prefix, "{}") && o.err == nil {
			o.err = fielderr.New(ErrInvalidOption, "", "Prefix", func(func(string) string) string {
				// the option's own name, lowercase, whoever reads it
				return fmt.Sprintf("prefix must not contain '{' or '}', got %s", quote.Value(prefix))
			})
		}
		o.Prefix = prefix
	}
}

// WithClock makes the strategy use c instead of the Redis server's TIME (or
// time.Now for local twins). Use it for tests, or to keep every host of a
// fleet on its own NTP-disciplined clock; skew between hosts then shifts
// decisions by the skew. c must be safe for concurrent use (see Clock):
// Now is called from other goroutines than the caller's, e.g. by a local
// twin's idle sweep. A nil c is ignored.
func WithClock(c Clock) Option {
	return func(o *Options) {
		if c != nil {
			o.Clock = c
		}
	}
}

// WithMaxSubjects bounds the subjects a local twin (NewLocal) holds at once
// to n (default DefaultMaxSubjects). When the bound is reached, a new
// subject evicts the least recently used one of the 1/64 of subjects that
// share its stripe; an evicted subject starts fresh on its next request,
// with its full capacity, as if its window had passed: the twin then
// allows more than the limit to subjects it evicted. Size n above the
// subjects active within one window so that only abusive key rotation
// evicts. Idle subjects are freed within about one window whatever n is.
// n must be >= 1. Redis strategies ignore it.
func WithMaxSubjects(n int) Option {
	return func(o *Options) {
		if n < 1 && o.err == nil {
			o.err = fmt.Errorf("%w: MaxSubjects must be >= 1, got %d", ErrInvalidOption, n)
		}
		o.MaxSubjects = n
	}
}

// MaxReplicas is the most replicas WithReplicas may wait for: more than
// any Redis deployment runs, and a bound on what a policy file can ask.
const MaxReplicas = 100

// WithReplicas is the durability mode: a decision that records units
// (AllowN with n > 0 that is allowed) is acknowledged only once at least n
// replicas of the Redis primary have it (n at most MaxReplicas). The
// strategy sends WAIT n timeout right after the script call, in the same
// pipeline (one WAIT for a whole pipeline of a batch.Client or a sharded
// subject), and a WAIT that counts fewer than n replicas within timeout
// makes the decision a backend failure (an error wrapping ErrBackend and
// ErrNotReplicated; a ratelimit.Limiter applies its failure policy and
// counts it for its breaker). The units it recorded on the primary stay
// recorded there. Peek, refunds and Reset send no WAIT: losing them in a
// failover never lets more through. n must be >= 1 and timeout > 0 (rounded
// up to whole milliseconds); keep timeout below the client's ReadTimeout
// and the caller's deadlines, or they end the wait first. The client must
// pipeline (a *redis.Client, *redis.ClusterClient, *redis.Ring or
// batch.Client), or the constructor fails. Local twins ignore it.
// docs/failover.md says what it costs and what it saves.
func WithReplicas(n int, timeout time.Duration) Option {
	return func(o *Options) {
		switch {
		case (n < 1 || n > MaxReplicas) && o.err == nil:
			o.err = fielderr.New(ErrInvalidOption, "", "Replicas", func(name func(string) string) string {
				return fmt.Sprintf("%s must be in [1, %d], got %d", name("Replicas"), MaxReplicas, n)
			})
		case timeout <= 0 && o.err == nil:
			o.err = fielderr.New(ErrInvalidOption, "", "ReplicaTimeout", func(name func(string) string) string {
				return fmt.Sprintf("%s must be > 0, got %s", name("ReplicaTimeout"), timeout)
			})
		}
		o.Replicas, o.ReplicaTimeout = n, timeout
	}
}

// WithOnEvict makes a local twin call f each time it evicts a subject to
// make room for another (see WithMaxSubjects), e.g. to count evictions. f
// runs under a lock of the twin and must be quick and safe for concurrent
// use. A nil f is ignored. Redis strategies ignore it.
func WithOnEvict(f func()) Option {
	return func(o *Options) {
		if f != nil {
			o.OnEvict = f
		}
	}
}

// WithoutBatching makes a Redis strategy send each call alone on the
// client it is given. By default, on a *redis.Client, *redis.ClusterClient
// or *redis.Ring with ContextTimeoutEnabled, the strategies of this module
// send their calls through one batching client (see package batch) that
// every strategy on that go-redis client shares, held only while they use
// it: nothing to close. Decisions are the same either way. Local twins
// ignore it.
func WithoutBatching() Option {
	return func(o *Options) { o.Unbatched = true }
}
