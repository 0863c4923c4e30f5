package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/sharded"
	"github.com/ratekit/ratelimit/strategy"
)

// TestMain stops the shared redis-server and the shared cluster the tests
// of this package start.
func TestMain(m *testing.M) { os.Exit(testredis.Main(m)) }

// clusterTimeout is the facade's per-call timeout in the cluster tests:
// generous, since a decision that times out would be made by the failure
// policy and hide what Redis said.
const clusterTimeout = 10 * time.Second

// strict fails the test on any decision the failure policy made instead of
// Redis, naming the cause (a CROSSSLOT error, for one), which the facade
// would otherwise turn into a degraded Result.
type strict struct{ t testing.TB }

func (s strict) Observe(_ context.Context, d ratelimit.Decision) {
	if d.Degraded {
		s.t.Errorf("%s %s: Redis did not decide: %v", d.Algorithm, d.Op, d.Cause)
	}
	if d.Err != nil && (errors.Is(d.Err, strategy.ErrBackend) && !errors.Is(d.Err, context.Canceled) && !errors.Is(d.Err, context.DeadlineExceeded)) {
		s.t.Errorf("%s %s: backend error: %v", d.Algorithm, d.Op, d.Err)
	}
}

// usesBurst reports whether algorithm a's capacity is Burst, asking its
// local twin rather than a list, so that algorithms added later are covered.
func usesBurst(t *testing.T, a strategy.Algorithm) bool {
	t.Helper()
	l, err := ratelimit.New(nil, ratelimit.Config{Algorithm: a, Limit: 2, Window: time.Second, Burst: 5})
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.Peek(context.Background(), "probe")
	if err != nil {
		t.Fatal(err)
	}
	return p.Limit == 5
}

// approximate lists the algorithms whose RetryAfter is not exact to the
// millisecond (see conformance.Subject.ExactRetry).
var approximate = map[strategy.Algorithm]bool{"sliding_counter": true}

// TestClusterConformance runs the conformance suite over every algorithm,
// sharded over 2 keys and not, built by the facade (ratelimit.New with
// Config.Shards and WithClock) on a real 3-master Redis Cluster. It drives
// the strategy the facade built, below the failure policy, so that a Redis
// error (CROSSSLOT, for one) fails the case instead of becoming a degraded
// decision, and so that a canceled context is an error, as the suite wants;
// the other cluster tests go through Limiter.Allow with a strict observer.
//
// It runs again with the cluster client behind a batch.Client (every call
// through its per-node queues).
func TestClusterConformance(t *testing.T) {
	cluster := testredis.SharedCluster(t)
	plain := cluster.Client(t)
	for _, a := range strategy.Algorithms() {
		for _, c := range []struct {
			shards  int
			batched bool
		}{{0, false}, {2, false}, {0, true}, {2, true}} {
			shards := c.shards
			var cc redis.Scripter = plain
			name := fmt.Sprintf("%s/shards=%d", a, shards)
			if c.batched {
				cc = conformance.Batched(t, plain)
				name += "/batched"
			}
			t.Run(name, func(t *testing.T) {
				conformance.Run(t, conformance.Subject{
					ExactRetry: !approximate[a],
					UsesBurst:  usesBurst(t, a),
					Shards:     shards,
					New: func(t *testing.T, lim strategy.Limit, clock *conformance.Clock) (strategy.Strategy, error) {
						l, err := ratelimit.New(cc, ratelimit.Config{
							Algorithm: a, Limit: lim.Limit, Window: lim.Window, Burst: lim.Burst,
							Shards: shards, Prefix: testredis.Prefix(t),
						}, ratelimit.WithClock(clock))
						if err != nil {
							return nil, err
						}
						if _, ok := ratelimit.StrategyOf(l).(*sharded.Limiter); ok != (shards > 1) {
							t.Fatalf("Shards %d, %v: strategy %T", shards, lim, ratelimit.StrategyOf(l))
						}
						return ratelimit.StrategyOf(l), nil
					},
				})
			})
		}
	}
}

// clusterKeys returns the keys under prefix on each master, by node index,
// read from each master itself.
func clusterKeys(t *testing.T, cluster *testredis.Cluster, prefix string) map[string]int {
	t.Helper()
	ctx := context.Background()
	where := map[string]int{}
	for i, n := range cluster.Nodes {
		c := n.Client(t)
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
			if err != nil {
				t.Fatalf("SCAN on %s: %v", n.Addr, err)
			}
			for _, k := range keys {
				where[k] = i
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return where
}

// TestClusterHotSubjectSpread shards one hot subject 6 ways, for every
// algorithm, and checks that its 6 keys exist, each on the master that owns
// its slot, and that they are spread over more than one master.
func TestClusterHotSubjectSpread(t *testing.T) {
	cluster := testredis.SharedCluster(t)
	cc := cluster.Client(t)
	ctx := context.Background()
	for _, a := range strategy.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			prefix := testredis.Prefix(t)
			l, err := ratelimit.New(cc, ratelimit.Config{Algorithm: a, Limit: 600, Window: time.Minute, Shards: 6, Prefix: prefix, Timeout: clusterTimeout},
				ratelimit.WithObserver(strict{t}))
			if err != nil {
				t.Fatal(err)
			}
			if n := ratelimit.StrategyOf(l).(*sharded.Limiter).Shards(); n != 6 {
				t.Fatalf("Shards() = %d, want 6", n)
			}
			for i := 0; i < 60; i++ {
				if r, err := l.Allow(ctx, "tenant:hot"); err != nil || !r.Allowed {
					t.Fatalf("request %d: %+v, %v", i+1, r, err)
				}
			}
			where := clusterKeys(t, cluster, prefix)
			nodes := map[int]bool{}
			var shardKeys []string
			for k, node := range where {
				slot, err := cc.ClusterKeySlot(ctx, k).Result()
				if err != nil {
					t.Fatal(err)
				}
				if owner := cluster.NodeOf(int(slot)); owner != node {
					t.Errorf("key %q (slot %d) found on master %d, but master %d owns the slot", k, slot, node, owner)
				}
				nodes[node] = true
				for i := 0; i < 6; i++ {
					if strings.Contains(k, fmt.Sprintf("{tenant:hot#%d}", i)) {
						shardKeys = append(shardKeys, fmt.Sprint(i))
					}
				}
			}
			slices.Sort(shardKeys)
			shardKeys = slices.Compact(shardKeys)
			if len(shardKeys) != 6 {
				t.Fatalf("keys %v: shards %v have keys, want all of 0-5", where, shardKeys)
			}
			if len(nodes) < 2 {
				t.Fatalf("the 6 shards' keys %v are all on one master", where)
			}
			t.Logf("%s: %d keys on %d of %d masters", a, len(where), len(nodes), len(cluster.Nodes))
			if err := l.Reset(ctx, "tenant:hot"); err != nil {
				t.Fatalf("Reset: %v", err)
			}
			if left := clusterKeys(t, cluster, prefix); len(left) != 0 {
				t.Fatalf("keys left after Reset: %v", left)
			}
		})
	}
}

// TestClusterShardedConcurrency has 16 goroutines hit one subject sharded 6
// ways, for every algorithm, on the cluster with the clock frozen (nothing
// refills): the subject never gets more than its capacity, and the test
// reports how close to it it gets: for a burst of exactly the capacity and
// one of twice it from one Limiter, and for a burst of the capacity from 4
// Limiters (standing for 4 app hosts, each with its own cluster client and
// round-robin counters) of 4 goroutines each.
//
// TestClusterShardedConcurrencyBatched runs it with each host's cluster
// client behind a batch.Client.
func TestClusterShardedConcurrency(t *testing.T) { clusterShardedConcurrency(t, false) }

func TestClusterShardedConcurrencyBatched(t *testing.T) { clusterShardedConcurrency(t, true) }

func clusterShardedConcurrency(t *testing.T, batched bool) {
	const limit, goroutines, hosts = 600, 16, 4
	cluster := testredis.SharedCluster(t)
	frozen := strategy.ClockFunc(func() time.Time { return conformance.Epoch })
	ctx := context.Background()
	var report strings.Builder
	for _, a := range strategy.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			prefix := testredis.Prefix(t)
			limiters := make([]*ratelimit.Limiter, hosts)
			for h := range limiters {
				plain := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), PoolSize: goroutines})
				t.Cleanup(func() { plain.Close() })
				var cc redis.Scripter = plain
				if batched {
					cc = conformance.Batched(t, plain, batch.WithMaxInFlight(1))
				}
				l, err := ratelimit.New(cc, ratelimit.Config{Algorithm: a, Limit: limit, Window: time.Minute, Shards: 6,
					Prefix: prefix, Timeout: clusterTimeout}, ratelimit.WithClock(frozen), ratelimit.WithObserver(strict{t}))
				if err != nil {
					t.Fatal(err)
				}
				limiters[h] = l
			}
			fmt.Fprintf(&report, "\n%-16s", a)
			for _, c := range []struct {
				name  string
				burst int
				hosts int
			}{{"1 host, burst 1x", 1, 1}, {"1 host, burst 2x", 2, 1}, {"4 hosts, burst 1x", 1, hosts}} {
				key := strings.ReplaceAll(c.name, " ", "")
				var allowed, next atomic.Int64
				var wg sync.WaitGroup
				for g := range goroutines {
					l := limiters[g%c.hosts]
					wg.Go(func() {
						for next.Add(1) <= int64(c.burst*limit) {
							r, err := l.Allow(ctx, key)
							if err != nil {
								t.Error(err)
								return
							}
							if r.Allowed {
								allowed.Add(1)
							}
						}
					})
				}
				wg.Wait()
				got := allowed.Load()
				if got > limit {
					t.Fatalf("%s: allowed %d, above the limit %d", c.name, got, limit)
				}
				if c.burst == 2 && got < limit*98/100 {
					t.Errorf("%s: allowed %d of %d, want at least 98%%", c.name, got, limit)
				}
				p, err := limiters[0].Peek(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if p.Remaining != limit-got {
					t.Errorf("%s: Peek after allowing %d of %d = %+v, want Remaining %d", c.name, got, limit, p, limit-got)
				}
				fmt.Fprintf(&report, " | %s: %d/%d", c.name, got, limit)
			}
		})
	}
	t.Logf("one subject, limit %d/min sharded 6 ways, %d goroutines, frozen clock, allowed/limit:%s", limit, goroutines, report.String())
}
