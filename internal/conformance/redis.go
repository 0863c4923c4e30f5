package conformance

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/testredis"
)

// Miniredis starts a miniredis for t and returns it with a client on it;
// both are closed when t ends.
func Miniredis(t testing.TB) (*miniredis.Miniredis, *redis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	return mr, c
}

// RealRedis returns a client, closed when t ends, on the real redis-server
// that the test binary shares (see testredis.Shared). Keys must carry
// testredis.Prefix(t).
func RealRedis(t testing.TB) *redis.Client {
	t.Helper()
	return testredis.Shared(t).Client(t)
}
