package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// tools are the programs a topology runs, and the account they run as.
type tools struct {
	// bin is PostgreSQL's program directory.
	bin string
	// bouncer is the PgBouncer program.
	bouncer string
	// cred is the account the servers run as: nil to run as this process, the postgres
	// account when this process is root (initdb, postgres and pgbouncer refuse root).
	cred *syscall.Credential
}

func findTools(o Options) (tools, error) {
	var tl tools
	tl.bin = o.BinDir
	if tl.bin == "" {
		// Debian keeps each major version's programs apart; the newest installed wins.
		found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
		slices.SortFunc(found, func(a, b string) int { return majorOf(a) - majorOf(b) })
		if len(found) > 0 {
			tl.bin = filepath.Dir(found[len(found)-1])
		} else if p, err := exec.LookPath("initdb"); err == nil {
			tl.bin = filepath.Dir(p)
		}
	}
	for _, prog := range []string{"initdb", "pg_ctl", "pg_basebackup"} {
		if _, err := os.Stat(filepath.Join(tl.bin, prog)); err != nil {
			return tools{}, fmt.Errorf("%w: PostgreSQL's %s not found (install Debian's postgresql package, or set Options.BinDir)", ErrNotInstalled, prog)
		}
	}
	tl.bouncer = o.PgBouncer
	if tl.bouncer == "" {
		if p, err := exec.LookPath("pgbouncer"); err == nil {
			tl.bouncer = p
		} else if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
			tl.bouncer = "/usr/sbin/pgbouncer"
		} else {
			return tools{}, fmt.Errorf("%w: pgbouncer not found (go tool task tools:pgbouncer installs Debian's package)", ErrNotInstalled)
		}
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return tools{}, fmt.Errorf("%w: running as root, the servers need the postgres account (Debian's postgresql package makes it): %v", ErrNotInstalled, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		tl.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	return tl, nil
}

// ErrNotInstalled means a program the topology needs is missing.
var ErrNotInstalled = errors.New("pgcluster: not installed")

// majorOf reads the major version out of /usr/lib/postgresql/VERSION/bin/initdb.
func majorOf(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

// own gives path to the account the servers run as.
func (tl tools) own(path string) error {
	if tl.cred == nil {
		return nil
	}
	if err := os.Chown(path, int(tl.cred.Uid), int(tl.cred.Gid)); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

// writeFile writes a file the servers read, owned by their account.
func (tl tools) writeFile(path, content string) error {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return tl.own(path)
}

// appendFile adds lines to a file of a server's (its configuration).
func appendFile(path, content string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if _, err := f.WriteString(content); err != nil {
		_ = f.Close()
		return fmt.Errorf("pgcluster: %w", err)
	}
	return f.Close()
}

// run runs program (a name in the PostgreSQL program directory, or a path) with args as the
// servers' account and returns its output; a failure's error quotes the output and, when
// given, the end of logFile.
func (tl tools) run(ctx context.Context, logFile, program string, args ...string) (string, error) {
	if !filepath.IsAbs(program) {
		program = filepath.Join(tl.bin, program)
	}
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Env = cleanEnv()
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: tl.cred}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// The servers these programs start run on after them; should one keep the output open,
	// the program's own exit is what counts.
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil
	}
	if err != nil {
		msg := fmt.Sprintf("pgcluster: %s %s: %v\n%s", filepath.Base(program), strings.Join(args, " "), err, strings.TrimSpace(out.String()))
		if logFile != "" {
			msg += "\n" + logTail(logFile)
		}
		return out.String(), errors.New(msg)
	}
	return out.String(), nil
}

// cleanEnv is this process's environment without libpq's variables (PGPORT, PGDATA…), which
// would change what the programs connect to, and in the C locale.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "LC_") || strings.HasPrefix(kv, "LANG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

// logTail is the last lines of a log file, to explain a failure.
func logTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return filepath.Base(path) + ":\n  " + strings.Join(lines, "\n  ")
}

// isSocketFile tells a PostgreSQL server's Unix socket or its lock file by name.
func isSocketFile(name string) bool { return strings.HasPrefix(name, ".s.PGSQL.") }
