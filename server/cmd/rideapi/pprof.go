//go:build pprof

package main

import (
	"log/slog"
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof/ on http.DefaultServeMux
)

// Built with -tags pprof (for profiling under `go tool task bench`), the server also serves
// net/http/pprof on 127.0.0.1:6060. Release builds never contain it.
func init() {
	go func() {
		if err := http.ListenAndServe("127.0.0.1:6060", nil); err != nil {
			slog.Error("pprof listener", "error", err)
		}
	}()
}
