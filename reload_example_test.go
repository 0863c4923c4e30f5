package ratelimit_test

import (
	"context"
	"fmt"

	"github.com/ratekit/ratelimit"
)

// A hot reload: login's limit is raised, upload removed, search added.
// Requests go through Get, so the next one sees the new policies.
func ExampleSet_Update() {
	ctx := context.Background()
	set, err := ratelimit.NewLocalSet(mustParse(`{
		"login":  {"algorithm": "sliding_log", "limit": 2, "window": "1m"},
		"upload": {"algorithm": "sliding_counter", "limit": 1000, "window": "1h"}
	}`))
	if err != nil {
		panic(err)
	}
	login := func() {
		l, err := set.Get("login")
		if err != nil {
			panic(err)
		}
		r, _ := l.Allow(ctx, "user:42")
		fmt.Printf("login: allowed %v, limit %d\n", r.Allowed, r.Limit)
	}
	login()
	login()
	login()

	old := set.Policies()
	err = set.UpdateJSON([]byte(`{
		"login":  {"algorithm": "sliding_log", "limit": 5, "window": "1m"},
		"search": {"algorithm": "gcra", "limit": 100, "window": "1s"}
	}`))
	fmt.Println("reloaded:", old.Diff(set.Policies()), err)
	login()
	_, err = set.Get("upload")
	fmt.Println(err)

	// a bad document changes nothing
	err = set.UpdateJSON([]byte(`{"login": {"algorithm": "sliding_log", "limit": 5, "window": "1 minute"}}`))
	fmt.Println(err)
	fmt.Println(set.Names())
	// Output:
	// login: allowed true, limit 2
	// login: allowed true, limit 2
	// login: allowed false, limit 2
	// reloaded: added search; changed login; removed upload <nil>
	// login: allowed true, limit 5
	// ratelimit: invalid option: no policy "upload"; the policies are "login", "search"
	// ratelimit: policy "login": field "window": invalid option: want a duration string like "1m" or "1h30m", got "1 minute"
	// [login search]
}

func mustParse(doc string) ratelimit.Policies {
	p, err := ratelimit.ParsePolicies([]byte(doc))
	if err != nil {
		panic(err)
	}
	return p
}
