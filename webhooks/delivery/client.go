package delivery

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// DefaultTimeout bounds one delivery attempt from dial to the end of the response headers and
// body. A receiver should answer fast and process afterwards; one that takes longer is treated
// as failed and retried.
const DefaultTimeout = 10 * time.Second

// MaxResponseBytes is how much of a receiver's answer body is read (and discarded) before the
// connection is given up, so a hostile or broken receiver cannot stream into the service.
const MaxResponseBytes = 64 << 10

// ErrForbiddenAddress means a destination resolves to an address that webhooks may not reach
// (private, loopback, link-local, metadata and similar ranges) while insecure mode is off.
var ErrForbiddenAddress = errors.New("webhooks: destination address is not publicly routable")

// forbiddenPrefixes are the ranges a delivery may not dial outside insecure mode: everything
// that reaches the service's own host or network, or a cloud metadata service, instead of a
// partner's public server. IPv4-mapped IPv6 addresses are unmapped before the check.
var forbiddenPrefixes = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network"; 0.0.0.0 reaches the local host
		"10.0.0.0/8",      // private
		"100.64.0.0/10",   // carrier-grade NAT; also hosts some cloud metadata services
		"127.0.0.0/8",     // loopback
		"169.254.0.0/16",  // link-local, including 169.254.169.254 metadata
		"172.16.0.0/12",   // private
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // documentation
		"192.168.0.0/16",  // private
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // documentation
		"203.0.113.0/24",  // documentation
		"224.0.0.0/4",     // multicast
		"240.0.0.0/4",     // reserved, and 255.255.255.255 broadcast
		"::/128",          // unspecified
		"::1/128",         // loopback
		"64:ff9b::/96",    // NAT64: would reach an embedded IPv4 address, maybe private
		"64:ff9b:1::/48",  // local-use NAT64
		"100::/64",        // discard-only
		"2001:db8::/32",   // documentation
		"2002::/16",       // 6to4: embeds an IPv4 address
		"fc00::/7",        // unique local, including AWS's fd00:ec2::254 metadata
		"fe80::/10",       // link-local
		"ff00::/8",        // multicast
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// ForbiddenAddress reports whether a delivery may not reach ip outside insecure mode.
func ForbiddenAddress(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsUnspecified() || ip.IsLoopback() || ip.IsPrivate() ||
		ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() || ip.IsMulticast() {
		return true
	}
	for _, p := range forbiddenPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// ClientOptions shape NewClient.
type ClientOptions struct {
	// Insecure allows every address, private and loopback included. For development and
	// tests only (RIDE_WEBHOOK_INSECURE).
	Insecure bool
	// Timeout bounds one request; zero means DefaultTimeout.
	Timeout time.Duration
}

// NewClient returns the HTTP client of deliveries. Unless opts.Insecure, it checks every
// address it dials after DNS resolution (the dialer's Control hook sees the IP actually
// connected to, so a name that resolves, or re-resolves, to a private address is refused with
// ErrForbiddenAddress). It never uses a proxy from the environment (the check would then see
// the proxy, not the destination), follows no redirect (a 3xx is the receiver's answer), and
// gives up after the timeout.
func NewClient(opts ClientOptions) *http.Client {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !opts.Insecure {
		dialer.Control = refuseForbidden
	}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConns:          100,
		// A partner's endpoints often share a host: keep a connection for every attempt that
		// may be in flight to it, so that a busy worker does not dial for each one.
		MaxIdleConnsPerHost: DefaultConcurrency,
		IdleConnTimeout:     90 * time.Second,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// refuseForbidden is the dialer's Control hook: it runs after name resolution, once per
// address tried, before the connection is made.
func refuseForbidden(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, address)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ForbiddenAddress(ip) {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, host)
	}
	return nil
}

// URLError explains why an endpoint URL cannot be registered.
type URLError struct {
	Reason string
}

func (e *URLError) Error() string { return "webhooks: endpoint URL " + e.Reason }

// CheckURL decides at registration whether raw can be an endpoint URL: absolute, https
// (or http in insecure mode), with a host, and outside insecure mode not a literal private,
// loopback or otherwise forbidden IP address nor a localhost name. Names are not resolved
// here (DNS may change); every address is checked again when a delivery dials it.
func CheckURL(raw string, insecure bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, &URLError{Reason: "is not a valid URL"}
	}
	switch {
	case !u.IsAbs() || u.Host == "" || u.Opaque != "":
		return nil, &URLError{Reason: "must be absolute, such as https://example.com/webhooks"}
	case u.Scheme == "https":
	case u.Scheme == "http" && insecure:
	case u.Scheme == "http":
		return nil, &URLError{Reason: "must use https"}
	default:
		return nil, &URLError{Reason: "must use https"}
	}
	host := u.Hostname()
	if host == "" {
		return nil, &URLError{Reason: "has no host"}
	}
	if insecure {
		return u, nil
	}
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if ForbiddenAddress(ip) {
			return nil, &URLError{Reason: "points to a private, loopback or reserved address"}
		}
		return u, nil
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return nil, &URLError{Reason: "points to localhost"}
	}
	return u, nil
}

// drain reads at most MaxResponseBytes of a response body and closes it, so a keep-alive
// connection can be reused when the answer was short, and is dropped when it was not.
func drain(res *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, MaxResponseBytes))
	_ = res.Body.Close()
}
