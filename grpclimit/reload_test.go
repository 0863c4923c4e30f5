package grpclimit_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/grpclimit"
	"github.com/ratekit/ratelimit/strategy"
)

// TestSetFollowsReloads checks that an Interceptor built by NewSet decides
// with the policies a Set holds now: a reload that changes a limit is
// enforced at the next call, and one that removes the policy sends calls
// to the ErrorHandler.
func TestSetFollowsReloads(t *testing.T) {
	policy := func(limit int64) ratelimit.Policies {
		return ratelimit.Policies{"api": {Algorithm: ratelimit.FixedWindow, Limit: limit, Window: time.Hour}}
	}
	clock := strategy.ClockFunc(func() time.Time { return time.Unix(1_700_000_000, 0) }) // no hour boundary mid-test
	set, err := ratelimit.NewSet(nil, policy(1), ratelimit.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	icpt, err := grpclimit.NewSet(set, grpclimit.Routes{Default: "api"})
	if err != nil {
		t.Fatal(err)
	}
	unary := icpt.Unary()
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 4711}})
	call := func() codes.Code {
		_, err := unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/pkg.Service/Method"},
			func(context.Context, any) (any, error) { return "ok", nil })
		return status.Code(err)
	}
	if got := []codes.Code{call(), call()}; got[0] != codes.OK || got[1] != codes.ResourceExhausted {
		t.Fatalf("limit 1: codes %v, want OK then ResourceExhausted", got)
	}
	if err := set.Update(policy(3)); err != nil {
		t.Fatal(err)
	}
	// a changed policy starts afresh in process: 3 more
	if got := []codes.Code{call(), call(), call(), call()}; got[2] != codes.OK || got[3] != codes.ResourceExhausted {
		t.Fatalf("after a reload to limit 3: codes %v, want 3 OK then ResourceExhausted", got)
	}
	if err := set.Update(ratelimit.Policies{"other": {Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if got := call(); got == codes.OK || got == codes.ResourceExhausted {
		t.Errorf("after the policy was removed: code %v, want the ErrorHandler's error", got)
	}
}
