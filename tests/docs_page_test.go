package tests

import (
	"bytes"
	"fmt"
	"html"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
)

// chromiumFlags are what headless Chromium needs on a closed network as root: without the
// background-networking flags it spends its start failing to reach Google.
var chromiumFlags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--hide-scrollbars", "--virtual-time-budget=15000",
}

// requireChromium finds Debian's chromium. CI must render the page, so a missing browser
// fails there (.ci/run installs it); elsewhere the spec is skipped with the command to run.
func requireChromium() string {
	GinkgoHelper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	msg := "headless Chromium is not installed: run `apt-get install -y chromium` (or `go tool task tools:chromium`)"
	if os.Getenv("CI") != "" {
		Fail(msg + "; CI must render /docs, and .ci/run installs it")
	}
	Skip(msg)
	return ""
}

// chromium runs one headless Chromium with a fresh profile and returns its standard output.
func chromium(ctx SpecContext, bin string, args ...string) []byte {
	GinkgoHelper()
	all := append(append([]string{}, chromiumFlags...), "--user-data-dir="+GinkgoT().TempDir())
	cmd := exec.CommandContext(ctx, bin, append(all, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	Expect(cmd.Run()).To(Succeed(), "chromium %s failed:\n%s", strings.Join(args, " "), stderr.String())
	return stdout.Bytes()
}

var _ = Describe("The reference page", func() {
	h := harnessFor("sqlite") // the page does not depend on the engine

	It("is served from the binary at /docs without a key, locked to its own assets", func() {
		status, header, body := fetch(h, "/docs")
		Expect(status).To(Equal(200))
		Expect(header.Get("Content-Type")).To(Equal("text/html; charset=utf-8"))
		Expect(header.Get("Content-Security-Policy")).To(ContainSubstring("default-src 'none'"))
		Expect(body).To(ContainSubstring(`<div id="swagger-ui">`))
		Expect(body).NotTo(ContainSubstring("https://"), "everything comes from the binary: it works offline")
		for _, asset := range []string{"swagger-ui-bundle.js", "swagger-ui.css", "ride-docs.js", "ride.css"} {
			Expect(body).To(ContainSubstring("/docs/assets/"+asset), asset)
			status, _, content := fetch(h, "/docs/assets/"+asset)
			Expect(status).To(Equal(200), asset)
			Expect(content).NotTo(BeEmpty(), asset)
		}
		status, header, _ = fetch(h, "/docs/assets/swagger-initializer.js")
		Expect(status).To(Equal(404), "only the files the page uses are served")
		Expect(header.Get("Content-Type")).To(Equal("application/problem+json"))
	})

	It("documents every problem type that a problem's `type` points to", func() {
		status, _, page := fetch(h, "/docs/problems")
		Expect(status).To(Equal(200))
		problems := []*Response{
			h.GET("/v1/trips/trp_nosuchtrip0000000000000000", h.Admin),
			h.GET("/v1/trips?limit=0", h.Admin),
			h.GET("/v1/trips", ""),
			h.Do(Request{Method: http.MethodDelete, Path: "/v1/trips", Key: h.Admin}),
		}
		for _, res := range problems {
			p := res.Problem()
			anchor, found := strings.CutPrefix(p.Type, "/docs/problems#")
			Expect(found).To(BeTrue(), p.Type)
			Expect(page).To(ContainSubstring(`<tr id="`+anchor+`">`), "no entry for %s", p.Type)
		}
		for _, code := range []string{"rate_limited", "invalid_cursor", "internal", "unavailable"} {
			Expect(page).To(ContainSubstring(`<tr id="` + code + `">`))
		}
	})

	It("renders every operation in headless Chromium, and leaves a screenshot", Label("chromium"), func(ctx SpecContext) {
		bin := requireChromium()
		doc, err := gen.GetSwagger()
		Expect(err).NotTo(HaveOccurred())

		dom := html.UnescapeString(string(chromium(ctx, bin, "--dump-dom", h.URL+"/docs")))
		Expect(dom).To(ContainSubstring(`class="swagger-ui`), "Swagger UI did not start")
		Expect(dom).To(ContainSubstring("Ride API"))
		rendered := 0
		for path, item := range doc.Paths.Map() {
			for method, op := range item.Operations() {
				Expect(dom).To(ContainSubstring(op.Summary), "%s %s (%s) is not on the page", method, path, op.OperationID)
				rendered++
			}
		}
		Expect(rendered).To(BeNumerically(">=", 9), "the read API alone has nine operations")
		Expect(dom).To(ContainSubstring("List trips"))

		dir, err := os.MkdirTemp("", "ride-docs-screenshot-")
		Expect(err).NotTo(HaveOccurred())
		png := filepath.Join(dir, "docs.png")
		chromium(ctx, bin, "--screenshot="+png, "--window-size=1280,2000", h.URL+"/docs")
		shot, err := os.ReadFile(png)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(shot[:8])).To(Equal("\x89PNG\r\n\x1a\n"), "not a PNG")
		Expect(len(shot)).To(BeNumerically(">", 50_000), "a blank page compresses to almost nothing")
		AddReportEntry("docs screenshot", png)
		fmt.Fprintf(GinkgoWriter, "screenshot of /docs (%d operations rendered): %s\n", rendered, png)
	}, NodeTimeout(2*time.Minute))
})
