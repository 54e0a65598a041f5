// Package buildinfo says which urlflow this is: the version, commit and commit date that
// the release build stamps into the binary (scripts/release, with -ldflags -X), and the Go
// version it was built with. A build that was not stamped says "devel", with the VCS
// revision when Go recorded one.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Stamped by the release build:
//
//	-X github.com/urlflow/urlflow/internal/buildinfo.version=v0.1.0
//	-X github.com/urlflow/urlflow/internal/buildinfo.commit=<full commit hash>
//	-X github.com/urlflow/urlflow/internal/buildinfo.date=<commit date, RFC 3339>
var version, commit, date string

// Info is what Get says of this binary.
type Info struct {
	// Version is the release's semantic version ("v0.1.0"), or "devel".
	Version string `json:"version"`
	// Commit is the commit built, and Date its commit date (RFC 3339); empty when unknown.
	Commit string `json:"commit,omitempty"`
	Date   string `json:"date,omitempty"`
	// Go is the version of Go that built it.
	Go string `json:"go"`
}

// Get returns what is known of this binary, read once: the user agent of every request
// urlflow sends asks for it, and reading the build's record allocated 8 KB each time.
var Get = sync.OnceValue(read)

// read reads what is known of this binary.
func read() Info {
	info := Info{Version: version, Commit: commit, Date: date, Go: runtime.Version()}
	if info.Version != "" {
		return info
	}
	info.Version = "devel"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = v
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && info.Commit == "":
				info.Commit = s.Value
			case s.Key == "vcs.time" && info.Date == "":
				info.Date = s.Value
			}
		}
	}
	return info
}

// Short is the version with the commit's first 12 characters when it is not a release:
// what the banner, the admin pages and MCP's serverInfo show.
func (i Info) Short() string {
	if i.Version == "devel" && len(i.Commit) >= 12 {
		return "devel-" + i.Commit[:12]
	}
	return i.Version
}

// UserAgent is the User-Agent of the requests urlflow makes: "urlflow/VERSION".
func UserAgent() string { return "urlflow/" + Get().Short() }
