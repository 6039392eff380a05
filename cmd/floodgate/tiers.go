package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/tier"
)

// DatabaseEnv names the environment variable the keys and tiers commands
// read the PostgreSQL URL from when --database is not given.
const DatabaseEnv = "FLOODGATE_DATABASE_URL"

// dbFlags are the connection flags shared by `floodgate keys` and
// `floodgate tiers`.
type dbFlags struct {
	url, config string
}

func (f *dbFlags) register(c *cobra.Command) {
	c.PersistentFlags().StringVar(&f.url, "database", "", "PostgreSQL URL (default $"+DatabaseEnv+", else database.url of -c)")
	c.PersistentFlags().StringVarP(&f.config, "config", "c", "", "configuration file whose database.url to use")
}

// resolve returns the database URL: --database, else $FLOODGATE_DATABASE_URL,
// else database.url of the -c file.
func (f *dbFlags) resolve() (string, error) {
	if f.url != "" {
		return f.url, nil
	}
	if u := os.Getenv(DatabaseEnv); u != "" {
		return u, nil
	}
	if f.config != "" {
		cfg, err := config.Load(f.config)
		if err != nil {
			return "", err
		}
		if cfg.Database.URL == "" {
			return "", fmt.Errorf("%s has no database.url", f.config)
		}
		return cfg.Database.URL, nil
	}
	return "", fmt.Errorf("no database: give --database, set $%s, or name a configuration with database.url in -c", DatabaseEnv)
}

// connTimeout bounds connecting and migrating; the commands' own queries
// are short.
const connTimeout = 15 * time.Second

// withDB connects, brings the tables up to date with tier.Migrate (so the
// commands work on an empty database), and runs fn.
func (f *dbFlags) withDB(cmd *cobra.Command, fn func(ctx context.Context, db *pgx.Conn) error) error {
	u, err := f.resolve()
	if err != nil {
		return err
	}
	pc, err := pgx.ParseConfig(u)
	if err != nil {
		// pgx's message may quote the URL, password and all.
		return errors.New("the database URL is not a PostgreSQL connection string (want postgres://user:password@host:5432/db)")
	}
	ctx, cancel := context.WithTimeout(cmdContext(cmd), connTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("connect to %s:%d/%s: %w", pc.Host, pc.Port, pc.Database, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := tier.Migrate(ctx, conn); err != nil {
		return err
	}
	return fn(ctx, conn)
}

// groupRun makes a command that only groups subcommands refuse an unknown
// one: cobra would print the help and exit 0, hiding a typo in a script.
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unknown command %q (run %s --help)", args[0], cmd.CommandPath())
	}
	return cmd.Help()
}

// newKeys is `floodgate keys add|list|revoke`.
func newKeys() *cobra.Command {
	var db dbFlags
	c := &cobra.Command{
		Use:   "keys",
		Short: "Add, list and revoke API keys in PostgreSQL (tiers.source postgres)",
		Long: `Manage the API keys of tiered quotas (docs/TIERS.md). Keys are stored only as
SHA-256 hashes: add prints a new key once, and nothing can show it again.

The database is --database, else $` + DatabaseEnv + `, else database.url of the
configuration given with -c. The tables are created on first use.`,
		RunE: groupRun,
	}
	db.register(c)

	var tenant, tierName string
	add := &cobra.Command{
		Use:   "add --tenant NAME --tier NAME",
		Short: "Create a key for a tenant on a tier and print it, once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return db.withDB(cmd, func(ctx context.Context, conn *pgx.Conn) error {
				k, err := tier.AddKey(ctx, conn, tenant, tierName)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n\nid:     %s\ntenant: %s\ntier:   %s\n\nThis is the only time the key is shown: only its SHA-256 is stored.\n",
					k.Secret, k.Hash.ID(), k.Tenant, k.Tier)
				return err
			})
		},
	}
	add.Flags().StringVar(&tenant, "tenant", "", "tenant owning the key; its keys share its quota (required)")
	add.Flags().StringVar(&tierName, "tier", "", "tier of the key, as `floodgate tiers set` made it (required)")
	add.MarkFlagRequired("tenant")
	add.MarkFlagRequired("tier")

	var listTenant string
	list := &cobra.Command{
		Use:   "list [--tenant NAME]",
		Short: "List keys by ID, newest first (never the keys themselves)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return db.withDB(cmd, func(ctx context.Context, conn *pgx.Conn) error {
				keys, err := tier.ListKeys(ctx, conn, listTenant)
				if err != nil {
					return err
				}
				return printKeys(cmd.OutOrStdout(), keys)
			})
		},
	}
	list.Flags().StringVar(&listTenant, "tenant", "", "only this tenant's keys")

	revoke := &cobra.Command{
		Use:   "revoke KEY-ID|HASH",
		Short: "Disable a key; daemons refuse it once their cache entry expires (tiers.cache.ttl)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return db.withDB(cmd, func(ctx context.Context, conn *pgx.Conn) error {
				id, err := tier.RevokeKey(ctx, conn, args[0])
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "revoked %s; caches refuse it once their entry expires\n", id)
				return err
			})
		},
	}
	c.AddCommand(add, list, revoke)
	return c
}

// newTiers is `floodgate tiers set|list`.
func newTiers() *cobra.Command {
	var db dbFlags
	c := &cobra.Command{
		Use:   "tiers",
		Short: "Set and list the tiers of API keys in PostgreSQL (tiers.source postgres)",
		Long: `Manage the tiers of tiered quotas (docs/TIERS.md): each tier is a set of
policies that all apply to its keys.

  floodgate tiers set free --policy name=free-minute,quota=10,window=1m
  floodgate tiers set pro --policy name=pro-minute,quota=1000,window=1m \
      --policy name=pro-day,quota=100000,window=24h,algorithm=fixed-window
  floodgate tiers list

The database is --database, else $` + DatabaseEnv + `, else database.url of the
configuration given with -c. The tables are created on first use.`,
		RunE: groupRun,
	}
	db.register(c)

	var specs []string
	set := &cobra.Command{
		Use:   "set NAME --policy SPEC [--policy SPEC]...",
		Short: "Create a tier or replace all of its policies",
		Long: `Create tier NAME or replace all of its policies. Each --policy is
name=…,quota=…,window=… with optional algorithm= (default sliding-window-counter),
burst= (token-bucket and gcra) and unit= (requests, content-bytes,
concurrent-requests). Daemons apply the change as their cache entries expire.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var limits tier.Limits
			for _, s := range specs {
				if err := tier.ParseLimit(s, &limits); err != nil {
					return err
				}
			}
			return db.withDB(cmd, func(ctx context.Context, conn *pgx.Conn) error {
				if err := tier.TiersSet(ctx, conn, args[0], limits); err != nil {
					return err
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "tier %s: %s\n", args[0], tier.FormatLimits(limits))
				return err
			})
		},
	}
	// StringArray, not StringSlice: a policy spec contains commas.
	set.Flags().StringArrayVarP(&specs, "policy", "p", nil, "a policy: name=…,quota=…,window=…[,algorithm=…][,burst=…][,unit=…]; repeat for more (required)")
	set.MarkFlagRequired("policy")

	list := &cobra.Command{
		Use:   "list",
		Short: "List tiers with their policies and number of enabled keys",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return db.withDB(cmd, func(ctx context.Context, conn *pgx.Conn) error {
				tiers, err := tier.ListTiers(ctx, conn)
				if err != nil {
					return err
				}
				return printTiers(cmd.OutOrStdout(), tiers)
			})
		},
	}
	c.AddCommand(set, list)
	return c
}

// printKeys writes keys as a table: id, tenant, tier, state and creation
// time. Keys are never printed, only their IDs.
func printKeys(w io.Writer, keys []tier.Key) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTENANT\tTIER\tSTATE\tCREATED")
	for _, k := range keys {
		state := "enabled"
		if !k.Enabled {
			state = "revoked"
			if k.Revoked != nil {
				state += " " + k.Revoked.UTC().Format(time.RFC3339)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Tenant, k.Tier, state, k.Created.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

// printTiers writes tiers as a table: name, enabled keys, limits.
func printTiers(w io.Writer, tiers []tier.TierInfo) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TIER\tKEYS\tPOLICIES")
	for _, t := range tiers {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", t.Name, t.Keys, tier.FormatLimits(t.Limits))
	}
	return tw.Flush()
}
