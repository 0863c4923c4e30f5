package main

import "github.com/ratekit/ratelimit"

// setupMetrics serves nothing yet: metrics come with ratelimitotel.
func setupMetrics(addr string) ([]ratelimit.Option, func(), error) {
	return nil, func() {}, nil
}
