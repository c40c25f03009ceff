package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"

	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store/storetest"
)

// GraphQLAnswer is a decoded GraphQL envelope.
type GraphQLAnswer struct {
	Data   map[string]any `json:"data"`
	Errors []struct {
		Message   string `json:"message"`
		Locations []struct {
			Line, Column int
		} `json:"locations"`
		Path       []any          `json:"path"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
	Extensions struct {
		Cost struct {
			Requested int `json:"requested"`
			Limit     int `json:"limit"`
		} `json:"cost"`
	} `json:"extensions"`
	raw *Response
}

// Codes lists the errors' extensions.code values in order.
func (a GraphQLAnswer) Codes() []string {
	codes := make([]string, len(a.Errors))
	for i, e := range a.Errors {
		codes[i], _ = e.Extensions["code"].(string)
	}
	return codes
}

// gqlDecode reads a GraphQL answer, which must be application/json whatever its status.
func gqlDecode(res *Response) GraphQLAnswer {
	ExpectWithOffset(2, res.Header.Get("Content-Type")).To(Equal("application/json"), "status %d body %s", res.Status, res.Body)
	var a GraphQLAnswer
	dec := json.NewDecoder(bytes.NewReader(res.Body))
	ExpectWithOffset(2, dec.Decode(&a)).To(Succeed(), "body: %s", res.Body)
	ExpectWithOffset(2, a.Extensions.Cost.Limit).To(Equal(1000), "every answer reports its cost")
	a.raw = res
	return a
}

// GQL posts a GraphQL request body and returns the raw, validated response.
func (h *Harness) GQL(key string, body map[string]any) *Response {
	return h.Do(Request{Method: http.MethodPost, Path: "/v1/graphql", Key: key, Body: body})
}

// Query posts a document with variables and decodes the envelope.
func (h *Harness) Query(key, query string, variables map[string]any) GraphQLAnswer {
	body := map[string]any{"query": query}
	if variables != nil {
		body["variables"] = variables
	}
	return gqlDecode(h.GQL(key, body))
}

// GQLGet sends a GraphQL request as GET with URL parameters.
func (h *Harness) GQLGet(key string, params map[string]string) *Response {
	return h.GET("/v1/graphql?"+gqlParams(params), key)
}

// gqlParams URL-encodes GraphQL GET parameters.
func gqlParams(params map[string]string) string {
	values := url.Values{}
	for k, v := range params {
		values.Set(k, v)
	}
	return values.Encode()
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// objectKeys returns the member names of a JSON object in the order they appear in raw.
func objectKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	Expect(err).NotTo(HaveOccurred())
	Expect(tok).To(Equal(json.Delim('{')))
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		Expect(err).NotTo(HaveOccurred())
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		Expect(dec.Decode(&skip)).To(Succeed())
	}
	return keys
}

// member returns the raw value of a path of object members.
func member(raw json.RawMessage, path ...string) json.RawMessage {
	for _, name := range path {
		var obj map[string]json.RawMessage
		ExpectWithOffset(1, json.Unmarshal(raw, &obj)).To(Succeed(), string(raw))
		var ok bool
		raw, ok = obj[name]
		ExpectWithOffset(1, ok).To(BeTrue(), "no member %q in %s", name, raw)
	}
	return raw
}

// queryLog counts the statements the store runs per table, keeping only those whose arguments
// name one of the watched ids, so that concurrent work of other specs cannot disturb a count.
type queryLog struct {
	mu      sync.Mutex
	watched map[string]bool
	counts  map[string]int
}

var queryLogs sync.Map // engine name → *queryLog

// installQueryLog registers the statement counter of h's store. GORM's callbacks may not
// change while statements run, so this happens once, before any server uses the store.
func (h *Harness) installQueryLog() {
	log := &queryLog{}
	queryLogs.Store(h.Engine, log)
	// The store reads trips with their drivers through Rows, which OnReads counts too.
	Expect(storetest.OnReads(h.Store, "tests:query_log", func(stmt storetest.Statement) {
		log.record(stmt.Table, stmt.Vars)
	})).To(Succeed())
}

// watchQueries starts counting the statements that mention any of ids, and returns the log.
func (h *Harness) watchQueries(ids ...string) *queryLog {
	v, ok := queryLogs.Load(h.Engine)
	Expect(ok).To(BeTrue(), "the %s harness has no query log", h.Engine)
	log := v.(*queryLog)
	log.mu.Lock()
	defer log.mu.Unlock()
	log.watched = map[string]bool{}
	for _, id := range ids {
		log.watched[id] = true
	}
	log.counts = map[string]int{}
	return log
}

func (l *queryLog) record(table string, vars []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var mentions func(v any) bool
	mentions = func(v any) bool {
		switch v := v.(type) {
		case string:
			return l.watched[v]
		case []string:
			for _, s := range v {
				if l.watched[s] {
					return true
				}
			}
		case []any:
			for _, s := range v {
				if mentions(s) {
					return true
				}
			}
		}
		return false
	}
	for _, v := range vars {
		if mentions(v) {
			l.counts[table]++
			return
		}
	}
}

// Counts returns the statements counted per table, as "table=n" sorted, for readable failures.
func (l *queryLog) Counts() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for table, n := range l.counts {
		out = append(out, fmt.Sprintf("%s=%d", table, n))
	}
	sort.Strings(out)
	return out
}

// aliases builds `a0: <field> a1: <field> …`.
func aliases(n int, field func(i int) string) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "a%d: %s\n", i, field(i))
	}
	return b.String()
}
