package crossplane

import (
	"strings"
	"testing"

	"github.com/peerrelay/peerrelay/test/harness"
)

// readmeBlock returns the commands of the first fenced block after the
// README heading: the test runs what the README says, not a copy of it.
func readmeBlock(t testing.TB, heading string) []harness.ReadmeCommand {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return harness.ReadmeBlock(t, root, heading)
}

// columns parses a kubectl table (or the README's copy of one) into one map
// per row, by header. A value starts where its header starts, as kubectl
// aligns them, so empty values (CONNECTION-SECRET) and values with spaces
// (ENDPOINTS) come out right.
func columns(lines []string) []map[string]string {
	if len(lines) == 0 {
		return nil
	}
	header := lines[0]
	var names []string
	var starts []int
	for i := 0; i < len(header); {
		if header[i] == ' ' {
			i++
			continue
		}
		j := i
		for j < len(header) && header[j] != ' ' {
			j++
		}
		names, starts = append(names, header[i:j]), append(starts, i)
		i = j
	}
	var rows []map[string]string
	for _, l := range lines[1:] {
		row := map[string]string{}
		for k, name := range names {
			end := len(l)
			if k+1 < len(starts) {
				end = min(starts[k+1], len(l))
			}
			if starts[k] < end {
				row[name] = strings.TrimSpace(l[starts[k]:end])
			}
		}
		rows = append(rows, row)
	}
	return rows
}
