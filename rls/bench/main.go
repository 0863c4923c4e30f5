// Command bench measures ratelimit-rls side by side with
// envoyproxy/ratelimit (built from its module, at the version go.mod
// requires) on one redis-server that it starts itself on a loopback port:
// the same descriptors, the same load generator (ours, over the generated
// RLS v3 client), at each concurrency. It prints, per server and
// concurrency, decisions/s, p50 and p99 latency, and the CPU the Redis
// server and the rate-limit server spent per decision.
//
//	go run . -duration 3s -c 8,64,256
//
// Each server runs in a process of its own (this binary, re-executed), so
// that the load generator's CPU is not counted as the server's. On a
// shared or small machine the load generator, the server and Redis
// compete for the same cores: compare the ratios of one run, not
// absolute figures across machines.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
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
	env       []string
}

var variants = []variant{
	{name: "envoyproxy/ratelimit (fixed window)", envoy: true},
	{name: "envoyproxy/ratelimit, REDIS_PIPELINE_WINDOW=150us", envoy: true, env: []string{"REDIS_PIPELINE_WINDOW=150us"}},
	{name: "rls fixed_window", algorithm: "fixed_window"},
	{name: "rls fixed_window, batched", algorithm: "fixed_window", batch: true},
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
	duration := flag.Duration("duration", 3*time.Second, "measuring time per cell (after a warm-up of a third of it)")
	conc := flag.String("c", "8,64,256", "concurrencies, comma-separated")
	only := flag.String("only", "", "measure only the variants whose name contains this")
	subjects := flag.Int("subjects", 10000, "distinct descriptor values the load spreads over")
	rpu := flag.Int("rpu", 100, "requests_per_unit (per second) of each subject")
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
	fmt.Printf("# %d subjects, %d/s each; %v per cell; GOMAXPROCS of the load generator %d\n", *subjects, *rpu, *duration, numCPU())
	fmt.Printf("| server | c | decisions/s | p50 | p99 | over limit | Redis CPU µs/decision | server CPU µs/decision |\n|---|---|---|---|---|---|---|---|\n")
	for _, v := range variants {
		if *only != "" && !strings.Contains(v.name, *only) {
			continue
		}
		if err := measureVariant(rs, v, cs, *duration, *subjects, *rpu); err != nil {
			log.Fatalf("bench: %s: %v", v.name, err)
		}
	}
}

func measureVariant(rs *testredis.Server, v variant, cs []int, d time.Duration, subjects, rpu int) error {
	dir, err := os.MkdirTemp("", "rls-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	port, err := testredis.FreePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var cmd *exec.Cmd
	if v.envoy {
		cfgDir := filepath.Join(dir, "ratelimit", "config")
		if err := os.MkdirAll(cfgDir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(cfgDir, "bench.yaml"), []byte(config(rpu, "")), 0o644); err != nil {
			return err
		}
		ports := make([]int, 2)
		for i := range ports {
			if ports[i], err = testredis.FreePort(); err != nil {
				return err
			}
		}
		cmd = exec.Command(self, "serve-envoy")
		cmd.Env = append(os.Environ(),
			"HOST=127.0.0.1", "PORT="+strconv.Itoa(ports[0]),
			"DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+strconv.Itoa(ports[1]),
			"GRPC_HOST=127.0.0.1", "GRPC_PORT="+strconv.Itoa(port),
			"USE_STATSD=false", "DISABLE_STATS=true", "LOG_LEVEL=error", // no metrics, as ours here
			"RUNTIME_ROOT="+dir, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
			"REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+rs.Addr,
		)
		cmd.Env = append(cmd.Env, v.env...)
	} else {
		file := filepath.Join(dir, "bench.yaml")
		if err := os.WriteFile(file, []byte(config(rpu, v.algorithm)), 0o644); err != nil {
			return err
		}
		cmd = exec.Command(self, "serve-rls", "-addr", addr, "-redis", rs.Addr, "-config", file, "-batch="+strconv.FormatBool(v.batch))
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	lg, err := newLoad(addr)
	if err != nil {
		return err
	}
	defer lg.close()
	if err := lg.ready(context.Background(), 30*time.Second); err != nil {
		return err
	}
	for _, c := range cs {
		if err := flushRedis(rs.Addr); err != nil {
			return err
		}
		lg.run(c, d/3, subjects) // warm-up: connections, scripts loaded
		redisBefore, err := redisCPU(rs.Addr)
		if err != nil {
			return err
		}
		srvBefore := procCPU(cmd.Process.Pid)
		r := lg.run(c, d, subjects)
		redisAfter, err := redisCPU(rs.Addr)
		if err != nil {
			return err
		}
		srvAfter := procCPU(cmd.Process.Pid)
		n := float64(r.decisions)
		fmt.Printf("| %s | %d | %.0f | %s | %s | %.1f%% | %.1f | %.1f |\n", v.name, c, n/r.elapsed.Seconds(),
			round(r.p50), round(r.p99), 100*float64(r.over)/max(n, 1),
			float64((redisAfter-redisBefore).Microseconds())/max(n, 1),
			float64((srvAfter-srvBefore).Microseconds())/max(n, 1))
		if r.errors > 0 {
			fmt.Printf("|   (%d errors, first: %v) |||||||\n", r.errors, r.firstErr)
		}
	}
	return nil
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

func round(d time.Duration) string {
	switch {
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%dµs", d.Microseconds())
	}
}
