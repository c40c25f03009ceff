// Package pgcluster runs the database topology of a deployment that outgrew one PostgreSQL
// server, on loopback ports, from the stock PostgreSQL and PgBouncer programs (Debian's
// postgresql-15 and pgbouncer packages): a primary cluster, one streaming standby made with
// pg_basebackup that applies WAL with a deliberate delay (recovery_min_apply_delay, so that its
// lag is certain), and PgBouncer in transaction pooling in front of the primary.
//
// Start brings it up from nothing and Stop takes every process it started down and removes its
// files. The specs of the topology use it from Go, and `go tool task cluster:up` from a shell
// (see README.md). Nothing here is used by the server itself.
package pgcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Defaults of Options.
const (
	// DefaultApplyDelay is the standby's recovery_min_apply_delay: every transaction reaches
	// it at least this long after its commit on the primary.
	DefaultApplyDelay = 2 * time.Second
	// DefaultMaxConnections is the primary's max_connections, PostgreSQL's own default.
	DefaultMaxConnections = 100
	// DefaultPoolSize is PgBouncer's default_pool_size: the server connections it opens to
	// the primary for each pair of database and user.
	DefaultPoolSize = 20
	// DefaultMaxClientConns is PgBouncer's max_client_conn: the client connections it accepts
	// in all.
	DefaultMaxClientConns = 2000
)

// User is the superuser of the clusters, trusted on the loopback interface.
const User = "postgres"

// slotName is the primary's replication slot for the standby: the primary keeps the WAL the
// standby has not received, however long the standby is down.
const slotName = "ride_standby"

// Options shape a Topology. The zero value is a topology in a temporary directory on free
// ports with the defaults above.
type Options struct {
	// Dir holds the clusters, PgBouncer's files and every log. Empty: a new directory under
	// os.TempDir(). A directory named here is kept from one Start to the next: Start on a
	// topology of Dir that is up returns it as it is (see Start).
	Dir string
	// PrimaryPort, StandbyPort and BouncerPort are the loopback ports; 0 picks a free one.
	PrimaryPort, StandbyPort, BouncerPort int
	// ApplyDelay is the standby's recovery_min_apply_delay; 0 is DefaultApplyDelay and a
	// negative value none at all.
	ApplyDelay time.Duration
	// MaxConnections is the primary's max_connections (the standby takes the same, as hot
	// standby requires); 0 is DefaultMaxConnections.
	MaxConnections int
	// PoolSize is PgBouncer's default_pool_size; 0 is DefaultPoolSize.
	PoolSize int
	// MaxClientConns is PgBouncer's max_client_conn; 0 is DefaultMaxClientConns.
	MaxClientConns int
	// BinDir is the directory of PostgreSQL's programs (initdb, pg_ctl, pg_basebackup); empty
	// looks in /usr/lib/postgresql/*/bin (the newest version) and then on PATH.
	BinDir string
	// PgBouncer is the PgBouncer program; empty looks on PATH and in /usr/sbin.
	PgBouncer string
}

func (o Options) withDefaults() Options {
	if o.ApplyDelay == 0 {
		o.ApplyDelay = DefaultApplyDelay
	}
	if o.ApplyDelay < 0 {
		o.ApplyDelay = 0
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	if o.PoolSize == 0 {
		o.PoolSize = DefaultPoolSize
	}
	if o.MaxClientConns == 0 {
		o.MaxClientConns = DefaultMaxClientConns
	}
	return o
}

// Topology is a running primary, its standby and PgBouncer. Its methods are not safe for
// concurrent use.
type Topology struct {
	// Dir holds every file of the topology; Stop removes it.
	Dir string
	// PrimaryPort, StandbyPort and BouncerPort are the loopback ports of the three servers.
	PrimaryPort, StandbyPort, BouncerPort int
	// ApplyDelay is the standby's recovery_min_apply_delay.
	ApplyDelay time.Duration
	// MaxConnections is the primary's max_connections.
	MaxConnections int
	// PoolSize is PgBouncer's default_pool_size.
	PoolSize int
	// MaxClientConns is PgBouncer's max_client_conn.
	MaxClientConns int
	// StartedIn is how long Start took to bring the topology up; zero for a topology Start
	// found already up.
	StartedIn time.Duration `json:"-"`

	tools tools
}

// PrimaryURL is the URL of database db on the primary, directly.
func (t *Topology) PrimaryURL(db string) string { return databaseURL(t.PrimaryPort, db) }

// StandbyURL is the URL of database db on the standby (read only, and late by ApplyDelay).
func (t *Topology) StandbyURL(db string) string { return databaseURL(t.StandbyPort, db) }

// BouncerURL is the URL of database db on the primary through PgBouncer. PgBouncer serves any
// database of the primary, including those created after it started.
func (t *Topology) BouncerURL(db string) string { return databaseURL(t.BouncerPort, db) }

// BouncerAdminURL is the URL of PgBouncer's console (SHOW POOLS, SHOW CONFIG…), which speaks
// the simple query protocol only.
func (t *Topology) BouncerAdminURL() string {
	return databaseURL(t.BouncerPort, "pgbouncer") + "&default_query_exec_mode=simple_protocol"
}

func databaseURL(port int, db string) string {
	u := url.URL{Scheme: "postgres", User: url.User(User), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// The files of a topology's directory.
const (
	stateFile   = "topology.json"
	ownerFile   = "owner.pid"
	primaryDir  = "primary"
	standbyDir  = "standby"
	bouncerINI  = "pgbouncer.ini"
	bouncerUser = "userlist.txt"
	bouncerPID  = "pgbouncer.pid"
	bouncerLog  = "pgbouncer.log"
	primaryLog  = "primary.log"
	standbyLog  = "standby.log"
	// tempPrefix starts the name of a directory Start made under os.TempDir().
	tempPrefix = "ride-pgcluster-"
)

// Start brings a topology up and returns it once all three servers answer and the standby
// streams from the primary.
//
// With an empty Options.Dir it starts from nothing in a directory of its own, first removing
// what topologies of processes that died without Stop left under os.TempDir(). With a Dir
// named, Start is idempotent: a topology of that Dir that is up and answers is returned as it
// is, and anything else found there (a topology half up, or down after a reboot) is stopped
// and removed before a new one starts. A Dir that holds other files is refused.
//
// On failure Start stops what it started, and its error quotes the end of the failing
// program's log.
func Start(ctx context.Context, opts Options) (*Topology, error) {
	began := time.Now()
	tl, err := findTools(opts)
	if err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		sweepAbandoned(ctx, tl)
	} else if t, err := Attach(ctx, opts.Dir); err == nil {
		if differ := t.differsFrom(opts); differ != "" {
			return nil, fmt.Errorf("pgcluster: the topology in %s is up with %s: stop it first to change its settings", opts.Dir, differ)
		}
		return t, nil
	} else if err := teardownDir(ctx, tl, opts.Dir); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	for attempt := 1; ; attempt++ {
		t, err := startIn(ctx, o, tl)
		// A free port may be taken by another program between the look and the bind: free
		// ports are looked for again, a few times.
		if err != nil && attempt < 3 && o.PrimaryPort == 0 && o.StandbyPort == 0 && o.BouncerPort == 0 &&
			strings.Contains(err.Error(), "in use") {
			continue
		}
		if err != nil {
			return nil, err
		}
		t.StartedIn = time.Since(began)
		return t, nil
	}
}

// startIn makes a topology's directory (o.Dir or a new one) and starts its servers.
func startIn(ctx context.Context, o Options, tl tools) (*Topology, error) {
	t := &Topology{Dir: o.Dir, ApplyDelay: o.ApplyDelay, MaxConnections: o.MaxConnections, PoolSize: o.PoolSize,
		MaxClientConns: o.MaxClientConns, tools: tl}
	var err error
	if t.Dir == "" {
		if t.Dir, err = os.MkdirTemp("", tempPrefix); err != nil {
			return nil, fmt.Errorf("pgcluster: %w", err)
		}
		// The owner's process id: a later Start removes the directory once that process is gone.
		if err := os.WriteFile(filepath.Join(t.Dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			_ = os.RemoveAll(t.Dir)
			return nil, fmt.Errorf("pgcluster: %w", err)
		}
	} else if err := os.MkdirAll(t.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	if err := tl.own(t.Dir); err != nil {
		_ = os.RemoveAll(t.Dir)
		return nil, err
	}
	if err := t.start(ctx, o); err != nil {
		_ = t.Stop()
		return nil, err
	}
	return t, nil
}

func (t *Topology) start(ctx context.Context, o Options) error {
	var err error
	if t.PrimaryPort, err = portOr(o.PrimaryPort); err != nil {
		return err
	}
	if t.StandbyPort, err = portOr(o.StandbyPort); err != nil {
		return err
	}
	if t.BouncerPort, err = portOr(o.BouncerPort); err != nil {
		return err
	}
	// The state is written first, so that Stop finds what to stop whatever step fails.
	if err := t.save(); err != nil {
		return err
	}
	if err := t.initPrimary(ctx); err != nil {
		return err
	}
	if err := t.startServer(ctx, primaryDir, primaryLog); err != nil {
		return err
	}
	if err := t.makeStandby(ctx); err != nil {
		return err
	}
	if err := t.StartStandby(ctx); err != nil {
		return err
	}
	return t.startBouncer(ctx)
}

// Load returns the topology recorded in dir as it was started, without checking that it
// runs: to stop it, or to start its standby again.
func Load(dir string) (*Topology, error) {
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("pgcluster: no topology in %s: %w", dir, err)
	}
	t := &Topology{}
	if err := json.Unmarshal(data, t); err != nil {
		return nil, fmt.Errorf("pgcluster: %s: %w", filepath.Join(dir, stateFile), err)
	}
	t.Dir = dir
	if t.tools, err = findTools(Options{}); err != nil {
		return nil, err
	}
	return t, nil
}

// Attach returns the topology recorded in dir when all three of its servers answer, without
// starting or changing anything.
func Attach(ctx context.Context, dir string) (*Topology, error) {
	t, err := Load(dir)
	if err != nil {
		return nil, err
	}
	for _, u := range []string{t.PrimaryURL("postgres"), t.StandbyURL("postgres"), t.BouncerURL("postgres")} {
		if err := ping(ctx, u); err != nil {
			return nil, fmt.Errorf("pgcluster: the topology in %s is not up: %w", dir, err)
		}
	}
	return t, nil
}

// differsFrom names the first setting of t that opts asks otherwise, or is empty.
func (t *Topology) differsFrom(opts Options) string {
	o := opts.withDefaults()
	for _, c := range []struct {
		name        string
		have, asked any
		given       bool
	}{
		{"primary port", t.PrimaryPort, o.PrimaryPort, o.PrimaryPort != 0},
		{"standby port", t.StandbyPort, o.StandbyPort, o.StandbyPort != 0},
		{"PgBouncer port", t.BouncerPort, o.BouncerPort, o.BouncerPort != 0},
		{"apply delay", t.ApplyDelay, o.ApplyDelay, true},
		{"max_connections", t.MaxConnections, o.MaxConnections, true},
		{"default_pool_size", t.PoolSize, o.PoolSize, true},
		{"max_client_conn", t.MaxClientConns, o.MaxClientConns, true},
	} {
		if c.given && c.have != c.asked {
			return fmt.Sprintf("%s %v, not %v", c.name, c.have, c.asked)
		}
	}
	return ""
}

func (t *Topology) save() error {
	data, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(t.Dir, stateFile), data, 0o644)
}

// Stop takes every process of the topology down (PgBouncer, then the standby, then the
// primary, each at once: connections are cut) and removes its directory. Stopping a topology
// that is already down only removes what is left.
func (t *Topology) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if t.tools.bin == "" { // a Topology made of its Dir alone
		var err error
		if t.tools, err = findTools(Options{}); err != nil {
			return err
		}
	}
	return teardownDir(ctx, t.tools, t.Dir)
}

// teardownDir stops whatever a topology's directory runs and removes the directory. It refuses
// a directory that holds files of anything but a topology.
func teardownDir(ctx context.Context, tl tools, dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	ours := map[string]bool{stateFile: true, ownerFile: true, primaryDir: true, standbyDir: true, bouncerINI: true,
		bouncerUser: true, bouncerPID: true, bouncerLog: true, primaryLog: true, standbyLog: true}
	for _, e := range entries {
		if !ours[e.Name()] && !isSocketFile(e.Name()) {
			return fmt.Errorf("pgcluster: %s holds %s, which is not a topology's: refusing to remove it", dir, e.Name())
		}
	}
	var errs []error
	errs = append(errs, stopBouncer(ctx, filepath.Join(dir, bouncerPID)))
	for _, data := range []string{standbyDir, primaryDir} {
		errs = append(errs, tl.stopServer(ctx, filepath.Join(dir, data), "immediate"))
	}
	if err := errors.Join(errs...); err != nil {
		return err // the files stay for a look, and for a later Stop
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

// ping connects to u and runs one statement.
func ping(ctx context.Context, u string) error {
	conn, err := connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "SELECT 1")
	return err
}

// portOr returns port, or a free loopback port when port is 0.
func portOr(port int) (int, error) {
	if port != 0 {
		return port, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
