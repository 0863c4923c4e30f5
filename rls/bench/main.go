// Command bench measures ratelimit-rls side by side with
// envoyproxy/ratelimit (built from its module, at the version go.mod
// requires) on one redis-server that it starts itself on a loopback port:
// the same descriptors, the same load generator (ours, over the generated
// RLS v3 client), at each concurrency. It prints, per server and
// concurrency, decisions/s, p50 and p99 latency, and the CPU the Redis
// server and the rate-limit server spent per decision.
//
//	go run . -duration 2s -c 8,64,256 -rounds 3
//
// Each server runs in a process of its own (this binary, re-executed), so
// that the load generator's CPU is not counted as the server's. On a
// shared or small machine the load generator, the server and Redis
// compete for the same cores: compare the ratios of one run, not
// absolute figures across machines.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ratekit/ratelimit/internal/testredis"
)

// variant is one server set-up to measure.
type variant struct {
	name      string
	envoy     bool   // envoyproxy/ratelimit; otherwise ours
	algorithm string // ours: the descriptor's algorithm
	batch     bool   // ours: -batch
	noWorkers bool   // ours: -stream-workers 0, a goroutine per request
	denyCache int    // ours: -deny-cache
	env       []string
}

var variants = []variant{
	{name: "envoyproxy/ratelimit (fixed window)", envoy: true},
	{name: "envoyproxy/ratelimit, REDIS_PIPELINE_WINDOW=150us", envoy: true, env: []string{"REDIS_PIPELINE_WINDOW=150us"}},
	{name: "rls fixed_window", algorithm: "fixed_window"},
	{name: "rls fixed_window, batched", algorithm: "fixed_window", batch: true},
	{name: "rls fixed_window, a goroutine per request", algorithm: "fixed_window", noWorkers: true},
	{name: "envoyproxy/ratelimit, LOCAL_CACHE_SIZE_IN_BYTES=1MiB", envoy: true, env: []string{"LOCAL_CACHE_SIZE_IN_BYTES=1048576"}},
	{name: "rls fixed_window, -deny-cache 10000", algorithm: "fixed_window", denyCache: 10000},
	{name: "rls sliding_counter, batched", algorithm: "sliding_counter", batch: true},
	{name: "rls gcra, batched", algorithm: "gcra", batch: true},
	{name: "rls token_bucket, batched", algorithm: "token_bucket", batch: true},
	{name: "rls compact_log, batched", algorithm: "compact_log", batch: true},
	{name: "rls sliding_log, batched", algorithm: "sliding_log", batch: true},
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "serve-envoy":
			serveEnvoy()
			return
		case "serve-rls":
			serveRLS(os.Args[2:])
			return
		}
	}
	duration := flag.Duration("duration", 2*time.Second, "measuring time per cell (after a warm-up of a quarter of it)")
	conc := flag.String("c", "8,64,256", "concurrencies, comma-separated")
	only := flag.String("only", "", "measure only the variants whose name contains this")
	rounds := flag.Int("rounds", 3, "rounds: each cell is measured once a round, the variants interleaved, and the median reported")
	subjects := flag.Int("subjects", 100, "distinct descriptor values the load spreads over")
	rpu := flag.Int("rpu", 100, "requests_per_unit (per second) of each subject")
	profileDir := flag.String("profile", "", "write each server's CPU profile over the whole run to `dir`/<server>.pprof")
	flag.Parse()
	var cs []int
	for _, s := range strings.Split(*conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			log.Fatalf("bench: -c: bad concurrency %q", s)
		}
		cs = append(cs, n)
	}
	rs, err := testredis.StartProcess()
	if err != nil {
		log.Fatalf("bench: %v", err)
	}
	defer rs.Close()
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	for _, v := range variants {
		if *only != "" && !strings.Contains(v.name, *only) {
			continue
		}
		s, err := startServer(rs, v, *rpu, *profileDir)
		if err != nil {
			log.Fatalf("bench: %s: %v", v.name, err)
		}
		servers = append(servers, s)
	}
	type cell struct{ v, c int }
	results := map[cell][]row{}
	for round := range *rounds {
		for ci, c := range cs {
			for vi, s := range servers {
				r, err := s.measure(rs, c, *duration, *subjects)
				if err != nil {
					log.Fatalf("bench: %s: %v", s.v.name, err)
				}
				results[cell{vi, ci}] = append(results[cell{vi, ci}], r)
				fmt.Fprintf(os.Stderr, "bench: round %d, c=%d, %s: %.0f decisions/s\n", round+1, c, s.v.name, r.rate)
			}
		}
	}
	fmt.Printf("%d subjects at %d/s each (fixed window unless named); %v per cell, median of %d interleaved rounds; GOMAXPROCS %d\n\n",
		*subjects, *rpu, *duration, *rounds, numCPU())
	fmt.Printf("| server | c | decisions/s | p50 | p99 | over limit | Redis CPU µs/decision | server CPU µs/decision | load generator CPU µs/decision | errors |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for vi, s := range servers {
		for ci, c := range cs {
			r := median(results[cell{vi, ci}])
			fmt.Printf("| %s | %d | %.0f | %s | %s | %.1f%% | %.1f | %.1f | %.1f | %d |\n", s.v.name, c, r.rate, round(r.p50), round(r.p99), r.over, r.redisCPU, r.srvCPU, r.loadCPU, r.errors)
		}
	}
	// What the cores allow once the load generator has its share: a
	// server and a Redis that cost nothing would reach cores / its CPU
	// per decision.
	var loadCPU []float64
	for _, rs := range results {
		for _, r := range rs {
			loadCPU = append(loadCPU, r.loadCPU)
		}
	}
	fmt.Printf("\nThe load generator's share bounds every row: with a server and a Redis that cost nothing, %d cores would decide at most %s/s at its median CPU per decision.\n",
		numCPU(), bound(numCPU(), loadCPU))
}

// bound is the decisions/s that cores allow when only the load generator
// spends CPU, at the median of its CPU per decision (µs) over the cells.
func bound(cores int, loadCPU []float64) string {
	if len(loadCPU) == 0 {
		return "n/a"
	}
	slices.Sort(loadCPU)
	m := loadCPU[len(loadCPU)/2]
	if m <= 0 {
		return "n/a"
	}
	return strconv.FormatFloat(float64(cores)*1e6/m, 'f', 0, 64)
}

// row is one measured cell.
type row struct {
	rate             float64 // decisions/s
	p50, p99         time.Duration
	over             float64 // % of decisions OVER_LIMIT
	redisCPU, srvCPU float64 // µs per decision
	loadCPU          float64 // µs per decision, the load generator's (this process)
	errors           int64
}

// median is the round with the median rate.
func median(rs []row) row {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b row) int { return cmp.Compare(a.rate, b.rate) })
	return s[len(s)/2]
}

// server is one variant's server process.
type server struct {
	v       variant
	cmd     *exec.Cmd
	lg      *load
	dir     string
	profile string // where the server writes its CPU profile, if anywhere
	done    chan struct{}
	stopped bool
}

func startServer(rs *testredis.Server, v variant, rpu int, profileDir string) (*server, error) {
	dir, err := os.MkdirTemp("", "rls-bench-")
	if err != nil {
		return nil, err
	}
	s := &server{v: v, dir: dir}
	port, err := testredis.FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if v.envoy {
		cfgDir := filepath.Join(dir, "ratelimit", "config")
		if err := os.MkdirAll(cfgDir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(cfgDir, "bench.yaml"), []byte(config(rpu, "")), 0o644); err != nil {
			return nil, err
		}
		ports := make([]int, 2)
		for i := range ports {
			if ports[i], err = testredis.FreePort(); err != nil {
				return nil, err
			}
		}
		s.cmd = exec.Command(self, "serve-envoy")
		s.cmd.Env = append(os.Environ(),
			"HOST=127.0.0.1", "PORT="+strconv.Itoa(ports[0]),
			"DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+strconv.Itoa(ports[1]),
			"GRPC_HOST=127.0.0.1", "GRPC_PORT="+strconv.Itoa(port),
			"USE_STATSD=false", "DISABLE_STATS=true", "LOG_LEVEL=error", // no metrics, as ours here
			"RUNTIME_ROOT="+dir, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
			"REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+rs.Addr,
		)
		s.cmd.Env = append(s.cmd.Env, v.env...)
	} else {
		file := filepath.Join(dir, "bench.yaml")
		if err := os.WriteFile(file, []byte(config(rpu, v.algorithm)), 0o644); err != nil {
			return nil, err
		}
		workers := streamWorkers
		if v.noWorkers {
			workers = 0
		}
		s.cmd = exec.Command(self, "serve-rls", "-addr", addr, "-redis", rs.Addr, "-config", file,
			"-batch="+strconv.FormatBool(v.batch), "-stream-workers="+strconv.Itoa(workers), "-deny-cache="+strconv.Itoa(v.denyCache))
	}
	if profileDir != "" {
		if s.cmd.Env == nil {
			s.cmd.Env = os.Environ()
		}
		s.profile = filepath.Join(profileDir, slug(v.name)+".pprof")
		s.cmd.Env = append(s.cmd.Env, "BENCH_CPUPROFILE="+s.profile)
	}
	s.cmd.Stdout, s.cmd.Stderr = os.Stderr, os.Stderr
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	s.done = make(chan struct{})
	go func() { s.cmd.Wait(); close(s.done) }()
	if s.lg, err = newLoad(addr); err != nil {
		s.stop()
		return nil, err
	}
	if err := s.lg.ready(context.Background(), 30*time.Second); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// stop stops the server (its profile written first); a second call does
// nothing.
func (s *server) stop() {
	if s.stopped {
		return
	}
	s.stopped = true
	if s.lg != nil {
		s.lg.close()
	}
	if s.profile != "" {
		s.cmd.Process.Signal(syscall.SIGUSR1)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(s.profile); err == nil {
				break
			}
		}
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	os.RemoveAll(s.dir)
}

// measure runs one cell on s: Redis emptied, a warm-up, then d of load.
func (s *server) measure(rs *testredis.Server, c int, d time.Duration, subjects int) (row, error) {
	if err := flushRedis(rs.Addr); err != nil {
		return row{}, err
	}
	s.lg.run(c, d/4, subjects) // warm-up: connections, scripts loaded
	redisBefore, err := redisCPU(rs.Addr)
	if err != nil {
		return row{}, err
	}
	srvBefore := procCPU(s.cmd.Process.Pid)
	loadBefore := selfCPU()
	r := s.lg.run(c, d, subjects)
	loadAfter := selfCPU()
	redisAfter, err := redisCPU(rs.Addr)
	if err != nil {
		return row{}, err
	}
	srvAfter := procCPU(s.cmd.Process.Pid)
	n := max(float64(r.decisions), 1)
	if r.errors > 0 {
		fmt.Fprintf(os.Stderr, "bench: %s, c=%d: %d errors, first: %v\n", s.v.name, c, r.errors, r.firstErr)
	}
	return row{
		rate: float64(r.decisions) / r.elapsed.Seconds(), p50: r.p50, p99: r.p99,
		over:     100 * float64(r.over) / n,
		redisCPU: float64((redisAfter - redisBefore).Microseconds()) / n,
		srvCPU:   float64((srvAfter - srvBefore).Microseconds()) / n,
		loadCPU:  float64((loadAfter - loadBefore).Microseconds()) / n,
		errors:   r.errors,
	}, nil
}

// config is the benchmark's descriptors: a per-user limit, as a gateway
// limits by a header or the client address. algorithm "" is
// envoyproxy/ratelimit's file, which refuses fields it does not know.
func config(rpu int, algorithm string) string {
	alg := ""
	if algorithm != "" {
		alg = ", algorithm: " + algorithm
	}
	return fmt.Sprintf("domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: %d%s}\n", rpu, alg)
}

// slug is name as a file name: letters and digits, the rest '-'.
func slug(name string) string {
	return strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, name), "-")
}

func round(d time.Duration) string {
	switch {
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%dµs", d.Microseconds())
	}
}
