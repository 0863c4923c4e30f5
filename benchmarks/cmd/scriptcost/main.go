// Command scriptcost counts the machine instructions a redis-server runs
// per decision of each strategy's script, under valgrind's callgrind: a
// count that, unlike time, does not move with the load of the machine, so
// two versions of a script compare exactly.
//
// usage: go -C benchmarks run ./cmd/scriptcost [-requests 1000] [-subjects 100]
//
// It starts redis-server under valgrind --tool=callgrind on a free
// loopback port (both must be on PATH: apt-get install redis-server
// valgrind), and for each strategy, limit 100 per minute, server TIME:
//
//   - batched: one invocation of the script's twin deciding -requests
//     requests over -subjects subjects (what a Batcher sends under load),
//     less one of 10, per request;
//   - direct: -requests / 10 calls of the script each on its own, less
//     none, per call (the network work of each command included).
//
// Every request is allowed: the command refuses -requests and -subjects
// that would bring a subject to the limit. The figures
// are the server's whole work between two callgrind dumps.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/benchmarks/internal/targets"
	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/strategy"
)

func main() {
	requests := flag.Int("requests", 1000, "requests per batched invocation (and 10 times the direct calls)")
	subjects := flag.Int("subjects", 100, "distinct subjects the requests go to")
	flag.Parse()
	if err := run(*requests, *subjects); err != nil {
		fmt.Fprintln(os.Stderr, "scriptcost:", err)
		os.Exit(1)
	}
}

func run(requests, subjects int) error {
	if requests < 20 || subjects < 1 {
		return errors.New("-requests must be at least 20 and -subjects at least 1")
	}
	// each algorithm sends 11 + 10 + requests + requests/10 requests, spread
	// evenly: every one must be allowed (limit 100), or a denial's cheaper
	// path would count
	if per := (21 + requests + requests/10 + subjects - 1) / subjects; per >= 100 {
		return fmt.Errorf("%d requests per subject would reach the limit of 100: more -subjects", per)
	}
	for _, bin := range []string{"valgrind", "callgrind_control", "redis-server"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found: apt-get install redis-server valgrind", bin)
		}
	}
	dir, err := os.MkdirTemp("", "scriptcost")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, addr, err := start(dir)
	if err != nil {
		return err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	rdb := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	defer rdb.Close()

	ctx := context.Background()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "algorithm\tinstructions per request, batched\tinstructions per call, direct\t\n")
	subject := 0
	for _, alg := range targets.Names() {
		st, err := targets.NewStrategy(alg, rdb, strategy.PerMinute(100), "sc:"+string(alg)+":", nil, 0)
		if err != nil {
			return err
		}
		p, ok := st.(engine.Planner)
		if !ok {
			return fmt.Errorf("%s: %T plans no script call", alg, st)
		}
		plan := func(n int) ([]*engine.Call, error) {
			cs := make([]*engine.Call, n)
			for i := range cs {
				subject = (subject + 1) % subjects
				c, err := p.Plan(engine.Req{Op: engine.OpAllow, Key: "u" + strconv.Itoa(subject), N: 1})
				if err != nil {
					return nil, err
				}
				cs[i] = &c
			}
			return cs, nil
		}
		// batched: one invocation of n requests, through the executor
		many := func(n int) error {
			cs, err := plan(n)
			if err != nil {
				return err
			}
			engine.Exec(ctx, rdb, cs)
			return firstErr(cs)
		}
		// direct: n calls, one at a time
		alone := func(n int) error {
			cs, err := plan(n)
			if err != nil {
				return err
			}
			for _, c := range cs {
				*c = engine.Run(ctx, rdb, *c)
			}
			return firstErr(cs)
		}
		if err := many(10); err != nil { // loads the twin
			return fmt.Errorf("%s: %w", alg, err)
		}
		if err := alone(1); err != nil { // loads the script
			return fmt.Errorf("%s: %w", alg, err)
		}
		small, err := count(dir, srv.Process.Pid, func() error { return many(10) })
		if err != nil {
			return fmt.Errorf("%s: %w", alg, err)
		}
		big, err := count(dir, srv.Process.Pid, func() error { return many(requests + 10) })
		if err != nil {
			return fmt.Errorf("%s: %w", alg, err)
		}
		calls := requests / 10
		direct, err := count(dir, srv.Process.Pid, func() error { return alone(calls) })
		if err != nil {
			return fmt.Errorf("%s: %w", alg, err)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", alg, (big-small)/int64(requests), direct/int64(calls))
	}
	return tw.Flush()
}

func firstErr(cs []*engine.Call) error {
	for _, c := range cs {
		if c.Err != nil {
			return c.Err
		}
	}
	return nil
}

// start runs redis-server under callgrind on a free loopback port.
func start(dir string) (*exec.Cmd, string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file="+filepath.Join(dir, "cg.out"),
		"redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	for range 300 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return cmd, addr, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, "", errors.New("redis-server under valgrind did not answer within 30s")
}

// count returns the instructions the server ran during f: callgrind's
// counters zeroed before it and dumped after it.
func count(dir string, pid int, f func() error) (int64, error) {
	if out, err := exec.Command("callgrind_control", "--zero", strconv.Itoa(pid)).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("callgrind_control --zero: %w: %s", err, out)
	}
	if err := f(); err != nil {
		return 0, err
	}
	before, _ := filepath.Glob(filepath.Join(dir, "cg.out*"))
	if out, err := exec.Command("callgrind_control", "--dump", strconv.Itoa(pid)).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("callgrind_control --dump: %w: %s", err, out)
	}
	after, _ := filepath.Glob(filepath.Join(dir, "cg.out*"))
	seen := map[string]bool{}
	for _, p := range before {
		seen[p] = true
	}
	for _, p := range after {
		if !seen[p] {
			defer os.Remove(p)
			return totals(p)
		}
	}
	return 0, errors.New("callgrind wrote no dump")
}

// totals reads the instruction count of a callgrind dump.
func totals(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "totals: "); ok {
			return strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no totals line", path)
}
