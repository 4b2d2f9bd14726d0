package crossplane

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/peerrelay/peerrelay/test/harness"
)

// readmeCommand is one command the README tells a user to type, with the
// output it shows for it (comment lines right below it), if any.
type readmeCommand struct {
	line   string
	args   []string
	output []string
}

// readmeBlock returns the commands of the first fenced block after the
// README heading: the test runs what the README says, not a copy of it.
func readmeBlock(t testing.TB, heading string) []readmeCommand {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var cmds []readmeCommand
	found, in := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !found:
			found = line == heading
			continue
		case !in:
			in = strings.HasPrefix(line, "```")
			continue
		case strings.HasPrefix(line, "```"):
			if len(cmds) == 0 {
				t.Fatalf("README: no commands in the block after %q", heading)
			}
			return cmds
		}
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
		case strings.HasPrefix(trimmed, "#"):
			// Output shown under a command belongs to it.
			if n := len(cmds); n > 0 && (len(cmds[n-1].output) > 0 || strings.HasPrefix(trimmed, "# NAME")) {
				cmds[n-1].output = append(cmds[n-1].output, strings.TrimSpace(strings.TrimPrefix(trimmed, "#")))
			}
		default:
			if i := strings.Index(trimmed, " #"); i >= 0 {
				trimmed = strings.TrimSpace(trimmed[:i])
			}
			cmds = append(cmds, readmeCommand{line: trimmed, args: strings.Fields(trimmed)})
		}
	}
	t.Fatalf("README: no fenced block after %q", heading)
	return nil
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
