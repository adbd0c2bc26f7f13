package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/edge"
	"github.com/weir-gateway/weir/httpapi"
	"github.com/weir-gateway/weir/serve"
)

func init() { rootCmd.AddCommand(nodesCmd()) }

// nodesCmd manages edge nodes in the database named by the config file,
// beside a running server as `weir keys` does.
func nodesCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{Use: "nodes", Short: "Create, list and revoke edge nodes and their tokens"}
	cmd.PersistentFlags().StringVarP(&path, "config", "c", "weir.yaml", "config file (for the storage path)")

	var name string
	create := &cobra.Command{
		Use:   "create --name NAME",
		Short: "Create a node; its token is shown once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return errors.New("create node: --name is required: the name to know the node by, unique among nodes")
			}
			_, db, err := openStore(cmd.Context(), path)
			if err != nil {
				return err
			}
			defer db.Close()
			n, token, err := serve.CreateNode(cmd.Context(), db, name, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "id:    %s\nname:  %s\ntoken: %s\n\n"+
				"The token is shown only now. Put it in the node's config, as token: in\n"+
				"node.yaml, or in the node's environment as WEIR_NODE_TOKEN.\n", n.ID, n.Name, token)
			return nil
		},
	}
	create.Flags().StringVar(&name, "name", "", "the node's name, unique among nodes (required)")

	var addr, token string
	list := &cobra.Command{
		Use:   "list",
		Short: "List nodes, by name",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if addr != "" {
				var view httpapi.NodesView
				if err := adminGet(addr, token, "/admin/nodes", &view); err != nil {
					return err
				}
				printLiveNodes(cmd.OutOrStdout(), view.Nodes)
				return nil
			}
			_, db, err := openStore(cmd.Context(), path)
			if err != nil {
				return err
			}
			defer db.Close()
			ns, err := db.NodeList(cmd.Context())
			if err != nil {
				return err
			}
			printNodes(cmd.OutOrStdout(), ns)
			return nil
		},
	}

	list.Flags().StringVar(&addr, "addr", "", "a running server's base URL: list the nodes it sees now (sessions, generations, slots used, heartbeats) instead of the stored tokens")
	list.Flags().StringVar(&token, "token", "", "admin token, with --addr (when the server sets one; env WEIR_ADMIN_TOKEN)")

	revoke := &cobra.Command{
		Use:   "revoke ID|NAME",
		Short: "Revoke a node's token, by the node's id or name",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, db, err := openStore(cmd.Context(), path)
			if err != nil {
				return err
			}
			defer db.Close()
			n, err := serve.FindNode(cmd.Context(), db, args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !n.Active() {
				fmt.Fprintf(out, "node %s (%s) was already revoked at %s\n", n.ID, n.Name, n.RevokedAt.Format(time.RFC3339))
				return nil
			}
			if err := db.NodeRevoke(cmd.Context(), &weir.NodeRevokeParams{ID: n.ID, At: time.Now()}); err != nil {
				return err
			}
			fmt.Fprintf(out, "revoked node %s (%s)\n", n.ID, n.Name)
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke, nodesForgetCmd())
	return cmd
}

// nodesForgetCmd forgets a gone node on a running server: its slots'
// scopes live in the server's memory (a fleet's engine), not in the
// database, so it goes through the admin API.
func nodesForgetCmd() *cobra.Command {
	var addr, token string
	cmd := &cobra.Command{
		Use:   "forget ID|NAME --addr URL",
		Short: "Forget a gone node now: retire its slots' scopes (edge.forget_after does it after a day)",
		Long: "Forget a node that is gone (not connected) on a running server, and in a fleet on every replica that\n" +
			"held its session: its slots' scopes are retired and it leaves /admin/nodes. A connected node is refused:\n" +
			"revoke its token first (weir nodes revoke), which ends its session. The node may dial in again later.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if addr == "" {
				return errors.New("forget node: --addr is required: the running server's base URL (a node's scopes are the server's, not the database's)")
			}
			var f weir.ForgottenNode
			if err := adminCall(http.MethodPost, addr, token, "/admin/nodes/"+url.PathEscape(args[0])+"/forget", &f); err != nil {
				return fmt.Errorf("forget node %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "forgot node %s (%s); retired %d scopes\n", f.Name, f.ID, len(f.Scopes))
			for _, s := range f.Scopes {
				fmt.Fprintf(cmd.OutOrStdout(), "  %s\n", s)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "", "the running server's base URL (required)")
	cmd.Flags().StringVar(&token, "token", "", "admin token (when the server sets one; env WEIR_ADMIN_TOKEN)")
	return cmd
}

func printNodes(w io.Writer, ns []weir.Node) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPREFIX\tCREATED\tREVOKED")
	for _, n := range ns {
		revoked := "-"
		if !n.Active() {
			revoked = n.RevokedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s…\t%s\t%s\n", n.ID, n.Name, n.Prefix, n.CreatedAt.Format(time.RFC3339), revoked)
	}
	tw.Flush()
}

// printLiveNodes prints the nodes a server sees: a line a node, and a
// line a provider under it.
func printLiveNodes(w io.Writer, ns []edge.NodeView) {
	if len(ns) == 0 {
		fmt.Fprintln(w, "no node has registered since the server started")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPROVIDER\tSTATE\tGENERATION\tSTREAMS READY\tSLOTS USED\tLONG USED\tQUEUED\tLAST SEEN\tMODELS")
	for _, n := range ns {
		state := "connected"
		switch {
		case !n.Connected:
			state = "gone"
		case n.Draining:
			state = "draining"
		}
		if n.Replica != "" {
			// Another replica's node, as that replica last published it.
			state += " to " + n.Replica
		}
		seen := (time.Duration(n.LastSeenMs) * time.Millisecond).String() + " ago"
		fmt.Fprintf(tw, "%s (%s)\t\t%s\t%d\t%d\t\t\t\t%s\t\n", n.Name, n.ID, state, n.Generation, n.ReadyStreams, seen)
		for _, p := range n.Providers {
			pstate := "serving"
			switch {
			case p.Orphaned:
				pstate = "orphaned"
			case p.Health == "unavailable":
				pstate = "unavailable"
			case p.Paused:
				pstate = "paused"
			}
			long := "-"
			if p.LongSlots > 0 {
				long = fmt.Sprintf("%d/%d", p.LongUsed, p.LongSlots)
			}
			fmt.Fprintf(tw, "\t%s\t%s\t\t\t%d/%d\t%s\t%d\t\t%s\n", p.ID, pstate, p.Used, p.Slots, long, p.Queued, strings.Join(p.Models, ","))
		}
	}
	tw.Flush()
}
