package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func init() {
	rootCmd.Version = versionString(debug.ReadBuildInfo())
	rootCmd.SetVersionTemplate("{{.Version}}\n")
	rootCmd.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the module version and VCS revision weir was built from",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			fmt.Fprintln(cmd.OutOrStdout(), rootCmd.Version)
		},
	})
}

// versionString says what a binary was built from: the main module's
// version ("(devel)" for a build from a checkout without one), the VCS
// revision and time Go stamped into it, whether the tree had changes, and
// the Go version. `go run` and -buildvcs=false stamp no revision.
func versionString(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "weir: no build information in this binary"
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	s := bi.Settings
	get := func(key string) string {
		for _, kv := range s {
			if kv.Key == key {
				return kv.Value
			}
		}
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "weir %s", version)
	if rev := get("vcs.revision"); rev != "" {
		fmt.Fprintf(&b, ", revision %s", rev)
		if t := get("vcs.time"); t != "" {
			fmt.Fprintf(&b, " (%s)", t)
		}
		if get("vcs.modified") == "true" {
			b.WriteString(", with uncommitted changes")
		}
	} else {
		b.WriteString(", no VCS revision stamped (go run, or built with -buildvcs=false)")
	}
	fmt.Fprintf(&b, ", %s", bi.GoVersion)
	return b.String()
}
