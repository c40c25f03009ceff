package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/rideapi/ride/server/app"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/store"
)

const keysUsage = `usage:
  rideapi keys create --role rider|driver|admin [--subject ID] [--account ID] [--description TEXT] [--expires RFC3339]
  rideapi keys list [--account ID]
  rideapi keys revoke [--account ID] KEY_ID

Admins can do the same through the API: /v1/api-keys.`

// keys runs the "keys" commands. Asking for help is not an error.
func keys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, keysUsage)
		return errors.New("keys: name a command: create, list or revoke")
	}
	var err error
	switch args[0] {
	case "create":
		err = createKey(ctx, args[1:], stdout, stderr)
	case "list":
		err = listKeys(ctx, args[1:], stdout, stderr)
	case "revoke":
		err = revokeKey(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, keysUsage)
		return nil
	default:
		fmt.Fprintln(stderr, keysUsage)
		return fmt.Errorf("keys: unknown command %q", args[0])
	}
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	var apiErr *problem.Error
	if errors.As(err, &apiErr) {
		return errors.New(apiErr.Detail)
	}
	return err
}

func keysFlags(name, usage string, stdout io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("keys "+name, flag.ContinueOnError)
	fs.SetOutput(stdout) // help is asked for, so it goes to stdout; errors come back to run
	account := fs.String("account", auth.DefaultAccount, "the account (tenant) of the key")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), usage)
		fs.PrintDefaults()
	}
	return fs, account
}

func createKey(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, account := keysFlags("create", "usage: rideapi keys create --role rider|driver|admin [--subject ID] [--account ID] [--description TEXT] [--expires RFC3339]\n\nPrints the new key alone on stdout; only its hash is stored.", stdout)
	role := fs.String("role", "", "rider, driver or admin (required)")
	subject := fs.String("subject", "", "the rider's (of the account) or driver's id (required for rider and driver keys)")
	description := fs.String("description", "", "a note for humans, e.g. which app holds the key")
	expires := fs.String("expires", "", "when the key stops working (RFC 3339); never when empty")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*role == auth.RoleRider || *role == auth.RoleDriver) && *subject == "" {
		return fmt.Errorf("a %s key needs --subject (the %s's id)", *role, *role)
	}
	p := app.APIKeyParams{Role: *role, Subject: *subject, Account: *account}
	if *description != "" {
		p.Description = description
	}
	if *expires != "" {
		at, err := time.Parse(time.RFC3339, *expires)
		if err != nil {
			return fmt.Errorf("--expires: %w", err)
		}
		p.ExpiresAt = &at
	}
	st, err := migratedStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	secret, _, err := app.New(app.Config{Store: st, Now: now}).CreateAPIKey(ctx, app.Operator(p.Account), p)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, secret)
	return nil
}

func listKeys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, account := keysFlags("list", "usage: rideapi keys list [--account ID]\n\nLists the account's keys, newest first, revoked ones included; never their secrets.", stdout)
	if err := fs.Parse(args); err != nil {
		return err
	}
	st, err := migratedStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tPREFIX\tROLE\tSUBJECT\tCREATED\tLAST USED\tEXPIRES\tREVOKED\tDESCRIPTION")
	page := store.PageParams{Limit: 100}
	for {
		keys, err := app.New(app.Config{Store: st, Now: now}).APIKeys(ctx, app.Operator(*account), page)
		if err != nil {
			return err
		}
		for _, k := range keys.Items {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, k.Role, orDash(k.Subject),
				k.CreatedAt.Format(time.RFC3339), timeOrDash(k.LastUsedAt), timeOrDash(k.ExpiresAt),
				timeOrDash(k.RevokedAt), orDash(k.Description))
		}
		if !keys.MoreAfter || len(keys.Items) == 0 {
			break
		}
		last := keys.Items[len(keys.Items)-1].Keyset()
		page.After = &last
	}
	return w.Flush()
}

func revokeKey(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, account := keysFlags("revoke", "usage: rideapi keys revoke [--account ID] KEY_ID\n\nRevokes the key; every replica refuses it within 1 second.", stdout)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.SetOutput(stderr)
		fs.Usage()
		return errors.New("keys revoke: name one key id (key_…)")
	}
	st, err := migratedStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	key, err := app.New(app.Config{Store: st, Now: now}).RevokeAPIKey(ctx, app.Operator(*account), fs.Arg(0))
	var refused *problem.Error
	if errors.As(err, &refused) && refused.Code == problem.NotFound {
		return fmt.Errorf("no key %s in account %s", fs.Arg(0), *account)
	} else if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "revoked %s at %s\n", key.ID, key.RevokedAt.UTC().Format(time.RFC3339))
	return nil
}

func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// now is the command line's clock, as the server's: UTC at microsecond precision.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
