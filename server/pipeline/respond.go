package pipeline

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/labstack/echo/v4"
)

// Cache policies of the contract: driver profiles change rarely and may be reused for a minute;
// everything else must be revalidated, which the ETag makes cheap.
const (
	cacheRevalidate    = "private, max-age=0, must-revalidate"
	cacheDriverProfile = "private, max-age=60"
)

func cachePolicy(path string) string {
	if path == "/v1/drivers/{driverId}" {
		return cacheDriverProfile
	}
	return cacheRevalidate
}

// Header values that many answers carry, made once. net/http only reads a header's values, and
// Header.Set and Header.Add never write into a slice they find (Add appends to a full one, which
// copies it), so answers can share them: a GET saves an allocation per header.
var (
	headerVaryAuthorization = []string{"Authorization"}
)

// bufferPool recycles response buffers; a GET answer is held whole to compute its ETag.
var bufferPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuffer is the largest buffer bufferPool keeps: a page of the longest list is far
// smaller, and a rare larger answer's buffer is left to the collector rather than kept for
// every later request.
const maxPooledBuffer = 256 << 10

// Static is an answer's body that never changes (an embedded document), with its ETag
// computed once.
type Static struct {
	Body []byte
	ETag string
}

// NewStatic makes body, which must never change, a Static.
func NewStatic(body []byte) Static { return Static{Body: body, ETag: StrongETag(body)} }

// WriteStatic writes s as the answer's body. A GET answer held for its ETag (Respond) refers
// to s instead of copying it, so an answer a client is slow to read, or never reads, keeps no
// copy of a large document alive.
func WriteStatic(w http.ResponseWriter, s Static) error {
	if r, ok := w.(*echo.Response); ok {
		if held, ok := r.Writer.(*bufferedResponse); ok && held.canHoldStatic() {
			if !r.Committed { // as echo.Response.Write does
				r.WriteHeader(cmp.Or(r.Status, http.StatusOK))
			}
			held.static = &s
			r.Size += int64(len(s.Body))
			return nil
		}
	}
	_, err := w.Write(s.Body)
	return err
}

// Respond is the outermost layer of every request: it names the request, renders errors
// through the boundary, and finishes GET answers with their validators and cache headers.
// HEAD is served as GET without the body.
func (pl *Pipeline) Respond(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		head := req.Method == http.MethodHead
		if head {
			// Route and validate HEAD exactly as GET. Echo routes on the request it was
			// handed, so change that one, before any copy is made.
			req.Method = http.MethodGet
		}
		requestID := NewRequestID()
		// A request the server has begun runs to its end even if the client goes away: a
		// write commits or rolls back whole, and its Idempotency-Key then replays the answer
		// to the retry. So the handlers get a context the client's disconnect does not
		// cancel. That also spares database/sql a watcher goroutine per query and per
		// transaction, which it starts for every cancellable context (measured in
		// tests/ridebench/README.md). The gate bounds the request's wait for the database
		// with a value the store reads instead (store.WithDeadline).
		ctx := newRequestContext(req.Context(), requestID)
		c.SetRequest(req.WithContext(ctx))
		res := c.Response()
		res.Header()[headerRequestID] = []string{requestID}

		pl.markDeprecated(req, res.Header())
		if req.Method != http.MethodGet || IsUpgrade(req) {
			// Answered as written: a write, or a socket, whose connection its handler takes.
			res.Writer = stampedWriter{ResponseWriter: res.Writer, requestID: requestID}
			if err := next(c); err != nil {
				pl.Render(err, c)
			}
			return nil
		}

		held := &bufferedResponse{ResponseWriter: res.Writer, body: bufferPool.Get().(*bytes.Buffer)}
		defer func() {
			if held.body.Cap() <= maxPooledBuffer {
				held.body.Reset()
				bufferPool.Put(held.body)
			}
		}()
		original := res.Writer
		res.Writer = held
		if err := next(c); err != nil {
			pl.Render(err, c)
		}
		res.Writer = original
		if held.streaming {
			return nil // sent as it was written
		}

		header := res.Header()
		stampRequestID(header, requestID)
		status := held.statusCode()
		body := held.bytes()
		if status == http.StatusOK {
			etag := held.etag()
			header["Etag"] = []string{etag} // canonical already: Set would make the key anew
			header["Vary"] = headerVaryAuthorization
			if info := ctx.state.operation; info != nil {
				header["Cache-Control"] = info.cacheControl
			}
			if etagMatches(c.Request().Header.Values("If-None-Match"), etag) {
				settleNotModified(c.Request().Context(), header) // a 304 costs no budget
				header.Del("Content-Type")
				header.Del("Content-Length")
				original.WriteHeader(http.StatusNotModified)
				return nil
			}
		}
		if denied := overdrawn(c.Request().Context()); denied != nil {
			// The bucket was empty: the request ran only to learn whether it was a 304.
			keepOnlyRateLimitHeaders(header)
			res.Committed = false
			pl.Render(denied, c)
			return nil
		}
		header.Set("Content-Length", strconv.Itoa(len(body)))
		original.WriteHeader(status)
		if !head {
			_, _ = original.Write(body)
		}
		return nil
	}
}

// stampedWriter sets X-Request-Id as the status line goes out, after generated code has set
// every declared header (an empty X-Request-Id among them) from its typed response struct.
type stampedWriter struct {
	http.ResponseWriter
	requestID string
}

func (w stampedWriter) WriteHeader(status int) {
	stampRequestID(w.Header(), w.requestID)
	w.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the connection (a socket's upgrade hijacks it).
func (w stampedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// DeprecatedPath is a path kept under an old spelling (Config.Deprecated).
type DeprecatedPath struct {
	// Prefix is the old spelling, e.g. /v1/webhook_endpoints.
	Prefix string
	// Successor is the current spelling that replaces Prefix in the Link header.
	Successor string
	// Deprecation is the header's value (RFC 9745: @ and the Unix seconds of the date).
	Deprecation string
}

// markDeprecated stamps Deprecation and Link on every answer of a deprecated path, before any
// layer can refuse the request.
func (pl *Pipeline) markDeprecated(req *http.Request, h http.Header) {
	if len(pl.deprecated) == 0 {
		return
	}
	path := req.URL.EscapedPath()
	for _, d := range pl.deprecated {
		if strings.HasPrefix(path, d.Prefix) {
			h.Set("Deprecation", d.Deprecation)
			h.Set("Link", d.SuccessorLink(path))
			return
		}
	}
}

// SuccessorLink is the Link header of an answer on escapedPath (a header carries no raw bytes
// of a path): the same path spelt the current way.
func (d DeprecatedPath) SuccessorLink(escapedPath string) string {
	return "<" + strings.Replace(escapedPath, d.Prefix, d.Successor, 1) + `>; rel="successor-version"`
}

// stampRequestID repairs the header after generated code, which sets every declared header
// from its typed response struct, wrote an empty X-Request-Id.
func stampRequestID(h http.Header, id string) {
	if v := h[headerRequestID]; len(v) == 1 && v[0] == id {
		return // still the value respond set
	}
	h.Set(headerRequestID, id)
}

// StrongETag is the validator of a representation: a strong ETag over its exact bytes, the
// 64-bit xxHash of them. That is plenty to tell versions of one resource apart by chance, and
// the same on every replica, and far cheaper than a cryptographic hash over a page of trips.
// Nothing relies on the tag being unforgeable: a
// caller who could make two versions of a resource collide could only confuse their own cache.
func StrongETag(body []byte) string {
	var sum [8]byte
	binary.BigEndian.PutUint64(sum[:], xxhash.Sum64(body))
	var tag [1 + 2*len(sum) + 1]byte
	tag[0], tag[len(tag)-1] = '"', '"'
	hex.Encode(tag[1:len(tag)-1], sum[:])
	return string(tag[:])
}

// ETagMatchesStrong applies If-Match's strong comparison (RFC 9110 §13.1.1): `*` matches any
// current representation, a weak tag never matches.
func ETagMatchesStrong(header string, etag string) bool {
	for _, candidate := range strings.Split(header, ",") {
		candidate = strings.TrimSpace(candidate)
		if candidate == "*" || candidate == etag {
			return true
		}
	}
	return false
}

// etagMatches applies If-None-Match's weak comparison (RFC 9110 §13.1.2).
func etagMatches(headers []string, etag string) bool {
	for _, header := range headers {
		for _, candidate := range strings.Split(header, ",") {
			candidate = strings.TrimSpace(candidate)
			if candidate == "*" || strings.TrimPrefix(candidate, "W/") == etag {
				return true
			}
		}
	}
	return false
}
