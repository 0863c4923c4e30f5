// Package routers shows httplimit's middleware on chi, Echo and Gin,
// through their net/http adapters. It is a module of its own, so that the
// library never requires a router; its examples are compiled and run by the
// tests. Copy what you need.
//
//   - chi takes net/http middleware as it is: r.Use(mw.Handler), or
//     r.With(mw.Handler) for one route.
//   - Echo adapts it with echo.WrapMiddleware(mw.Handler), for e.Use, a
//     group or one route.
//   - Gin has no adapter for net/http middleware: Gin (below) is one, in
//     a dozen lines.
package routers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ratekit/ratelimit/httplimit"
)

// Gin returns mw as Gin middleware: an allowed request goes on down the
// chain (c.Next) with the rate-limit headers set and the decision in its
// context (httplimit.ResultFromContext); a denied one, or one the
// middleware's ErrorHandler answers, is aborted after the middleware wrote
// its response.
func Gin(mw *httplimit.Middleware) gin.HandlerFunc {
	return func(c *gin.Context) {
		passed := false
		mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			passed = true
			c.Request = r // carries the decision
			c.Next()
		})).ServeHTTP(c.Writer, c.Request)
		if !passed {
			c.Abort()
		}
	}
}
