package grpclimit_test

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ratekit/ratelimit/grpclimit"
)

// redisServer is a redis-server process of one test.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// startRedis starts a redis-server on a free loopback port, waits until it
// answers PING and kills it when t ends. A missing binary fails the test:
// the tests need a real Redis and never skip it.
func startRedis(t testing.TB) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server not found on PATH: install it (Debian: apt-get install redis-server) or run ./scripts/test.sh, which does")
	}
	for attempt := 0; attempt < 5; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		s := &redisServer{addr: "127.0.0.1:" + strconv.Itoa(port), done: make(chan struct{})}
		s.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--protected-mode", "no", "--dir", t.TempDir())
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the test binary
		if err := s.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { s.cmd.Wait(); close(s.done) }()
		t.Cleanup(s.kill)
		if s.ready() {
			return s
		}
		s.kill() // the port was taken meanwhile, say: try another
	}
	t.Fatal("redis-server did not start")
	return nil
}

func (s *redisServer) ready() bool {
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		select {
		case <-s.done:
			return false
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// kill stops the server and waits until it has exited.
func (s *redisServer) kill() {
	s.cmd.Process.Kill()
	<-s.done
}

// client returns a client of s, closed when t ends.
func (s *redisServer) client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// testService answers the calls of grpc.testing.TestService that the tests
// make; each handler reports the decision it saw in the trailer "remaining".
type testService struct {
	testgrpc.UnimplementedTestServiceServer
}

func reportResult(ctx context.Context, setTrailer func(metadata.MD)) {
	if res, ok := grpclimit.ResultFromContext(ctx); ok {
		setTrailer(metadata.Pairs("remaining", strconv.FormatInt(res.Remaining, 10)))
	}
}

func (testService) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	reportResult(ctx, func(md metadata.MD) { grpc.SetTrailer(ctx, md) })
	return &testgrpc.Empty{}, nil
}

func (testService) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	reportResult(ctx, func(md metadata.MD) { grpc.SetTrailer(ctx, md) })
	return &testgrpc.SimpleResponse{}, nil
}

func (testService) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, stream testgrpc.TestService_StreamingOutputCallServer) error {
	reportResult(stream.Context(), stream.SetTrailer)
	for range req.GetResponseParameters() {
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
	return nil
}

// client is a client of the test service and its connection.
type client struct {
	testgrpc.TestServiceClient
	conn *grpc.ClientConn
}

// serve starts a gRPC server with the test service on a loopback TCP port,
// with opts (the interceptors), and returns a client of it dialed with
// copts; both stop when t ends.
func serve(t testing.TB, copts []grpc.DialOption, opts ...grpc.ServerOption) client {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(srv, testService{})
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, copts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return client{testgrpc.NewTestServiceClient(conn), conn}
}

// serveWith is serve with icpt's interceptors installed.
func serveWith(t *testing.T, icpt *grpclimit.Interceptor) client {
	t.Helper()
	return serve(t, nil, grpc.ChainUnaryInterceptor(icpt.Unary()), grpc.ChainStreamInterceptor(icpt.Stream()))
}

// reply is what a client saw of one unary call.
type reply struct {
	err     error
	header  metadata.MD
	trailer metadata.MD
}

func (r reply) code() string { return status.Code(r.err).String() }

// empty makes one EmptyCall with md as outgoing metadata.
func empty(t *testing.T, c testgrpc.TestServiceClient, md ...string) reply {
	t.Helper()
	var r reply
	ctx := metadata.AppendToOutgoingContext(t.Context(), md...)
	_, r.err = c.EmptyCall(ctx, &testgrpc.Empty{}, grpc.Header(&r.header), grpc.Trailer(&r.trailer))
	return r
}

// details returns the RetryInfo and QuotaFailure details of err (nil when
// absent) and fails t on any other detail.
func details(t *testing.T, err error) (*errdetails.RetryInfo, *errdetails.QuotaFailure) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("error %v is not a status", err)
	}
	var ri *errdetails.RetryInfo
	var qf *errdetails.QuotaFailure
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			ri = d
		case *errdetails.QuotaFailure:
			qf = d
		case error:
			t.Fatalf("undecodable detail: %v", d)
		default:
			t.Fatalf("unexpected detail %T", d)
		}
	}
	return ri, qf
}

var errTest = errors.New("test: no key")
