package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Stamped by scripts/build.sh (make build, the Dockerfile) with
//
//	-ldflags "-X main.version=v1.2.3 -X main.commit=<sha> -X main.date=<RFC 3339>"
//
// A plain go build or go install leaves them empty, and the build info
// fills in what it knows: the module version, the VCS revision and time.
var version, commit, date string

// buildInfo is what `floodgate version` prints: the stamped values, else
// the build info's, else "unknown".
type buildInfo struct {
	Version, Commit, Date, Go string
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Commit: commit, Date: date, Go: "unknown"}
	if info, ok := debug.ReadBuildInfo(); ok {
		b.Go = info.GoVersion
		if b.Version == "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision" && b.Commit == "":
				b.Commit = s.Value
			case s.Key == "vcs.time" && b.Date == "":
				b.Date = s.Value
			}
		}
	}
	for _, f := range []*string{&b.Version, &b.Commit, &b.Date} {
		if *f == "" {
			*f = "unknown"
		}
	}
	return b
}

func (b buildInfo) String() string {
	return fmt.Sprintf("floodgate %s\ncommit: %s\ndate:   %s\ngo:     %s", b.Version, b.Commit, b.Date, b.Go)
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), readBuildInfo())
			return nil
		},
	}
}
