// Package rls is a rate-limit service for Envoy: a Server implementing
// envoy.service.ratelimit.v3.RateLimitService on github.com/ratekit/ratelimit,
// configured by envoyproxy/ratelimit's YAML descriptor files.
//
//	build := rls.NewBuilder(rdb, "rls:")           // ratelimit.New on rdb, per descriptor
//	cfg, err := rls.Load("config", build)          // a file or a directory; errors name file, line and field
//	srv := rls.NewServer(cfg, rls.WithHeaders(rls.DefaultHeaders))
//	rlsv3.RegisterRateLimitServiceServer(grpcServer, srv)
//	go srv.Watch(ctx, "config", time.Second, build) // reload on change; a bad file keeps the old config
//
// Each descriptor of the configuration with a rate_limit is one
// *ratelimit.Limiter (fixed_window unless its algorithm field names
// another); each request descriptor that matches it is one subject, the
// domain and its entries as matched, stored by the limiter under its
// Prefix (the Builder's prefix, then the algorithm's name). A Config is
// immutable; Server.Reload and SetConfig swap a whole one in atomically.
// The Server and Config are safe for concurrent use.
//
// Serve it on a grpc.Server with stream workers
// (grpc.NewServer(grpc.NumStreamWorkers(64))): a goroutine started per
// request grows its stack on the way down to the Redis call, while a
// worker keeps its grown stack (bench/README.md has what that saves).
//
// The command cmd/ratelimit-rls serves it with flags and environment
// variables; see the module's README for the configuration format.
package rls
