package engine_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/testredis"
)

func TestMain(m *testing.M) { os.Exit(testredis.Main(m)) }

// scriptA and scriptB count their runs per key and return which script
// and which call ran.
var (
	scriptA = redis.NewScript(`redis.call('INCR', KEYS[1]) return 'A:' .. ARGV[1]`)
	scriptB = redis.NewScript(`redis.call('INCR', KEYS[1]) return 'B:' .. ARGV[1]`)
)

// sent counts the commands a client sends, by name.
type sent struct {
	evalsha, eval, load, pipelines atomic.Int64
	evalshaArgs                    atomic.Int64 // the last EVALSHA's arguments
}

func (s *sent) count(cmd redis.Cmder) {
	switch strings.ToLower(cmd.Name()) {
	case "evalsha":
		s.evalsha.Add(1)
		s.evalshaArgs.Store(int64(len(cmd.Args())))
	case "eval":
		s.eval.Add(1)
	case "script":
		s.load.Add(1)
	}
}

func (s *sent) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *sent) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { s.count(cmd); return next(ctx, cmd) }
}
func (s *sent) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		scripts := false
		for _, c := range cmds {
			s.count(c)
			scripts = scripts || strings.HasPrefix(strings.ToLower(c.Name()), "eval")
		}
		if scripts { // not the handshake of a connection
			s.pipelines.Add(1)
		}
		return next(ctx, cmds)
	}
}

// calls returns n raw calls, alternating scripts A and B, on keys
// prefix+i.
func calls(prefix string, n int) []*engine.Call {
	cs := make([]*engine.Call, n)
	for i := range cs {
		s := scriptA
		if i%2 == 1 {
			s = scriptB
		}
		cs[i] = &engine.Call{Script: s, Keys: []string{prefix + strconv.Itoa(i)}, Args: []any{i}, Raw: true}
	}
	return cs
}

// check fails t unless call i got its own reply (nil error) and ran once.
func check(t *testing.T, rdb redis.Cmdable, cs []*engine.Call) {
	t.Helper()
	for i, c := range cs {
		want := "A:" + strconv.Itoa(i)
		if i%2 == 1 {
			want = "B:" + strconv.Itoa(i)
		}
		if c.Err != nil || c.Reply != want {
			t.Errorf("call %d: got %v, %v; want %q", i, c.Reply, c.Err, want)
		}
		if n, err := rdb.Get(context.Background(), c.Keys[0]).Int(); err != nil || n != 1 {
			t.Errorf("call %d ran %d times (%v), want once", i, n, err)
		}
	}
}

// When only some calls of a pipeline get NOSCRIPT, only those are sent
// again, after one SCRIPT LOAD of their script; each call gets its own
// reply and runs once.
func TestExecNoScriptInPartOfAPipeline(t *testing.T) {
	s := testredis.Start(t)
	rdb := s.Client(t)
	ctx := context.Background()
	if err := scriptA.Load(ctx, rdb).Err(); err != nil { // B is not loaded
		t.Fatal(err)
	}
	var p sent
	rdb.AddHook(&p)
	cs := calls("k", 6)
	engine.Exec(ctx, rdb, cs)
	check(t, rdb, cs)
	if p.pipelines.Load() != 2 || p.load.Load() != 1 || p.evalsha.Load() != 6+3 || p.eval.Load() != 0 {
		t.Errorf("%d pipelines, %d SCRIPT LOAD, %d EVALSHA, %d EVAL; want 2, 1, 9 (6, then the 3 of B), 0",
			p.pipelines.Load(), p.load.Load(), p.evalsha.Load(), p.eval.Load())
	}
}

// flushAfterLoad flushes the script cache right after each SCRIPT LOAD:
// the calls sent again get NOSCRIPT once more.
type flushAfterLoad struct {
	sent
	admin *redis.Client
}

func (f *flushAfterLoad) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		f.count(cmd)
		err := next(ctx, cmd)
		if strings.ToLower(cmd.Name()) == "script" {
			f.admin.ScriptFlush(ctx)
		}
		return err
	}
}

func (f *flushAfterLoad) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return f.sent.ProcessPipelineHook(next)
}

// A call answered NOSCRIPT again after its script was loaded goes out as
// EVAL with the text; a call whose caller left is not sent again.
func TestSendNoScriptTwiceAndLeftCallers(t *testing.T) {
	s := testredis.Start(t)
	rdb := s.Client(t)
	ctx := context.Background()
	f := &flushAfterLoad{admin: s.Client(t)}
	rdb.AddHook(f)
	cs := calls("k", 4)
	left := calls("gone", 2)
	all := append(append([]*engine.Call{}, cs...), left...)
	live := func(i int) bool { return i < len(cs) }
	engine.Send(ctx, engine.Target{Node: rdb, Live: live}, all)
	check(t, rdb, cs)
	if f.eval.Load() != 4 || f.load.Load() != 2 {
		t.Errorf("%d EVAL, %d SCRIPT LOAD; want 4 EVAL (the calls of callers still waiting), 2 loads (one per script)", f.eval.Load(), f.load.Load())
	}
	for i, c := range left {
		if c.Err == nil || !strings.HasPrefix(c.Err.Error(), "NOSCRIPT") {
			t.Errorf("call %d of a caller that left: err %v, want its NOSCRIPT", i, c.Err)
		}
		if n, _ := rdb.Exists(ctx, c.Keys[0]).Result(); n != 0 {
			t.Errorf("call %d of a caller that left ran", i)
		}
	}
}

// Calls sent to a node that does not serve their keys are answered MOVED
// and sent again through the cluster client, once.
func TestSendRedirected(t *testing.T) {
	cl := testredis.SharedCluster(t)
	cc := cl.Client(t)
	ctx := context.Background()
	prefix := testredis.Prefix(t)
	cs := calls("{"+prefix+"}:", 4) // one slot
	right, err := cc.MasterForKey(ctx, cs[0].Keys[0])
	if err != nil {
		t.Fatal(err)
	}
	var wrong *redis.Client
	for _, n := range cl.Nodes {
		if n.Addr != right.Options().Addr {
			wrong = n.Client(t)
			break
		}
	}
	for _, s := range []*redis.Script{scriptA, scriptB} {
		if err := s.Load(ctx, cc).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var p sent
	wrong.AddHook(&p)
	engine.Send(ctx, engine.Target{Node: wrong, Redirect: cc}, cs)
	check(t, cc, cs)
	if p.pipelines.Load() != 1 || p.evalsha.Load() != 4 {
		t.Errorf("the wrong node got %d pipelines, %d EVALSHA; want the 4 calls in 1", p.pipelines.Load(), p.evalsha.Load())
	}
}

// barrier is a Submitter that answers its calls once n are in flight
// together.
type barrier struct {
	redis.Scripter
	n     int
	calls chan *engine.Call
}

func (b *barrier) Submit(ctx context.Context, c engine.Call) engine.Call {
	b.calls <- &c
	<-ctx.Done()
	return c
}

// Exec hands a Submitter its calls together, so that it can pipeline
// them, not one after the other.
func TestExecSubmitsTogether(t *testing.T) {
	b := &barrier{n: 4, calls: make(chan *engine.Call, 4)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		engine.Exec(ctx, b, calls("k", 4))
		close(done)
	}()
	for i := range b.n {
		select {
		case <-b.calls:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d calls submitted while the first waits, want %d together", i, b.n)
		}
	}
	cancel()
	<-done
}
