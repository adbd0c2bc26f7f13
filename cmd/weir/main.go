// Command weir is Weir's one binary: the gateway and the tools around it.
// Each subcommand lives in its own file and registers itself from that
// file's init, so adding one never edits this file.
package main

import (
	"os"

	"github.com/spf13/cobra"
)

// rootCmd is the weir command; subcommands add themselves to it with
// func init() { rootCmd.AddCommand(...) }.
var rootCmd = &cobra.Command{
	Use:   "weir",
	Short: "Weir is an AI gateway that queues instead of failing",
	Long: `Weir sits between applications and AI model providers and admits every
request through named capacities in a fair, durable order: a burst waits in
a queue instead of bouncing off a provider's 429.`,
	SilenceUsage: true, // a failing command prints its error, not its usage
}

func main() {
	requireSubcommands(rootCmd)
	if err := rootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
