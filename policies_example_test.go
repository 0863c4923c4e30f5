package ratelimit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
)

// Per-endpoint policies from a JSON configuration: each policy gets its own
// limiter and its own key namespace, and swapping an endpoint's algorithm is
// a change to its "algorithm" field.
func ExamplePolicies_UnmarshalJSON() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	var policies ratelimit.Policies
	err := json.Unmarshal([]byte(`{
		"login":  {"algorithm": "sliding_log", "limit": 2, "window": "1m", "on_failure": "closed", "timeout": "10s"},
		"search": {"algorithm": "token_bucket", "limit": 100, "window": "1s", "burst": 200, "timeout": "10s"}
	}`), &policies) // timeout: generous, so that the example never degrades on a loaded machine
	if err != nil {
		panic(err) // names the policy and the field
	}
	set, err := ratelimit.NewSet(rdb, policies)
	if err != nil {
		panic(err)
	}
	login, err := set.Get("login")
	if err != nil {
		panic(err)
	}
	search, err := set.Get("search")
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		r, _ := login.Allow(ctx, "user:42")
		fmt.Printf("login %d: allowed=%v remaining=%d\n", i, r.Allowed, r.Remaining)
	}
	r, _ := search.Allow(ctx, "user:42")
	fmt.Printf("search: allowed=%v remaining=%d\n", r.Allowed, r.Remaining)
	fmt.Println("keys:", mr.Keys())

	var bad ratelimit.Policies
	err = json.Unmarshal([]byte(`{"upload": {"algorithm": "sliding_log", "limit": 1000, "window": "1 hour"}}`), &bad)
	fmt.Println(err)
	// Output:
	// login 1: allowed=true remaining=1
	// login 2: allowed=true remaining=0
	// login 3: allowed=false remaining=0
	// search: allowed=true remaining=199
	// keys: [rl:login:sl:{user:42} rl:search:tb:{user:42}]
	// ratelimit: policy "upload": field "window": invalid option: want a duration string like "1m" or "1h30m", got "1 hour"
}

// Policies as a Go value: the same thing without JSON.
func ExampleNewSet() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	set, err := ratelimit.NewSet(rdb, ratelimit.Policies{
		"login":  {Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Minute, OnFailure: ratelimit.FailClosed},
		"upload": {Algorithm: ratelimit.SlidingLog, Limit: -1000, Window: time.Hour},
	})
	fmt.Println(set == nil, err)
	// Output:
	// true ratelimit: policy "upload": field "limit": invalid limit: Limit must be >= 0, got -1000
}
