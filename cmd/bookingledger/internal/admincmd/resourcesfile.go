package admincmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"bookingledger/domain/resource"
)

const EnvResourcesFile = "BOOKINGLEDGER_RESOURCES_FILE"

// resourcesFile is the JSON document of BOOKINGLEDGER_RESOURCES_FILE and `resources apply`.
type resourcesFile struct {
	Resources map[string][]string `json:"resources"`
}

// maxResourcesFile bounds the file read at start.
const maxResourcesFile = 4 << 20

// ReadResourcesFile reads and checks a resources file: every name and provider resource valid, and
// no provider resource under two names.
func ReadResourcesFile(path string) (map[string][]string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("resources file: %w", err)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxResourcesFile+1))
	if err != nil {
		return nil, fmt.Errorf("resources file %s: %w", path, err)
	}
	if len(b) > maxResourcesFile {
		return nil, fmt.Errorf("resources file %s: larger than %d bytes", path, maxResourcesFile)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var doc resourcesFile
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf(`resources file %s: want {"resources": {"<name>": ["<provider resource>", …]}}: %w`, path, err)
	}
	if doc.Resources == nil {
		return nil, fmt.Errorf(`resources file %s: no "resources" object`, path)
	}
	owner := map[string]string{}
	names := slices.Sorted(maps.Keys(doc.Resources)) // the error names the same pair every time
	for _, name := range names {
		ids := doc.Resources[name]
		if err := resource.ValidateName(name); err != nil {
			return nil, fmt.Errorf("resources file %s: %w", path, err)
		}
		for _, id := range ids {
			if err := resource.ValidateIdentifier(id); err != nil {
				return nil, fmt.Errorf("resources file %s: %s: %w", path, name, err)
			}
			if o, ok := owner[id]; ok && o != name {
				return nil, fmt.Errorf("resources file %s: %s is listed under %s and %s: %w", path, id, o, name, resource.ErrLinkedElsewhere)
			}
			owner[id] = name
		}
	}
	return doc.Resources, nil
}

// ApplyResourcesFile applies the file serve was given at start: the links it asks for that the
// stream does not have yet are appended (none on a second start with the same file).
func ApplyResourcesFile(ctx context.Context, svc *resource.Service, path string, desired map[string][]string, log *slog.Logger) error {
	evs, err := svc.Apply(ctx, desired, "file "+path, time.Now().UTC())
	if err != nil {
		return fmt.Errorf("%s %s: %w", EnvResourcesFile, path, err)
	}
	log.Info("resources file applied", "file", path, "names", len(desired), "events_appended", len(evs))
	return nil
}
