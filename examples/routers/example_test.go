package routers_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-chi/chi/v5"
	"github.com/labstack/echo/v4"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/examples/routers"
	"github.com/ratekit/ratelimit/httplimit"
	"github.com/ratekit/ratelimit/strategy"
)

// loginLimits is two logins a minute per client IP. The examples use an
// in-process limiter with a stopped clock so that their output is fixed; a
// service uses ratelimit.New on Redis.
func loginLimits() *httplimit.Middleware {
	stopped := strategy.ClockFunc(func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) })
	limiter, err := ratelimit.New(nil, ratelimit.Config{
		Name: "login", Algorithm: ratelimit.SlidingLog, Limit: 2, Window: time.Minute,
	}, ratelimit.WithClock(stopped))
	if err != nil {
		panic(err)
	}
	mw, err := httplimit.New(limiter)
	if err != nil {
		panic(err)
	}
	return mw
}

// try sends three logins to h and prints what came back.
func try(h http.Handler) {
	for i := 1; i <= 3; i++ {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/login", nil))
		fmt.Printf("%d %d %s | RateLimit: %s\n", i, w.Code, strings.TrimSpace(w.Body.String()), w.Header().Get("RateLimit"))
	}
}

func Example_chi() {
	mw := loginLimits()
	r := chi.NewRouter()
	r.With(mw.Handler).Post("/login", func(w http.ResponseWriter, r *http.Request) { // or r.Use(mw.Handler) for every route
		fmt.Fprint(w, "welcome")
	})
	try(r)
	// Output:
	// 1 200 welcome | RateLimit: "login";r=1;t=60
	// 2 200 welcome | RateLimit: "login";r=0;t=60
	// 3 429 rate limit exceeded | RateLimit: "login";r=0;t=60
}

func Example_echo() {
	mw := loginLimits()
	e := echo.New()
	e.POST("/login", func(c echo.Context) error { // or e.Use(echo.WrapMiddleware(mw.Handler)) for every route
		return c.String(http.StatusOK, "welcome")
	}, echo.WrapMiddleware(mw.Handler))
	try(e)
	// Output:
	// 1 200 welcome | RateLimit: "login";r=1;t=60
	// 2 200 welcome | RateLimit: "login";r=0;t=60
	// 3 429 rate limit exceeded | RateLimit: "login";r=0;t=60
}

func Example_gin() {
	gin.SetMode(gin.ReleaseMode)
	mw := loginLimits()
	r := gin.New()
	r.POST("/login", routers.Gin(mw), func(c *gin.Context) { // or r.Use(routers.Gin(mw)) for every route
		res, _ := httplimit.ResultFromContext(c.Request.Context())
		c.String(http.StatusOK, "welcome, %d left", res.Remaining)
	})
	try(r)
	// Output:
	// 1 200 welcome, 1 left | RateLimit: "login";r=1;t=60
	// 2 200 welcome, 0 left | RateLimit: "login";r=0;t=60
	// 3 429 rate limit exceeded | RateLimit: "login";r=0;t=60
}
