package harness

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ReadmeCommand is one command the README tells a user to type, with the
// output it shows for it (comment lines right below it), if any.
type ReadmeCommand struct {
	Line   string
	Args   []string
	Output []string
}

// ReadmeBlock returns the commands of the first fenced block after the
// heading in the README of the tree at root: tests run what the README
// says, not a copy of it.
func ReadmeBlock(t testing.TB, root, heading string) []ReadmeCommand {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var cmds []ReadmeCommand
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
			if n := len(cmds); n > 0 && (len(cmds[n-1].Output) > 0 || strings.HasPrefix(trimmed, "# NAME")) {
				cmds[n-1].Output = append(cmds[n-1].Output, strings.TrimSpace(strings.TrimPrefix(trimmed, "#")))
			}
		default:
			if i := strings.Index(trimmed, " #"); i >= 0 {
				trimmed = strings.TrimSpace(trimmed[:i])
			}
			cmds = append(cmds, ReadmeCommand{Line: trimmed, Args: ShellFields(trimmed)})
		}
	}
	t.Fatalf("README: no fenced block after %q", heading)
	return nil
}

// ShellFields splits a command line into words as a shell does for the
// README's commands: at spaces, except inside single quotes, which go.
func ShellFields(line string) []string {
	var words []string
	var w strings.Builder
	quoted, inWord := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, w.String())
				w.Reset()
			}
			inWord = false
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}
