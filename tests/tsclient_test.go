package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// tsDir is the TypeScript consumer project: package.json pins openapi-typescript,
// openapi-fetch and typescript, package-lock.json pins everything beneath them.
const tsDir = "ts"

// requireNode finds node and npm. CI must build and run the TypeScript client, so missing
// tools fail there; elsewhere the spec is skipped.
func requireNode() {
	GinkgoHelper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := tool + " is not installed: the TypeScript client check needs Node.js 20+ and npm"
			if os.Getenv("CI") != "" {
				Fail(msg + "; CI must run it")
			}
			Skip(msg)
		}
	}
}

// inTS runs a command in the TypeScript project and returns its standard output; a failure
// shows everything the command printed.
func inTS(ctx SpecContext, env []string, name string, args ...string) string {
	GinkgoHelper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = tsDir
	cmd.Env = append(append(os.Environ(), "NO_UPDATE_NOTIFIER=1", "SCARF_ANALYTICS=false"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	fmt.Fprintf(GinkgoWriter, "%s %s: %s\n", name, strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	Expect(err).NotTo(HaveOccurred(), "%s %s failed:\n%s\n%s", name, strings.Join(args, " "), stdout.String(), stderr.String())
	return stdout.String()
}

// npmInstalled reports whether node_modules was installed from the current lockfile (npm ci
// writes node_modules/.package-lock.json), so a warm run spares the reinstall.
func npmInstalled() bool {
	installed, err := os.Stat(filepath.Join(tsDir, "node_modules", ".package-lock.json"))
	if err != nil {
		return false
	}
	lock, err := os.Stat(filepath.Join(tsDir, "package-lock.json"))
	return err == nil && installed.ModTime().After(lock.ModTime())
}

var _ = Describe("A TypeScript client generated from the document", Label("typescript"), func() {
	h := harnessFor("sqlite") // a client check: one engine is enough

	It("type-checks a consumer's journey and runs it against a live server", func(ctx SpecContext) {
		requireNode()
		driver := h.NewDriver(DriverOpts{})
		rider := h.NewRider()
		for range 3 {
			h.NewTrip(TripOpts{Driver: driver, Rider: rider})
		}
		h.AppendEvent("trip.completed") // its fare is 1850

		if !npmInstalled() {
			inTS(ctx, nil, "npm", "ci", "--prefer-offline", "--no-audit", "--no-fund")
		}
		inTS(ctx, nil, "node_modules/.bin/openapi-typescript", "../../openapi/ride.yaml", "--output", "schema.d.ts")
		// tsc type-checks journey.ts against the generated types and, only when they agree
		// (noEmitOnError), compiles it for node, which cannot run TypeScript itself.
		inTS(ctx, nil, "node_modules/.bin/tsc", "-p", "tsconfig.json")
		out := inTS(ctx, []string{"RIDE_API_URL=" + h.URL, "RIDE_API_KEY=" + h.Admin, "RIDE_CITY=" + driver.City},
			"node", "build/journey.js")

		var result struct {
			Journey string   `json:"journey"`
			Trips   []string `json:"trips"`
			Trip    string   `json:"trip"`
			Problem string   `json:"problem"`
			Fares   []int    `json:"fares"`
		}
		Expect(json.Unmarshal([]byte(strings.TrimSpace(out)), &result)).To(Succeed(), out)
		Expect(result.Journey).To(Equal("ok"))
		Expect(result.Trips).To(HaveLen(3))
		Expect(result.Trip).To(Equal(result.Trips[0]))
		Expect(result.Problem).To(Equal("invalid_limit"))
		Expect(result.Fares).To(ContainElement(1850), "events narrowed by type")
	}, NodeTimeout(3*time.Minute))
})
