package main

import (
	"context"
	"flag"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/envoyproxy/ratelimit/src/service_cmd/runner"
	"github.com/envoyproxy/ratelimit/src/settings"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/rls"
)

// serveEnvoy runs envoyproxy/ratelimit as its own command does, set up by
// the environment (see its README), until SIGTERM.
func serveEnvoy() {
	profile()
	r := runner.NewRunner(settings.NewSettings())
	go func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
		<-ch
		r.Stop()
		os.Exit(0)
	}()
	r.Run()
}

// profile starts a CPU profile of this server process if BENCH_CPUPROFILE
// names a file (see -profile): it is written there on SIGUSR1, which the
// bench sends before it stops the server (envoyproxy/ratelimit exits at
// SIGTERM from a goroutine of its own, leaving no time to write it).
func profile() {
	name := os.Getenv("BENCH_CPUPROFILE")
	if name == "" {
		return
	}
	f, err := os.Create(name + ".part")
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		log.Fatal(err)
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	go func() {
		<-ch
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			log.Fatal(err)
		}
		if err := os.Rename(name+".part", name); err != nil {
			log.Fatal(err)
		}
	}()
}

// streamWorkers is cmd/ratelimit-rls's default -stream-workers.
const streamWorkers = 64

// serveRLS runs our server as cmd/ratelimit-rls does (the same Redis
// client settings and default stream workers), without metrics, until
// SIGTERM.
func serveRLS(args []string) {
	fs := flag.NewFlagSet("serve-rls", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:8081", "")
	redisAddr := fs.String("redis", "127.0.0.1:6379", "")
	config := fs.String("config", "", "")
	useBatch := fs.Bool("batch", false, "")
	workers := fs.Uint("stream-workers", streamWorkers, "")
	denyCache := fs.Int("deny-cache", 0, "")
	fs.Parse(args)
	profile()
	rdb := redis.NewClient(&redis.Options{
		Addr: *redisAddr, ContextTimeoutEnabled: true,
		ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1,
	})
	var sc redis.Scripter = rdb
	if *useBatch {
		b, err := batch.New(rdb)
		if err != nil {
			log.Fatal(err)
		}
		sc = b
	}
	var obs []ratelimit.Option
	if *denyCache > 0 {
		obs = append(obs, ratelimit.WithDenyCache(*denyCache))
	}
	build := rls.NewBuilder(sc, "rls:", obs...)
	srv := rls.NewServer(nil)
	if err := srv.Reload(*config, build); err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	gs := grpc.NewServer(grpc.NumStreamWorkers(uint32(*workers)))
	rlsv3.RegisterRateLimitServiceServer(gs, srv)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() { <-ctx.Done(); gs.Stop() }()
	gs.Serve(lis)
}
