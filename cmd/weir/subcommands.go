package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// requireSubcommands makes every command under c that only groups others
// (weir tasks, keys, nodes) fail when it is run without one of them,
// instead of printing its help and exiting 0: `weir tasks --key $KEY
// list` with KEY unset is `weir tasks --key list`, and a script must see
// that fail.
func requireSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		requireSubcommands(sub)
	}
	if !c.HasParent() || c.Runnable() || !c.HasSubCommands() {
		return
	}
	c.RunE = func(cmd *cobra.Command, args []string) error { return errNoSubcommand(cmd, args) }
}

// errNoSubcommand says which subcommands cmd has, and names a flag that
// took one of their names as its value: the value meant for it was empty.
func errNoSubcommand(cmd *cobra.Command, args []string) error {
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	msg := cmd.CommandPath() + " needs a subcommand"
	if len(args) > 0 {
		msg = fmt.Sprintf("%s has no subcommand %q", cmd.CommandPath(), args[0])
	}
	msg += " (" + strings.Join(names, ", ") + ")"
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if v := f.Value.String(); slices.Contains(names, v) {
			msg += fmt.Sprintf(`; --%s took %q as its value: was the value meant for it empty, as an unset variable is?`, f.Name, v)
		}
	})
	return errors.New(msg)
}
