package engine

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
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
// go-redis never sends a call again after a failure (every command goes
// with NoRetry: a script whose reply was lost may have run). A call
// answered NOSCRIPT did not run: its script is loaded once per Send and
// only those calls are sent again, once; one answered NOSCRIPT again (the
// cache flushed once more in between) goes out as EVAL with its text.
// Calls redirected with MOVED or ASK did not run either, and are sent
// again through t.Redirect. Calls with Done set are not sent.
func Send(ctx context.Context, t Target, cs []*Call) {
	var one [1]*redis.Cmd
	cmds := one[:]
	if len(cs) > 1 {
		cmds = make([]*redis.Cmd, len(cs))
	}
	for i, c := range cs {
		if !c.Done {
			cmds[i] = c.cmd(ctx, false)
		}
	}
	run(ctx, t.Node, cmds)
	again := t.Node
	if t.Redirect != nil {
		again = t.Redirect
		resend(ctx, again, cs, cmds, func(i int, err error) bool { return isRedirect(err) }, false)
	}
	var loaded map[*redis.Script]bool
	noscript := func(i int, err error) bool {
		s := cs[i].Script
		if s == nil || !isNoScript(err) {
			return false // unknown text: the caller falls back to EVAL
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
			loaded[s] = ok
		}
		return ok && ctx.Err() == nil && (t.Live == nil || t.Live(i))
	}
	if resend(ctx, again, cs, cmds, noscript, false) {
		// Flushed again in between: send those few with their text.
		resend(ctx, again, cs, cmds, func(i int, err error) bool {
			return isNoScript(err) && ctx.Err() == nil && (t.Live == nil || t.Live(i))
		}, true)
	}
	for i, c := range cs {
		if cmd := cmds[i]; cmd != nil {
			c.finish(cmd.Result())
		}
	}
}

// resend sends again, on p, the calls whose command's error retry accepts
// (as EVAL when eval), replacing their commands, and reports whether it
// sent any.
func resend(ctx context.Context, p Sender, cs []*Call, cmds []*redis.Cmd, retry func(i int, err error) bool, eval bool) bool {
	var idx []int
	for i, cmd := range cmds {
		if cmd != nil && cmd.Err() != nil && retry(i, cmd.Err()) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return false
	}
	re := make([]*redis.Cmd, len(idx))
	for j, i := range idx {
		re[j] = cs[i].cmd(ctx, eval)
	}
	run(ctx, p, re)
	for j, i := range idx {
		cmds[i] = re[j]
	}
	return true
}

// run sends cmds (nil ones skipped) on p: one command on its own, several
// in one pipeline; never re-sent by go-redis.
func run(ctx context.Context, p Sender, cmds []*redis.Cmd) {
	if len(cmds) == 1 {
		if cmds[0] != nil {
			_ = p.Process(ctx, noRetry{cmds[0]})
		}
		return
	}
	pipe := p.Pipeline()
	n := 0
	for _, cmd := range cmds {
		if cmd != nil {
			_ = pipe.Process(ctx, noRetry{cmd})
			n++
		}
	}
	if n > 0 {
		_, _ = pipe.Exec(ctx) // each command carries its own error
	}
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
