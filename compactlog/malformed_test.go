package compactlog_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// TestMalformedRanges: a value whose header claims more slots than it
// holds is the package's malformed-state error on every path, whether the
// script reads the value whole or by ranges (a Limit whose value is above
// 1 KB), never a Lua error from reading past its end: a header alone that
// claims 10 units of 1000, the value truncated by a byte, by half.
func TestMalformedRanges(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	backends := map[string]func(t *testing.T) (*redis.Client, string){
		"miniredis": func(t *testing.T) (*redis.Client, string) {
			_, rdb := conformance.Miniredis(t)
			return rdb, ""
		},
		"redis": func(t *testing.T) (*redis.Client, string) {
			return conformance.RealRedis(t), testredis.Prefix(t)
		},
	}
	limits := []struct {
		name string
		lim  strategy.Limit
	}{
		{"ranges", strategy.PerMinute(1000)}, // 13 + 1000 x 2 bytes > 1 KB
		{"whole", strategy.PerMinute(100)},
	}
	shapes := []struct {
		name string
		mod  func(v string) string
	}{
		{"header claiming 10 units", func(v string) string {
			return v[:9] + "\x00\x0a" + v[11:13]
		}},
		{"truncated by a byte", func(v string) string { return v[:len(v)-1] }},
		{"truncated by half", func(v string) string { return v[:len(v)/2] }},
	}
	ops := []struct {
		name string
		do   func(st *compactlog.Limiter, key string) (strategy.Result, error)
	}{
		{"AllowN", func(st *compactlog.Limiter, key string) (strategy.Result, error) { return st.AllowN(ctx, key, 1) }},
		{"Peek", func(st *compactlog.Limiter, key string) (strategy.Result, error) { return st.Peek(ctx, key) }},
		{"RefundN", func(st *compactlog.Limiter, key string) (strategy.Result, error) { return st.RefundN(ctx, key, 1) }},
	}
	for bname, backend := range backends {
		t.Run(bname, func(t *testing.T) {
			rdb, prefix := backend(t)
			for _, l := range limits {
				st, err := compactlog.New(rdb, l.lim, strategy.WithClock(clock), strategy.WithPrefix(prefix+"cl-"+l.name+":"))
				if err != nil {
					t.Fatal(err)
				}
				// a valid value: 5 units recorded 1 ms apart
				for i := range 5 {
					if _, err := st.AllowN(ctx, "good", 1); err != nil {
						t.Fatalf("%s: request %d: %v", l.name, i+1, err)
					}
					clock.Advance(time.Millisecond)
				}
				good, err := rdb.Get(ctx, st.Key("good")).Result()
				if err != nil {
					t.Fatal(err)
				}
				if want := 13 + int(l.lim.Limit)*2; len(good) != want {
					t.Fatalf("%s: value of %d bytes, want %d", l.name, len(good), want)
				}
				for _, sh := range shapes {
					for _, op := range ops {
						name := l.name + "/" + sh.name + "/" + op.name
						t.Run(name, func(t *testing.T) {
							key := st.Key("bad")
							if err := rdb.Set(ctx, key, sh.mod(good), time.Minute).Err(); err != nil {
								t.Fatal(err)
							}
							r, err := op.do(st, "bad")
							if !errors.Is(err, strategy.ErrBackend) || !strings.Contains(err.Error(), "compactlog: malformed state in "+key) {
								t.Errorf("%s: got %+v, %v; want ErrBackend, compactlog: malformed state in %s", name, r, err, key)
							}
						})
					}
				}
			}
		})
	}
}
