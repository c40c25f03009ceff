//go:build pprof

package main

import (
	"log"
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof/ on http.DefaultServeMux
)

// Built with -tags pprof, the hand-written server also serves net/http/pprof on
// 127.0.0.1:6061, so that its profile can be set beside the server's (which a pprof build of
// rideapi serves on 6060).
func init() {
	profileHandwritten = func() {
		go func() { log.Println(http.ListenAndServe("127.0.0.1:6061", nil)) }()
	}
}
