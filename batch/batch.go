package batch

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/strategy"
)

// Defaults and bounds of the options.
const (
	// DefaultMaxInFlight is the most sends (calls sent alone, and
	// pipelines) a Client keeps in flight per Redis node; at most half of
	// them (rounded up) are pipelines. Up to 8 concurrent callers are thus
	// each sent at once, as without batching; beyond, calls share at most 4
	// pipelines, which measured ahead of 8 at concurrency 64 (deeper
	// pipelines, less Redis CPU per call).
	DefaultMaxInFlight = 8
	// DefaultMaxBatch is the most commands one pipeline carries.
	DefaultMaxBatch = 128
	// DefaultMaxQueue is the most calls that may wait per node for a
	// pipeline; more fail at once with ErrQueueFull.
	DefaultMaxQueue = 10000

	maxInFlight = 256
	maxBatch    = 10000
	maxQueue    = 1 << 20
)

// ErrClosed is the error of calls made on, or still waiting in, a Client
// that is closed.
var ErrClosed = engine.ErrBatchClosed

// ErrQueueFull is the error of a call that finds MaxQueue calls already
// waiting for a pipeline to the same node: Redis is not keeping up, and
// waiting longer would only add latency.
var ErrQueueFull = engine.ErrQueueFull

// Option configures a Client.
type Option func(*options)

type options struct {
	inFlight, batch, queue int
	err                    error
}

func (o *options) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// WithMaxInFlight sets how many sends (calls sent alone, and pipelines) may
// be in flight per Redis node at once, in [1, 256], of which at most half
// (rounded up) pipelines; default DefaultMaxInFlight. Fewer make bigger
// pipelines (less Redis CPU per call) but make callers wait for a pipeline
// at a lower concurrency.
func WithMaxInFlight(k int) Option {
	return func(o *options) {
		if k < 1 || k > maxInFlight {
			o.fail(fmt.Errorf("%w: WithMaxInFlight: k must be in [1, %d], got %d", strategy.ErrInvalidOption, maxInFlight, k))
		}
		o.inFlight = k
	}
}

// WithMaxBatch sets the most commands one pipeline carries, in [1, 10000];
// default DefaultMaxBatch.
func WithMaxBatch(n int) Option {
	return func(o *options) {
		if n < 1 || n > maxBatch {
			o.fail(fmt.Errorf("%w: WithMaxBatch: n must be in [1, %d], got %d", strategy.ErrInvalidOption, maxBatch, n))
		}
		o.batch = n
	}
}

// WithMaxQueue sets the most calls that may wait per node for a pipeline,
// in [1, 1048576]; default DefaultMaxQueue. A call beyond it fails at once
// with ErrQueueFull.
func WithMaxQueue(n int) Option {
	return func(o *options) {
		if n < 1 || n > maxQueue {
			o.fail(fmt.Errorf("%w: WithMaxQueue: n must be in [1, %d], got %d", strategy.ErrInvalidOption, maxQueue, n))
		}
		o.queue = n
	}
}

// Client is a redis.Scripter that sends concurrent script calls to the same
// Redis node together in pipelines. It is safe for concurrent use. See the
// package doc.
type Client struct {
	b *engine.Batcher
}

var (
	_ redis.Scripter   = (*Client)(nil)
	_ engine.Submitter = (*Client)(nil)
)

// New returns a Client that batches the script calls made on rdb, which must
// be a *redis.Client, a *redis.ClusterClient (one queue per master, calls
// grouped by the node that serves their first key's slot) or a *redis.Ring
// (one queue per shard). Any other redis.Scripter is accepted and called
// directly, without batching. New does not take ownership of rdb: Close
// stops the Client, never rdb. Bad options are reported naming the option.
func New(rdb redis.Scripter, opts ...Option) (*Client, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: redis client is nil", strategy.ErrInvalidOption)
	}
	o := options{inFlight: DefaultMaxInFlight, batch: DefaultMaxBatch, queue: DefaultMaxQueue}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.err != nil {
		return nil, o.err
	}
	return &Client{b: engine.NewBatcher(rdb, o.inFlight, o.batch, o.queue)}, nil
}

// Unwrap returns the client the Client was made on, for the commands it
// does not batch (ratelimit.New asks it CONFIG GET).
func (c *Client) Unwrap() redis.Scripter { return c.b.Unwrap() }

// HonoursContext reports whether every call returns by its context's
// deadline or cancellation whatever the underlying client's settings: true
// for a *redis.Client and a *redis.Ring, whose callers wait for a pipeline
// on their context; false for a *redis.ClusterClient (finding a key's node
// may load the cluster's slot map, which the context does not bound) and
// for clients passed through. The facade (ratelimit.New) then calls the
// Client on the caller's goroutine rather than on a worker.
func (c *Client) HonoursContext() bool { return c.b.HonoursContext() }

// Close stops the Client: calls made later, calls waiting for a pipeline
// and callers of pipelines in flight return at once with errors wrapping
// ErrClosed (the replies of calls in flight are discarded; those calls may
// have run). Close returns once the Client's goroutines that are not
// waiting on Redis have exited; it never waits for Redis, which go-redis
// does not let a context interrupt (it applies deadlines to the socket,
// not cancellation). A pipeline in flight to a node that hangs holds its
// goroutine and connection until go-redis gives up on it (the callers'
// latest deadline with ContextTimeoutEnabled, else ReadTimeout) or the
// underlying client is closed; it then exits without touching the Client.
// A call sent alone runs on its caller's goroutine, not the Client's, and
// returns when go-redis does. Close does not close the underlying client.
// It is safe to call more than once.
func (c *Client) Close() error { return c.b.Close() }

// Submit sends c, a strategy's script call, in a pipeline shared with
// concurrent calls to the same node (or on its own when nothing else is
// in flight to that node), and returns once c has its outcome or ctx is
// done (see engine.Submitter). Every strategy of this module hands the
// Client its calls this way.
func (c *Client) Submit(ctx context.Context, call engine.Call) engine.Call {
	return c.b.Submit(ctx, call)
}

// EvalSha runs the script with SHA1 digest sha1 in a pipeline shared with
// concurrent calls to the same node (or on its own when nothing else is in
// flight to that node). A NOSCRIPT reply of a script this Client has seen
// (through Eval or ScriptLoad) is recovered by loading it and re-sending
// only the calls that got NOSCRIPT; otherwise it is returned, and
// redis.Script.Run then falls back to Eval.
func (c *Client) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return c.b.EvalSha(ctx, sha1, keys, args...)
}

// Eval runs script like EvalSha with the script's digest: the Client
// remembers the script, sends EVALSHA, and on NOSCRIPT loads the script once
// and re-sends, so that the whole text crosses the network once per node,
// not once per caller.
func (c *Client) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return c.b.Eval(ctx, script, keys, args...)
}

// EvalRO is the underlying client's EvalRO, not batched.
func (c *Client) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return c.b.EvalRO(ctx, script, keys, args...)
}

// EvalShaRO is the underlying client's EvalShaRO, not batched.
func (c *Client) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return c.b.EvalShaRO(ctx, sha1, keys, args...)
}

// ScriptExists is the underlying client's ScriptExists.
func (c *Client) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	return c.b.ScriptExists(ctx, hashes...)
}

// ScriptLoad loads script with the underlying client (on every master of a
// cluster) and remembers it for NOSCRIPT recovery.
func (c *Client) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	return c.b.ScriptLoad(ctx, script)
}
