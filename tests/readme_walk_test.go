package tests

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// walkedDocuments are the README and the guides it names, in its order: the documents a
// newcomer pastes into a shell.
var walkedDocuments = []string{"README.md", "webhooks/README.md", "schema/README.md", "openapi/README.md", "server/README.md"}

// A shell block a document says must not be pasted by the walk carries a comment line just
// before it: `<!-- walk: serves -->` for the block that starts the server (the walk starts it
// in the background, as a newcomer's first terminal would), `<!-- walk: skip, REASON -->` for
// one the walk cannot run (the tests themselves, a maintainer's release).
var walkMarker = regexp.MustCompile(`<!-- walk: (serves|skip, [^>]+?) -->\n$`)

// shellBlock is one ```sh block of a document.
type shellBlock struct {
	text string
	// marker is "serves", "skip, REASON", or "" for a block the walk runs.
	marker string
}

// shellBlocks are the ```sh blocks of a document, in order.
func shellBlocks(doc string) []shellBlock {
	var blocks []shellBlock
	fence := regexp.MustCompile("(?s)```sh\n(.*?)```")
	for _, m := range fence.FindAllStringSubmatchIndex(doc, -1) {
		b := shellBlock{text: doc[m[2]:m[3]]}
		if mark := walkMarker.FindStringSubmatch(doc[max(0, m[0]-200):m[0]]); mark != nil {
			b.marker = mark[1]
		}
		blocks = append(blocks, b)
	}
	return blocks
}

// The README and every guide are documentation a newcomer pastes into a shell; this spec
// pastes them. It starts the server with the README's own command on a fresh database with demo
// data, then runs every shell block of each document, in order, in one bash per document (with
// errexit and pipefail) at the repository's root; then it runs them all a second time on the
// same database, as a reader who comes back would.
var _ = Describe("The README's walk and every guide", Label("sqlite"), func() {
	It("run as written on a fresh demo database, and again on the same one", func(ctx SpecContext) {
		for _, tool := range []string{"bash", "curl", "jq", "node", "npm"} {
			if _, err := exec.LookPath(tool); err != nil {
				if os.Getenv("CI") != "" {
					Fail(tool + " is missing; CI must run the README's walk and the guides")
				}
				Skip(tool + " is missing")
			}
		}
		root, err := filepath.Abs("..")
		Expect(err).NotTo(HaveOccurred())

		var serves []string
		scripts := map[string]string{}
		for _, name := range walkedDocuments {
			doc, err := os.ReadFile(filepath.Join(root, name))
			Expect(err).NotTo(HaveOccurred())
			blocks := shellBlocks(string(doc))
			Expect(blocks).NotTo(BeEmpty(), "%s has no sh block", name)
			var script strings.Builder
			for _, b := range blocks {
				switch {
				case b.marker == "serves":
					serves = append(serves, b.text)
				case strings.HasPrefix(b.marker, "skip, "):
					GinkgoWriter.Printf("%s: not walked (%s):\n%s\n", name, strings.TrimPrefix(b.marker, "skip, "), b.text)
				default:
					script.WriteString(b.text)
				}
			}
			scripts[name] = script.String()
		}
		Expect(serves).To(HaveLen(1), "exactly one block starts the server")

		dir := GinkgoT().TempDir()
		addr := freeAddress()
		env := append(os.Environ(), "DATABASE_URL=sqlite://"+filepath.Join(dir, "ride.db"), "RIDE_ADDR="+addr,
			"RIDE_RATE_LIMIT_READ=0", "RIDE_RATE_LIMIT_WRITE=0", "API=http://"+addr,
			"TMPDIR="+dir) // the guides' projects (mktemp -d) go away with the spec
		server := exec.Command("bash", "-c", "set -euo pipefail\n"+serves[0])
		server.Dir, server.Env = root, env
		server.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		stdout, err := server.StdoutPipe()
		Expect(err).NotTo(HaveOccurred())
		server.Stderr = GinkgoWriter
		Expect(server.Start()).To(Succeed())
		DeferCleanup(func() {
			_ = syscall.Kill(-server.Process.Pid, syscall.SIGTERM)
			_ = server.Wait()
		})
		ready := make(chan string, 1)
		go func() {
			lines := bufio.NewScanner(stdout)
			for lines.Scan() {
				if strings.HasPrefix(lines.Text(), "Ride API listening") {
					ready <- lines.Text()
				}
			}
		}()
		Eventually(ready).WithTimeout(3 * time.Minute).Should(Receive())

		// What each document's answers must show, on the first walk and on the second.
		first := map[string][]string{
			"README.md": {`"cancelled_by":"rider"`, `"status":"accepted"`, "precondition_failed",
				`"status":"completed"`, "HTTP/1.1 201 Created", "Idempotent-Replayed: true", "payment.succeeded", "404"},
			"webhooks/README.md": {`"status":"enabled"`, `"secret":"whsec_`, `"event_id":"evt_`, `"status":"pending"`, "204\n404\n"},
			"schema/README.md":   {`{"data":{"trip":{"status":`, `"extensions":{"cost":`},
			"openapi/README.md":  {"20 trips; more: true"},
			"server/README.md":   {"revoked key_", "401"},
		}
		again := map[string][]string{
			"README.md": {`"status":"accepted"`, "precondition_failed", `"status":"completed"`, "HTTP/1.1 201 Created",
				"Idempotent-Replayed: true", "payment.succeeded", "404"},
		}
		for walk := 1; walk <= 2; walk++ {
			for _, name := range walkedDocuments {
				run := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+scripts[name])
				run.Dir, run.Env = root, env
				output, err := run.CombinedOutput()
				GinkgoWriter.Printf("%s, walk %d:\n%s\n", name, walk, output)
				Expect(err).NotTo(HaveOccurred(), "%s stopped on walk %d:\n%s", name, walk, output)
				want := first[name]
				if w, ok := again[name]; ok && walk == 2 {
					want = w
				}
				for _, s := range want {
					Expect(string(output)).To(ContainSubstring(s), "%s, walk %d", name, walk)
				}
			}
		}
	}, SpecTimeout(12*time.Minute))
})

// freeAddress is a loopback address no one listens on right now.
func freeAddress() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer ln.Close()
	return ln.Addr().String()
}
