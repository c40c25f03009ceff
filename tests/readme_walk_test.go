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

// The README's walk is documentation a newcomer pastes into a shell; this spec pastes it. It
// takes the shell blocks of the walk section, in order, and runs them in one bash (with
// errexit and pipefail) at the repository's root against the real binary serving a fresh
// database with demo data, as the two commands of the README start it.
var _ = Describe("The README's walk", Label("sqlite"), func() {
	It("runs as written against a fresh demo database", func(ctx SpecContext) {
		for _, tool := range []string{"bash", "curl", "jq"} {
			if _, err := exec.LookPath(tool); err != nil {
				if os.Getenv("CI") != "" {
					Fail(tool + " is missing; CI must run the README's walk")
				}
				Skip(tool + " is missing")
			}
		}
		root, err := filepath.Abs("..")
		Expect(err).NotTo(HaveOccurred())
		readme, err := os.ReadFile(filepath.Join(root, "README.md"))
		Expect(err).NotTo(HaveOccurred())
		script := walkScript(string(readme))

		dir := GinkgoT().TempDir()
		binary := filepath.Join(dir, "rideapi")
		build := exec.CommandContext(ctx, "go", "build", "-o", binary, "./server/cmd/rideapi")
		build.Dir = root
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", out)

		addr := freeAddress()
		env := append(os.Environ(), "DATABASE_URL=sqlite://"+filepath.Join(dir, "ride.db"), "RIDE_ADDR="+addr,
			"RIDE_RATE_LIMIT_READ=0", "RIDE_RATE_LIMIT_WRITE=0")
		server := exec.Command(binary)
		server.Dir, server.Env = dir, env
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
		Eventually(ready).WithTimeout(2 * time.Minute).Should(Receive())

		walk := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+script)
		walk.Dir = root
		walk.Env = append(env, "API=http://"+addr)
		output, err := walk.CombinedOutput()
		GinkgoWriter.Printf("The walk's output:\n%s\n", output)
		Expect(err).NotTo(HaveOccurred(), "the walk stopped:\n%s", output)
		for _, want := range []string{`"cancelled_by":"rider"`, `"status":"accepted"`, "precondition_failed",
			`"status":"completed"`, "HTTP/1.1 201 Created", "Idempotent-Replayed: true", "payment.succeeded", "404"} {
			Expect(string(output)).To(ContainSubstring(want))
		}
	}, SpecTimeout(5*time.Minute))
})

// walkScript is the shell blocks of the README's walk section, in order.
func walkScript(readme string) string {
	start := strings.Index(readme, "\n## A walk")
	ExpectWithOffset(1, start).To(BeNumerically(">=", 0), "README.md has no walk section")
	section := readme[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1)
	ExpectWithOffset(1, blocks).NotTo(BeEmpty(), "the walk has no sh blocks")
	var script strings.Builder
	for _, b := range blocks {
		script.WriteString(b[1])
	}
	return script.String()
}

// freeAddress is a loopback address no one listens on right now.
func freeAddress() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer ln.Close()
	return ln.Addr().String()
}
