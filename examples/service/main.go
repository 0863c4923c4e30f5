// Command service is a small HTTP service rate-limited per endpoint: the
// policies of policies.json (or of -policies), the httplimit middleware with
// the draft-11 RateLimit headers, and Limiter.Wait pacing the service's own
// calls to an upstream API. It keeps its limits in an embedded miniredis by
// default, or in a real Redis with -redis:
//
//	go run ./examples/service                          # embedded miniredis
//	go run ./examples/service -redis 127.0.0.1:6379    # a real Redis
//	curl -i -X POST localhost:8080/login               # 6th within a minute: 429
//
// Endpoints:
//
//	POST /login   policy "login", per client IP
//	GET  /search  policy "search", per X-API-Key (per client IP without one)
//	POST /upload  policy "upload", per X-API-Key, costing one unit per KiB of body
//	GET  /report  paces its upstream calls with policy "upstream" and Wait
//	GET  /healthz unlimited
//
// SIGHUP reloads the -policies file while the service runs: requests in
// flight finish under the old policies, the next ones get the new, and a
// policy left unchanged keeps its limiter. The log says what changed; a file
// that does not parse, or lacks a policy the service needs, changes nothing
// and the log says why:
//
//	kill -HUP $(pidof service)
//
// SIGINT (Ctrl-C) or SIGTERM (what container runtimes and systemd send)
// stops it gracefully: it stops accepting connections and lets the requests
// in flight finish, for at most 5 seconds.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/httplimit"
)

// DefaultPolicies is the service's configuration when -policies is not
// given: one policy per endpoint, each with the algorithm that suits it.
//
//go:embed policies.json
var DefaultPolicies []byte

// Config is what NewHandler builds the service from.
type Config struct {
	// Policies must hold "login", "search", "upload" and "upstream".
	Policies ratelimit.Policies
	// TrustedProxies are the CIDRs of reverse proxies whose X-Forwarded-For
	// is believed; none: the TCP peer is the client.
	TrustedProxies []string
	// LimiterOptions apply to every limiter (a clock in tests, an observer).
	LimiterOptions []ratelimit.Option
}

// UpstreamKey is the subject under which policy "upstream" paces the
// service's calls to its upstream API: one budget for the whole service.
const UpstreamKey = "upstream-api"

// Required are the policies the service needs, one per rate-limited route.
var Required = []string{"login", "search", "upload", "upstream"}

// Service is the service's routes, rate-limited by a set of policies that
// Reload replaces while it serves.
type Service struct {
	set *ratelimit.Set
	mux *http.ServeMux

	mu  sync.Mutex         // serializes Reload
	cur ratelimit.Policies // the policies in force
}

// NewHandler returns the service's routes, rate-limited with the policies
// of cfg on rdb. It fails when a policy is missing or invalid.
func NewHandler(rdb redis.Scripter, cfg Config) (http.Handler, error) {
	return NewService(rdb, cfg)
}

// NewService is NewHandler, returning the Service so that its policies can
// be reloaded.
func NewService(rdb redis.Scripter, cfg Config) (*Service, error) {
	if err := checkRequired(cfg.Policies); err != nil {
		return nil, err
	}
	set, err := ratelimit.NewSet(rdb, cfg.Policies, cfg.LimiterOptions...)
	if err != nil {
		return nil, err
	}
	var proxies []httplimit.Option
	if len(cfg.TrustedProxies) > 0 {
		proxies = append(proxies, httplimit.WithTrustedProxies("X-Forwarded-For", cfg.TrustedProxies...))
	}
	perAPIKey := httplimit.WithKeyHeader("X-API-Key")
	kib := httplimit.WithCost(func(r *http.Request) int64 { return max(1, (r.ContentLength+1023)/1024) })

	mux := http.NewServeMux()
	routes := []struct {
		pattern, policy string
		h               http.HandlerFunc
		opts            []httplimit.Option
	}{
		{"POST /login", "login", login, nil},
		{"GET /search", "search", search, []httplimit.Option{perAPIKey}},
		{"POST /upload", "upload", upload, []httplimit.Option{perAPIKey, kib}},
	}
	for _, rt := range routes {
		// NewForPolicy looks the policy up per request: Reload reaches it
		m, err := httplimit.NewForPolicy(set, rt.policy, append(rt.opts, proxies...)...)
		if err != nil {
			return nil, err
		}
		mux.Handle(rt.pattern, m.Handler(rt.h))
	}
	mux.HandleFunc("GET /report", report(set))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	return &Service{set: set, mux: mux, cur: maps.Clone(cfg.Policies)}, nil
}

// ServeHTTP serves the service's routes.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Reload puts p in force, atomically: requests in flight finish under the
// old policies, the next ones are decided by the new. Policies that p leaves
// unchanged keep their limiters; changed ones keep their subjects' units in
// Redis unless their algorithm changed. On any error (a required policy
// missing, an invalid one) nothing changes. It returns what changed.
func (s *Service) Reload(p ratelimit.Policies) (Changes, error) {
	if err := checkRequired(p); err != nil {
		return Changes{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.set.Update(p); err != nil {
		return Changes{}, err
	}
	c := diff(s.cur, p)
	s.cur = maps.Clone(p)
	return c, nil
}

// Changes lists, by policy name, what a Reload changed. Each list is
// sorted.
type Changes struct {
	Added, Changed, Removed []string
}

// String returns e.g. "added search; changed login; removed upload", or
// "no change".
func (c Changes) String() string {
	var parts []string
	for _, l := range []struct {
		what  string
		names []string
	}{{"added", c.Added}, {"changed", c.Changed}, {"removed", c.Removed}} {
		if len(l.names) > 0 {
			parts = append(parts, l.what+" "+strings.Join(l.names, ", "))
		}
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, "; ")
}

// diff returns what replacing old with next changes.
func diff(old, next ratelimit.Policies) Changes {
	var c Changes
	for _, name := range slices.Sorted(maps.Keys(old)) {
		n, ok := next[name]
		switch {
		case !ok:
			c.Removed = append(c.Removed, name)
		case !reflect.DeepEqual(old[name], n):
			c.Changed = append(c.Changed, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(next)) {
		if _, ok := old[name]; !ok {
			c.Added = append(c.Added, name)
		}
	}
	return c
}

// ReloadFile reads the policy file at path and reloads its policies (see
// Reload): what the service does on SIGHUP.
func (s *Service) ReloadFile(path string) (Changes, error) {
	p, err := readPolicies(path)
	if err != nil {
		return Changes{}, err
	}
	return s.Reload(p)
}

// maxPolicyFile is the largest policy file read: ratelimit refuses
// documents above 1 MiB, so one byte more is enough for it to refuse.
const maxPolicyFile = 1<<20 + 1

// readPolicies reads and decodes the policy file at path.
func readPolicies(path string) (ratelimit.Policies, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPolicyFile))
	if err != nil {
		return nil, err
	}
	return parsePolicies(data)
}

// parsePolicies decodes a policy document.
func parsePolicies(data []byte) (ratelimit.Policies, error) {
	var p ratelimit.Policies
	if err := json.Unmarshal(data, &p); err != nil {
		if se := (*json.SyntaxError)(nil); errors.As(err, &se) {
			return nil, fmt.Errorf("invalid JSON at byte %d: %w", se.Offset, err)
		}
		return nil, err
	}
	return p, nil
}

// checkRequired reports the first policy of Required that p lacks.
func checkRequired(p ratelimit.Policies) error {
	for _, name := range Required {
		if _, ok := p[name]; !ok {
			return fmt.Errorf("policy %q is missing: the service needs %s", name, strings.Join(Required, ", "))
		}
	}
	return nil
}

func login(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "welcome\n") }

func search(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "results for %q\n", r.URL.Query().Get("q"))
}

func upload(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	fmt.Fprintf(w, "stored %d bytes\n", n)
}

// report calls the upstream API, which allows the service only so many
// calls a second: rather than be refused upstream, it waits for its turn,
// at most 5 seconds. It takes policy "upstream" from set per request, so a
// reload reaches it.
func report(set *ratelimit.Set) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		upstream, err := set.Get("upstream")
		if err != nil { // Reload keeps it: cannot happen
			http.Error(w, "no upstream policy", http.StatusInternalServerError)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		start := time.Now()
		if _, err := upstream.Wait(ctx, UpstreamKey); err != nil {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "upstream busy, try again", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "report ready (waited %s for the upstream)\n", time.Since(start).Round(time.Millisecond))
	}
}

// run parses args, starts the service and serves until ctx ends. ready, if
// not nil, is told the address it listens on.
func run(ctx context.Context, args []string, logw io.Writer, ready func(addr string)) error {
	fs := flag.NewFlagSet("service", flag.ContinueOnError)
	fs.SetOutput(logw)
	listen := fs.String("listen", "127.0.0.1:8080", "address to listen on")
	redisAddr := fs.String("redis", "", "Redis address (host:port); empty runs an embedded miniredis")
	policiesPath := fs.String("policies", "", "JSON file of policies; empty uses the built-in policies.json")
	trusted := fs.String("trusted-proxies", "", "comma-separated CIDRs of reverse proxies whose X-Forwarded-For is believed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger := log.New(logw, "service: ", log.LstdFlags)

	policies, err := parsePolicies(DefaultPolicies)
	if *policiesPath != "" {
		policies, err = readPolicies(*policiesPath)
	}
	if err != nil {
		return err
	}
	cfg := Config{Policies: policies}
	if *trusted != "" {
		cfg.TrustedProxies = strings.Split(*trusted, ",")
	}

	addr := *redisAddr
	if addr == "" {
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			return err
		}
		defer mr.Close()
		addr = mr.Addr()
		logger.Printf("limits kept in an embedded miniredis (use -redis host:port for a real Redis)")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()

	svc, err := NewService(rdb, cfg)
	if err != nil {
		return err
	}
	// SIGHUP reloads the policy file; registered before the service says
	// it listens, so that a SIGHUP never finds the default action (exit).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: svc, ReadHeaderTimeout: 10 * time.Second}
	logger.Printf("listening on http://%s (policies: %s)", ln.Addr(), strings.Join(slices.Sorted(maps.Keys(policies)), ", "))
	if ready != nil {
		ready(ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	for done := false; !done; {
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			done = true
		case <-hup:
			reload(svc, *policiesPath, logger)
		}
	}
	logger.Printf("shutting down: finishing the requests in flight")
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	logger.Printf("stopped")
	return nil
}

// reload is what the service does on SIGHUP: reload the policy file at
// path, and log what changed, or why it keeps the policies in force.
func reload(svc *Service, path string, logger *log.Logger) {
	if path == "" {
		logger.Printf("SIGHUP: nothing to reload: the service runs the built-in policies (start it with -policies file)")
		return
	}
	changes, err := svc.ReloadFile(path)
	if err != nil {
		logger.Printf("SIGHUP: keeping the policies in force: %s: %v", path, err)
		return
	}
	logger.Printf("SIGHUP: reloaded %s: %s", path, changes)
}

// stopSignals end the service gracefully: Ctrl-C, and the signal that
// container runtimes, systemd and kill send by default.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "service:", err)
		os.Exit(1)
	}
}
