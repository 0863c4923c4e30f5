package httplimit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/httplimit"
)

// Two logins a minute per client IP, behind a reverse proxy at 10.0.0.1
// that appends the client's address to X-Forwarded-For.
func Example() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)) // the Redis server's clock decides
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	limiter, err := ratelimit.New(rdb, ratelimit.Config{
		Name: "login", Algorithm: ratelimit.SlidingLog, Limit: 2, Window: time.Minute,
		Timeout: 10 * time.Second, // generous: the example must never degrade on a loaded machine
	})
	if err != nil {
		panic(err)
	}
	mw, err := httplimit.New(limiter, httplimit.WithTrustedProxies("X-Forwarded-For", "10.0.0.0/8"))
	if err != nil {
		panic(err)
	}
	login := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "welcome\n")
	}))

	for i := 1; i <= 3; i++ {
		r := httptest.NewRequest("POST", "/login", nil)
		r.RemoteAddr = "10.0.0.1:51234"                         // the proxy
		r.Header.Set("X-Forwarded-For", "6.6.6.6, 203.0.113.7") // a forged hop, then the client
		w := httptest.NewRecorder()
		login.ServeHTTP(w, r)
		fmt.Printf("%d %s | RateLimit-Policy: %s | RateLimit: %s | Retry-After: %q\n", i, w.Result().Status,
			w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	fmt.Println(mr.Keys())
	// Output:
	// 1 200 OK | RateLimit-Policy: "login";q=2;w=60 | RateLimit: "login";r=1;t=60 | Retry-After: ""
	// 2 200 OK | RateLimit-Policy: "login";q=2;w=60 | RateLimit: "login";r=0;t=60 | Retry-After: ""
	// 3 429 Too Many Requests | RateLimit-Policy: "login";q=2;w=60 | RateLimit: "login";r=0;t=60 | Retry-After: "60"
	// [rl:sl:{ip:203.0.113.7}]
}

// Forwarding headers are believed only from trusted proxies, right-most
// untrusted hop first.
func ExampleClientIP() {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Forwarded-For", "6.6.6.6, 203.0.113.7, 10.0.0.2")

	r.RemoteAddr = "10.0.0.1:51234" // a trusted proxy
	ip, _ := httplimit.ClientIP(r, "X-Forwarded-For", proxies)
	fmt.Println("via the proxy:", ip)

	r.RemoteAddr = "198.51.100.9:51234" // anyone else: the header may be forged
	ip, _ = httplimit.ClientIP(r, "X-Forwarded-For", proxies)
	fmt.Println("direct:", ip)
	// Output:
	// via the proxy: 203.0.113.7
	// direct: 198.51.100.9
}
