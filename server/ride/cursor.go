package ride

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
)

// Limits of a cursor. They bound the work a hostile cursor can cause before it
// is rejected and keep cursors short enough for a URL.
const (
	// MaxCursorLength is the longest cursor string accepted, in characters.
	// The longest cursor Encode can produce is well under it.
	MaxCursorLength = 512
	// MaxCursorValues is how many sort values a cursor may carry; lists sort
	// by at most three keys, so eight leaves room without inviting abuse.
	MaxCursorValues = 8
	// MaxCursorIDLength is the longest tiebreaker id, in bytes.
	MaxCursorIDLength = 64
)

// Wire format, version 1 (all integers little-endian base-128 varints as in
// encoding/binary):
//
//	version  1 byte (cursorVersion)
//	flags    1 byte (bit 0: backward; other bits must be zero)
//	count    uvarint, ≤ MaxCursorValues
//	values   count × zigzag varint
//	idLen    uvarint, ≤ MaxCursorIDLength
//	id       idLen bytes
//	mac      first 16 bytes of HMAC-SHA256(secret, version‖…‖id‖query)
//
// The payload is self-delimiting, so payload‖query is unambiguous without a
// separator. The whole is base64url without padding. Varints must be minimal,
// so each position has exactly one cursor spelling.
const (
	cursorVersion byte = 1
	flagBackward  byte = 1 << 0
	// cursorMACLen keeps 128 bits of the tag: forging stays infeasible while
	// the cursor stays short.
	cursorMACLen = 16
	// cursorMinPayload is version, flags, a zero count and a zero id length.
	cursorMinPayload = 4
)

// Reasons for rejection, made once so that rejecting a flood of bad cursors
// does not allocate. Each wraps ErrInvalidCursor; the API never shows them.
var (
	errCursorEmpty     = fmt.Errorf("%w: empty", ErrInvalidCursor)
	errCursorTooLong   = fmt.Errorf("%w: longer than %d characters", ErrInvalidCursor, MaxCursorLength)
	errCursorEncoding  = fmt.Errorf("%w: not canonical unpadded base64url", ErrInvalidCursor)
	errCursorTruncated = fmt.Errorf("%w: truncated", ErrInvalidCursor)
	errCursorVersion   = fmt.Errorf("%w: unknown version", ErrInvalidCursor)
	errCursorMAC       = fmt.Errorf("%w: authentication failed", ErrInvalidCursor)
	errCursorFlags     = fmt.Errorf("%w: unknown flags", ErrInvalidCursor)
	errCursorVarint    = fmt.Errorf("%w: malformed varint", ErrInvalidCursor)
	errCursorValues    = fmt.Errorf("%w: more than %d values", ErrInvalidCursor, MaxCursorValues)
	errCursorIDLength  = fmt.Errorf("%w: id longer than %d bytes", ErrInvalidCursor, MaxCursorIDLength)
	errCursorTrailing  = fmt.Errorf("%w: length mismatch", ErrInvalidCursor)
)

// cursorEncoding is strict so that bits past the last byte must be zero: one
// byte string, one text, and a cursor cannot be altered without touching the MAC.
var cursorEncoding = base64.RawURLEncoding.Strict()

// Cursor is a position in a keyset-paginated list: the sort values and id of
// the item at the page edge, and which way the walk goes. The store turns it
// into a WHERE (values, id) > (…) clause, so a page costs the same at any depth.
type Cursor struct {
	// Backward asks for the items before this position (prev_cursor).
	Backward bool
	// Values are the edge item's sort values in sort-key order, as integers
	// (timestamps in microseconds, money in minor units).
	Values []int64
	// ID is the edge item's id, the tiebreaker that makes the order total.
	ID string
}

// CursorCodec turns cursors into opaque, authenticated strings and back. The
// MAC covers the query the cursor was made for, so a cursor replayed against
// other filters, another sort or another caller is rejected instead of
// silently paging through the wrong list. A CursorCodec is safe for
// concurrent use.
type CursorCodec struct {
	scratch sync.Pool // of *cursorScratch
}

// cursorScratch is per-goroutine working memory; pooling it keeps the MAC
// state and buffers off the allocator on every request.
type cursorScratch struct {
	mac   hash.Hash
	buf   []byte
	query []byte
	sum   []byte
}

// NewCursorCodec returns a codec keyed with secret. Every replica must share
// the secret for cursors to survive a restart or a load balancer. It panics on
// an empty secret, because a MAC without a key authenticates nothing.
func NewCursorCodec(secret []byte) *CursorCodec {
	if len(secret) == 0 {
		panic("ride: NewCursorCodec needs a non-empty secret")
	}
	key := append([]byte(nil), secret...)
	c := &CursorCodec{}
	c.scratch.New = func() any {
		return &cursorScratch{
			mac: hmac.New(sha256.New, key),
			buf: make([]byte, 0, MaxCursorLength*2),
			sum: make([]byte, 0, sha256.Size),
		}
	}
	return c
}

// Encode returns cur as an opaque string bound to query (see QueryKey). It
// panics if cur exceeds MaxCursorValues or MaxCursorIDLength: the server
// builds cursors from its own rows, so that is a programming error, and a
// cursor Decode would refuse must never reach a client.
func (c *CursorCodec) Encode(cur Cursor, query string) string {
	if len(cur.Values) > MaxCursorValues || len(cur.ID) > MaxCursorIDLength {
		panic(fmt.Sprintf("ride: cursor exceeds limits (%d values, %d-byte id)", len(cur.Values), len(cur.ID)))
	}
	s := c.scratch.Get().(*cursorScratch)
	defer c.scratch.Put(s)

	var flags byte
	if cur.Backward {
		flags |= flagBackward
	}
	b := append(s.buf[:0], cursorVersion, flags)
	b = binary.AppendUvarint(b, uint64(len(cur.Values)))
	for _, v := range cur.Values {
		b = binary.AppendVarint(b, v)
	}
	b = binary.AppendUvarint(b, uint64(len(cur.ID)))
	b = append(b, cur.ID...)
	b = append(b, s.sign(b, query)...)
	raw := len(b)
	b = cursorEncoding.AppendEncode(b, b)
	s.buf = b
	return string(b[raw:])
}

// Decode parses a string made by Encode with the same secret and query. Any
// problem at all yields an error wrapping ErrInvalidCursor; hostile input is
// bounded by the limits above and never panics. The payload is parsed only
// after its MAC has been checked.
func (c *CursorCodec) Decode(s string, query string) (Cursor, error) {
	switch {
	case s == "":
		return Cursor{}, errCursorEmpty
	case len(s) > MaxCursorLength:
		return Cursor{}, errCursorTooLong
	}
	sc := c.scratch.Get().(*cursorScratch)
	defer c.scratch.Put(sc)

	// Copy the text into the scratch buffer and decode behind it, so that
	// neither step allocates.
	b := append(sc.buf[:0], s...)
	b, err := cursorEncoding.AppendDecode(b, b)
	sc.buf = b
	raw := b[len(s):]
	// The decoder skips CR and LF; a length check refuses such spellings.
	if err != nil || cursorEncoding.EncodedLen(len(raw)) != len(s) {
		return Cursor{}, errCursorEncoding
	}
	if len(raw) < cursorMinPayload+cursorMACLen {
		return Cursor{}, errCursorTruncated
	}
	payload, tag := raw[:len(raw)-cursorMACLen], raw[len(raw)-cursorMACLen:]
	if payload[0] != cursorVersion {
		return Cursor{}, errCursorVersion
	}
	if !hmac.Equal(tag, sc.sign(payload, query)) {
		return Cursor{}, errCursorMAC
	}
	return parseCursorPayload(payload[1:])
}

// sign returns the truncated MAC of payload‖query in scratch memory that
// stays valid until the next call.
func (s *cursorScratch) sign(payload []byte, query string) []byte {
	s.mac.Reset()
	s.mac.Write(payload)
	s.query = append(s.query[:0], query...)
	s.mac.Write(s.query)
	s.sum = s.mac.Sum(s.sum[:0])
	return s.sum[:cursorMACLen]
}

// parseCursorPayload reads everything after the version byte and insists that
// nothing is left over.
func parseCursorPayload(p []byte) (Cursor, error) {
	var cur Cursor
	flags := p[0]
	if flags&^flagBackward != 0 {
		return Cursor{}, errCursorFlags
	}
	cur.Backward = flags&flagBackward != 0
	p = p[1:]

	count, n := binary.Uvarint(p)
	if !minimalVarint(p, n) {
		return Cursor{}, errCursorVarint
	}
	if count > MaxCursorValues {
		return Cursor{}, errCursorValues
	}
	p = p[n:]
	if count > 0 {
		cur.Values = make([]int64, count)
		for i := range cur.Values {
			v, n := binary.Varint(p)
			if !minimalVarint(p, n) {
				return Cursor{}, errCursorVarint
			}
			cur.Values[i] = v
			p = p[n:]
		}
	}

	idLen, n := binary.Uvarint(p)
	if !minimalVarint(p, n) {
		return Cursor{}, errCursorVarint
	}
	if idLen > MaxCursorIDLength {
		return Cursor{}, errCursorIDLength
	}
	p = p[n:]
	if uint64(len(p)) != idLen {
		return Cursor{}, errCursorTrailing
	}
	cur.ID = string(p)
	return cur, nil
}

// minimalVarint reports whether binary.(U)varint read a well-formed varint of
// n bytes at the start of p in its shortest form (no zero high group).
func minimalVarint(p []byte, n int) bool {
	return n == 1 || (n > 1 && p[n-1] != 0)
}

// QueryKey joins the parts that define a list query (route, filters, sort,
// caller) into one string for Encode and Decode. Each part is length-prefixed,
// so ("ab", "c") and ("a", "bc") give different keys and no filter value can
// impersonate another. Callers must pass parts in a fixed order and write
// absent filters as empty strings.
func QueryKey(parts ...string) string {
	n := 0
	for _, p := range parts {
		n += len(p) + 21 // room for the decimal length and the colon
	}
	var b strings.Builder
	b.Grow(n)
	var num [20]byte
	for _, p := range parts {
		b.Write(strconv.AppendInt(num[:0], int64(len(p)), 10))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}
