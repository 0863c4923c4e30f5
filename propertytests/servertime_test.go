package propertytests

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// TimeCase is a burst of real time against a real Redis whose scripts read
// the server's TIME, the default clock: Goroutines spread over the hosts
// send requests of the Costs in turn, pausing Pauses ms between them, for
// Windows windows.
type TimeCase struct {
	Limit      int64
	Burst      int64
	Window     int // index into timeWindows
	Goroutines int
	Windows    int
	Seed       uint64 // of each goroutine's costs and pauses
	Costs      []int64
	Pauses     []int
}

var timeWindows = []time.Duration{50 * time.Millisecond, 80 * time.Millisecond, 120 * time.Millisecond}

func (c TimeCase) String() string {
	return fmt.Sprintf("TimeCase{Limit %d, Burst %d, Window %v, %d goroutines, %d windows, seed %d, costs %v, pauses %v}",
		c.Limit, c.Burst, timeWindows[c.Window%len(timeWindows)], c.Goroutines, c.Windows, c.Seed, c.Costs, c.Pauses)
}

func genTimeCase() gopter.Gen {
	return gen.Struct(reflect.TypeOf(TimeCase{}), map[string]gopter.Gen{
		"Limit":      gen.Int64Range(1, 8),
		"Burst":      gen.OneGenOf(gen.Const(int64(0)), gen.Int64Range(1, 12)),
		"Window":     gen.IntRange(0, len(timeWindows)-1),
		"Goroutines": gen.IntRange(2, 12),
		"Windows":    gen.IntRange(2, 4),
		"Seed":       gen.UInt64(),
		"Costs":      gen.SliceOfN(4, gen.Weighted([]gen.WeightedGen{{Weight: 4, Gen: gen.Const(int64(1))}, {Weight: 1, Gen: gen.Int64Range(1, 3)}})),
		"Pauses":     gen.SliceOfN(4, gen.IntRange(0, 3)),
	}).SuchThat(func(c TimeCase) bool {
		ok := c.Limit >= 1 && c.Limit <= 8 && c.Burst >= 0 && c.Burst <= 12 && c.Window >= 0 && c.Window < len(timeWindows) &&
			c.Goroutines >= 2 && c.Goroutines <= 12 && c.Windows >= 2 && c.Windows <= 4 && len(c.Costs) == 4 && len(c.Pauses) == 4
		for i := 0; ok && i < 4; i++ {
			ok = c.Costs[i] >= 1 && c.Costs[i] <= 3 && c.Pauses[i] >= 0 && c.Pauses[i] <= 3
		}
		return ok
	})
}

// span is an allowed request whose decision the server made at some
// millisecond in [s, e]: the client's clock before the call and after the
// reply, on the same machine as the server.
type span struct {
	s, e, n int64
}

// serverTimeProp runs TimeCases on a real Redis with the server's clock and
// checks that no set of allowed units certainly breaks the bound: units
// whose whole intervals fit in one window (sliding log, fixed window), or
// in [a, b] (token bucket, GCRA).
func serverTimeProp(t *testing.T, s subject, st *stats) gopter.Prop {
	srv := testredis.Shared(t)
	var clients []*redis.Client
	for range hosts {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 16})
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
	}
	base := testredis.Prefix(t)
	n := 0
	return prop.ForAll(func(c TimeCase) string {
		n++
		st.cases.Add(1)
		lim := strategy.Limit{Limit: c.Limit, Window: timeWindows[c.Window%len(timeWindows)], Burst: c.Burst}
		opts := []strategy.Option{strategy.WithPrefix(fmt.Sprintf("%sc%d:", base, n))} // no clock: the server's TIME
		var hostsSt []strategy.Strategy
		for _, cl := range clients {
			h, err := build(s, lim, func(l strategy.Limit) (strategy.Strategy, error) { return s.newRedis(cl, l, opts...) })
			if err != nil {
				return "build: " + err.Error()
			}
			hostsSt = append(hostsSt, h)
		}
		var mu sync.Mutex
		var allowed []span
		var failure string
		deadline := time.Now().Add(time.Duration(c.Windows) * lim.Window)
		var wg sync.WaitGroup
		for g := range c.Goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(c.Seed, uint64(g)))
				h := hostsSt[g%hosts]
				for time.Now().Before(deadline) {
					n := c.Costs[rng.IntN(len(c.Costs))]
					s0 := time.Now()
					r, err := h.AllowN(ctx, "hot", n)
					e0 := time.Now()
					mu.Lock()
					switch {
					case err != nil:
						failure = err.Error()
					case r.Allowed:
						allowed = append(allowed, span{s0.UnixMilli(), e0.UnixMilli(), n})
						st.allowed.Add(1)
					default:
						st.denied.Add(1)
					}
					st.calls.Add(1)
					mu.Unlock()
					if err != nil {
						return
					}
					if p := c.Pauses[rng.IntN(len(c.Pauses))]; p > 0 {
						time.Sleep(time.Duration(p) * time.Millisecond)
					}
				}
			}()
		}
		wg.Wait()
		if failure != "" {
			return failure
		}
		return checkSpans(s.kind, lim, allowed)
	}, genTimeCase())
}

// checkSpans finds a set of allowed units that certainly exceeds the bound
// of algorithm k, whatever instant of its span each decision was made at.
func checkSpans(k kind, lim strategy.Limit, a []span) string {
	sort.Slice(a, func(i, j int) bool { return a[i].s < a[j].s })
	w, b := lim.Window.Milliseconds(), lim.Capacity()
	// all decided within W-1 ms of a[i].s: one sliding window holds them
	sliding := func(limit int64) string {
		for i := range a {
			sum := int64(0)
			for j := i; j < len(a); j++ {
				if a[j].e-a[i].s < w {
					sum += a[j].n
				}
			}
			if sum > limit {
				return fmt.Sprintf("%d units certainly decided within %d ms from %s, at most %d per %v", sum, w-1, ms(a[i].s), limit, lim.Window)
			}
		}
		return ""
	}
	fixed := func() string {
		sums := map[int64]int64{}
		for _, x := range a {
			if floorDiv(x.s, w) == floorDiv(x.e, w) {
				k := floorDiv(x.s, w)
				if sums[k] += x.n; sums[k] > lim.Limit {
					return fmt.Sprintf("%d units certainly in the aligned window from %s, limit %d", sums[k], ms(k*w), lim.Limit)
				}
			}
		}
		return ""
	}
	switch k {
	case slidingLog:
		return sliding(lim.Limit)
	case fixedWindow:
		return fixed()
	case slidingCounter:
		if msg := fixed(); msg != "" {
			return msg
		}
		return sliding(lim.Limit + lim.Limit*(w-2)/w)
	case tokenBucket, gcraKind:
		for i := range a {
			for j := range a {
				lo, hi := a[i].s, a[j].e
				if hi < lo {
					continue
				}
				sum := int64(0)
				for _, x := range a {
					if x.s >= lo && x.e <= hi {
						sum += x.n
					}
				}
				if sum*w > b*w+lim.Limit*(hi-lo) {
					return fmt.Sprintf("%d units certainly decided in [%s, %s], more than burst %d + %d per %v", sum, ms(lo), ms(hi), b, lim.Limit, lim.Window)
				}
			}
		}
	default:
		return fmt.Sprintf("no bound known for algorithm kind %d", k)
	}
	return ""
}
