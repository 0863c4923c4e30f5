// Command report measures every rate-limiting strategy of the module side
// by side, with the peer libraries and a trivial EVALSHA floor, and prints
// what each costs and gives up: decisions per second at several
// concurrencies and their ratio to the floor, latency, round trips, Redis
// commands and CPU per decision, bytes per subject, precision, and the
// local twins' speed.
//
// By default it runs on an embedded miniredis and needs no server:
//
//	cd benchmarks && go run ./cmd/report
//
// On a real Redis (memory and Redis CPU are measured only there):
//
//	go run ./cmd/report -redis 127.0.0.1:6379
//	go run ./cmd/report -cluster 10.0.0.1:7000,10.0.0.2:7000
//	go run ./cmd/report -start-redis          # starts a throwaway redis-server
//	go run ./cmd/report -start-redis -chart chart.svg -json-file report.json
//
// The report writes only keys that carry its run's token (and one random
// subject per memory probe, checked absent first) and deletes them when it
// is done. It never flushes anything.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/ratekit/ratelimit/benchmarks/internal/redisproc"
	"github.com/ratekit/ratelimit/benchmarks/internal/report"
	"github.com/ratekit/ratelimit/strategy"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		addr       = fs.String("redis", "", "measure on the Redis at `host:port` instead of an embedded miniredis")
		cluster    = fs.String("cluster", "", "measure on the Redis Cluster reached through `addr,addr,...`")
		startRedis = fs.Bool("start-redis", false, "start a throwaway redis-server on a free loopback port and measure on it")
		startClus  = fs.Int("start-cluster", 0, "start a throwaway Redis Cluster of `n` masters on loopback ports and measure on it")
		duration   = fs.Duration("duration", 30*time.Second, "total time of the interleaved speed slices")
		rounds     = fs.Int("rounds", 5, "times each (target, concurrency) cell is visited")
		concList   = fs.String("concurrency", "1,8,64", "comma-separated concurrencies")
		subjects   = fs.Int("subjects", 10000, "distinct subjects in the workload")
		limit      = fs.Int64("limit", 100, "units allowed per window")
		window     = fs.Duration("window", time.Minute, "the limit's window")
		peers      = fs.Bool("peers", true, "measure the peer libraries too (redis_rate, ulule/limiter, mennanov/limiters)")
		localDur   = fs.Duration("local", 300*time.Millisecond, "time per local twin and path (negative: skip)")
		subjBytes  = fs.Int("subject-bytes", 6, "length of the memory probes' subjects, in bytes (>= 4)")
		only       = fs.String("only", "", "comma-separated target names to measure (the floor is always measured)")
		jsonOut    = fs.Bool("json", false, "write JSON to stdout instead of tables")
		jsonFile   = fs.String("json-file", "", "also write the JSON to `file`")
		chart      = fs.String("chart", "", "write an SVG chart of bytes per subject against precision to `file` (needs a real Redis)")
		quiet      = fs.Bool("q", false, "no progress line on stderr")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "report: "+format+"\n", a...)
		return 1
	}
	o := report.Options{Duration: *duration, Rounds: *rounds, Subjects: *subjects, Peers: *peers,
		LocalDuration: *localDur, SubjectBytes: *subjBytes, Limit: strategy.Limit{Limit: *limit, Window: *window}, Progress: stderr}
	if *quiet {
		o.Progress = nil
	}
	for _, c := range strings.Split(*concList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return fail("-concurrency: bad value %q", c)
		}
		o.Concurrency = append(o.Concurrency, n)
	}
	if *only != "" {
		o.Only = strings.Split(*only, ",")
	}
	chosen := 0
	for _, set := range []bool{*addr != "", *cluster != "", *startRedis, *startClus > 0} {
		if set {
			chosen++
		}
	}
	if chosen > 1 {
		return fail("choose one of -redis, -cluster, -start-redis, -start-cluster")
	}
	switch {
	case *addr != "":
		o.Backend, o.Addrs = report.BackendRedis, []string{*addr}
	case *cluster != "":
		o.Backend, o.Addrs = report.BackendCluster, strings.Split(*cluster, ",")
	case *startRedis:
		s, err := redisproc.Start()
		if err != nil {
			return fail("%v", err)
		}
		defer s.Close()
		o.Backend, o.Addrs = report.BackendRedis, []string{s.Addr}
	case *startClus > 0:
		c, err := redisproc.StartCluster(*startClus)
		if err != nil {
			return fail("%v", err)
		}
		defer c.Close()
		o.Backend, o.Addrs = report.BackendCluster, c.Addrs()
	}
	if *chart != "" && o.Backend == "" {
		return fail("-chart plots bytes per subject, which only a real Redis measures: add -redis, -cluster, -start-redis or -start-cluster")
	}
	if *chart != "" && !strings.HasSuffix(*chart, ".svg") {
		return fail("-chart writes SVG: name the file *.svg")
	}
	r, err := report.Run(ctx, o)
	if err != nil {
		return fail("%v", err)
	}
	if *chart != "" {
		if err := writeFile(*chart, r.WriteChart); err != nil {
			return fail("chart: %v", err)
		}
	}
	if *jsonFile != "" {
		if err := writeFile(*jsonFile, r.WriteJSON); err != nil {
			return fail("%v", err)
		}
	}
	if *jsonOut {
		err = r.WriteJSON(stdout)
	} else {
		err = r.WriteTable(stdout)
	}
	if err != nil {
		return fail("%v", err)
	}
	return 0
}

func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
