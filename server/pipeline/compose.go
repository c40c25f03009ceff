package pipeline

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// composed serves an Echo's routes inside middleware composed once. Echo's own e.Pre and e.Use
// compose their chains again on every request (a closure per layer per request, and one more
// for routing); this runs the same order from one chain built up front: pre, routing (Echo's
// router, so its 404 and 405 handlers too), use, the route's handler.
type composed struct {
	e     *echo.Echo
	chain echo.HandlerFunc
}

// Compose serves e's routes inside the layers: pre before routing, use after it, in order.
func Compose(e *echo.Echo, pre, use []echo.MiddlewareFunc) http.Handler {
	h := func(c echo.Context) error { return c.Handler()(c) }
	for i := len(use) - 1; i >= 0; i-- {
		h = use[i](h)
	}
	h = routeThen(e, h)
	for i := len(pre) - 1; i >= 0; i-- {
		h = pre[i](h)
	}
	return &composed{e: e, chain: h}
}

// routeThen finds the request's route (as the pre layers left the request) and goes on.
func routeThen(e *echo.Echo, next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		e.Router().Find(r.Method, echo.GetPath(r), c)
		return next(c)
	}
}

func (h *composed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := h.e.AcquireContext()
	c.Reset(r, w)
	if err := h.chain(c); err != nil {
		h.e.HTTPErrorHandler(err, c)
	}
	h.e.ReleaseContext(c)
}
