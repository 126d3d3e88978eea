package admincmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"bookingledger/adapters/httpapi/readapi"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/cmd/bookingledger/internal/ledgerdb"
	"bookingledger/domain/ledger"
	"bookingledger/projections"
	"bookingledger/projections/history"
)

const receiptsUsage = `Usage: bookingledger receipts list [--outcome O] [--provider P] [--limit N] [--json] [flags]
       bookingledger receipts show <id> [--json] [flags]

list prints the delivery receipts, newest first: every request the ingress answered for a served
provider, whatever became of it. --outcome narrows it to one of accepted, duplicate, ignored,
quarantined, deferred or rejected — quarantined (verified but not mappable) and deferred (waiting for
a provider's data) are the ones an operator looks into. show prints one receipt with the reason, the
verified body kept with it (never kept for a rejected request) and the other receipts of the same
delivery: what it became. --json prints what GET /api/receipts or GET /api/receipts/{id} answers.`

func RunReceipts(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := cmdline.NewEnvFlags("receipts", getenv, stderr, receiptsUsage)
	sf := ledgerdb.RegisterStoreFlags(f, ledgerdb.UsesBodies)
	outcome := f.String("outcome", []string{"BOOKINGLEDGER_RECEIPTS_OUTCOME"}, "", "list: only receipts with this outcome")
	provider := f.String("provider", []string{"BOOKINGLEDGER_RECEIPTS_PROVIDER"}, "", "list: only receipts of this provider")
	limit := f.Int64("limit", []string{"BOOKINGLEDGER_RECEIPTS_LIMIT"}, 50, 1, "list: at most this many receipts (newest first; at most 1000)")
	asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "print JSON (the HTTP API's shape)")
	pos, err := f.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return cmdline.UsageErrorf("receipts wants an action: list, or show <id>")
	}
	var id int64
	switch pos[0] {
	case "list":
		if len(pos) > 1 {
			return cmdline.UsageErrorf("receipts list takes no arguments, got %q", pos[1:])
		}
		if _, err := readapi.ParseReceiptOutcome(*outcome); err != nil {
			return cmdline.UsageErrorf("receipts list: --%s", strings.TrimPrefix(err.Error(), projections.ErrInvalidQuery.Error()+": "))
		}
		if *limit > readmodel.MaxReceiptLimit {
			return cmdline.UsageErrorf("receipts list: --limit is more than %d", readmodel.MaxReceiptLimit)
		}
	case "show":
		if len(pos) != 2 {
			return cmdline.UsageErrorf("receipts show wants one receipt id, got %q", pos[1:])
		}
		if id, err = strconv.ParseInt(pos[1], 10, 64); err != nil || id <= 0 {
			return cmdline.UsageErrorf("receipts show: receipt id %q is not a positive integer (see 'bookingledger receipts list')", pos[1])
		}
		if err := cmdline.OnlyFor(f, "receipts show", "list", "outcome", "provider", "limit"); err != nil {
			return err
		}
	default:
		return cmdline.UsageErrorf("receipts: unknown action %q (want list or show)", pos[0])
	}
	rs, err := ledgerdb.OpenReadSide(ctx, sf, stderr)
	if err != nil {
		return err
	}
	defer rs.Close()

	if pos[0] == "list" {
		list, err := rs.RM.Receipts(ctx, history.ReceiptQuery{Outcome: ledger.Outcome(*outcome), Provider: *provider, Limit: int(*limit)})
		if err != nil {
			return fmt.Errorf("receipts list: %w", err)
		}
		if *asJSON {
			out := readapi.ReceiptsDTO{Receipts: make([]readapi.ReceiptDTO, len(list))}
			for i, e := range list {
				out.Receipts[i] = readapi.ToReceipt(e)
			}
			return cmdline.WriteJSON(stdout, out)
		}
		return history.WriteReceipts(stdout, list)
	}
	d, err := rs.RM.Receipt(ctx, id)
	if errors.Is(err, projections.ErrNotFound) {
		return fmt.Errorf("receipts show: no receipt %d (see 'bookingledger receipts list')", id)
	}
	if err != nil {
		return fmt.Errorf("receipts show: %w", err)
	}
	if *asJSON {
		return cmdline.WriteJSON(stdout, readapi.ToReceiptDetail(d))
	}
	return history.WriteReceipt(stdout, d)
}
