package rls_test

import (
	"context"
	"strconv"
	"testing"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratekit/ratelimit/batch"
)

// BenchmarkShouldRateLimit measures the Server's own cost per request,
// without gRPC: lookup, one decision on Redis, the response. Many subjects
// and one hot subject, serial and parallel, direct and batched.
func BenchmarkShouldRateLimit(b *testing.B) {
	rdb := shared(b)
	bc, err := batch.New(rdb)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bc.Close() })
	const cfg = "domain: b\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 1000000000}\n"
	for _, mode := range []string{"direct", "batched"} {
		e := start(b, rdb, map[string]string{"b.yaml": cfg})
		if mode == "batched" {
			e = start(b, bc, map[string]string{"b.yaml": cfg})
		}
		srv := e.srv
		reqs := make([]*rlsv3.RateLimitRequest, 1024)
		for i := range reqs {
			reqs[i] = &rlsv3.RateLimitRequest{Domain: "b", Descriptors: []*commonv3.RateLimitDescriptor{desc("user", "u"+strconv.Itoa(i))}}
		}
		for _, keys := range []string{"many", "hot"} {
			pick := func(i int) *rlsv3.RateLimitRequest {
				if keys == "hot" {
					return reqs[0]
				}
				return reqs[i%len(reqs)]
			}
			b.Run(mode+"/"+keys+"/serial", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if _, err := srv.ShouldRateLimit(context.Background(), pick(i)); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(mode+"/"+keys+"/parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for i := 0; pb.Next(); i++ {
						if _, err := srv.ShouldRateLimit(context.Background(), pick(i)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
