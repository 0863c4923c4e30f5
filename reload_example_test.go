package ratelimit_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ratekit/ratelimit"
)

// A hot reload: login's limit is raised, upload removed, search added.
// Requests go through Get, so the next one sees the new policies.
func ExampleSet_Update() {
	ctx := context.Background()
	var p ratelimit.Policies
	if err := json.Unmarshal([]byte(`{
		"login":  {"algorithm": "sliding_log", "limit": 2, "window": "1m"},
		"upload": {"algorithm": "sliding_counter", "limit": 1000, "window": "1h"}
	}`), &p); err != nil {
		panic(err)
	}
	set, err := ratelimit.NewSet(nil, p) // in process; give a Redis client to share the limits
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

	// reload: decode the new document, then swap it in
	reload := func(doc string) error {
		var next ratelimit.Policies
		if err := json.Unmarshal([]byte(doc), &next); err != nil {
			return err
		}
		return set.Update(next)
	}
	err = reload(`{
		"login":  {"algorithm": "sliding_log", "limit": 5, "window": "1m"},
		"search": {"algorithm": "gcra", "limit": 100, "window": "1s"}
	}`)
	fmt.Println("reloaded:", err)
	login()
	_, err = set.Get("upload")
	fmt.Println(err)

	// a bad document changes nothing
	err = reload(`{"login": {"algorithm": "sliding_log", "limit": 5, "window": "1 minute"}}`)
	fmt.Println(err)
	login()
	// Output:
	// login: allowed true, limit 2
	// login: allowed true, limit 2
	// login: allowed false, limit 2
	// reloaded: <nil>
	// login: allowed true, limit 5
	// ratelimit: invalid option: no policy "upload"; the policies are "login", "search"
	// ratelimit: policy "login": field "window": invalid option: want a duration string like "1m" or "1h30m", got "1 minute"
	// login: allowed true, limit 5
}

func mustParse(doc string) ratelimit.Policies {
	var p ratelimit.Policies
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		panic(err)
	}
	return p
}
