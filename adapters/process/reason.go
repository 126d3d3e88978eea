package process

import "fmt"

// itemReason is the reconciliation item's reason for a step that ends needs_reconciliation or failed:
// the step, and what is wrong (the note and the error, whichever say something). Empty otherwise.
func itemReason(st Step, o outcome) string {
	switch o.state {
	case StateNeedsReconciliation:
		return clip(fmt.Sprintf("%s %s: %s", st.Kind, st.Key, firstNonEmpty(o.note, errText(o.err))))
	case StateFailed:
		what := o.note
		if e := errText(o.err); e != "" {
			if what != "" {
				what += ": "
			}
			what += e
		}
		return clip(fmt.Sprintf("%s %s failed (nothing was done): %s", st.Kind, st.Key, what))
	}
	return ""
}
