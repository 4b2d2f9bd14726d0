package fn

import (
	"strings"
	"testing"
)

func TestBaseName(t *testing.T) {
	long := strings.Repeat("a", 70)
	cases := map[string]struct {
		reason, name, want, why string
	}{
		"Fits":     {reason: "A DNS-1035 label short enough is used as it is.", name: "my-relay", want: "my-relay"},
		"Dots":     {reason: "Dots become dashes, and a hash keeps names apart.", name: "my.relay", want: "my-relay-" + shortHash("my.relay"), why: "no dots"},
		"Digit":    {reason: "A leading digit gets a letter first.", name: "9-lives", want: "pr-9-lives-" + shortHash("9-lives"), why: "must start with a letter"},
		"TooLong":  {reason: "A long name is cut, and the hash keeps two long names apart.", name: long, want: long[:maxBaseLen-9] + "-" + shortHash(long), why: "within"},
		"Capitals": {reason: "Capitals are lowered.", name: "MyRelay", want: "myrelay-" + shortHash("MyRelay"), why: "lower-case"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, why := baseName(tc.name)
			if got != tc.want || !strings.Contains(why, tc.why) || (tc.why == "") != (why == "") {
				t.Errorf("%s\nbaseName(%q) = %q, %q; want %q and a reason containing %q", tc.reason, tc.name, got, why, tc.want, tc.why)
			}
			if len(got) > maxBaseLen {
				t.Errorf("%s\n%q is longer than %d", tc.reason, got, maxBaseLen)
			}
		})
	}
}
