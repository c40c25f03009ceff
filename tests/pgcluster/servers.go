package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// startTimeout bounds each server's start and stop (pg_ctl -t).
const startTimeout = 60 * time.Second

func (t *Topology) initPrimary(ctx context.Context) error {
	data := filepath.Join(t.Dir, primaryDir)
	// --no-sync: a test cluster need not survive a crash of the host.
	if _, err := t.tools.run(ctx, "", "initdb", "-D", data, "-U", User, "--auth=trust", "-E", "UTF8",
		"--locale=C", "--no-sync", "--no-instructions"); err != nil {
		return err
	}
	// initdb's pg_hba.conf already trusts replication connections from 127.0.0.1.
	return appendFile(filepath.Join(data, "postgresql.conf"), fmt.Sprintf(`
# pgcluster: the primary
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
max_connections = %d
wal_level = replica
max_wal_senders = 4
# A test topology trades crash safety for speed: no fsync.
fsync = off
`, t.PrimaryPort, t.Dir, t.MaxConnections))
}

// makeStandby copies the running primary with pg_basebackup -R (standby.signal and
// primary_conninfo) through a replication slot of its own, and gives the copy its port and
// apply delay.
func (t *Topology) makeStandby(ctx context.Context) error {
	data := filepath.Join(t.Dir, standbyDir)
	if _, err := t.tools.run(ctx, "", "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(t.PrimaryPort), "-U", User,
		"-D", data, "-R", "-C", "-S", slotName, "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		return err
	}
	// The copy's postgresql.conf is the primary's: the lines below come later and win.
	return appendFile(filepath.Join(data, "postgresql.conf"), fmt.Sprintf(`
# pgcluster: the standby
port = %d
hot_standby = on
hot_standby_feedback = on
recovery_min_apply_delay = '%dms'
`, t.StandbyPort, t.ApplyDelay.Milliseconds()))
}

// startServer starts the cluster in data with pg_ctl and waits until it accepts connections.
func (t *Topology) startServer(ctx context.Context, data, logFile string) error {
	logPath := filepath.Join(t.Dir, logFile)
	_, err := t.tools.run(ctx, logPath, "pg_ctl", "start", "-D", filepath.Join(t.Dir, data), "-l", logPath,
		"-w", "-t", strconv.Itoa(int(startTimeout.Seconds())), "-s")
	return err
}

// stopServer stops the cluster in data with pg_ctl in mode (smart, fast or immediate). A
// cluster that does not run is no error.
func (tl tools) stopServer(ctx context.Context, data, mode string) error {
	pid, ok := serverPID(data)
	if !ok || !alive(pid) {
		return nil
	}
	_, err := tl.run(ctx, "", "pg_ctl", "stop", "-D", data, "-m", mode, "-w", "-t", strconv.Itoa(int(startTimeout.Seconds())), "-s")
	return err
}

// serverPID reads the postmaster's process id from its lock file.
func serverPID(data string) (int, bool) {
	content, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	first, _, _ := strings.Cut(string(content), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	return pid, err == nil && pid > 0
}

// alive tells whether process pid runs: it exists and has not exited (a zombie, which its
// parent has yet to collect, has).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc to ask: it exists
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) == 0 || fields[0] != "Z"
}

// StopMode is how a server is stopped (pg_ctl's -m).
type StopMode string

const (
	// StopFast ends every session with an error (FATAL, SQLSTATE 57P01) and shuts down
	// cleanly, as an operator's restart does.
	StopFast StopMode = "fast"
	// StopImmediate cuts every connection at once without a message, as a crash of the server
	// does.
	StopImmediate StopMode = "immediate"
)

// StopStandby stops the standby; StartStandby starts it again. The primary keeps the WAL the
// standby misses meanwhile (a replication slot), so it catches up once started.
func (t *Topology) StopStandby(ctx context.Context, mode StopMode) error {
	return t.tools.stopServer(ctx, filepath.Join(t.Dir, standbyDir), string(mode))
}

// StartStandby starts the standby and waits until it accepts connections and streams WAL
// from the primary again. Starting a standby that runs is no error.
func (t *Topology) StartStandby(ctx context.Context) error {
	if pid, ok := serverPID(filepath.Join(t.Dir, standbyDir)); !ok || !alive(pid) {
		if err := t.startServer(ctx, standbyDir, standbyLog); err != nil {
			return err
		}
	}
	return t.waitFor(ctx, "the standby to stream from the primary", t.StandbyURL("postgres"),
		"SELECT count(*) = 1 FROM pg_stat_wal_receiver WHERE status = 'streaming'", filepath.Join(t.Dir, standbyLog))
}

// FreezeStandby stops the standby's processes where they stand (SIGSTOP), as a server that
// hangs does: its connections stay open, new ones are accepted by the kernel, and nothing
// answers. ThawStandby lets them go on (SIGCONT).
func (t *Topology) FreezeStandby() error { return t.signalStandby(syscall.SIGSTOP) }

// ThawStandby ends FreezeStandby.
func (t *Topology) ThawStandby() error { return t.signalStandby(syscall.SIGCONT) }

// signalStandby sends sig to the standby's postmaster and every process it runs.
func (t *Topology) signalStandby(sig syscall.Signal) error {
	pid, ok := serverPID(filepath.Join(t.Dir, standbyDir))
	if !ok {
		return errors.New("pgcluster: the standby does not run")
	}
	pids := []int{pid}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	for _, p := range procs {
		child, err := strconv.Atoi(p.Name())
		if err != nil || child == pid {
			continue
		}
		if _, parent, err := procTimes(child, false); err == nil && parent == pid {
			pids = append(pids, child)
		}
	}
	for _, p := range pids {
		if err := syscall.Kill(p, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("pgcluster: signal %v to %d: %w", sig, p, err)
		}
	}
	return nil
}

// PauseReplay stops the standby from applying WAL until ResumeReplay: whatever the primary
// commits meanwhile is certainly not on the standby, however slow the host.
func (t *Topology) PauseReplay(ctx context.Context) error {
	if err := t.exec(ctx, t.StandbyURL("postgres"), "SELECT pg_wal_replay_pause()"); err != nil {
		return err
	}
	return t.waitFor(ctx, "the standby's replay to pause", t.StandbyURL("postgres"),
		"SELECT pg_get_wal_replay_pause_state() = 'paused'", filepath.Join(t.Dir, standbyLog))
}

// ResumeReplay lets the standby apply WAL again, each transaction ApplyDelay after its commit.
func (t *Topology) ResumeReplay(ctx context.Context) error {
	return t.exec(ctx, t.StandbyURL("postgres"), "SELECT pg_wal_replay_resume()")
}

// CaughtUp waits until the standby has replayed everything the primary had written when it was
// called: at least ApplyDelay after the last commit.
func (t *Topology) CaughtUp(ctx context.Context) error {
	var lsn string
	if err := t.queryRow(ctx, t.PrimaryURL("postgres"), "SELECT pg_current_wal_lsn()::text", &lsn); err != nil {
		return err
	}
	return t.waitFor(ctx, "the standby to replay "+lsn, t.StandbyURL("postgres"),
		"SELECT pg_last_wal_replay_lsn() >= '"+lsn+"'::pg_lsn", filepath.Join(t.Dir, standbyLog))
}

func (t *Topology) startBouncer(ctx context.Context) error {
	// The user list only has to name the superuser: PgBouncer asks the primary about any other
	// role (auth_user), and trusts them all.
	if err := t.tools.writeFile(filepath.Join(t.Dir, bouncerUser), `"`+User+`" ""`+"\n"); err != nil {
		return err
	}
	ini := fmt.Sprintf(`;; pgcluster: PgBouncer in transaction pooling in front of the primary
[databases]
* = host=127.0.0.1 port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
auth_user = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = %d
pidfile = %s
logfile = %s
admin_users = %s
stats_users = %s
`, t.PrimaryPort, t.BouncerPort, filepath.Join(t.Dir, bouncerUser), User, t.PoolSize, t.MaxClientConns,
		filepath.Join(t.Dir, bouncerPID), filepath.Join(t.Dir, bouncerLog), User, User)
	iniPath := filepath.Join(t.Dir, bouncerINI)
	if err := t.tools.writeFile(iniPath, ini); err != nil {
		return err
	}
	logPath := filepath.Join(t.Dir, bouncerLog)
	if _, err := t.tools.run(ctx, logPath, t.tools.bouncer, "-d", "-q", iniPath); err != nil {
		return err
	}
	// PgBouncer goes to the background before it listens: a port it could not take shows in its
	// log only, and another program may answer there. It is ours once it leads to our primary.
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		var ours bool
		err := t.queryRow(ctx, t.BouncerURL("postgres"), fmt.Sprintf("SELECT inet_server_port() = %d", t.PrimaryPort), &ours)
		if err == nil && ours {
			return nil
		}
		if log, _ := os.ReadFile(logPath); strings.Contains(string(log), " FATAL ") {
			return fmt.Errorf("pgcluster: PgBouncer did not start\n%s", logTail(logPath))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: waiting for PgBouncer to answer: %w (last: %v)\n%s", ctx.Err(), err, logTail(logPath))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stopBouncer stops the PgBouncer of pidFile and waits until it has exited. A PgBouncer that
// does not run is no error. It is killed outright: its own immediate shutdown (SIGTERM) takes
// about two seconds, and its clients and servers go down with it anyway.
func stopBouncer(ctx context.Context, pidFile string) error {
	pid, err := bouncerPIDOf(pidFile)
	if err != nil {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for alive(pid) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: PgBouncer (pid %d) did not exit: %w", pid, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// bouncerPIDOf reads the process id of the running PgBouncer of pidFile.
func bouncerPIDOf(pidFile string) (int, error) {
	content, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, fmt.Errorf("pgcluster: PgBouncer does not run: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(content)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pgcluster: %s holds no process id", pidFile)
	}
	// A pid file left from before a reboot may name another program by now.
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || strings.TrimSpace(string(comm)) != "pgbouncer" {
		return 0, fmt.Errorf("pgcluster: PgBouncer (pid %d) does not run", pid)
	}
	return pid, nil
}

// waitFor polls query (one boolean) on u until it answers true, for at most startTimeout.
func (t *Topology) waitFor(ctx context.Context, what, u, query, logFile string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var last error
	for {
		var ok bool
		if last = t.queryRow(ctx, u, query, &ok); last == nil && ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: waiting for %s: %w (last: %v)\n%s", what, ctx.Err(), last, logTail(logFile))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (t *Topology) queryRow(ctx context.Context, u, query string, dest ...any) error {
	conn, err := connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, query).Scan(dest...)
}

func (t *Topology) exec(ctx context.Context, u, query string) error {
	conn, err := connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, query)
	return err
}

// connect opens one connection, waiting at most 5 s for it.
func connect(ctx context.Context, u string) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return pgx.Connect(cctx, u)
}
