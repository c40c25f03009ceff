package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CPU time per request, read from /proc (Linux) around each measured window: on a virtual
// machine whose speed drifts with its neighbours, it moves far less than requests per second,
// and it says where a request's cost lies: in the server, in PostgreSQL or in the client.

// cpuTimes is CPU time (user and system) used by the processes of a run.
type cpuTimes struct {
	server      time.Duration // the real server
	compare     time.Duration // the second build of the real server (-compare)
	handwritten time.Duration // the hand-written comparison server
	sqlite      time.Duration // the real server on SQLite, its database inside it
	postgres    time.Duration // the PostgreSQL cluster's processes: the benchmark's backends and the writers (pgScope)
	self        time.Duration // this process: the load generator, and the reference's pgx client
}

// servers are the pids of the servers, set when they start.
var servers struct{ real, compare, handwritten, sqlite int }

// clockTick is USER_HZ, the unit of /proc's CPU times: 100 on every Linux this runs on.
const clockTick = 10 * time.Millisecond

func readCPU() cpuTimes {
	t := cpuTimes{self: processCPU(os.Getpid())}
	if servers.real != 0 {
		t.server = processCPU(servers.real)
	}
	if servers.compare != 0 {
		t.compare = processCPU(servers.compare)
	}
	if servers.handwritten != 0 {
		t.handwritten = processCPU(servers.handwritten)
	}
	if servers.sqlite != 0 {
		t.sqlite = processCPU(servers.sqlite)
	}
	comms, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, comm := range comms {
		if name, err := os.ReadFile(comm); err == nil && string(bytes.TrimSpace(name)) == "postgres" {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(comm))); err == nil && pgScope.counts(pid) {
				t.postgres += processCPU(pid)
			}
		}
	}
	return t
}

// pgScope is the PostgreSQL work that is the benchmark's: the processes of its cluster (the
// postmaster's children: writers, autovacuum and the backends), of the backends only those
// connected to its databases. Other clusters and other databases on the host, such as tests
// running beside the benchmark, are left out. With no postmaster known, every process named
// postgres counts.
var pgScope postgresScope

type postgresScope struct {
	postmaster int
	databases  map[string]bool
}

// scopePostgres finds the postmaster of the cluster whose backend has pid backend.
func scopePostgres(backend int, databases ...string) {
	pgScope.postmaster = parentOf(backend)
	pgScope.databases = map[string]bool{}
	for _, db := range databases {
		if db != "" {
			pgScope.databases[db] = true
		}
	}
}

func (s *postgresScope) counts(pid int) bool {
	if s.postmaster == 0 || pid == s.postmaster {
		return true
	}
	if parentOf(pid) != s.postmaster {
		return false
	}
	title, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	if db, client := backendDatabase(string(bytes.ReplaceAll(title, []byte{0}, []byte{' '}))); client {
		return s.databases[db]
	}
	return true // a background process of the cluster
}

// backendDatabase reads a PostgreSQL process title: a client backend's is "postgres:
// [cluster: ]user database host(port) activity" (host "[local]" on a socket).
func backendDatabase(title string) (database string, client bool) {
	fields := strings.Fields(title)
	for i := 2; i < len(fields); i++ {
		if f := fields[i]; f == "[local]" || (strings.HasSuffix(f, ")") && strings.Contains(f, "(")) {
			return fields[i-1], true
		}
	}
	return "", false
}

// parentOf is a process's parent pid, or 0 once it is gone.
func parentOf(pid int) int {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	fields := bytes.Fields(stat[bytes.LastIndexByte(stat, ')')+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(string(fields[1]))
	return ppid
}

// processCPU is utime + stime of a process, or 0 once it is gone.
func processCPU(pid int) time.Duration {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces; the fields after it are fixed:
	// utime and stime are the 12th and 13th after the closing parenthesis.
	fields := bytes.Fields(stat[bytes.LastIndexByte(stat, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(string(fields[11]), 10, 64)
	stime, _ := strconv.ParseInt(string(fields[12]), 10, 64)
	return time.Duration(utime+stime) * clockTick
}

func (t cpuTimes) sub(u cpuTimes) cpuTimes {
	return cpuTimes{t.server - u.server, t.compare - u.compare, t.handwritten - u.handwritten, t.sqlite - u.sqlite, t.postgres - u.postgres, t.self - u.self}
}

func (t cpuTimes) add(u cpuTimes) cpuTimes {
	return cpuTimes{t.server + u.server, t.compare + u.compare, t.handwritten + u.handwritten, t.sqlite + u.sqlite, t.postgres + u.postgres, t.self + u.self}
}

// perRequest formats d spread over n requests in µs.
func perRequest(d time.Duration, n int) string {
	if n == 0 {
		return "–"
	}
	return strconv.FormatFloat(float64(d)/float64(time.Microsecond)/float64(n), 'f', 0, 64)
}
