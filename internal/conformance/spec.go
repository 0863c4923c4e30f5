package conformance

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// Keyed is a Redis strategy that tells the key it keeps a subject under.
type Keyed interface {
	strategy.Strategy
	Key(subject string) string
}

// Twin is a local twin that tells how many subjects it holds.
type Twin interface {
	strategy.Strategy
	Subjects() int
}

// Spec describes one algorithm for the checks that every algorithm's
// Redis strategy and twin share (RunSpec): its constructors, where it keeps
// a subject in Redis, when that key expires, what a subject costs there,
// and when the twin forgets a subject. The numbers are the algorithm's
// own; the checks are the same for all.
type Spec[R Keyed, L Twin] struct {
	New      NewRedis[R]
	NewLocal NewLocal[L]
	// Subject says what the suite (Run) expects of the algorithm; RunSpec
	// runs it on every backend (RunBackends).
	Subject Subject
	// RefundLimits are limits the Redis strategy and its twin are compared
	// on with refunds beyond the usual ones (RefundDifferential).
	RefundLimits []strategy.Limit
	// Differential are limits the Redis strategy and its twin are
	// compared on (DifferentialOf) beyond the usual ones.
	Differential []strategy.Limit
	// Checks are checks of the algorithm's family (see BucketSpec,
	// ExactLogSpec, WindowChecks), run after the shared ones.
	Checks []Check
	// Tag is the algorithm's part of a key: <prefix><Tag>:{<subject>}.
	Tag string
	// ServerTime is what the Redis strategy decides by the server's TIME
	// (no client clock).
	ServerTime ServerTime
	// TTL is when a subject's key expires.
	TTL TTL
	// Still is a time after a subject of 5 per minute took its whole
	// capacity when nothing has come back yet: Peek and denials then
	// write nothing.
	Still time.Duration
	// Idle is how long after its last request a subject of 5 per second
	// no longer matters, so the twin forgets it.
	Idle time.Duration
	// Memory are the subjects measured with MEMORY USAGE on a real
	// redis-server.
	Memory []Memory
	// OnMemory, when set, is called with each case of Memory, the client
	// of the server it was measured on and the bytes measured, for checks
	// of the algorithm's own (a comparison with another layout).
	OnMemory func(t *testing.T, rdb *redis.Client, m Memory, bytes int64)
	// Invalid are the algorithm's own invalid configurations, beyond the
	// ones every strategy rejects (see InvalidConfig).
	Invalid []ConfigCase
	// Allocs, when its Limit is not 0, is a limit under which a decision
	// and a Peek of the twin on a warm subject allocate nothing
	// (LocalAllocs).
	Allocs strategy.Limit
	// Accepted are configurations at the edge of what the algorithm
	// allows, which both constructors must accept.
	Accepted []strategy.Limit
}

// ServerTime is a sequence of decisions of one subject on miniredis, whose
// TIME the test sets, by a strategy without a client clock; and, when Real
// is set, a check on a real Redis.
type ServerTime struct {
	Lim   strategy.Limit
	Steps []TimeStep
	// Real, when set (with Burst 0), is a limit whose whole capacity a
	// subject takes on a real Redis by its TIME; the next request is then
	// denied with RetryAfter RealRetry, less the time the calls took.
	Real      strategy.Limit
	RealRetry time.Duration
}

// TimeStep is one decision of ServerTime.
type TimeStep struct {
	// At is the server's TIME, since Epoch.
	At time.Duration
	// N is the request's cost; 0 is a Peek.
	N       int64
	Allowed bool
	// RetryAfter, when not 0, is the RetryAfter wanted.
	RetryAfter time.Duration
	// Full: the subject has its whole capacity back (Remaining = Limit,
	// ResetAfter 0).
	Full bool
}

// TTL says when the key of a subject expires after its first request.
type TTL struct {
	Lim strategy.Limit
	// Start is the client clock at the request, since Epoch.
	Start time.Duration
	// N is the first request's cost.
	N int64
	// Want is the key's TTL after it, which is also the request's
	// ResetAfter: the key lives exactly as long as the subject matters.
	Want time.Duration
	// KeepOnLaterWrite: a later request in the same window leaves the
	// TTL as it is (the deadline has not moved), rather than set it anew.
	KeepOnLaterWrite bool
}

// Memory is one subject whose MEMORY USAGE is measured on a real
// redis-server: Requests requests of Cost units, each allowed, the clock
// advanced by Step after each.
type Memory struct {
	Lim strategy.Limit
	// Prefix is the key prefix; "" is the default.
	Prefix string
	// Subject is the subject measured; "" is MemorySubject.
	Subject string
	// Start is the clock at the first request, since Epoch.
	Start    time.Duration
	Requests int
	Cost     int64
	Step     time.Duration
	// Encodings, when not empty, are the OBJECT ENCODINGs allowed.
	Encodings []string
	// MaxBytes, when not 0, is the most MEMORY USAGE may report.
	MaxBytes int64
}

// Check is a named check of an algorithm family, run as a subtest.
type Check struct {
	Name string
	Run  func(t *testing.T)
}

// MemorySubject is the subject whose key Memory measures by default.
const MemorySubject = "user:42"

// RunSpec runs, each a subtest, the checks every algorithm shares, with
// s's numbers: the suite on every backend, the Redis strategy against its
// twin, the key layout, decisions by the server's TIME, the key's TTL,
// that Peek and denials write nothing, the memory a subject costs, invalid
// and edge configurations, that the twin forgets idle subjects and
// allocates nothing on a warm one; then s.Checks.
func RunSpec[R Keyed, L Twin](t *testing.T, s Spec[R, L]) {
	t.Helper()
	t.Run("conformance", func(t *testing.T) { RunBackends(t, s.Subject, s.New, s.NewLocal) })
	t.Run("differential", func(t *testing.T) { DifferentialOf(t, s.New, s.NewLocal, s.Differential...) })
	t.Run("key layout", func(t *testing.T) { keyLayout(t, s) })
	t.Run("server time", func(t *testing.T) { serverTime(t, s) })
	t.Run("TTL", func(t *testing.T) { ttl(t, s) })
	t.Run("peek and denial write nothing", func(t *testing.T) { peekAndDenialWriteNothing(t, s) })
	t.Run("memory usage", func(t *testing.T) { memoryUsage(t, s) })
	t.Run("invalid config", func(t *testing.T) {
		InvalidConfig(t, s.New, s.NewLocal, s.Invalid...)
		_, rdb := Miniredis(t)
		for _, lim := range s.Accepted {
			if _, err := s.New(rdb, lim); err != nil {
				t.Errorf("New(%v): %v, want accepted", lim, err)
			}
			if _, err := s.NewLocal(lim); err != nil {
				t.Errorf("NewLocal(%v): %v, want accepted", lim, err)
			}
		}
	})
	t.Run("twin drops idle subjects", func(t *testing.T) { dropsIdle(t, s) })
	t.Run("refunds", func(t *testing.T) { Refunds(t, strategy.Limit{Limit: 10, Window: time.Minute}, s.New, s.NewLocal) })
	t.Run("refund differential", func(t *testing.T) {
		RefundDifferential(t, s.New, s.NewLocal, append([]strategy.Limit{
			{Limit: 5, Window: 1500 * time.Millisecond},
			{Limit: 100, Window: time.Second},
			{Limit: 1, Window: 300 * time.Millisecond},
		}, s.RefundLimits...)...)
	})
	t.Run("refund server time", func(t *testing.T) { RefundServerTime(t, s.New) })
	t.Run("per-call limits", func(t *testing.T) { Overrides(t, s.New, s.NewLocal) })
	if !raceEnabled {
		t.Run("a per-call limit allocates nothing more", func(t *testing.T) {
			OverrideAllocs(t, s.New, s.NewLocal,
				strategy.Limit{Limit: 1000, Window: time.Hour}, strategy.Limit{Limit: 5000, Window: time.Hour, Burst: 9000})
		})
	}
	if s.Allocs.Limit != 0 {
		t.Run("twin allocates nothing on a warm subject", func(t *testing.T) { LocalAllocs(t, s.NewLocal, s.Allocs) })
	}
	for _, c := range s.Checks {
		t.Run(c.Name, c.Run)
	}
}

func keyLayout[R Keyed, L Twin](t *testing.T, s Spec[R, L]) {
	_, rdb := Miniredis(t)
	st, err := s.New(rdb, strategy.PerMinute(5), strategy.WithPrefix("app:"))
	if err != nil {
		t.Fatal(err)
	}
	for subject, want := range map[string]string{
		"user:42":   "{user:42}",
		"{x}":       "{%7Bx%7D}",
		"a#1":       "{a%231}",
		"100%":      "{100%25}",
		"ключ":      "{ключ}",
		"nul\x00in": "{nul\x00in}",
	} {
		want = "app:" + s.Tag + ":" + want
		if got := st.Key(subject); got != want {
			t.Errorf("Key(%q) = %q, want %q", subject, got, want)
		}
	}
	def, err := s.New(rdb, strategy.PerMinute(5))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := def.Key("user:42"), "rl:"+s.Tag+":{user:42}"; got != want {
		t.Errorf("Key with the default prefix = %q, want %q", got, want)
	}
}

func serverTime[R Keyed, L Twin](t *testing.T, s Spec[R, L]) {
	c := s.ServerTime
	t.Run("miniredis", func(t *testing.T) {
		mr, rdb := Miniredis(t)
		st, err := s.New(rdb, c.Lim)
		if err != nil {
			t.Fatal(err)
		}
		for i, step := range c.Steps {
			mr.SetTime(Epoch.Add(step.At))
			var r strategy.Result
			if step.N == 0 {
				r = Peek(t, st, "k")
			} else {
				r = Allow(t, st, "k", step.N)
			}
			what := fmt.Sprintf("step %d, AllowN(%d) at +%v by the server's TIME", i+1, step.N, step.At)
			if r.Allowed != step.Allowed {
				t.Fatalf("%s: %+v, want Allowed %v", what, r, step.Allowed)
			}
			if step.RetryAfter != 0 && r.RetryAfter != step.RetryAfter {
				t.Fatalf("%s: %+v, want RetryAfter %v", what, r, step.RetryAfter)
			}
			if step.Full && (r.Remaining != r.Limit || r.ResetAfter != 0) {
				t.Fatalf("%s: %+v, want the whole capacity back (Remaining = Limit, ResetAfter 0)", what, r)
			}
		}
	})
	if c.Real.Limit == 0 {
		return
	}
	t.Run("redis", func(t *testing.T) {
		st, err := s.New(RealRedis(t), c.Real, strategy.WithPrefix(testredis.Prefix(t)))
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		if r := Allow(t, st, "k", c.Real.Limit); !r.Allowed {
			t.Fatalf("AllowN(%d) of %v on an idle subject = %+v, want allowed", c.Real.Limit, c.Real, r)
		}
		r := Allow(t, st, "k", 1)
		took := time.Since(began)
		if r.Allowed || r.RetryAfter > c.RealRetry || r.RetryAfter < c.RealRetry-took-time.Millisecond {
			t.Fatalf("the next request by the server's TIME: %+v, want denied with RetryAfter %v less at most the %v the calls took", r, c.RealRetry, took)
		}
	})
}

func ttl[R Keyed, L Twin](t *testing.T, s Spec[R, L]) {
	c := s.TTL
	t.Run("miniredis", func(t *testing.T) {
		mr, rdb := Miniredis(t)
		clock := NewClock(Epoch.Add(c.Start))
		mr.SetTime(clock.Now())
		st, err := s.New(rdb, c.Lim, strategy.WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		key := st.Key("k")
		r := Allow(t, st, "k", c.N)
		if got := mr.TTL(key); got != c.Want || r.ResetAfter != c.Want {
			t.Fatalf("after AllowN(%d) %v into a window of %v: TTL %v, ResetAfter %v (%+v); want both %v", c.N, c.Start, c.Lim, got, r.ResetAfter, r, c.Want)
		}
		left := c.Want
		if c.KeepOnLaterWrite {
			mr.FastForward(time.Millisecond) // TTLs move only with FastForward: a rewritten one shows
			left -= time.Millisecond
			if r := Allow(t, st, "k", 1); !r.Allowed {
				t.Fatalf("a later request: %+v, want allowed", r)
			}
			if got := mr.TTL(key); got != left {
				t.Fatalf("TTL after a later request in the window = %v, want %v, not set anew", got, left)
			}
		}
		mr.FastForward(left - time.Millisecond)
		if !mr.Exists(key) {
			t.Fatal("key gone 1ms before its TTL")
		}
		mr.FastForward(time.Millisecond)
		if mr.Exists(key) {
			t.Fatal("key still exists after its TTL")
		}
	})
	t.Run("redis", func(t *testing.T) {
		rdb := RealRedis(t)
		st, err := s.New(rdb, c.Lim, strategy.WithClock(NewClock(Epoch.Add(c.Start))), strategy.WithPrefix(testredis.Prefix(t)))
		if err != nil {
			t.Fatal(err)
		}
		key := st.Key("k")
		began := time.Now()
		Allow(t, st, "k", c.N)
		got := rdb.PTTL(ctx, key).Val()
		if took := time.Since(began); got > c.Want || got < c.Want-took-time.Millisecond {
			t.Fatalf("PTTL = %v, want %v less at most the %v the calls took", got, c.Want, took)
		}
		if err := st.Reset(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		if n := rdb.Exists(ctx, key).Val(); n != 0 {
			t.Fatal("key exists after Reset")
		}
	})
	t.Run("redis server time", func(t *testing.T) {
		rdb := RealRedis(t)
		st, err := s.New(rdb, strategy.PerMinute(5), strategy.WithPrefix(testredis.Prefix(t)))
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		r := Allow(t, st, "k", 1)
		got := rdb.PTTL(ctx, st.Key("k")).Val()
		lo := r.ResetAfter - time.Since(began) - time.Millisecond
		gone := got < 0 && lo <= time.Millisecond // the window may have ended meanwhile (times in whole ms)
		if !gone && (got > r.ResetAfter || got < lo) {
			t.Fatalf("PTTL = %v, want ResetAfter %v less at most the time the calls took", got, r.ResetAfter)
		}
	})
}

// state returns every key of mr with its type, value and TTL.
func state(t *testing.T, mr *miniredis.Miniredis) string {
	t.Helper()
	var b strings.Builder
	for _, k := range mr.Keys() {
		typ := mr.Type(k)
		fmt.Fprintf(&b, "%q %s ttl=%v:", k, typ, mr.TTL(k))
		switch typ {
		case "string":
			v, _ := mr.Get(k)
			fmt.Fprintf(&b, " %q", v)
		case "hash":
			fields, _ := mr.HKeys(k)
			slices.Sort(fields)
			for _, f := range fields {
				fmt.Fprintf(&b, " %q=%q", f, mr.HGet(k, f))
			}
		case "zset":
			members, _ := mr.ZMembers(k)
			for _, m := range members {
				score, _ := mr.ZScore(k, m)
				fmt.Fprintf(&b, " %q=%v", m, score)
			}
		default:
			t.Fatalf("key %q of type %s: state does not read it", k, typ)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func peekAndDenialWriteNothing[R Keyed, L Twin](t *testing.T, s Spec[R, L]) {
	mr, rdb := Miniredis(t)
	clock := NewClock(Epoch)
	st, err := s.New(rdb, strategy.PerMinute(5), strategy.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	Peek(t, st, "never-seen")
	if r := Allow(t, st, "never-seen", 6); r.Allowed {
		t.Fatalf("AllowN(6) of 5 = %+v, want denied", r)
	}
	if keys := mr.Keys(); len(keys) != 0 {
		t.Fatalf("Peek and an impossible request of an unknown subject created keys %v", keys)
	}
	if r := Allow(t, st, "k", 5); !r.Allowed {
		t.Fatalf("AllowN(5) of 5 = %+v, want allowed", r)
	}
	// TTLs move only with FastForward: by 1 ms, so that a TTL written anew
	// from the clock (moved by Still) or from the window shows
	mr.FastForward(time.Millisecond)
	before := state(t, mr)
	clock.Advance(s.Still)
	if p := Peek(t, st, "k"); p.Allowed || p.Remaining != 0 {
		t.Fatalf("Peek %v after taking the whole capacity = %+v, want not allowed, Remaining 0", s.Still, p)
	}
	for _, n := range []int64{1, 2, 5} {
		if r := Allow(t, st, "k", n); r.Allowed || r.Remaining != 0 {
			t.Fatalf("AllowN(%d) %v after taking the whole capacity = %+v, want denied, Remaining 0", n, s.Still, r)
		}
	}
	if after := state(t, mr); after != before {
		t.Fatalf("Peek and denials changed what Redis holds:\nbefore %s\nafter  %s", before, after)
	}
}

// MemoryOf builds with newRedis on rdb the strategy of m, resets its
// subject, sends it m's requests and returns what MEMORY USAGE and
// OBJECT ENCODING report for its key.
func MemoryOf[R Keyed](t *testing.T, rdb *redis.Client, newRedis NewRedis[R], m Memory) (bytes int64, encoding string) {
	t.Helper()
	clock := NewClock(Epoch.Add(m.Start))
	opts := []strategy.Option{strategy.WithClock(clock)}
	if m.Prefix != "" {
		opts = append(opts, strategy.WithPrefix(m.Prefix))
	}
	st, err := newRedis(rdb, m.Lim, opts...)
	if err != nil {
		t.Fatal(err)
	}
	subject := cmp.Or(m.Subject, MemorySubject)
	if err := st.Reset(ctx, subject); err != nil {
		t.Fatal(err)
	}
	for i := range m.Requests {
		if r := Allow(t, st, subject, m.Cost); !r.Allowed {
			t.Fatalf("%v, request %d of cost %d: %+v, want allowed", m.Lim, i+1, m.Cost, r)
		}
		clock.Advance(m.Step)
	}
	key := st.Key(subject)
	bytes, err = rdb.MemoryUsage(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return bytes, rdb.ObjectEncoding(ctx, key).Val()
}

func memoryUsage[R Keyed, L Twin](t *testing.T, s Spec[R, L]) {
	if len(s.Memory) == 0 {
		t.Fatal("Spec.Memory is empty: every algorithm states what a subject costs")
	}
	rdb := testredis.Start(t).Client(t) // a server of its own: the default prefix is safe
	for _, m := range s.Memory {
		bytes, enc := MemoryOf(t, rdb, s.New, m)
		t.Logf("%v, %d requests of cost %d, prefix %q: MEMORY USAGE %d bytes (%.2f per unit of the limit), encoding %s",
			m.Lim, m.Requests, m.Cost, m.Prefix, bytes, float64(bytes)/float64(m.Lim.Limit), enc)
		if bytes <= 0 || m.MaxBytes != 0 && bytes > m.MaxBytes {
			t.Errorf("%v, prefix %q: MEMORY USAGE %d bytes, want <= %d", m.Lim, m.Prefix, bytes, m.MaxBytes)
		}
		if len(m.Encodings) > 0 && !slices.Contains(m.Encodings, enc) {
			t.Errorf("%v, prefix %q: encoding %s, want one of %v", m.Lim, m.Prefix, enc, m.Encodings)
		}
		if s.OnMemory != nil {
			s.OnMemory(t, rdb, m, bytes)
		}
	}
}

func dropsIdle[R Keyed, L Twin](t *testing.T, s Spec[R, L]) {
	clock := NewClock(Epoch)
	st, err := s.NewLocal(strategy.PerSecond(5), strategy.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		Allow(t, st, fmt.Sprint("subject-", i), 1)
	}
	if n := st.Subjects(); n != 1000 {
		t.Fatalf("%d subjects stored after 1000 requests of 1000 subjects, want 1000", n)
	}
	Peek(t, st, "peeked")
	if n := st.Subjects(); n != 1000 {
		t.Fatalf("Peek of a fresh subject stored it: %d subjects", n)
	}
	clock.Advance(s.Idle)
	Allow(t, st, "late", 1)
	for i := range 5000 { // touch every stripe (64 of them) with near certainty
		Peek(t, st, fmt.Sprint("p", i))
	}
	if n := st.Subjects(); n != 1 {
		t.Fatalf("%d subjects stored %v after their last request, want only the one since", n, s.Idle)
	}
}

// Allow returns st.AllowN(ctx, key, n), failing t on an error.
func Allow(t testing.TB, st strategy.Strategy, key string, n int64) strategy.Result {
	t.Helper()
	r, err := st.AllowN(ctx, key, n)
	if err != nil {
		t.Fatalf("AllowN(%q, %d): %v", key, n, err)
	}
	return r
}

// Peek returns st.Peek(ctx, key), failing t on an error.
func Peek(t testing.TB, st strategy.Strategy, key string) strategy.Result {
	t.Helper()
	r, err := st.Peek(ctx, key)
	if err != nil {
		t.Fatalf("Peek(%q): %v", key, err)
	}
	return r
}
