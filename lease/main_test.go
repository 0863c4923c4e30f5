package lease_test

import (
	"os"
	"testing"

	"github.com/ratekit/ratelimit/internal/testredis"
)

// TestMain stops the redis-server the tests share (testredis.Shared).
func TestMain(m *testing.M) { os.Exit(testredis.Main(m)) }
