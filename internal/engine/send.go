package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/strategy"
)

// Sender sends commands, one alone or several in a pipeline: a
// *redis.Client, or a *redis.ClusterClient or *redis.Ring, which split a
// pipeline per node (a cluster client following MOVED and ASK).
type Sender interface {
	Process(ctx context.Context, cmd redis.Cmder) error
	Pipeline() redis.Pipeliner
}

// Target is where Send sends calls.
type Target struct {
	// Node takes the calls: one alone, several in one pipeline.
	Node Sender
	// Load is where a script answered NOSCRIPT is loaded (SCRIPT LOAD;
	// on every master of a cluster client); Node's when nil.
	Load redis.Scripter
	// Redirect, when set (the cluster client of a Node that is one of its
	// nodes), sends again the calls Node answered MOVED or ASK, and the
	// calls sent again after NOSCRIPT, following the redirection.
	Redirect Sender
	// Live, when set, reports whether the caller of the i-th call still
	// waits for it: a call answered NOSCRIPT is sent again only then (and
	// only while ctx is not done).
	Live func(i int) bool
}

// Send is the executor: it sends cs (EVALSHA) to t.Node, one call alone,
// several in one pipeline, and finishes each (Result and Err, or Reply).
// Calls of one script go as one invocation of its twin (Many), which
// decides each in order and returns each its own reply; on a cluster or a
// Ring, only calls of one hash tag do.
// go-redis never sends a call again after a failure (every command goes
// with NoRetry: a script whose reply was lost may have run). A call
// answered NOSCRIPT did not run: its script (and twin) is loaded once per
// Send and only those calls are sent again, once; one answered NOSCRIPT
// again (the cache flushed once more in between) goes out as EVAL with its
// text, alone. Calls redirected with MOVED or ASK did not run either, and
// are sent again through t.Redirect. Calls with Done set are not sent.
//
// Durable calls (Replicas > 0) are followed by one WAIT in their pipeline,
// on t.Node's connection; on a cluster client or a Ring as t.Node, the
// calls go per node, each node's with its WAIT. A durable call sent again
// after NOSCRIPT goes to t.Node with a WAIT of its own; one redirected
// fails (it did not run, and its WAIT would count another connection's
// writes), and a cluster client reloads its slot map.
func Send(ctx context.Context, t Target, cs []*Call) {
	var one [1]outcome
	res := one[:]
	if len(cs) > 1 {
		res = make([]outcome, len(cs))
	}
	var oneIdx [1]int
	idx := oneIdx[:0]
	for i, c := range cs {
		if !c.Done {
			idx = append(idx, i)
		}
	}
	w := waitOf(cs, idx)
	if w.n > 0 {
		switch t.Node.(type) {
		case *redis.ClusterClient, *redis.Ring: // a WAIT goes to one node
			sendPerNode(ctx, t, cs, idx)
			return
		}
	}
	_, single := t.Node.(*redis.Client)
	bySlot := t.Redirect != nil || !single
	send(ctx, t.Node, cs, res, idx, false, bySlot, w)
	again := t.Node
	if t.Redirect != nil {
		again = t.Redirect
		moved := false // a durable call redirected
		resend(ctx, again, cs, res, func(i int, err error) bool {
			if !isRedirect(err) {
				return false
			}
			if cs[i].Replicas > 0 {
				// Its WAIT would go to another connection: it fails, not
				// run, and the next calls find the new node.
				moved = true
				return false
			}
			return true
		}, false, wait{})
		if cc, ok := t.Redirect.(*redis.ClusterClient); ok && moved {
			cc.ReloadState(ctx)
		}
	}
	var loaded map[*redis.Script]bool
	durablePass := false // the pass that sends durable calls again
	noscript := func(i int, err error) bool {
		s := cs[i].Script
		if s == nil || !isNoScript(err) || (cs[i].Replicas > 0) != durablePass {
			return false // unknown text: the caller falls back to EVAL; or sent on the other pass
		}
		ok, seen := loaded[s]
		if !seen {
			if loaded == nil {
				loaded = map[*redis.Script]bool{}
			}
			load := t.Load
			if load == nil {
				load, _ = t.Node.(redis.Scripter)
			}
			ok = load != nil && s.Load(ctx, load).Err() == nil
			if m := Many(s); ok && m != nil {
				ok = m.Load(ctx, load).Err() == nil
			}
			loaded[s] = ok
		}
		return ok && ctx.Err() == nil && (t.Live == nil || t.Live(i))
	}
	flushed := func(i int, err error) bool {
		return isNoScript(err) && (cs[i].Replicas > 0) == durablePass &&
			ctx.Err() == nil && (t.Live == nil || t.Live(i))
	}
	if resend(ctx, again, cs, res, noscript, false, wait{}) {
		// Flushed again in between: send those few with their text.
		resend(ctx, again, cs, res, flushed, true, wait{})
	}
	if w.n > 0 {
		// Durable calls go again on their node, with a WAIT of their own.
		again, durablePass = t.Node, true
		if resend(ctx, again, cs, res, noscript, false, w) {
			resend(ctx, again, cs, res, flushed, true, w)
		}
	}
	for _, i := range idx {
		cs[i].finish(res[i].v, res[i].err)
	}
}

// wait is the WAIT that follows a pipeline's calls: at least n replicas,
// for at most ms milliseconds; none when n is 0.
type wait struct{ n, ms int64 }

// waitOf returns the WAIT of the calls idx of cs: the most replicas and
// the longest timeout of the durable ones.
func waitOf(cs []*Call, idx []int) wait {
	var w wait
	for _, i := range idx {
		c := cs[i]
		if c.Replicas <= 0 {
			continue
		}
		w.n = max(w.n, int64(c.Replicas))
		ms := (c.ReplicaTimeout + time.Millisecond - 1) / time.Millisecond // rounded up: WAIT 0 never returns
		w.ms = max(w.ms, int64(max(ms, 1)))
	}
	return w
}

// sendPerNode sends the calls idx of cs, some durable, through t.Node, a
// cluster client or a Ring: to each node the calls of its keys, in one
// pipeline with their WAIT. It sends copies of the calls and copies their
// outcomes back, so that no pointer of cs is kept: Send's callers keep
// their Calls on the stack.
func sendPerNode(ctx context.Context, t Target, cs []*Call, idx []int) {
	load := t.Load
	if load == nil {
		load, _ = t.Node.(redis.Scripter)
	}
	type part struct {
		calls []*Call // copies
		at    []int   // the index in cs of each call
	}
	var nodes []*redis.Client
	parts := map[*redis.Client]*part{}
	for _, i := range idx {
		c := cs[i]
		var key string
		if len(c.Keys) > 0 {
			key = c.Keys[0]
		}
		var node *redis.Client
		var err error
		switch r := t.Node.(type) {
		case *redis.ClusterClient:
			node, err = r.MasterForKey(ctx, key)
		case *redis.Ring:
			node, err = r.GetShardClientForKey(key)
		}
		if err != nil {
			c.finish(nil, err)
			continue
		}
		p := parts[node]
		if p == nil {
			p = &part{}
			parts[node] = p
			nodes = append(nodes, node)
		}
		cp := *c
		p.calls, p.at = append(p.calls, &cp), append(p.at, i)
	}
	for _, node := range nodes {
		p := parts[node]
		sub := Target{Node: node, Load: load}
		if cc, ok := t.Node.(*redis.ClusterClient); ok {
			sub.Redirect = cc
		}
		if t.Live != nil {
			sub.Live = func(j int) bool { return t.Live(p.at[j]) }
		}
		Send(ctx, sub, p.calls)
		for j, i := range p.at {
			*cs[i] = *p.calls[j]
		}
	}
}

// outcome is a call's reply or error.
type outcome struct {
	v   any
	err error
}

// send sends the calls idx of cs on p (see groups), as EVAL when eval, and
// records their outcomes in res.
func send(ctx context.Context, p Sender, cs []*Call, res []outcome, idx []int, eval, bySlot bool, w wait) {
	if len(idx) == 1 && w.n == 0 { // the direct path: one command, no group
		cmd := cs[idx[0]].cmd(ctx, eval)
		_ = p.Process(ctx, noRetry{cmd})
		res[idx[0]] = outcome{cmd.Val(), cmd.Err()}
		return
	}
	gs := groups(ctx, cs, idx, eval, bySlot)
	var wcmd *redis.Cmd
	if len(gs) == 1 && w.n == 0 {
		_ = p.Process(ctx, noRetry{gs[0].cmd})
	} else {
		pipe := p.Pipeline()
		for _, g := range gs {
			_ = pipe.Process(ctx, noRetry{g.cmd})
		}
		if w.n > 0 { // on the calls' connection: WAIT counts its writes
			wcmd = redis.NewCmd(ctx, "wait", w.n, w.ms)
			_ = pipe.Process(ctx, noRetry{wcmd})
		}
		_, _ = pipe.Exec(ctx) // each command carries its own error
	}

	for _, g := range gs {
		v, err := g.cmd.Val(), g.cmd.Err()
		if len(g.idx) == 1 {
			res[g.idx[0]] = outcome{v, err}
			continue
		}
		arr, ok := v.([]any)
		if err == nil && (!ok || len(arr) != len(g.idx)) {
			err = fmt.Errorf("script reply: want %d replies, got %T", len(g.idx), v)
		}
		for j, i := range g.idx {
			switch {
			case err != nil:
				res[i] = outcome{nil, err}
			case arr[j] == nil:
				res[i] = outcome{nil, fmt.Errorf("script reply %d: nil", j)}
			default:
				e, isErr := arr[j].(error)
				if isErr {
					res[i] = outcome{nil, e}
				} else {
					res[i] = outcome{arr[j], nil}
				}
			}
		}
	}
	if wcmd != nil {
		acknowledge(cs, res, idx, wcmd, w)
	}
}

// acknowledge fails the durable calls idx of cs that ran (no error in res)
// and recorded units but that fewer replicas than each requires
// acknowledged, by the reply of the pipeline's WAIT wcmd. A denial records
// nothing a failover could forget: it stands.
func acknowledge(cs []*Call, res []outcome, idx []int, wcmd *redis.Cmd, w wait) {
	got, err := wcmd.Int64()
	for _, i := range idx {
		need := int64(cs[i].Replicas)
		if need <= 0 || res[i].err != nil || (cs[i].Decode && denial(res[i].v)) {
			continue
		}
		switch {
		case err != nil:
			res[i] = outcome{nil, fmt.Errorf("%w: WAIT %d %d: %w", strategy.ErrNotReplicated, w.n, w.ms, err)}
		case got < need:
			res[i] = outcome{nil, fmt.Errorf("%w: %d of %d replicas acknowledged within %dms", strategy.ErrNotReplicated, got, need, w.ms)}
		}
	}
}

// resend sends again, on p, the calls whose error retry accepts (as EVAL,
// alone, when eval), replacing their outcomes, and reports whether it sent
// any.
func resend(ctx context.Context, p Sender, cs []*Call, res []outcome, retry func(i int, err error) bool, eval bool, w wait) bool {
	var idx []int
	for i := range res {
		if res[i].err != nil && retry(i, res[i].err) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return false
	}
	_, single := p.(*redis.Client)
	send(ctx, p, cs, res, idx, eval, !single, w)
	return true
}

// noRetry is a command go-redis does not re-send, alone or in a pipeline,
// after a failure: a script whose reply was lost may have run.
type noRetry struct{ *redis.Cmd }

// NoRetry reports true.
func (noRetry) NoRetry() bool { return true }

// cmd builds c's EVALSHA (EVAL with the script's text when eval), the
// command go-redis's EvalSha and Eval build: a lone slice or map argument
// is spread.
func (c *Call) cmd(ctx context.Context, eval bool) *redis.Cmd {
	name, payload := "evalsha", c.SHA
	if c.Script != nil {
		payload = c.Script.Hash()
		if eval {
			name, payload = "eval", scriptText(c.Script)
		}
	}
	a := make([]any, 3+len(c.Keys), 3+len(c.Keys)+len(c.Args))
	a[0], a[1], a[2] = name, payload, len(c.Keys)
	for i, k := range c.Keys {
		a[3+i] = k
	}
	a = appendArgs(a, c.Args)
	cmd := redis.NewCmd(ctx, a...)
	if len(c.Keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

// appendArgs appends args as go-redis does: a lone slice or map argument is
// spread.
func appendArgs(dst, args []any) []any {
	if len(args) != 1 {
		return append(dst, args...)
	}
	switch v := args[0].(type) {
	case []any:
		return append(dst, v...)
	case []string:
		for _, s := range v {
			dst = append(dst, s)
		}
		return dst
	case map[string]any:
		for k, x := range v {
			dst = append(dst, k, x)
		}
		return dst
	case map[string]string:
		for k, x := range v {
			dst = append(dst, k, x)
		}
		return dst
	}
	return append(dst, args[0])
}

func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

func isRedirect(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	s := re.Error()
	return strings.HasPrefix(s, "MOVED ") || strings.HasPrefix(s, "ASK ")
}

// scriptText returns s's text, which go-redis hands only to a Scripter's
// Eval.
func scriptText(s *redis.Script) string {
	var t textOf
	s.Eval(context.Background(), &t, nil)
	return t.src
}

// textOf is a Scripter whose Eval records the script it is given.
type textOf struct {
	redis.Scripter
	src string
}

func (t *textOf) Eval(_ context.Context, script string, _ []string, _ ...any) *redis.Cmd {
	t.src = script
	return nil
}

// denial reports whether v, a decision script's reply (see Decode), denies.
func denial(v any) bool {
	arr, ok := v.([]any)
	return ok && len(arr) == 4 && arr[0] == int64(0)
}
