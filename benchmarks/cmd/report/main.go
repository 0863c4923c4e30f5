// Command report measures every rate-limiting strategy of the module side
// by side, with the peer libraries and a trivial EVALSHA floor, and prints
// what each costs and gives up, then which to pick for what, from the
// numbers it just measured: decisions per second at several concurrencies
// and their ratio to the floor, latency, round trips, Redis commands and CPU
// per decision, bytes per subject, precision, and the in-process twins'
// speed.
//
// By default it starts a throwaway redis-server (7.0 or newer, from PATH or
// $REDIS_SERVER) on a free loopback port and measures everything there:
//
//	go -C benchmarks run ./cmd/report
//
// Without a redis-server it falls back to an embedded miniredis and reports
// precision and the in-process twins only, saying so: miniredis interprets
// Lua in Go, so its speed would mislead. Other backends:
//
//	go run ./cmd/report -redis 127.0.0.1:6379
//	go run ./cmd/report -cluster 10.0.0.1:7000,10.0.0.2:7000
//	go run ./cmd/report -start-cluster 3
//	go run ./cmd/report -miniredis            # precision only, no server
//	go run ./cmd/report -chart chart.svg -json-file report.json -goals
//
// With -replay it measures nothing: it replays a traffic trace, generated
// or read from a CSV file, through two policies on local twins with a
// manual clock, and prints how often the candidate's decisions agree with
// the enforced one's (the matrix package compare counts on live traffic):
//
//	go run ./cmd/report -replay boundary \
//	    -enforced '{"algorithm":"fixed_window","limit":100,"window":"1m"}' \
//	    -candidate '{"algorithm":"sliding_log","limit":100,"window":"1m"}'
//	go run ./cmd/report -replay trace.csv -enforced '...' -candidate '...'
//
// The report writes only keys that carry its run's token (and one random
// subject per memory probe, checked absent first) and deletes them when it
// is done. It never flushes anything.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/ratekit/ratelimit/benchmarks/internal/report"
	"github.com/ratekit/ratelimit/internal/testredis"
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
		addr       = fs.String("redis", "", "measure on the Redis at `host:port` instead of one the report starts")
		cluster    = fs.String("cluster", "", "measure on the Redis Cluster reached through `addr,addr,...`")
		startRedis = fs.Bool("start-redis", false, "start a throwaway redis-server on a free loopback port, and fail if there is none (the default tries this, then falls back to miniredis)")
		useMini    = fs.Bool("miniredis", false, "measure precision only, on an embedded miniredis, even when a redis-server is available")
		startClus  = fs.Int("start-cluster", 0, "start a throwaway Redis Cluster of `n` masters on loopback ports and measure on it")
		duration   = fs.Duration("duration", 30*time.Second, "total time of the interleaved speed slices (the whole run takes about twice this)")
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
		showGoals  = fs.Bool("goals", false, "also print the project's own performance targets and whether this run met them")
		quiet      = fs.Bool("q", false, "no progress line on stderr")

		replayTrace  = fs.String("replay", "", "replay a trace through the -enforced and -candidate policies on local twins and print their agreement matrix, instead of measuring: a generated `shape` (steady, bursty, many, boundary) or a CSV file of \"ms,subject,cost\" lines")
		enforcedPol  = fs.String("enforced", "", "-replay: the enforced policy, a JSON `object` such as '{\"algorithm\":\"fixed_window\",\"limit\":100,\"window\":\"1m\"}'")
		candidatePol = fs.String("candidate", "", "-replay: the candidate policy, a JSON `object`")
		replaySubj   = fs.Int("replay-subjects", 10, "-replay of a shape: the subjects of the generated trace")
		replayWin    = fs.Int("replay-windows", 10, "-replay of a shape: the generated trace's length, in windows of the enforced policy")
		seed         = fs.Uint64("seed", 1, "-replay of a shape: the seed of the generated trace")
	)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `report measures every rate-limiting strategy of github.com/ratekit/ratelimit
side by side, with three peer libraries and a trivial-script floor: speed,
latency, Redis work and memory per subject, and precision (how far above
the limit each lets traffic through), then says which to pick for what.

By default it starts its own redis-server (7.0 or newer) on a free loopback
port, measures there (about a minute), and stops it. Without a redis-server
it measures precision only, on an embedded miniredis, and says so.

usage: go -C benchmarks run ./cmd/report [flags]

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "report: "+format+"\n", a...)
		return 1
	}
	if *replayTrace != "" {
		err := runReplay(ctx, replayOptions{trace: *replayTrace, enforced: *enforcedPol, candidate: *candidatePol,
			subjects: *replaySubj, windows: *replayWin, seed: *seed, json: *jsonOut}, stdout)
		if err != nil {
			return fail("%v", err)
		}
		return 0
	}
	if *enforcedPol != "" || *candidatePol != "" {
		return fail("-enforced and -candidate go with -replay")
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
	for _, set := range []bool{*addr != "", *cluster != "", *startRedis, *startClus > 0, *useMini} {
		if set {
			chosen++
		}
	}
	if chosen > 1 {
		return fail("choose one of -redis, -cluster, -start-redis, -start-cluster, -miniredis")
	}
	origin := ""
	if chosen == 0 { // the default: a redis-server of our own when there is one
		if err := haveRedis(); err == nil {
			*startRedis = true
		} else {
			fmt.Fprintf(stderr, "report: no redis-server found (%v)\nreport: measuring precision only, on an embedded miniredis\n", err)
			*useMini = true
		}
	}
	switch {
	case *addr != "":
		o.Backend, o.Addrs = report.BackendRedis, []string{*addr}
	case *cluster != "":
		o.Backend, o.Addrs = report.BackendCluster, strings.Split(*cluster, ",")
	case *startRedis:
		s, err := testredis.StartProcess()
		if err != nil {
			return fail("%v", err)
		}
		defer s.Close()
		o.Backend, o.Addrs = report.BackendRedis, []string{s.Addr}
		origin = "started by the report on " + s.Addr
	case *startClus > 0:
		c, err := testredis.StartClusterOf(*startClus)
		if err != nil {
			return fail("%v", err)
		}
		defer c.Close()
		o.Backend, o.Addrs = report.BackendCluster, c.Addrs()
		origin = "started by the report"
	case *useMini:
		o.Backend, o.PrecisionOnly = report.BackendMiniredis, true
		origin = "embedded in the report: precision only"
	}
	if *chart != "" && (o.Backend == "" || o.PrecisionOnly) {
		return fail("-chart plots bytes per subject, which only a real Redis measures: install redis-server, or use -redis, -cluster or -start-cluster")
	}
	if *chart != "" && !strings.HasSuffix(*chart, ".svg") {
		return fail("-chart writes SVG: name the file *.svg")
	}
	r, err := report.Run(ctx, o)
	if err != nil {
		return fail("%v", err)
	}
	r.Origin, r.Commit = origin, commit()
	if !*showGoals {
		r.Goals = nil // the project's own targets mean little to a user
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

// commit names the commit of the working tree the report runs in, with
// "+ uncommitted changes" when it is not clean; "" outside a git checkout.
func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	// the report's own outputs (make report rewrites them) do not count
	st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--",
		":/", ":(exclude,top)benchmarks/report.txt", ":(exclude,top)benchmarks/chart.svg").Output()
	if err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += " + uncommitted changes"
	}
	return c
}

// haveRedis reports whether a redis-server can be started: the one
// testredis.Binary names exists and is executable.
func haveRedis() error {
	p, err := testredis.Binary()
	if err != nil {
		return err
	}
	if _, err := exec.LookPath(p); err != nil {
		return fmt.Errorf("redis-server %s: %w", p, err)
	}
	return nil
}
