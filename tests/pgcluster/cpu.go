package pgcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Server names one PostgreSQL server of a topology.
type Server string

const (
	// Primary is the primary cluster.
	Primary Server = primaryDir
	// Standby is the standby cluster.
	Standby Server = standbyDir
	// Bouncer is PgBouncer, one process.
	Bouncer Server = "pgbouncer"
)

// clockTicks is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTicks = 100

// CPU is the processor time the server has used since it started: its postmaster's and every
// process it runs (backends, WAL sender or receiver, checkpointer…), those that have exited
// included. The difference of two readings is the server's cost of what ran between them,
// whichever connections it served; it moves in steps of 10 ms, so measure many statements.
// Linux only (/proc).
func (t *Topology) CPU(server Server) (time.Duration, error) {
	if server == Bouncer {
		pid, err := bouncerPIDOf(filepath.Join(t.Dir, bouncerPID))
		if err != nil {
			return 0, err
		}
		ticks, _, err := procTimes(pid, false)
		return time.Duration(ticks) * time.Second / clockTicks, err
	}
	pid, ok := serverPID(filepath.Join(t.Dir, string(server)))
	if !ok {
		return 0, fmt.Errorf("pgcluster: the %s does not run", server)
	}
	// The postmaster's own time and what it collected from exited children (cutime, cstime).
	total, _, err := procTimes(pid, true)
	if err != nil {
		return 0, err
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: %w", err)
	}
	for _, p := range procs {
		child, err := strconv.Atoi(p.Name())
		if err != nil || child == pid {
			continue
		}
		ticks, parent, err := procTimes(child, false)
		if err != nil || parent != pid {
			continue // gone meanwhile, or another program's
		}
		total += ticks
	}
	return time.Duration(total) * time.Second / clockTicks, nil
}

// procTimes reads a process's user and system time from /proc/PID/stat in clock ticks (with
// its exited children's when children is set), and its parent's process id.
func procTimes(pid int, children bool) (int64, int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name, in parentheses, may hold spaces: the fields start after its end.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// fields[0] is field 3 of proc(5): state; ppid is field 4, utime 14, stime 15, cutime 16,
	// cstime 17.
	if len(fields) < 15 {
		return 0, 0, fmt.Errorf("pgcluster: /proc/%d/stat: too few fields", pid)
	}
	parent, _ := strconv.Atoi(fields[1])
	last := 13
	if children {
		last = 15
	}
	var ticks int64
	for _, f := range fields[11:last] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("pgcluster: /proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return ticks, parent, nil
}
