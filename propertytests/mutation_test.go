package propertytests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"
)

// edit replaces the one occurrence of old by new.
type edit struct{ old, new string }

// mutant is a deliberate bug: edits to one file of the module. The
// properties of subjects on backends (regular expressions matching
// TestProperties' subtests) must catch it.
type mutant struct {
	name     string
	file     string // from the module root
	edits    []edit
	subjects string // e.g. "slidinglog|sharded-slidinglog"
	backends string // e.g. "miniredis|redis"
}

// mutants are the classic rate-limiter bugs, written into copies of the
// scripts and Go files. Each edit's old text must occur exactly once in the
// file: when the code changes, the mutant fails loudly until updated.
var mutants = []mutant{
	{
		name: "sliding log: check then act in two round trips",
		file: "slidinglog/slidinglog.go",
		edits: []edit{{
			old: `import (
	_ "embed"`,
			new: `import (
	"context"
	_ "embed"`,
		}, {
			old: `type Limiter struct {
	engine.Redis[params, unitlog.Log]
}`,
			new: `type Limiter struct {
	engine.Redis[params, unitlog.Log]
}

// MUTANT: count in one script run, record in another
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	lim := l.Limit()
	chk, err := l.Redis.Peek(ctx, key)
	if err != nil || n == 0 || n > lim.Limit || chk.Remaining < n {
		return l.Redis.AllowN(ctx, key, n)
	}
	c, err := l.Plan(engine.Req{Op: engine.OpAllow, Key: key, N: n})
	if err != nil {
		return strategy.Result{}, err
	}
	c.Args[0], c.Capacity = int64(strategy.MaxUnits), strategy.MaxUnits
	c = engine.Run(ctx, l.Client(), c)
	c.Result.Limit, c.Result.Remaining = lim.Limit, chk.Remaining-n
	return c.Result, c.Err
}`,
		}},
		subjects: "slidinglog", backends: "redis",
	},
	{
		name:     "sliding log: the timestamp as the member",
		file:     "slidinglog/slidinglog.lua",
		edits:    []edit{{old: `local m = (last + n) % M`, new: `local m = now % M`}},
		subjects: "slidinglog", backends: "redis",
	},
	{
		name:     "sliding log: a request in the newest entry's ms overwrites it (collision undercount)",
		file:     "slidinglog/slidinglog.lua",
		edits:    []edit{{old: `redis.call('ZREM', key, top[1])`, new: `redis.call('ZREM', key, top[1]); m = last`}},
		subjects: "slidinglog", backends: "redis",
	},
	{
		name:     "sliding log twin: a request in the newest entry's ms overwrites it (collision undercount)",
		file:     "internal/unitlog/unitlog.go",
		edits:    []edit{{old: `e.cum += uint64(units)`, new: `_ = units`}},
		subjects: "slidinglog", backends: "local",
	},
	{
		name:     "sliding log: eviction removed (units never leave)",
		file:     "slidinglog/slidinglog.lua",
		edits:    []edit{{old: `redis.call('ZREVRANGEBYSCORE', key, int(floor), '-inf', 'WITHSCORES', 'LIMIT', '0', '1')`, new: `{}`}},
		subjects: "slidinglog", backends: "redis",
	},
	{
		name:     "sliding log: entries that left the window never removed (the key grows)",
		file:     "slidinglog/slidinglog.lua",
		edits:    []edit{{old: `      redis.call('ZREMRANGEBYSCORE', key, '-inf', int(floor))` + "\n", new: "\n"}},
		subjects: "slidinglog", backends: "redis",
	},
	{
		name:     "sliding log twin: eviction removed (units never leave)",
		file:     "internal/unitlog/unitlog.go",
		edits:    []edit{{old: `return int64(g.at(g.n-1).cum - g.before(g.first(floor)))`, new: `return int64(g.at(g.n-1).cum - g.base)`}},
		subjects: "slidinglog", backends: "local",
	},
	{
		name:     "sliding log: window edge off by one (now - t <= W counts)",
		file:     "slidinglog/slidinglog.lua",
		edits:    []edit{{old: `local floor = now - window`, new: `local floor = now - window - 1`}},
		subjects: "slidinglog", backends: "redis",
	},
	{
		name:     "sliding log twin: window edge off by one (now - t <= W counts)",
		file:     "internal/unitlog/decide.go",
		edits:    []edit{{old: `floor := now - window`, new: `floor := now - window - 1`}},
		subjects: "slidinglog", backends: "local",
	},
	{
		name: "sliding log: denied requests recorded",
		file: "slidinglog/slidinglog.lua",
		edits: []edit{{
			old: `local k = count + want - limit`,
			new: `if n > 0 then redis.call('ZADD', key, newest + 1, (last + n) % M) end
local k = count + want - limit`,
		}},
		subjects: "slidinglog", backends: "redis",
	},
	{
		name: "sliding log: PEXPIRE dropped",
		file: "slidinglog/slidinglog.lua",
		edits: []edit{{
			old: `    if t == now then
      redis.call('PEXPIRE', key, ARGV[2])
    else
      redis.call('PEXPIRE', key, int(reset))
    end
`,
			new: "\n",
		}},
		subjects: "slidinglog", backends: "redis",
	},
	{
		name: "sliding log: RetryAfter waits for the k-th entry, not the k-th unit",
		file: "internal/unitlog/kth.lua",
		edits: []edit{
			{old: `if (e[1] - base) % M < k then`, new: `if 1 < k then`},
			{old: `if (x[1] - base) % M >= k then`, new: `if mid - brank >= k then`},
		},
		subjects: "slidinglog", backends: "redis",
	},
	{
		name:     "sliding log twin: RetryAfter waits for the k-th entry, not the k-th unit",
		file:     "internal/unitlog/unitlog.go",
		edits:    []edit{{old: `if int64(g.at(mid).cum-b) >= k {`, new: `if _ = b; int64(mid-first+1) >= k {`}, {old: `lo, hi := g.first(floor), g.n-1`, new: `first := g.first(floor); lo, hi := first, g.n-1`}},
		subjects: "slidinglog", backends: "local",
	},
	{
		name:     "token bucket: refill truncated to whole tokens",
		file:     "tokenbucket/tokenbucket.lua",
		edits:    []edit{{old: `tokens = tokens + (now - last) * olp`, new: `tokens = tokens + math.floor((now - last) * olp / owp) * owp`}},
		subjects: "tokenbucket", backends: "redis",
	},
	{
		name:     "token bucket twin: refill truncated to whole tokens",
		file:     "tokenbucket/tokenbucket.go",
		edits:    []edit{{old: `b.deficit -= e * p.LP`, new: `b.deficit -= e * p.LP / p.WP * p.WP`}},
		subjects: "tokenbucket", backends: "local",
	},
	{
		name: "token bucket: denied requests take their tokens",
		file: "internal/exact/decide.lua", // the tail of tokenbucket.lua, whose locals it sees
		edits: []edit{{
			old: `if after > full then`,
			new: `if after > full then
  if n > 0 then redis.call('HSET', key, 't', math.max(tokens - want * wp, 0), 'l', last) end`,
		}},
		subjects: "tokenbucket", backends: "redis",
	},
	{
		name: "token bucket: denied requests restart the refill clock",
		file: "internal/exact/decide.lua", // the tail of tokenbucket.lua, whose locals it sees
		edits: []edit{{
			old: `if after > full then`,
			new: `if after > full then
  if n > 0 and s[1] then redis.call('HSET', key, 'l', now) end`,
		}},
		subjects: "tokenbucket", backends: "redis",
	},
	{
		name:     "token bucket: PEXPIRE dropped",
		file:     "tokenbucket/tokenbucket.lua",
		edits:    []edit{{old: `redis.call('PEXPIRE', key, int(reset))` + "\n", new: "\n"}},
		subjects: "tokenbucket", backends: "redis",
	},
	{
		name: "fixed window: window edge off by one (the edge instant still in the old window)",
		file: "fixedwindow/fixedwindow.lua",
		edits: []edit{
			{old: `local elapsed = now % window`, new: `local elapsed = (now - 1) % window + 1`},
			{old: `local left = window - elapsed`, new: `local left = math.max(window - elapsed, 1)`},
		},
		subjects: "fixedwindow", backends: "redis",
	},
	{
		name: "fixed window twin: window edge off by one (the edge instant still in the old window)",
		file: "internal/exact/window.go",
		edits: []edit{
			{old: `idx := FloorDiv(now, window)`, new: `idx := FloorDiv(now-1, window)`},
			{old: `left := (idx+1)*window - now`, new: `left := max((idx+1)*window-now, 1)`},
		},
		subjects: "fixedwindow", backends: "local",
	},
	{
		name:     "fixed window: limit check off by one (>= instead of >)",
		file:     "fixedwindow/fixedwindow.lua",
		edits:    []edit{{old: `if count + want > limit then`, new: `if count + want >= limit then`}},
		subjects: "fixedwindow", backends: "redis",
	},
	{
		name:     "fixed window: the count of an earlier window read as this one's",
		file:     "fixedwindow/fixedwindow.lua",
		edits:    []edit{{old: `if v and v >= base and v < base + 2199023255552 then`, new: `if v and v < base + 2199023255552 then`}},
		subjects: "fixedwindow", backends: "redis",
	},
	{
		name: "fixed window: denied requests counted",
		file: "fixedwindow/fixedwindow.lua",
		edits: []edit{{
			old: `if count + want > limit then`,
			new: `if count + want > limit then
  if n > 0 then redis.call('SET', KEYS[1], base + count + n, 'PX', left) end`,
		}},
		subjects: "fixedwindow", backends: "redis",
	},
	{
		name:     "fixed window: expiry dropped",
		file:     "fixedwindow/fixedwindow.lua",
		edits:    []edit{{old: `redis.call('SET', KEYS[1], int(base + n), 'PX', int(left))`, new: `redis.call('SET', KEYS[1], int(base + n))`}},
		subjects: "fixedwindow", backends: "redis",
	},
	{
		name:     "fixed window: an earlier window's counter incremented instead of restarted",
		file:     "fixedwindow/fixedwindow.lua",
		edits:    []edit{{old: "if count > 0 then\n  -- this window's counter", new: "if v then\n  -- this window's counter"}},
		subjects: "fixedwindow", backends: "redis",
	},
	{
		name:     "sliding counter: the previous window's weight rounded down",
		file:     "slidingcounter/slidingcounter.lua",
		edits:    []edit{{old: `math.floor((prev * (window - elapsed) + window - 1) / window)`, new: `math.floor((prev * (window - elapsed)) / window)`}},
		subjects: "slidingcounter", backends: "redis",
	},
	{
		name:     "sliding counter: the previous window ignored (a fixed window)",
		file:     "slidingcounter/slidingcounter.lua",
		edits:    []edit{{old: `  elseif t == (idx - 1) % 4096 then` + "\n" + `    prev = c` + "\n", new: "\n"}},
		subjects: "slidingcounter", backends: "redis",
	},
	{
		name: "sliding counter: denied requests counted",
		file: "slidingcounter/slidingcounter.lua",
		edits: []edit{{
			old: `local retry` + "\n",
			new: `local retry
if n > 0 then redis.call('SET', KEYS[1], (tag * 1048576 + prev) * 1048576 + curr + n, 'PX', 2 * window - elapsed) end` + "\n",
		}},
		subjects: "slidingcounter", backends: "redis",
	},
	{
		name:     "sliding counter: expiry dropped",
		file:     "slidingcounter/slidingcounter.lua",
		edits:    []edit{{old: `redis.call('SET', KEYS[1], int((tag * 1048576 + rawprev) * 1048576 + curr + n), 'PX', int(reset))`, new: `redis.call('SET', KEYS[1], int((tag * 1048576 + rawprev) * 1048576 + curr + n))`}},
		subjects: "slidingcounter", backends: "redis",
	},
	{
		name:     "gcra: emission interval truncated to whole ms",
		file:     "internal/exact/exact.go",
		edits:    []edit{{old: `s := Scale{LP: lim.Limit / g, WP: w / g, Capacity: lim.Capacity()}`, new: `s := Scale{LP: g / g, WP: w / lim.Limit, Capacity: lim.Capacity()}`}},
		subjects: "gcra", backends: "redis|local",
	},
	{
		name:     "gcra: TAT in the past not brought up to now",
		file:     "gcra/gcra.lua",
		edits:    []edit{{old: `if q and r and q >= now then`, new: `if q and r then`}},
		subjects: "gcra", backends: "redis",
	},
	{
		name: "gcra: denied requests move TAT",
		file: "internal/exact/decide.lua", // the tail of gcra.lua
		edits: []edit{{
			old: `if after > full then`,
			new: `if after > full then
  if n > 0 then redis.call('SET', key, now + math.floor(after / lp), 'PX', math.ceil(after / lp)) end`,
		}},
		subjects: "gcra", backends: "redis",
	},
	{
		name:     "gcra: expiry dropped",
		file:     "gcra/gcra.lua",
		edits:    []edit{{old: `redis.call('SET', key, tat, 'PX', int(reset))`, new: `redis.call('SET', key, tat)`}},
		subjects: "gcra", backends: "redis",
	},
	{
		name: "compact log: window edge off by one (now - t <= W counts)",
		file: "compactlog/compactlog.lua",
		edits: []edit{
			{old: `if at(mid) > floor then`, new: `if at(mid) >= floor then`},
			{old: `at(count - 1) <= floor`, new: `at(count - 1) < floor`},
			{old: `at(lo + step - 1) <= floor`, new: `at(lo + step - 1) < floor`},
		},
		subjects: "compactlog", backends: "redis",
	},
	{
		name: "compact log: denied requests recorded",
		file: "compactlog/compactlog.lua",
		edits: []edit{{
			old: `local retry = at(first + live + want - limit - 1) + window - now`,
			new: `local retry = at(first + live + want - limit - 1) + window - now
if n > 0 then first = math.min(first + n, count); store(n, math.max(now, newest)); return {0, math.max(limit - live, 0), retry, reset} end`,
		}},
		subjects: "compactlog", backends: "redis",
	},
	{
		name:     "compact log: the head moved one slot too far (the next units land one slot off)",
		file:     "compactlog/compactlog.lua",
		edits:    []edit{{old: `fields(w, t, (head + k) % cap, keep + k, cap)`, new: `fields(w, t, (head + k + 1) % cap, keep + k, cap)`}},
		subjects: "compactlog", backends: "redis",
	},
	{
		name:     "compact log: RetryAfter read from the wrong slot (one unit later)",
		file:     "compactlog/compactlog.lua",
		edits:    []edit{{old: `at(first + live + want - limit - 1)`, new: `at(first + live + want - limit)`}},
		subjects: "compactlog", backends: "redis",
	},
	{
		name: "compact log: expiry dropped",
		file: "compactlog/compactlog.lua",
		edits: []edit{
			{old: `redis.call('SET', key, s, 'PX', ttl)`, new: `redis.call('SET', key, s)`},
			{old: `redis.call('PEXPIRE', key, ttl)`, new: `redis.call('PERSIST', key)`},
			{old: `.. table.concat(parts), 'PX', ttl)`, new: `.. table.concat(parts))`},
		},
		subjects: "compactlog", backends: "redis",
	},
	{
		name:     "compact log twin: window edge off by one (now - t <= W counts)",
		file:     "internal/unitlog/decide.go",
		edits:    []edit{{old: `floor := now - window`, new: `floor := now - window - 1`}},
		subjects: "compactlog", backends: "local",
	},
	{
		name:     "compact log twin: eviction removed (units never leave)",
		file:     "internal/unitlog/unitlog.go",
		edits:    []edit{{old: `return int64(g.at(g.n-1).cum - g.before(g.first(floor)))`, new: `return int64(g.at(g.n-1).cum - g.base)`}},
		subjects: "compactlog", backends: "local",
	},
	{
		name: "sharded: the limit not divided among the shards",
		file: "sharded/sharded.go",
		edits: []edit{
			{old: `share := strategy.Limit{Limit: l.limShare[i], Window: lim.Window}`, new: `share := strategy.Limit{Limit: lim.Limit, Window: lim.Window}`},
			{old: `share.Burst = l.burstShare[i]`, new: `share.Burst = lim.Burst`},
		},
		subjects: "sharded-.*", backends: "redis|local",
	},
	{
		name: "compare: the candidate's decision reaches the caller",
		file: "compare/compare.go",
		edits: []edit{{
			old: `	if l.mode == modeInline {
		l.compare(ctx, key, n, lim, res)
		return res, nil
	}`,
			new: `	if l.mode == modeInline { // MUTANT
		cres, cerr := l.candidate.AllowN(ctx, key, n)
		l.outcome(ctx, n, res, cres, OutcomeOf(res.Allowed, cres.Allowed))
		return cres, cerr
	}`,
		}},
		subjects: "fixedwindow", backends: "local",
	},
	{
		name:     "shadow mode: a shadow denial not reported (Result.Shadow unset)",
		file:     "decide.go",
		edits:    []edit{{old: `r.Allowed, r.Shadow = true, true`, new: `r.Allowed, r.Shadow = true, false`}},
		subjects: "fixedwindow", backends: "local",
	},
	{
		name:     "shadow mode: a Peek of a full subject reported as a shadow pass",
		file:     "decide.go",
		edits:    []edit{{old: `if l.shadow && !r.Allowed && err == nil && c.Op == guard.Allow && c.N > 0 {`, new: `if l.shadow && !r.Allowed && err == nil {`}},
		subjects: "slidinglog", backends: "local",
	},
	{
		name:     "facade: a per-call limit error treated as a backend error",
		file:     "failure.go",
		edits:    []edit{{old: `errors.Is(err, strategy.ErrInvalidLimit) || `, new: ``}},
		subjects: "compactlog", backends: "local",
	},
	{
		name:     "batch: replies handed to the wrong callers of a pipeline",
		file:     "internal/engine/send.go",
		edits:    []edit{{old: `cs[i].finish(res[i].v, res[i].err)`, new: `j := len(res) - 1 - i; cs[i].finish(res[j].v, res[j].err) // MUTANT`}},
		subjects: "fixedwindow|gcra|slidinglog", backends: "miniredis-batched|redis-batched",
	},
	{
		name:     "durability: the WAIT after a durable pipeline skipped",
		file:     "internal/engine/send.go",
		edits:    []edit{{old: `if w.n > 0 { // on the calls' connection: WAIT counts its writes`, new: `if false { // MUTANT: no WAIT`}},
		subjects: "fixedwindow|tokenbucket|sharded-slidinglog", backends: "redis-durable|redis-durable-batched",
	},
	{
		name:     "many requests in one script call: one request given another's reply",
		file:     "internal/engine/send.go",
		edits:    []edit{{old: `res[i] = outcome{arr[j], nil}`, new: `res[i] = outcome{arr[(j+1)%len(arr)], nil} // MUTANT`}},
		subjects: "fixedwindow|gcra|slidinglog|compactlog", backends: "miniredis-batched|redis-batched",
	},
	{
		name:     "many requests in one script call: a request decided with the arguments of the one before it",
		file:     "internal/engine/many.go",
		edits:    []edit{{old: `len(f.Keys) == len(c.Keys) && sameArgs(f.Args, c.Args) {`, new: `len(f.Keys) == len(c.Keys) { // MUTANT`}},
		subjects: "fixedwindow|gcra|slidinglog|compactlog", backends: "miniredis-batched|redis-batched",
	},
	{
		name:     "many requests in one script call: the replies returned in reverse order",
		file:     "internal/engine/many.go",
		edits:    []edit{{old: `    out[i] = r`, new: `    out[#KEYS + 1 - i] = r`}},
		subjects: "fixedwindow|gcra|slidinglog|compactlog", backends: "miniredis-batched|redis-batched",
	},
	{
		name:     "lease: a lease's unspent units never given back",
		file:     "lease/lease.go",
		edits:    []edit{{old: `if _, err := l.refund.RefundN(ctx, b.key, k); err != nil {`, new: `if err := error(nil); err != nil { // MUTANT`}},
		subjects: "lease-tokenbucket|lease-gcra", backends: "miniredis|redis|local",
	},
	{
		name:     "lease: the sweep takes an ended lease's units and never gives them back",
		file:     "lease/lease.go",
		edits:    []edit{{old: `backs = append(backs, back)`, new: `_ = back // MUTANT`}},
		subjects: "lease-tokenbucket|lease-gcra", backends: "miniredis|redis|local",
	},
	{
		name:     "lease: units the bucket refilled while a lease held them given back too",
		file:     "lease/lease.go",
		edits:    []edit{{old: `k := l.owed(b, l.clock.Now().UnixNano())`, new: `k := b.units // MUTANT`}},
		subjects: "lease-tokenbucket|lease-gcra", backends: "miniredis|redis",
	},
	{
		name:     "lease: a unit spent after its lease ended",
		file:     "lease/lease.go",
		edits:    []edit{{old: `if s.left >= n && now < s.expires {`, new: `if s.left >= n { // MUTANT`}},
		subjects: "lease-.*", backends: "miniredis|redis|local",
	},
	{
		name:     "lease: a late unit counted in the wrong window (the log's lease not recorded ahead)",
		file:     "slidinglog/slidinglog.lua",
		edits:    []edit{{old: `local t = now + ahead`, new: `local t = now`}},
		subjects: "lease-slidinglog", backends: "miniredis|redis",
	},
	{
		name:     "lease: a late unit counted in the wrong window (the compact log's lease not recorded ahead)",
		file:     "compactlog/compactlog.lua",
		edits:    []edit{{old: `local t = math.max(now + ahead, newest)`, new: `local t = math.max(now, newest)`}},
		subjects: "lease-compactlog", backends: "miniredis|redis",
	},
	{
		name:     "lease: a window algorithm's lease outlives its aligned window",
		file:     "lease/lease.go",
		edits:    []edit{{old: "\t\t\tlife = min(life, end)\n", new: "\t\t\tlife = life // MUTANT\n"}},
		subjects: "lease-fixedwindow|lease-slidingcounter", backends: "miniredis|redis|local",
	},
	{
		name:     "lease: the sliding counter's lease ends with the next window instead of its own",
		file:     "lease/lease.go",
		edits:    []edit{{old: `return res.ResetAfter - l.lim.Window, true`, new: `return res.ResetAfter, true // MUTANT`}},
		subjects: "lease-slidingcounter", backends: "miniredis|redis|local",
	},
}

// mutationSeed and mutationCases make the mutation check deterministic
// (but for the interleavings of concurrent requests) and bounded.
const (
	mutationSeed  = 20261129
	mutationCases = 25
)

var (
	failLine = regexp.MustCompile(`^\s*--- FAIL: TestProperties/([^/\s]+)/([^/\s]+)/([^/\s]+) `)
	leafLine = regexp.MustCompile(`^\s*--- (PASS|FAIL): TestProperties/[^/\s]+/[^/\s]+/[^/\s]+ `)
)

// TestMutants proves that the properties can fail: it builds each mutant
// (through go test -overlay, leaving the checkout untouched), runs the
// affected properties with a fixed seed, and fails when a mutant survives.
//
// It takes minutes of CPU, so it runs only when asked: RATELIMIT_MUTANTS
// is a regular expression of the mutants' names to run ("." for all;
// ./scripts/test.sh sets it). Without it the test skips, saying so.
func TestMutants(t *testing.T) {
	re := os.Getenv("RATELIMIT_MUTANTS")
	if re == "" {
		t.Skip("mutation check skipped: it takes minutes; set RATELIMIT_MUTANTS=. (all mutants) or a regexp of their names, or run ./scripts/test.sh")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found above the package directory: %v", err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the mutants: %v", err)
	}
	m, err := regexp.Compile(re)
	if err != nil {
		t.Fatalf("RATELIMIT_MUTANTS=%q: %v", re, err)
	}
	selected := slices.DeleteFunc(slices.Clone(mutants), func(x mutant) bool { return !m.MatchString(x.name) })
	if len(selected) == 0 {
		t.Fatalf("RATELIMIT_MUTANTS=%q matches no mutant", re)
	}
	dir := t.TempDir()

	// The unmutated code must pass the very runs that must fail below, or a
	// "caught" mutant could be a failure of the suite itself.
	subjectsRe, backendsRe := map[string]bool{}, map[string]bool{}
	for _, m := range selected {
		subjectsRe[m.subjects], backendsRe[m.backends] = true, true
	}
	// It runs alongside the mutants (it is the longest run): its verdict is
	// read before theirs.
	baseline := mutant{name: "baseline (no mutation)", subjects: joinAlt(subjectsRe), backends: joinAlt(backendsRe)}

	type row struct {
		name, file string
		caught     []string
		err        error
	}
	// Mutants run a few at a time (RATELIMIT_MUTANT_JOBS, default the
	// number of CPUs): each is a build, mostly CPU, then properties that
	// wait on Redis, so two overlap well on two cores.
	jobs := runtime.NumCPU()
	if v := os.Getenv("RATELIMIT_MUTANT_JOBS"); v != "" {
		if jobs, err = strconv.Atoi(v); err != nil || jobs < 1 {
			t.Fatalf("RATELIMIT_MUTANT_JOBS=%q: want a whole number >= 1", v)
		}
	}
	table := make([]row, len(selected))
	outs := make([]string, len(selected))
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	var base row
	var baseOut string
	wg.Add(1)
	sem <- struct{}{}
	go func() {
		defer func() { <-sem; wg.Done() }()
		caught, out, err := runMutant(t, goBin, root, dir, baseline, -1)
		base, baseOut = row{caught: caught, err: err}, out
	}()
	for i, m := range selected {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			caught, out, err := runMutant(t, goBin, root, dir, m, i)
			table[i], outs[i] = row{m.name, m.file, caught, err}, out
		}()
	}
	wg.Wait()
	if base.err != nil || len(base.caught) > 0 {
		t.Fatalf("the unmutated code fails the mutation runs (%v, failed %v):\n%s", base.err, base.caught, tail(baseOut, 8000))
	}
	for i, r := range table {
		m := selected[i]
		switch {
		case r.err != nil:
			t.Errorf("mutant %q: %v\n%s", m.name, r.err, tail(outs[i], 4000))
		case len(r.caught) == 0:
			t.Errorf("mutant %q SURVIVED: no property of %s on %s caught it; strengthen the properties", m.name, m.subjects, m.backends)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "mutation check: seed %d, %d cases per property\n", mutationSeed, mutationCases)
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "mutant\tfile\tfirst caught by (subject/backend/property)")
	for _, r := range table {
		by := strings.Join(r.caught, ", ")
		switch {
		case r.err != nil:
			by = "ERROR: see above"
		case by == "":
			by = "NOTHING: survived"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.name, r.file, by)
	}
	tw.Flush()
	t.Log("\n" + b.String())
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

func joinAlt(set map[string]bool) string {
	var parts []string
	for k := range set {
		parts = append(parts, k)
	}
	slices.Sort(parts)
	return strings.Join(parts, "|")
}

// runMutant builds m as an overlay and runs its properties. It returns the
// properties that failed, the output, and an error when the run failed
// without any property failing (a mutant that does not build, a panic).
func runMutant(t *testing.T, goBin, root, dir string, m mutant, i int) ([]string, string, error) {
	t.Helper()
	// -ldflags=-w: no DWARF, so each mutant's test binary links faster.
	// -gcflags -N -l for this module's packages: a mutant recompiles the
	// mutated package, the root and this test package, about 40 % faster
	// unoptimized; the properties wait on Redis, not on this code's speed
	// (the dependencies, miniredis's Lua among them, stay optimized).
	// -failfast: a mutant's run ends at the first property that catches it
	// (one is enough; the rest would take most of the time). The baseline
	// runs every property: -failfast starts no test after a failure, so
	// passing with it is passing them all.
	args := []string{"test", "-count=1", "-v", "-failfast", "-vet=off", "-ldflags=-w", "-gcflags=github.com/ratekit/ratelimit/...=-N -l"}
	if m.file != "" {
		path := filepath.Join(root, filepath.FromSlash(m.file))
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, "", err
		}
		text := string(src)
		for _, e := range m.edits {
			if n := strings.Count(text, e.old); n != 1 {
				return nil, "", fmt.Errorf("the snippet to mutate occurs %d times in %s (want exactly 1): the code changed, update the mutant:\n%s", n, m.file, e.old)
			}
			text = strings.Replace(text, e.old, e.new, 1)
		}
		mutated := filepath.Join(dir, fmt.Sprintf("mutant%d%s", i, filepath.Ext(path)))
		if err := os.WriteFile(mutated, []byte(text), 0o644); err != nil {
			return nil, "", err
		}
		overlay, err := json.Marshal(map[string]map[string]string{"Replace": {path: mutated}})
		if err != nil {
			return nil, "", err
		}
		ovPath := filepath.Join(dir, fmt.Sprintf("overlay%d.json", i))
		if err := os.WriteFile(ovPath, overlay, 0o644); err != nil {
			return nil, "", err
		}
		args = append(args, "-overlay="+ovPath)
	}
	args = append(args, "-run", fmt.Sprintf("^TestProperties$/^(%s)$/^(%s)$/", m.subjects, m.backends), "./propertytests")
	c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, goBin, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		fmt.Sprintf("RATELIMIT_PROP_SEED=%d", mutationSeed),
		fmt.Sprintf("RATELIMIT_PROP_CASES=%d", mutationCases),
		"RATELIMIT_PROP_SHRINK=0",
	)
	start := time.Now()
	outb, runErr := cmd.CombinedOutput()
	out := string(outb)
	var caught []string
	leaves := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if leafLine.MatchString(sc.Text()) {
			leaves++
		}
		if f := failLine.FindStringSubmatch(sc.Text()); f != nil {
			caught = append(caught, f[1]+"/"+f[2]+"/"+f[3])
		}
	}
	slices.Sort(caught)
	caught = slices.Compact(caught)
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	t.Logf("%s: %v (%v of CPU), caught by %v", m.name, time.Since(start).Round(time.Millisecond), cpu.Round(time.Millisecond), caught)
	if runErr != nil && len(caught) == 0 {
		return nil, out, fmt.Errorf("go %s: %v, and no property failed", strings.Join(args, " "), runErr)
	}
	if runErr == nil && len(caught) > 0 {
		return caught, out, fmt.Errorf("properties failed but go test passed")
	}
	if leaves == 0 {
		return nil, out, fmt.Errorf("go test ran no property")
	}
	return caught, out, nil
}
