package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// load is the load generator: a few gRPC connections to one server,
// shared round-robin by the callers, as a fleet of proxies would open.
type load struct {
	conns   []*grpc.ClientConn
	clients []rlsv3.RateLimitServiceClient
}

const connections = 4

func newLoad(addr string) (*load, error) {
	l := &load{}
	for range connections {
		c, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			l.close()
			return nil, err
		}
		l.conns = append(l.conns, c)
		l.clients = append(l.clients, rlsv3.NewRateLimitServiceClient(c))
	}
	return l, nil
}

func (l *load) close() {
	for _, c := range l.conns {
		c.Close()
	}
}

func request(user string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*commonv3.RateLimitDescriptor{{
		Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "user", Value: user}}}}}
}

// ready waits until the server answers a request with a limit.
func (l *load) ready(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := l.clients[0].ShouldRateLimit(cctx, request("ready"))
		cancel()
		if err == nil && resp.Statuses[0].CurrentLimit != nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server not ready after %v: %v %v", within, resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type result struct {
	decisions, over, errors int64
	firstErr                error
	elapsed                 time.Duration
	p50, p99                time.Duration
}

// run sends requests from c callers for d, each for a random one of
// subjects users, and returns what they measured.
func (l *load) run(c int, d time.Duration, subjects int) result {
	users := make([]string, subjects)
	for i := range users {
		users[i] = "u" + strconv.Itoa(i)
	}
	var over, errs atomic.Int64
	var firstErr atomic.Value
	lat := make([][]time.Duration, c)
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for g := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 42))
			client := l.clients[g%len(l.clients)]
			mine := make([]time.Duration, 0, 4096)
			for {
				t0 := time.Now()
				if t0.After(stop) {
					break
				}
				resp, err := client.ShouldRateLimit(context.Background(), request(users[rng.IntN(len(users))]))
				mine = append(mine, time.Since(t0))
				if err != nil {
					if errs.Add(1) == 1 {
						firstErr.Store(err)
					}
					continue
				}
				if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
					over.Add(1)
				}
			}
			lat[g] = mine
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for _, m := range lat {
		all = append(all, m...)
	}
	slices.Sort(all)
	r := result{decisions: int64(len(all)) - errs.Load(), over: over.Load(), errors: errs.Load(), elapsed: elapsed}
	if e, ok := firstErr.Load().(error); ok {
		r.firstErr = e
	}
	if len(all) > 0 {
		r.p50 = all[len(all)/2]
		r.p99 = all[len(all)*99/100]
	}
	return r
}

// redisCPU is the Redis server's CPU time so far (INFO cpu: used_cpu_sys
// and used_cpu_user, of the main thread and the others).
func redisCPU(addr string) (time.Duration, error) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second)), nil
}

// flushRedis empties the benchmark's own redis-server, which nobody
// else uses, between cells.
func flushRedis(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	return c.FlushAll(context.Background()).Err()
}

// procCPU is the CPU time (user and system) of process pid so far, from
// /proc; 0 where there is none.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64) // utime, field 14
	st, _ := strconv.ParseInt(f[12], 10, 64) // stime, field 15
	const clkTck = 100                       // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / clkTck
}

// selfCPU is this process's CPU time (user and system) so far, from
// getrusage: finer than /proc's clock ticks (procCPU), which a short
// cell's share can stay under.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func numCPU() int { return runtime.GOMAXPROCS(0) }
