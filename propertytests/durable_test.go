package propertytests

import (
	"bytes"
	"fmt"

	"github.com/ratekit/ratelimit/internal/testredis"
)

// checkReplicated runs c one request at a time on a durable strategy
// (strategy.WithReplicas) and checks after each request: a decision of n
// > 0 units was followed by a WAIT on the primary (INFO commandstats), a
// Peek by none, and once a decision returns the replica holds every key of
// the case as the primary does (DUMP).
func checkReplicated(e *env, c Case, _ func() (*env, error)) string {
	d := e.durable
	if d == nil {
		return "checkReplicated needs a durability backend"
	}
	waits := func() (int64, error) { return testredis.Calls(ctx, d.primaryAddr, "wait") }
	before, err := waits()
	if err != nil {
		return err.Error()
	}
	_, msg := e.runSerial(c, func(ev event) string {
		after, err := waits()
		if err != nil {
			return err.Error()
		}
		sent := after - before
		before = after
		switch {
		case ev.op == opPeek && sent != 0:
			return fmt.Sprintf("%s: a Peek sent %d WAITs, want none", ev, sent)
		case ev.op == opAllow && ev.n > 0 && sent == 0:
			return fmt.Sprintf("%s: a durable decision returned without a WAIT", ev)
		}
		return sameOnReplica(e)
	})
	return msg
}

// sameOnReplica compares every key of e's case on the primary and on the
// replica.
func sameOnReplica(e *env) string {
	d := e.durable
	keys, err := d.primary.Keys(ctx, globEscape(d.prefix)+"*").Result()
	if err != nil {
		return err.Error()
	}
	for _, k := range keys {
		p, perr := d.primary.Dump(ctx, k).Bytes()
		r, rerr := d.replica.Dump(ctx, k).Bytes()
		if perr != nil {
			continue // gone meanwhile
		}
		if rerr != nil || !bytes.Equal(p, r) {
			return fmt.Sprintf("key %q differs on the replica right after the decision (%v)", k, rerr)
		}
	}
	return ""
}
