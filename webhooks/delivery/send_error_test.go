package delivery_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/webhooks/delivery"
)

var _ = Describe("The error a delivery records", func() {
	describe := func(err error) string { return delivery.DescribeSendError(err, time.Second) }

	It("says what failed without the resolver, addresses or URL of the sending network", func() {
		dns := &url.Error{Op: "Post", URL: "https://partner2.example.com/hooks", Err: &net.OpError{
			Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "partner2.example.com",
				Server: "10.255.255.53:53", IsNotFound: true}}}
		Expect(describe(dns)).To(Equal("connection failed: the host name does not resolve"))

		// A real refused connection: a port nothing listens on.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		addr := ln.Addr().String()
		Expect(ln.Close()).To(Succeed())
		_, err = http.Get("http://" + addr + "/hooks")
		Expect(err).To(HaveOccurred())
		Expect(describe(err)).To(Equal("connection failed: the receiver refused the connection"))

		// A real certificate the client does not trust.
		tlsServer := httptest.NewTLSServer(http.NotFoundHandler())
		defer tlsServer.Close()
		_, err = http.Get(tlsServer.URL)
		Expect(err).To(HaveOccurred())
		Expect(describe(err)).To(Equal("TLS failed: the receiver's certificate could not be verified"))

		// TLS spoken to a plain HTTP port.
		plain := httptest.NewServer(http.NotFoundHandler())
		defer plain.Close()
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool()}}}
		_, err = client.Get("https://" + plain.Listener.Addr().String())
		Expect(err).To(HaveOccurred())
		Expect(describe(err)).To(Equal("TLS failed: the receiver does not speak TLS on this port"))

		ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
		defer cancel()
		<-ctx.Done()
		Expect(describe(&url.Error{Op: "Post", URL: "https://x.example", Err: ctx.Err()})).To(HavePrefix("timeout"))

		for _, err := range []error{dns, errors.New("dial tcp 10.1.2.3:443: some kernel wording"),
			fmt.Errorf("post: %w", errors.New("lookup internal.corp on 10.0.0.2:53"))} {
			Expect(describe(err)).NotTo(ContainSubstring("10."), "%v", err)
			Expect(describe(err)).NotTo(ContainSubstring("example.com"), "%v", err)
		}
	})
})
