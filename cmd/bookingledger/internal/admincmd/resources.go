package admincmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/httpapi/resourceapi"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/cmd/bookingledger/internal/ledgerdb"
	"bookingledger/domain/resource"
)

const resourcesUsage = `Usage: bookingledger resources link <name> <provider-resource>... [--by WHO] [flags]
       bookingledger resources unlink <name> [<provider-resource>...] [--by WHO] [flags]
       bookingledger resources list [--json] [flags]
       bookingledger resources show <name> [--json] [flags]
       bookingledger resources apply <file.json> [--by WHO] [flags]

Linked resources: one host's calendars at several providers (a Calendly user, a Cal.com user, an
Acuity calendar) joined under one name, so that the calendar guards them as one — an overlapping
booking on another provider is a conflict. A provider resource is the identifier the calendar shows
in its resource column (bookingledger calendar): https://api.calendly.com/users/<uuid>,
calcom-user-<id>, acuity-calendar-<id>, a Standard Webhooks sender's own names. An unlinked one is
its own calendar. Each change is an event on the "resources" stream, recorded with who (--by) and
when; the calendar re-projects the bookings of the resources it changes.

link adds provider resources to a name (linking what is linked already appends nothing); a provider
resource belongs to at most one name. unlink takes them off again (none named: all of them). show
prints a name's provider resources and every change that named it. apply makes every name of a JSON
file own exactly the provider resources the file lists (names it does not mention are left alone) —
the file serve applies at start from BOOKINGLEDGER_RESOURCES_FILE:
  {"resources": {"dr-smith": ["https://api.calendly.com/users/AAAA", "acuity-calendar-77"]}}`

func RunResources(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := cmdline.NewEnvFlags("resources", getenv, stderr, resourcesUsage)
	sf := ledgerdb.RegisterStoreFlags(f, ledgerdb.UsesEvents)
	by := f.String("by", []string{"BOOKINGLEDGER_OPERATOR"}, cmdline.Operator(getenv), "link, unlink, apply: who makes the change, recorded with it")
	asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "print JSON (the admin API's shape)")
	pos, err := f.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return cmdline.UsageErrorf("resources wants an action: link, unlink, list, show or apply")
	}
	action, rest := pos[0], pos[1:]
	var desired map[string][]string
	switch action {
	case "link":
		if len(rest) < 2 {
			return cmdline.UsageErrorf("resources link wants a name and at least one provider resource, got %q", rest)
		}
	case "unlink", "show":
		if len(rest) < 1 || (action == "show" && len(rest) != 1) {
			return cmdline.UsageErrorf("resources %s wants a name first, got %q", action, rest)
		}
	case "list":
		if len(rest) != 0 {
			return cmdline.UsageErrorf("resources list takes no arguments, got %q", rest)
		}
	case "apply":
		if len(rest) != 1 {
			return cmdline.UsageErrorf("resources apply wants one JSON file, got %q", rest)
		}
		if desired, err = ReadResourcesFile(rest[0]); err != nil {
			return cmdline.UsageError{Err: err}
		}
	default:
		return cmdline.UsageErrorf("resources: unknown action %q (want link, unlink, list, show or apply)", action)
	}
	if action == "list" || action == "show" {
		if err := cmdline.OnlyFor(f, "resources "+action, "link, unlink and apply", "by"); err != nil {
			return err
		}
	}
	if action != "link" && len(rest) > 0 && action != "apply" {
		if err := resource.ValidateName(rest[0]); err != nil {
			return cmdline.UsageErrorf("resources %s: %w", action, err)
		}
	}
	rs, err := ledgerdb.OpenReadSide(ctx, sf, stderr)
	if err != nil {
		return err
	}
	defer rs.Close()
	svc := resource.NewService(rs.Store.Events, eventcodec.JSON{})
	now := time.Now().UTC()

	var evs []resource.Event
	switch action {
	case "list":
		st, _, err := svc.Load(ctx)
		if err != nil {
			return fmt.Errorf("resources list: %w", err)
		}
		return writeResourceList(stdout, resourceapi.List(st), *asJSON)
	case "show":
		st, all, err := svc.Load(ctx)
		if err != nil {
			return fmt.Errorf("resources show: %w", err)
		}
		doc, err := resourceapi.Show(st, all, rest[0])
		if err != nil {
			return fmt.Errorf("resources show: %w", err)
		}
		return writeResourceShow(stdout, doc, *asJSON)
	case "link":
		evs, err = svc.Link(ctx, rest[0], rest[1:], *by, now)
	case "unlink":
		evs, err = svc.Unlink(ctx, rest[0], rest[1:], *by, now)
	case "apply":
		evs, err = svc.Apply(ctx, desired, *by, now)
	}
	if err != nil {
		if errors.Is(err, resource.ErrInvalid) {
			return cmdline.UsageError{Err: fmt.Errorf("resources %s: %w", action, err)}
		}
		return fmt.Errorf("resources %s: %w", action, err)
	}
	if *asJSON {
		out := []resourceapi.EventDTO{}
		for _, e := range evs {
			out = append(out, resourceapi.Event(e))
		}
		return cmdline.WriteJSON(stdout, map[string]any{"appended": out})
	}
	if len(evs) == 0 {
		_, err := fmt.Fprintln(stdout, "nothing to change: the links are as asked already")
		return err
	}
	for _, e := range evs {
		if _, err := fmt.Fprintf(stdout, "%s %s: %s (event %s)\n", strings.TrimSuffix(strings.TrimPrefix(string(e.Type), "resource."), ".v1"),
			e.Name, strings.Join(e.Resources, ", "), e.ID); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintln(stdout, "the calendar re-projects the bookings of these resources as serve's projection reaches the change")
	return err
}

func writeResourceList(w io.Writer, doc resourceapi.ListDTO, asJSON bool) error {
	if asJSON {
		return cmdline.WriteJSON(w, doc)
	}
	if len(doc.Resources) == 0 {
		_, err := fmt.Fprintln(w, "no linked resources: every provider resource is its own calendar")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "name\tprovider resources")
	for _, r := range doc.Resources {
		fmt.Fprintf(tw, "%s\t%s\n", r.Name, strings.Join(r.ProviderResources, ", "))
	}
	return tw.Flush()
}

func writeResourceShow(w io.Writer, doc resourceapi.ShowDTO, asJSON bool) error {
	if asJSON {
		return cmdline.WriteJSON(w, doc)
	}
	fmt.Fprintf(w, "resource %s\n", doc.Name)
	if len(doc.ProviderResources) == 0 {
		fmt.Fprintln(w, "  provider resources: none (unlinked)")
	}
	for _, r := range doc.ProviderResources {
		fmt.Fprintf(w, "  provider resource: %s\n", r)
	}
	fmt.Fprintln(w, "history:")
	for _, e := range doc.History {
		if _, err := fmt.Fprintf(w, "  %s  %-8s %s  by %s  (event %s)\n", e.At.Format(time.RFC3339), strings.TrimSuffix(strings.TrimPrefix(e.Type, "resource."), ".v1"),
			strings.Join(e.ProviderResources, ", "), e.By, e.EventID); err != nil {
			return err
		}
	}
	return nil
}
