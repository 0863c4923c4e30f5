// Package batch shares Redis round trips among concurrent rate-limit
// decisions.
//
// Every strategy runs one script per decision, and most of what Redis spends
// on a small script is per-command network work (a read and a write system
// call), which a pipeline shares among its commands. A Client wraps a
// go-redis client and is itself a redis.Scripter, so every strategy,
// sharded, multilimit and the facade take it unchanged, with the same
// decisions:
//
//	rdb, err := batch.New(redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}))
//	limiter, err := ratelimit.New(rdb, cfg)
//	defer rdb.Close()
//
// The constructors of this module (ratelimit.New, NewSet, every strategy's
// New, multilimit.New) already batch by default, through one such client
// per go-redis client with ContextTimeoutEnabled, shared and held only while
// in use (see strategy.WithoutBatching). Make a Client yourself for other
// options, or for a client without ContextTimeoutEnabled.
//
// # How it batches
//
// The strategies of this module hand the Client each decision's script
// call as a value (Submit); a strategy from elsewhere calls EvalSha or
// Eval as on any client. Either way the calls (EVALSHA) are queued per
// Redis node: one queue for a *redis.Client, one per master of a *redis.ClusterClient (a call goes to
// the master serving its first key's hash slot), one per shard of a
// *redis.Ring. A call that finds nothing queued, no pipeline in flight and
// fewer than MaxInFlight (8) calls in flight to its node is sent at once, on the caller's
// goroutine, so a lone request never waits for a timer or a hand-off (the
// caller must be able to abandon it: the node client has
// ContextTimeoutEnabled, or the context has no done channel; otherwise it
// goes through the queue). Any other call joins the queue, and the next
// free slot sends everything queued (up to MaxBatch calls) as one pipeline,
// with at most half of MaxInFlight (4) pipelines in flight. There is no
// flush timer: a pipeline leaves as soon as a slot is free, and as load
// grows pipelines grow with it.
//
// # Guarantees
//
//   - Each call gets its own reply, as if sent alone.
//   - go-redis never re-sends a call (every command is marked NoRetry, so
//     neither the client's MaxRetries nor a pipeline retry can run a
//     decision twice). A call whose pipeline failed (connection lost,
//     timeout) gets the error; it may or may not have run, exactly as
//     without batching.
//   - NOSCRIPT (scripts not loaded yet, SCRIPT FLUSH, a restart): a call
//     that got NOSCRIPT did not run. When the Client knows the script (a
//     strategy of this module hands it over with the call; for others it
//     saw it through Eval or ScriptLoad, which redis.Script.Run's
//     fallback provides on first use), it loads it once per pipeline and
//     re-sends only the calls that got NOSCRIPT and whose callers still
//     wait; the others, which may have run, are never re-sent. A re-sent
//     call answered NOSCRIPT again (the cache flushed once more) goes out
//     as EVAL with the script's text. On a cluster, calls redirected with MOVED or
//     ASK did not run either and are re-sent through the cluster client.
//   - A caller whose context ends returns at once with the context's
//     error; if its call was still queued it is dropped, never sent (it
//     spends no quota); if it was sent, its reply is discarded. The others
//     in its pipeline are not held back. A call that fails as its caller's
//     deadline is reached (the socket's i/o timeout at that deadline)
//     fails with an error wrapping context.DeadlineExceeded.
//   - Close fails queued calls with ErrClosed, releases the callers of
//     pipelines in flight with an error wrapping ErrClosed (their calls
//     may have run), and returns once the Client's goroutines have exited
//     or are in a send: it never waits on Redis, which go-redis does not
//     let a context interrupt. A goroutine in a send to a node that hangs
//     exits when go-redis gives up on it (see Client.Close).
//   - A Client holds a goroutine only while calls wait for a pipeline (at
//     most half of MaxInFlight per node, each exiting when the queue is
//     empty), so Close is optional: a Client dropped without it leaks
//     nothing once its calls have returned.
//   - At most MaxQueue calls wait per node; more fail at once with
//     ErrQueueFull. Calls whose callers left do not count, and refusing a
//     call costs the same whatever the queue's length.
//
// # When it pays
//
// Batching pays when many decisions are in flight on one process at once
// (tens of concurrent requests and up): a pipeline shares the network work
// of its calls, so throughput rises and Redis CPU per decision falls with
// concurrency. make report measures it against direct calls at 1 to 256
// concurrent callers (see benchmarks/README.md). Up to 8 concurrent callers
// per node nothing is queued and every call goes out at once as without
// batching, at the cost of a mutex. It never changes a decision, which is
// why it is on by default.
//
// Only script calls with at least one key are batched (that is what the
// strategies send); EvalRO, EvalShaRO, ScriptExists and ScriptLoad go to the
// underlying client directly.
package batch
