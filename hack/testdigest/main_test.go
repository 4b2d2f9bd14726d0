package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func stream(t *testing.T, events ...event) string {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		j, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

func TestDigest(t *testing.T) {
	const pkg = "example.com/sys"
	out := func(test, s string) event { return event{Action: "output", Package: pkg, Test: test, Output: s} }
	cases := map[string]struct {
		reason string
		in     string
		failed bool
		digest string
	}{
		"SubtestFailed": {
			reason: "A failed subtest's lines are the digest; its parent's later lines (the processes' logs) are not.",
			in: stream(t,
				out("TestSys", "=== RUN   TestSys\n"),
				out("TestSys/Pods", "=== RUN   TestSys/Pods\n"),
				out("TestSys/Pods", "    pods_test.go:147: counter 0\n"),
				out("TestSys/Pods", "    --- FAIL: TestSys/Pods (1.00s)\n"),
				event{Action: "fail", Package: pkg, Test: "TestSys/Pods"},
				out("TestSys", "    process.go:59: ---- kube-scheduler output ----\n"),
				event{Action: "fail", Package: pkg, Test: "TestSys"},
				event{Action: "fail", Package: pkg},
			),
			failed: true,
			digest: "---- example.com/sys TestSys/Pods\n    pods_test.go:147: counter 0\n",
		},
		"PackageFailedAlone": {
			reason: "A package that failed with no failed test (a timeout's panic) shows its own last lines.",
			in: stream(t,
				out("", "panic: test timed out after 30m0s\n"),
				event{Action: "fail", Package: pkg},
			),
			failed: true,
			digest: "---- example.com/sys\npanic: test timed out after 30m0s\n",
		},
		"Passed": {
			reason: "Nothing failed: no digest.",
			in: stream(t,
				out("TestSys", "=== RUN   TestSys\n"),
				event{Action: "pass", Package: pkg, Test: "TestSys"},
				event{Action: "pass", Package: pkg},
			),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := &digest{tails: map[test][]string{}}
			var text, dig bytes.Buffer
			if err := d.read(strings.NewReader(tc.in), &text); err != nil {
				t.Fatal(err)
			}
			failed, err := d.write(&dig)
			if err != nil {
				t.Fatal(err)
			}
			if failed != tc.failed {
				t.Errorf("%s\nfailed: got %v, want %v", tc.reason, failed, tc.failed)
			}
			got, _ := strings.CutPrefix(dig.String(), "\n==== what failed (each failed test's last lines; the whole output is above) ====\n")
			if diff := cmp.Diff(tc.digest, got); diff != "" {
				t.Errorf("%s\ndigest: -want, +got:\n%s", tc.reason, diff)
			}
			var want strings.Builder
			for l := range strings.Lines(tc.in) {
				var e event
				_ = json.Unmarshal([]byte(l), &e)
				want.WriteString(e.Output)
			}
			if diff := cmp.Diff(want.String(), text.String()); diff != "" {
				t.Errorf("%s\ntext: -want (every output, framing too), +got:\n%s", tc.reason, diff)
			}
		})
	}
}
