package engine

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Batcher's defaults (package batch's DefaultMaxInFlight, DefaultMaxBatch
// and DefaultMaxQueue), which Batched uses.
const (
	DefaultBatchInFlight = 8
	DefaultBatchMax      = 128
	DefaultBatchQueue    = 10000
)

// Bounds of a Batcher beyond its options.
const (
	// maxScripts bounds the scripts a Batcher remembers for NOSCRIPT
	// recovery; scripts beyond it are not remembered (their callers fall
	// back to EVAL, as without batching).
	maxScripts = 1024
	// maxLanes bounds the nodes a Batcher keeps queues for (a Ring or a
	// cluster whose nodes keep changing); calls to further nodes are sent
	// unbatched.
	maxLanes = 1024
)

// ErrBatchClosed is the error of calls made on, or still waiting in, a
// Batcher that is closed (batch.ErrClosed).
var ErrBatchClosed = errors.New("batch: client closed")

// errBatchClosedInFlight is the error of a call whose pipeline was in
// flight when the Batcher closed.
var errBatchClosedInFlight = fmt.Errorf("%w: the call was in flight, its reply is discarded (it may have run)", ErrBatchClosed)

// ErrQueueFull is the error of a call that finds maxQueue calls already
// waiting for a pipeline to the same node (batch.ErrQueueFull).
var ErrQueueFull = errors.New("batch: queue full")

// Batcher is a redis.Scripter that sends concurrent script calls to the
// same Redis node together in pipelines: package batch's Client, and what
// New puts in front of a go-redis client by default (Batched). It is safe
// for concurrent use. Package batch's doc says what it guarantees.
type Batcher struct {
	rdb      redis.Scripter
	route    func(ctx context.Context, key string) (*redis.Client, error) // nil: every call is passed through
	cluster  *redis.ClusterClient                                         // follows MOVED and ASK
	honours  bool
	single   *lane // the lane of a *redis.Client: no routing
	inFlight int   // sends in flight per node
	pipes    int   // of which pipelines
	maxBatch int
	maxQueue int

	ctx      context.Context // canceled by Close; the pipelines' base context
	cancel   context.CancelFunc
	closed   atomic.Bool
	flushers flushers

	lanesMu sync.RWMutex
	lanes   map[*redis.Client]*lane

	scripts  sync.Map // sha1 hex -> *redis.Script
	nScripts atomic.Int32
}

var (
	_ redis.Scripter = (*Batcher)(nil)
	_ Submitter      = (*Batcher)(nil)
)

// NewBatcher returns a Batcher of the script calls made on rdb, which
// batches for a *redis.Client, a *redis.ClusterClient (one queue per
// master, calls grouped by the node that serves their first key's slot)
// and a *redis.Ring (one queue per shard), and passes any other
// redis.Scripter's calls through. inFlight, maxBatch and maxQueue are
// package batch's options, valid.
func NewBatcher(rdb redis.Scripter, inFlight, maxBatch, maxQueue int) *Batcher {
	c := &Batcher{rdb: rdb, inFlight: inFlight, pipes: (inFlight + 1) / 2, maxBatch: maxBatch, maxQueue: maxQueue,
		lanes: map[*redis.Client]*lane{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	switch r := rdb.(type) {
	case *redis.Client:
		c.route = func(context.Context, string) (*redis.Client, error) { return r, nil }
		c.honours = true
		c.single = c.lane(r)
	case *redis.ClusterClient:
		c.route = r.MasterForKey
		c.cluster = r
		// Finding a key's node may load the slot map, which the call's
		// context does not bound.
		c.honours = false
	case *redis.Ring:
		c.route = func(_ context.Context, key string) (*redis.Client, error) { return r.GetShardClientForKey(key) }
		c.honours = true
	}
	return c
}

// Unwrap returns the client the Batcher was made on, for the commands it
// does not batch (ratelimit.New asks it CONFIG GET).
func (c *Batcher) Unwrap() redis.Scripter { return c.rdb }

// HonoursContext reports whether every call returns by its context's
// deadline or cancellation whatever the underlying client's settings: true
// for a *redis.Client and a *redis.Ring, whose callers wait for a pipeline
// on their context; false for a *redis.ClusterClient (finding a key's node
// may load the cluster's slot map, which the context does not bound) and
// for clients passed through. The facade (ratelimit.New) then calls the
// Batcher on the caller's goroutine rather than on a worker.
func (c *Batcher) HonoursContext() bool { return c.honours }

// Close stops the Batcher: calls made later, calls waiting for a pipeline
// and callers of pipelines in flight return at once with errors wrapping
// ErrBatchClosed (the replies of calls in flight are discarded; those calls may
// have run). Close returns once the Batcher's goroutines that are not
// waiting on Redis have exited; it never waits for Redis, which go-redis
// does not let a context interrupt (it applies deadlines to the socket,
// not cancellation). A pipeline in flight to a node that hangs holds its
// goroutine and connection until go-redis gives up on it (the callers'
// latest deadline with ContextTimeoutEnabled, else ReadTimeout) or the
// underlying client is closed; it then exits without touching the Batcher.
// A call sent alone runs on its caller's goroutine, not the Batcher's, and
// returns when go-redis does. Close does not close the underlying client.
// It is safe to call more than once.
func (c *Batcher) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	c.cancel()
	c.lanesMu.Lock()
	lanes := make([]*lane, 0, len(c.lanes))
	for _, l := range c.lanes {
		lanes = append(lanes, l)
	}
	c.lanesMu.Unlock()
	for _, l := range lanes {
		l.close()
	}
	c.flushers.wait()
	return nil
}

// flushers counts the flushers that Close waits for: those started and not
// in a send. A flusher in a send may wait on Redis for as long as go-redis
// does; it leaves the count while it sends, and exits after the send when
// the Batcher has closed meanwhile.
type flushers struct {
	mu     sync.Mutex
	n      int
	closed bool
	zero   chan struct{} // closed once closed and n is 0
}

// add counts k flushers starting. The lane they serve is not closed, so
// Close has not begun waiting.
func (f *flushers) add(k int) {
	f.mu.Lock()
	f.n += k
	f.mu.Unlock()
}

// leave uncounts a flusher that exits or starts a send.
func (f *flushers) leave() {
	f.mu.Lock()
	f.n--
	if f.closed && f.n == 0 {
		close(f.zero)
	}
	f.mu.Unlock()
}

// back counts again a flusher whose send returned, and reports false,
// counting nothing, when the Batcher has closed: the flusher must exit.
func (f *flushers) back() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.n++
	return true
}

// wait waits until no counted flusher is left; none is added afterwards.
func (f *flushers) wait() {
	f.mu.Lock()
	f.closed = true
	f.zero = make(chan struct{})
	if f.n == 0 {
		close(f.zero)
	}
	zero := f.zero
	f.mu.Unlock()
	<-zero
}

// Submit sends c, a strategy's script call, in a pipeline shared with
// concurrent calls to the same node (or on its own when nothing else is
// in flight to that node), and returns once c has its outcome or ctx is
// done (see Submitter). Every strategy of this module hands the
// Batcher its calls this way.
func (c *Batcher) Submit(ctx context.Context, call Call) Call {
	if err := ctx.Err(); err != nil {
		call.Ended(err)
		return call
	}
	if c.closed.Load() {
		call.Fail(ErrBatchClosed)
		return call
	}
	l, err := c.laneOf(ctx, call.Keys)
	switch {
	case err != nil:
		call.Fail(err)
	case l == nil:
		return Run(ctx, c.rdb, call)
	default:
		l.submit(ctx, &call)
	}
	return call
}

// EvalSha runs the script with SHA1 digest sha1 in a pipeline shared with
// concurrent calls to the same node (or on its own when nothing else is in
// flight to that node). A NOSCRIPT reply of a script this Batcher has seen
// (through Eval or ScriptLoad) is recovered by loading it and re-sending
// only the calls that got NOSCRIPT; otherwise it is returned, and
// redis.Script.Run then falls back to Eval.
func (c *Batcher) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return c.do(ctx, Call{Script: c.known(sha1), SHA: sha1, Keys: keys, Args: args, Raw: true}, "")
}

// Eval runs script like EvalSha with the script's digest: the Batcher
// remembers the script, sends EVALSHA, and on NOSCRIPT loads the script once
// and re-sends, so that the whole text crosses the network once per node,
// not once per caller.
func (c *Batcher) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return c.do(ctx, Call{Script: c.learn(script), Keys: keys, Args: args, Raw: true}, script)
}

// EvalRO is the underlying client's EvalRO, not batched.
func (c *Batcher) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return c.rdb.EvalRO(ctx, script, keys, args...)
}

// EvalShaRO is the underlying client's EvalShaRO, not batched.
func (c *Batcher) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return c.rdb.EvalShaRO(ctx, sha1, keys, args...)
}

// ScriptExists is the underlying client's ScriptExists.
func (c *Batcher) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	return c.rdb.ScriptExists(ctx, hashes...)
}

// ScriptLoad loads script with the underlying client (on every master of a
// cluster) and remembers it for NOSCRIPT recovery.
func (c *Batcher) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	c.learn(script)
	return c.rdb.ScriptLoad(ctx, script)
}

// learn remembers script (up to maxScripts of them) and returns it.
func (c *Batcher) learn(script string) *redis.Script {
	sum := sha1.Sum([]byte(script))
	sha := hex.EncodeToString(sum[:])
	if s := c.known(sha); s != nil {
		return s
	}
	s := redis.NewScript(script)
	if c.nScripts.Load() < maxScripts {
		if v, loaded := c.scripts.LoadOrStore(sha, s); loaded {
			return v.(*redis.Script)
		}
		c.nScripts.Add(1)
	}
	return s
}

// known returns the script of digest sha, or nil when unknown.
func (c *Batcher) known(sha string) *redis.Script {
	if v, ok := c.scripts.Load(sha); ok {
		return v.(*redis.Script)
	}
	return nil
}

// do sends call, a Raw call made through the Batcher's redis.Scripter
// methods (src: the script, for Eval), and returns its reply as a command.
func (c *Batcher) do(ctx context.Context, call Call, src string) *redis.Cmd {
	if err := ctx.Err(); err != nil {
		return errCmd(ctx, err)
	}
	if c.closed.Load() {
		return errCmd(ctx, ErrBatchClosed)
	}
	l, err := c.laneOf(ctx, call.Keys)
	switch {
	case err != nil:
		return errCmd(ctx, err)
	case l == nil && src != "":
		return c.rdb.Eval(ctx, src, call.Keys, call.Args...)
	case l == nil:
		return c.rdb.EvalSha(ctx, call.SHA, call.Keys, call.Args...)
	}
	l.submit(ctx, &call)
	cmd := redis.NewCmd(ctx)
	if call.Err != nil {
		cmd.SetErr(call.Err)
	} else {
		cmd.SetVal(call.Reply)
	}
	return cmd
}

// laneOf returns the queue of the node that serves keys, or nil when the
// call is to be sent unbatched.
func (c *Batcher) laneOf(ctx context.Context, keys []string) (*lane, error) {
	if c.route == nil || len(keys) == 0 {
		return nil, nil
	}
	if c.single != nil {
		return c.single, nil
	}
	node, err := c.route(ctx, keys[0])
	if err != nil {
		return nil, err
	}
	return c.lane(node), nil
}

// lane returns node's queue, made on first use; nil beyond maxLanes.
func (c *Batcher) lane(node *redis.Client) *lane {
	c.lanesMu.RLock()
	l := c.lanes[node]
	c.lanesMu.RUnlock()
	if l != nil {
		return l
	}
	c.lanesMu.Lock()
	defer c.lanesMu.Unlock()
	if l = c.lanes[node]; l != nil {
		return l
	}
	if len(c.lanes) >= maxLanes || c.closed.Load() {
		return nil
	}
	l = &lane{c: c, node: node, inline: node.Options().ContextTimeoutEnabled}
	c.lanes[node] = l
	return l
}

// waiter is a queued call and its caller. Its state moves once from
// queued to sent (a flusher took it), to dropped (its caller left first)
// or to closed (the Batcher closed first). The call is the caller's, copied:
// a caller that left never sees it written.
type waiter struct {
	ctx   context.Context
	call  Call
	state atomic.Int32
	done  chan struct{} // closed once call has its outcome
}

const (
	callQueued int32 = iota
	callSent
	callDropped
	callClosed
)

// lane is the queue of one Redis node.
type lane struct {
	c      *Batcher
	node   *redis.Client
	inline bool // node stops at a context's deadline itself

	mu      sync.Mutex
	queue   []*waiter
	dropped int // calls in queue whose callers left (state callDropped)
	solo    int // calls sent alone, in flight
	piped   int // flushers running: pipelines in flight or about to be
	closed  bool
}

// submit sends call at once, on the caller's goroutine, when nothing is
// queued, no pipeline is in flight and fewer than inFlight calls are (and
// the call can be abandoned at its context's end); otherwise queues it for
// the next pipeline and waits for its outcome or its context's end. Once
// pipelines run, calls join them until the queue drains: deeper pipelines,
// less Redis CPU per call.
func (l *lane) submit(ctx context.Context, call *Call) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		call.Fail(ErrBatchClosed)
		return
	}
	if l.solo < l.c.inFlight && l.piped == 0 && len(l.queue) == 0 && (l.inline || ctx.Done() == nil) {
		l.solo++
		l.mu.Unlock()
		one := [1]*Call{call}
		l.send(ctx, one[:], nil)
		l.release()
		settle(ctx, call)
		return
	}
	// The bound counts only the calls whose callers still wait: the others
	// leave the queue when a flusher meets them, or when they are the
	// greater part of it (amortized: each compaction follows as many
	// departures as it keeps calls), never by a scan per call.
	if n := len(l.queue) - l.dropped; n >= l.c.maxQueue {
		l.mu.Unlock()
		call.Fail(fmt.Errorf("%w (%d calls waiting)", ErrQueueFull, n))
		return
	}
	if l.dropped > len(l.queue)/2 {
		l.queue = compact(l.queue)
		l.dropped = 0
	}
	w := &waiter{ctx: ctx, call: *call, done: make(chan struct{})}
	l.queue = append(l.queue, w)
	l.startPipe()
	l.mu.Unlock()
	select {
	case <-w.done:
		w.settle(call)
	case <-ctx.Done():
		if l.drop(w) {
			call.Ended(ctx.Err()) // never sent
			return
		}
		select {
		case <-w.done:
			w.settle(call)
		default:
			call.Ended(ctx.Err()) // sent: its reply is discarded
		}
	case <-l.c.ctx.Done(): // Close
		if l.drop(w) || w.state.Load() == callClosed {
			call.Fail(ErrBatchClosed) // never sent
			return
		}
		select {
		case <-w.done:
			w.settle(call)
		default:
			call.Fail(errBatchClosedInFlight)
		}
	}
}

// settle hands the caller's call the outcome of w, which is done.
func (w *waiter) settle(call *Call) {
	*call = w.call
	settle(w.ctx, call)
}

// drop takes w, queued, out of the calls to send, and reports false when
// a flusher or Close took it first.
func (l *lane) drop(w *waiter) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !w.state.CompareAndSwap(callQueued, callDropped) {
		return false
	}
	if !l.closed {
		l.dropped++
	}
	return true
}

// settle makes the failure of call, made under ctx, that ctx's end caused
// say so: a network error that came once ctx was canceled, or once the
// clock reached its deadline (a socket's read deadline set to it fires a
// moment before ctx's timer), wraps ctx's error, as go-redis's own errors
// do when it does not re-send.
func settle(ctx context.Context, call *Call) {
	err := call.Err
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	var reply redis.Error
	if errors.As(err, &reply) || errors.Is(err, ErrBatchClosed) {
		return // Redis answered, or the Batcher closed: not the context's doing
	}
	cerr := ctx.Err()
	if cerr == nil {
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			cerr = context.DeadlineExceeded
		}
	}
	if cerr != nil {
		call.Err = fmt.Errorf("%w: %w", cerr, err)
	}
}

// compact drops the calls whose callers left.
func compact(q []*waiter) []*waiter {
	out := q[:0]
	for _, w := range q {
		if w.state.Load() == callQueued {
			out = append(out, w)
		}
	}
	clear(q[len(out):])
	return out
}

// startPipe starts a flusher with a pipeline slot when calls are queued
// and a pipeline may start. l.mu is held, and the lane is not closed, so
// Close has not begun waiting for flushers.
func (l *lane) startPipe() {
	if len(l.queue) == 0 || l.closed || l.piped >= l.c.pipes || l.solo+l.piped >= l.c.inFlight {
		return
	}
	l.piped++
	l.c.flushers.add(1)
	go l.flush()
}

// release frees a lone call's slot, handing one to a flusher when calls
// are queued.
func (l *lane) release() {
	l.mu.Lock()
	l.solo--
	l.startPipe()
	l.mu.Unlock()
}

// flush runs pipelines, one at a time, until the queue is empty, and then
// exits: a flusher lives only while calls wait, so an idle Batcher holds no
// goroutine and one dropped without Close leaks nothing. It also exits
// after a send during which the Batcher closed.
func (l *lane) flush() {
	var batch []*waiter
	var calls []*Call
	live := func(i int) bool { return batch[i].ctx.Err() == nil }
	for {
		batch = l.take(batch[:0])
		l.c.flushers.leave() // exits, or sends: Close does not wait on Redis
		if len(batch) == 0 {
			return
		}
		for _, w := range batch {
			calls = append(calls, &w.call)
		}
		ctx, cancel := batchContext(l.c.ctx, batch)
		l.send(ctx, calls, live)
		cancel()
		for _, w := range batch {
			close(w.done)
		}
		clear(batch)
		clear(calls)
		calls = calls[:0]
		if !l.c.flushers.back() {
			return
		}
	}
}

// take moves up to maxBatch queued calls into batch, skipping those whose
// callers left; when there are none it frees the slot.
func (l *lane) take(batch []*waiter) []*waiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := 0
	for ; i < len(l.queue) && len(batch) < l.c.maxBatch; i++ {
		if l.queue[i].state.CompareAndSwap(callQueued, callSent) {
			batch = append(batch, l.queue[i])
		} else {
			l.dropped-- // only its caller takes a queued call out
		}
	}
	n := copy(l.queue, l.queue[i:])
	clear(l.queue[n:])
	l.queue = l.queue[:n]
	if len(batch) == 0 {
		l.piped--
	}
	return batch
}

// close fails the queued calls with ErrBatchClosed.
func (l *lane) close() {
	l.mu.Lock()
	l.closed = true
	q := l.queue
	l.queue, l.dropped = nil, 0
	l.mu.Unlock()
	for _, w := range q {
		if w.state.CompareAndSwap(callQueued, callClosed) {
			w.call.Fail(ErrBatchClosed)
			close(w.done)
		}
	}
}

// batchContext is the context of a pipeline: canceled when the Batcher
// closes, and ending at the latest deadline of its callers (when all have
// one), after which no one waits for its replies.
func batchContext(base context.Context, batch []*waiter) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, w := range batch {
		d, ok := w.ctx.Deadline()
		if !ok {
			return base, func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(base, latest)
}

// send sends calls to the node with the engine's executor (Send):
// one pipeline for several, never re-sent by go-redis, NOSCRIPT recovered
// for only the calls that did not run and whose callers still wait (live;
// nil: the lone caller, under ctx), and on a cluster MOVED and ASK
// followed through the cluster client.
func (l *lane) send(ctx context.Context, calls []*Call, live func(int) bool) {
	t := Target{Node: l.node, Load: l.node, Live: live}
	if l.c.cluster != nil {
		t.Redirect = l.c.cluster
	}
	Send(ctx, t, calls)
}

func errCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

// Queued returns how many calls wait in c's queues, and how many of them
// their callers have left (for tests).
func (c *Batcher) Queued() (calls, dropped int) {
	c.lanesMu.RLock()
	defer c.lanesMu.RUnlock()
	for _, l := range c.lanes {
		l.mu.Lock()
		calls += len(l.queue)
		dropped += l.dropped
		l.mu.Unlock()
	}
	return calls, dropped
}
