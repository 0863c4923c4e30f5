package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/testredis"
)

// counter adds ARGV[1] to KEYS[1] and returns the sum, what it added and
// the time it decided at; it fails for a cost of -1.
var counter = engine.Script(`
if ARGV[1] == '-1' then error('a cost of -1') end
local sum = redis.call('INCRBY', KEYS[1], ARGV[1])
return {sum, ARGV[1] + 0, now_ms(ARGV[2])}
`)

// counts returns calls of counter adding 1, 2, ... on the keys given.
func counts(keys ...string) []*engine.Call {
	cs := make([]*engine.Call, len(keys))
	for i, k := range keys {
		cs[i] = &engine.Call{Script: counter, Keys: []string{k}, Args: []any{i + 1, engine.ServerTime}}
	}
	return cs
}

// checkCounts fails t unless each call got its own reply: the running sum
// of its key, its own cost, and one time for all.
func checkCounts(t *testing.T, cs []*engine.Call, failing int, oneTime bool) {
	t.Helper()
	sums := map[string]int64{}
	var at int64
	for i, c := range cs {
		if i == failing {
			if c.Err == nil || !strings.Contains(c.Err.Error(), "a cost of -1") {
				t.Errorf("call %d: err %v, want its own script error", i, c.Err)
			}
			continue
		}
		sums[c.Keys[0]] += int64(i + 1)
		v, ok := c.Reply.([]any)
		if c.Err != nil || !ok || len(v) != 3 {
			t.Fatalf("call %d: reply %v, err %v", i, c.Reply, c.Err)
		}
		if v[0] != sums[c.Keys[0]] || v[1] != int64(i+1) {
			t.Errorf("call %d: sum %v, cost %v; want %d, %d (its own reply, in order)", i, v[0], v[1], sums[c.Keys[0]], i+1)
		}
		if at == 0 {
			at = v[2].(int64)
		} else if oneTime && v[2] != at {
			t.Errorf("call %d decided at %v, the first at %d: want one server time per invocation", i, v[2], at)
		}
	}
}

// Calls of one script in a pipeline to one node go as one invocation of
// its twin, which decides each in order and returns each its own reply; a
// request that fails fails alone; after SCRIPT FLUSH the twin is loaded
// again and used.
func TestSendManyInOneInvocation(t *testing.T) {
	s := testredis.Start(t)
	rdb := s.Client(t)
	ctx := context.Background()
	var p sent
	rdb.AddHook(&p)
	for round := range 3 {
		if round == 1 {
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		p.evalsha.Store(0)
		p.load.Store(0)
		pre := testredis.Prefix(t) + string(rune('a'+round))
		cs := counts(pre+"{x}", pre+"{y}", pre+"{x}", pre+"{x}", pre+"{y}", pre+"{z}")
		failing := -1
		if round == 2 {
			cs[3].Args[0], failing = -1, 3
		}
		engine.Send(ctx, engine.Target{Node: rdb}, cs)
		checkCounts(t, cs, failing, true)
		want := int64(1) // one invocation of the twin
		if round < 2 {
			want = 2 // a fresh server, then flushed: NOSCRIPT, loaded, then again
		}
		if p.evalsha.Load() != want {
			t.Errorf("round %d: %d EVALSHA (%d SCRIPT LOAD), want %d", round, p.evalsha.Load(), p.load.Load(), want)
		}
	}
}

// On a cluster, only the calls of one hash tag share an invocation.
func TestSendManyBySlotOnACluster(t *testing.T) {
	cl := testredis.SharedCluster(t)
	cc := cl.Client(t)
	ctx := context.Background()
	pre := testredis.Prefix(t)
	var p sent
	cc.AddHook(&p)
	engine.Exec(ctx, cc, counts(pre+"{a}", pre+"{b}", pre+"{a}", pre+"{c}", pre+"{b}", pre+"{a}")) // loads the scripts
	pre += "2"
	cs := counts(pre+"{a}", pre+"{b}", pre+"{a}", pre+"{c}", pre+"{b}", pre+"{a}")
	p.evalsha.Store(0)
	engine.Exec(ctx, cc, cs)
	checkCounts(t, cs, -1, false)
	if n := p.evalsha.Load(); n != 3 {
		t.Errorf("%d EVALSHA; want 3, one per hash tag", n)
	}
}

// Requests in a row with the same arguments send them once per invocation,
// and each request still gets its own reply.
func TestSendManySharesRepeatedArguments(t *testing.T) {
	s := testredis.Start(t)
	rdb := s.Client(t)
	ctx := context.Background()
	var p sent
	rdb.AddHook(&p)
	pre := testredis.Prefix(t)
	costs := []int{1, 1, 2, 2, 2, 1, 3}
	keys := []string{"{x}", "{y}", "{x}", "{y}", "{z}", "{z}", "{x}"}
	for round := range 2 { // the first loads the twin (NOSCRIPT, then again)
		cs := make([]*engine.Call, len(costs))
		for i, c := range costs {
			cs[i] = &engine.Call{Script: counter, Keys: []string{pre + keys[i]}, Args: []any{c, engine.ServerTime}}
		}
		engine.Send(ctx, engine.Target{Node: rdb}, cs)
		sums := map[string]int64{}
		for i, c := range cs {
			sums[keys[i]] += int64(costs[i])
			v, ok := c.Reply.([]any)
			if c.Err != nil || !ok || len(v) != 3 {
				t.Fatalf("round %d call %d: reply %v, err %v", round, i, c.Reply, c.Err)
			}
			want := sums[keys[i]] + int64(round)*map[string]int64{"{x}": 6, "{y}": 3, "{z}": 3}[keys[i]]
			if v[0] != want || v[1] != int64(costs[i]) {
				t.Errorf("round %d call %d: sum %v, cost %v; want %d, %d", round, i, v[0], v[1], want, costs[i])
			}
		}
	}
	// evalsha, sha, numkeys, 7 keys, then 4 runs of requests with the same
	// arguments (costs 1 1, 2 2 2, 1, 3): their count, 4 triples, and the
	// arguments of each run (2)
	if got, want := p.evalshaArgs.Load(), int64(3+7+1+3*4+2*4); got != want {
		t.Errorf("EVALSHA of %d arguments, want %d: repeated arguments are sent once", got, want)
	}
}

// sums adds ARGV[1] to each of its KEYS and returns their sums.
var sums = engine.Script(`
local out = {}
for i = 1, #KEYS do
  out[i] = redis.call('INCRBY', KEYS[i], ARGV[1])
end
return out
`)

// Requests of the same arguments but of different key counts are runs of
// their own, and each request sees its own keys.
func TestSendManySplitsRunsByKeyCount(t *testing.T) {
	s := testredis.Start(t)
	rdb := s.Client(t)
	ctx := context.Background()
	var p sent
	rdb.AddHook(&p)
	pre := testredis.Prefix(t)
	keys := [][]string{{"a"}, {"a", "b"}, {"b"}, {"c", "a"}, {"c"}}
	want := map[string]int64{}
	for round := range 2 { // the first loads the twin (NOSCRIPT, then again)
		cs := make([]*engine.Call, len(keys))
		for i, ks := range keys {
			full := make([]string, len(ks))
			for j, k := range ks {
				full[j] = pre + k
			}
			cs[i] = &engine.Call{Script: sums, Keys: full, Args: []any{1}}
		}
		engine.Send(ctx, engine.Target{Node: rdb}, cs)
		for i, c := range cs {
			v, ok := c.Reply.([]any)
			if c.Err != nil || !ok || len(v) != len(keys[i]) {
				t.Fatalf("round %d call %d: reply %v, err %v", round, i, c.Reply, c.Err)
			}
			for j, k := range keys[i] {
				want[k]++
				if v[j] != want[k] {
					t.Errorf("round %d call %d key %s: sum %v, want %d", round, i, k, v[j], want[k])
				}
			}
		}
	}
	// evalsha, sha, numkeys, 7 keys, then 5 runs (key counts 1, 2, 1, 2, 1):
	// their count, 5 triples, and the argument of each run
	if got, want := p.evalshaArgs.Load(), int64(3+7+1+3*5+5); got != want {
		t.Errorf("EVALSHA of %d arguments, want %d", got, want)
	}
}
