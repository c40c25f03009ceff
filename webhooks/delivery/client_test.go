package delivery_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/webhooks/delivery"
)

var _ = Describe("The guarded client", func() {
	DescribeTable("forbidden addresses",
		func(addr string, forbidden bool) {
			Expect(delivery.ForbiddenAddress(netip.MustParseAddr(addr))).To(Equal(forbidden))
		},
		Entry("loopback", "127.0.0.1", true),
		Entry("loopback, elsewhere in 127/8", "127.5.6.7", true),
		Entry("private 10/8", "10.1.2.3", true),
		Entry("private 172.16/12", "172.20.0.1", true),
		Entry("private 192.168/16", "192.168.1.1", true),
		Entry("cloud metadata", "169.254.169.254", true),
		Entry("carrier-grade NAT", "100.64.0.1", true),
		Entry("unspecified", "0.0.0.0", true),
		Entry("broadcast", "255.255.255.255", true),
		Entry("multicast", "224.0.0.1", true),
		Entry("IPv6 loopback", "::1", true),
		Entry("IPv6 unspecified", "::", true),
		Entry("IPv6 unique local (AWS metadata)", "fd00:ec2::254", true),
		Entry("IPv6 link-local", "fe80::1", true),
		Entry("IPv4-mapped loopback", "::ffff:127.0.0.1", true),
		Entry("NAT64 of a private address", "64:ff9b::a00:1", true),
		Entry("a public IPv4 address", "93.184.215.14", false),
		Entry("a public IPv6 address", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", false),
	)

	Context("outside insecure mode", func() {
		client := delivery.NewClient(delivery.ClientOptions{Timeout: 2 * time.Second})

		DescribeTable("refuses at dial time, after resolution",
			func(url string) {
				req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, nil)
				Expect(err).NotTo(HaveOccurred())
				_, err = client.Do(req)
				Expect(err).To(MatchError(delivery.ErrForbiddenAddress))
			},
			Entry("127.0.0.1", "http://127.0.0.1:9/hook"),
			Entry("10.x", "http://10.20.30.40/hook"),
			Entry("the metadata address", "http://169.254.169.254/latest/meta-data/"),
			Entry("::1", "http://[::1]:9/hook"),
			Entry("a name that resolves to loopback", "http://localhost:9/hook"),
		)

		It("refuses a live local receiver", func() {
			receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				Fail("the guarded client reached a loopback receiver")
			}))
			defer receiver.Close()
			_, err := client.Post(receiver.URL, "application/json", nil)
			Expect(err).To(MatchError(delivery.ErrForbiddenAddress))
		})
	})

	Context("in insecure mode", func() {
		It("reaches a local receiver, follows no redirect, and times out", func() {
			client := delivery.NewClient(delivery.ClientOptions{Insecure: true, Timeout: 200 * time.Millisecond})
			receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/redirect":
					http.Redirect(w, r, "/elsewhere", http.StatusFound)
				case "/slow":
					select {
					case <-r.Context().Done():
					case <-time.After(5 * time.Second):
					}
				default:
					w.WriteHeader(http.StatusNoContent)
				}
			}))
			defer receiver.Close()

			res, err := client.Post(receiver.URL+"/ok", "application/json", nil)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.StatusCode).To(Equal(http.StatusNoContent))
			res.Body.Close()

			res, err = client.Post(receiver.URL+"/redirect", "application/json", nil)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.StatusCode).To(Equal(http.StatusFound))
			res.Body.Close()

			_, err = client.Post(receiver.URL+"/slow", "application/json", nil)
			Expect(err).To(HaveOccurred())
		})
	})

	DescribeTable("registration-time URL checks",
		func(url string, insecure bool, ok bool) {
			_, err := delivery.CheckURL(url, insecure)
			if ok {
				Expect(err).NotTo(HaveOccurred())
			} else {
				var urlErr *delivery.URLError
				Expect(err).To(BeAssignableToTypeOf(urlErr))
			}
		},
		Entry("https", "https://partner.example.com/hooks", false, true),
		Entry("http refused", "http://partner.example.com/hooks", false, false),
		Entry("http allowed in insecure mode", "http://partner.example.com/hooks", true, true),
		Entry("relative", "/hooks", false, false),
		Entry("no host", "https:///hooks", false, false),
		Entry("other schemes", "ftp://partner.example.com/", true, false),
		Entry("literal loopback", "https://127.0.0.1/hooks", false, false),
		Entry("literal private", "https://10.0.0.8:8443/hooks", false, false),
		Entry("literal metadata", "https://169.254.169.254/", false, false),
		Entry("literal IPv6 loopback", "https://[::1]/hooks", false, false),
		Entry("localhost", "https://localhost/hooks", false, false),
		Entry("a public literal address", "https://93.184.215.14/hooks", false, true),
		Entry("loopback in insecure mode", "http://127.0.0.1:8080/hooks", true, true),
	)
})
