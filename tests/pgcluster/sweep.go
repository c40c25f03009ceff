package pgcluster

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// sweepAbandoned stops and removes the topologies that Start made under os.TempDir() for a
// process that has exited since without calling Stop (a test binary killed at its timeout):
// their servers would otherwise run, and hold their ports, until the host restarts. Topologies
// of processes still running are left alone, and so are directories named by Options.Dir,
// which have no owner.
func sweepAbandoned(ctx context.Context, tl tools) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, dir := range dirs {
		content, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // being made right now, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(content)))
		if err != nil || pid <= 0 || alive(pid) {
			continue
		}
		_ = teardownDir(ctx, tl, dir)
	}
}
