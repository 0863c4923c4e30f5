package ratelimit_test

import (
	"context"
	"fmt"

	"github.com/ratekit/ratelimit"
)

// Promoting a candidate without a cold start: the sliding log tried beside
// the fixed window has recorded the same traffic on its own keys, so the
// policy reloaded to the candidate's fields starts from that state and the
// subject that spent its limit stays denied.
func ExampleSet_Update_promote() {
	ctx := context.Background()
	set, err := ratelimit.NewSet(nil, mustParse(`{
		"api": {"algorithm": "fixed_window", "limit": 3, "window": "1m",
			"candidate": {"algorithm": "sliding_log", "limit": 3, "window": "1m"}}
	}`))
	if err != nil {
		panic(err)
	}
	allow := func() {
		l, err := set.Get("api")
		if err != nil {
			panic(err)
		}
		r, _ := l.Allow(ctx, "user:42")
		fmt.Printf("%s: allowed %v, remaining %d\n", l.Config().Algorithm, r.Allowed, r.Remaining)
	}
	for range 3 {
		allow()
	}
	// the candidate's fields become the policy's
	err = set.Update(mustParse(`{"api": {"algorithm": "sliding_log", "limit": 3, "window": "1m"}}`))
	fmt.Println("promoted:", err)
	allow()
	// Output:
	// fixed_window: allowed true, remaining 2
	// fixed_window: allowed true, remaining 1
	// fixed_window: allowed true, remaining 0
	// promoted: <nil>
	// sliding_log: allowed false, remaining 0
}
