// Command quickstart runs the sliding log on an embedded miniredis and
// prints its decisions: the smallest program that uses the library.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/strategy"
)

func main() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	for _, a := range strategy.Algorithms() {
		lim, err := ratelimit.New(rdb, ratelimit.Config{Algorithm: a, Limit: 5, Window: time.Minute, Prefix: "demo:"})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s, 5 per minute, 7 requests at once:\n", a)
		for i := 1; i <= 7; i++ {
			r, err := lim.Allow(context.Background(), "user:42")
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("  request %d: allowed=%-5v remaining=%d retry after=%v\n", i, r.Allowed, r.Remaining, r.RetryAfter.Round(time.Second))
		}
	}
}
