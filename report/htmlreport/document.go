package htmlreport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/widetp/widetp/report"
)

// Document is what one page shows: a report (the README's "Reading a report" contract) and what
// travels with it.
type Document struct {
	Report report.Report
	// Extra are the top-level fields of the report JSON this renderer has no place for (a field a
	// newer widetp added), shown in the header as they are, so that a newer report loses nothing
	// in an older renderer.
	Extra []Field
	// Steps is the report's timeline (its "steps": faults and what followed each), shown as a table
	// when there is one. Each step keeps its fields in the order the JSON gave them.
	Steps []Step
	// Records are the processes' JSON records as read, index for index with Report.Processes,
	// fields unknown to report.Process included (the per-process detail shows them all); nil when
	// the document was built from a report.Report, whose records are marshalled instead.
	Records []json.RawMessage
	// Artifacts are the files of the run's artifacts directory the page links to; nil when there
	// is none (a prediction, or a report.json read on its own).
	Artifacts *Artifacts
}

// Field is one named value of the header or of a step, rendered as text.
type Field struct {
	Name  string
	Value string
}

// Step is one entry of a report's timeline.
type Step struct {
	Fields []Field
}

// FromReport wraps rep in a Document with nothing beside it.
func FromReport(rep report.Report) *Document {
	return &Document{Report: rep}
}

// knownTopLevel are the report fields the page renders in their own places; any other top-level
// field is shown in the header (Document.Extra).
var knownTopLevel = map[string]bool{
	"scenario": true, "profile": true, "runtime": true, "verdict": true, "expected": true,
	"violations": true, "processes": true, "timings": true, "steps": true, "planner": true,
}

// Read reads a report from path: a report.json file, or a run's artifacts directory (its
// report.json). The directory that holds the report.json is scanned for the artifacts a run
// leaves (README, "Reading a report"), so the page links to whichever of them exist.
func Read(path string) (*Document, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	file, dir := path, filepath.Dir(path)
	if st.IsDir() {
		file, dir = filepath.Join(path, ArtifactReport), path
	}
	b, err := os.ReadFile(file)
	if err != nil {
		if st.IsDir() && errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("read report: %s has no %s: not a run's artifacts directory (the run may have failed before its report)", path, ArtifactReport)
		}
		return nil, fmt.Errorf("read report: %w", err)
	}
	doc, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("read report %s: %w", file, err)
	}
	arts, err := ScanArtifacts(dir)
	if err != nil {
		return nil, fmt.Errorf("read report %s: %w", file, err)
	}
	if !arts.empty() {
		doc.Artifacts = arts
	}
	return doc, nil
}

// Decode parses a report JSON object. It keeps what report.Report does not know (Extra, Steps,
// the raw Records) and refuses what is no widetp report: not one JSON object, or no scenario or
// processes field.
func Decode(b []byte) (*Document, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("not a report JSON object: %w", err)
	}
	for _, f := range []string{"scenario", "processes"} {
		if _, ok := top[f]; !ok {
			return nil, fmt.Errorf("not a widetp report: no %q field", f)
		}
	}
	doc := &Document{}
	// The timeline is kept field by field below, whatever its steps carry: the typed report sees
	// none of it, so that a step with fields report.Step lacks (or of other types) still decodes.
	typed := b
	if _, ok := top["steps"]; ok {
		rest := make(map[string]json.RawMessage, len(top))
		for k, v := range top {
			if k != "steps" {
				rest[k] = v
			}
		}
		typed, _ = json.Marshal(rest)
	}
	if err := json.Unmarshal(typed, &doc.Report); err != nil {
		return nil, fmt.Errorf("decode report: %w", err)
	}
	if err := json.Unmarshal(top["processes"], &doc.Records); err != nil {
		return nil, fmt.Errorf("decode report: processes: %w", err)
	}
	if len(doc.Records) != len(doc.Report.Processes) {
		doc.Records = nil
	}
	if raw, ok := top["steps"]; ok && !isNull(raw) {
		steps, err := decodeSteps(raw)
		if err != nil {
			return nil, fmt.Errorf("decode report: steps: %w", err)
		}
		doc.Steps = steps
	}
	names := make([]string, 0, len(top))
	for name := range top {
		if !knownTopLevel[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		doc.Extra = append(doc.Extra, Field{Name: name, Value: valueText(top[name])})
	}
	return doc, nil
}

// decodeSteps reads a timeline: an array of objects, each field kept in document order.
func decodeSteps(raw json.RawMessage) ([]Step, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("want an array of objects: %w", err)
	}
	steps := make([]Step, 0, len(items))
	for i, item := range items {
		fields, err := orderedFields(item)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i, err)
		}
		steps = append(steps, Step{Fields: fields})
	}
	return steps, nil
}

// orderedFields lists the fields of one JSON object in the order they appear, each value as text.
func orderedFields(raw json.RawMessage) ([]Field, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("want an object, got %s", valueText(raw))
	}
	var out []Field
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("field %q: %w", name, err)
		}
		out = append(out, Field{Name: name, Value: stepValueText(name, v)})
	}
	return out, nil
}

// stepValueText renders a step's field: its violations (report.Step) one "kind: message" a line,
// its effects one a line, anything else as valueText does.
func stepValueText(name string, raw json.RawMessage) string {
	switch name {
	case "violations":
		var vs []report.Violation
		if json.Unmarshal(raw, &vs) == nil {
			lines := make([]string, len(vs))
			for i, v := range vs {
				lines[i] = v.Message
				if lines[i] == "" {
					lines[i] = string(v.Kind)
				}
			}
			return strings.Join(lines, "\n")
		}
	case "effects":
		var es []string
		if json.Unmarshal(raw, &es) == nil {
			return strings.Join(es, "\n")
		}
	}
	return valueText(raw)
}

// valueText renders a JSON value for a reader: a string without its quotes, anything else as
// compact JSON.
func valueText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		return buf.String()
	}
	return string(raw)
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// formatSeconds renders a timing.
func formatSeconds(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + " s" }
