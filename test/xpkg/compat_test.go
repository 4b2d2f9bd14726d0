package xpkg

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/peerrelay/peerrelay/test/harness"
)

// previousVersion is the release before this one (the Makefile's
// PREVIOUS_VERSION), whose tree `make xpkg-previous` unpacks.
const previousVersion = "v0.1.0"

// schemaFiles are the files that hold our APIs' schemas: the PeerRelay
// API (XRDs), the function's Input, and the provider's kinds.
var schemaFiles = []string{
	"package/configuration/xrd-v2.yaml",
	"package/configuration/xrd-legacy.yaml",
	"package/function/input/fn.peerrelay.io_inputs.yaml",
	"package/provider/crds/relay.peerrelay.io_relayconfigs.yaml",
	"package/provider/crds/relay.peerrelay.io_providerconfigs.yaml",
	"package/provider/crds/relay.peerrelay.io_clusterproviderconfigs.yaml",
	"package/provider/crds/relay.peerrelay.io_providerconfigusages.yaml",
}

// TestSchemasKeepThePolicy holds this tree's schemas to the README's
// compatibility policy against the previous release's: a patch release
// changes no schema; a minor one only adds optional fields, and refuses
// no value the previous one accepted (no field removed or retyped, none
// newly required, no narrower bound, enum, pattern or format, no new
// validation rule). Every version the previous release served is still
// served.
func TestSchemasKeepThePolicy(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	prev := filepath.Join(root, ".cache/previous", previousVersion, "src")
	_, err = os.Stat(prev)
	harness.Need(t, err == nil, "no %s: run `make xpkg-previous`", prev)
	patch := minorLine(version) == minorLine(previousVersion)
	for _, f := range schemaFiles {
		old, now := schemas(t, filepath.Join(prev, f)), schemas(t, filepath.Join(root, f))
		for v, o := range old {
			n, ok := now[v]
			switch {
			case !ok:
				t.Errorf("%s: version %s is no longer served", f, v)
			case patch && !reflect.DeepEqual(o, n):
				t.Errorf("%s %s: the schema changed in a patch release (%s → %s)", f, v, previousVersion, version)
			default:
				for _, d := range narrowed(v, o, n) {
					t.Errorf("%s: %s (%s → %s)", f, d, previousVersion, version)
				}
			}
		}
	}
}

// minorLine is vX.Y of vX.Y.Z.
func minorLine(v string) string { return v[:strings.LastIndexByte(v, '.')] }

// schemas reads a CRD's or XRD's openAPIV3Schema by version name.
func schemas(t *testing.T, path string) map[string]map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Served bool   `json:"served"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]map[string]any{}
	for _, v := range doc.Spec.Versions {
		if v.Served {
			out[v.Name] = v.Schema.OpenAPIV3Schema
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no served version with a schema", path)
	}
	return out
}

// narrowed lists what schema now refuses that old accepted, by path.
func narrowed(path string, old, now map[string]any) []string {
	var out []string
	say := func(format string, a ...any) { out = append(out, path+": "+fmt.Sprintf(format, a...)) }
	if old["type"] != now["type"] {
		say("type %v → %v", old["type"], now["type"])
	}
	oldProps, _ := old["properties"].(map[string]any)
	nowProps, _ := now["properties"].(map[string]any)
	for _, k := range sortedKeys(oldProps) {
		n, ok := nowProps[k].(map[string]any)
		if !ok {
			say("field %s removed", k)
			continue
		}
		o, _ := oldProps[k].(map[string]any)
		out = append(out, narrowed(path+"."+k, o, n)...)
	}
	for _, sub := range []string{"items", "additionalProperties"} {
		o, okOld := old[sub].(map[string]any)
		n, okNow := now[sub].(map[string]any)
		if okOld && okNow {
			out = append(out, narrowed(path+"."+sub, o, n)...)
		}
	}
	oldRequired, nowRequired := stringList(old["required"]), stringList(now["required"])
	for _, r := range nowRequired {
		if !slices.Contains(oldRequired, r) {
			say("field %s newly required", r)
		}
	}
	if nowEnum := now["enum"]; nowEnum != nil {
		oldEnum, _ := old["enum"].([]any)
		if oldEnum == nil {
			say("enum %v where any value was accepted", nowEnum)
		}
		for _, v := range oldEnum {
			if !slices.Contains(nowEnum.([]any), v) {
				say("enum value %v refused", v)
			}
		}
	}
	for _, k := range []string{"maxLength", "maxItems", "maxProperties", "maximum"} {
		if n, ok := number(now[k]); ok {
			if o, had := number(old[k]); !had || n < o {
				say("%s %v → %v", k, old[k], now[k])
			}
		}
	}
	for _, k := range []string{"minLength", "minItems", "minProperties", "minimum"} {
		if n, ok := number(now[k]); ok {
			if o, had := number(old[k]); (!had && n > 0) || (had && n > o) {
				say("%s %v → %v", k, old[k], now[k])
			}
		}
	}
	for _, k := range []string{"pattern", "format"} {
		if now[k] != nil && now[k] != old[k] {
			say("%s %v → %v", k, old[k], now[k])
		}
	}
	oldRules, _ := old["x-kubernetes-validations"].([]any)
	nowRules, _ := now["x-kubernetes-validations"].([]any)
	for _, r := range nowRules {
		if !slices.ContainsFunc(oldRules, func(o any) bool { return reflect.DeepEqual(o, r) }) {
			say("new validation rule %v", r.(map[string]any)["rule"])
		}
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func stringList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, s := range l {
		out = append(out, fmt.Sprint(s))
	}
	return out
}

func number(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok
}

func TestNarrowed(t *testing.T) {
	const base = `
type: object
required: [name]
properties:
  name: {type: string, maxLength: 63, pattern: '^[a-z]+$'}
  mode: {type: string, enum: [A, B]}
  count: {type: integer, minimum: 1, maximum: 10}
  tags:
    type: array
    maxItems: 32
    items: {type: object, properties: {key: {type: string}}}
`
	cases := map[string]struct {
		reason string
		now    string
		want   []string
	}{
		"Same": {reason: "An unchanged schema refuses nothing more.", now: base},
		"NewOptionalField": {
			reason: "A minor release may add an optional field.",
			now:    strings.Replace(base, "properties:\n  name:", "properties:\n  extra: {type: string}\n  name:", 1),
		},
		"WiderBounds": {
			reason: "Wider bounds and a new enum value accept more.",
			now:    strings.NewReplacer("maxLength: 63", "maxLength: 64", "enum: [A, B]", "enum: [A, B, C]", "minimum: 1", "minimum: 0").Replace(base),
		},
		"Removed": {
			reason: "A removed field (here inside a list's items) is refused by pruning and by clients.",
			now:    strings.Replace(base, "properties: {key: {type: string}}", "properties: {other: {type: string}}", 1),
			want:   []string{"v.tags.items: field key removed"},
		},
		"Retyped": {
			reason: "A field of another type refuses the old values.",
			now:    strings.Replace(base, "count: {type: integer", "count: {type: string", 1),
			want:   []string{"v.count: type integer → string"},
		},
		"NewlyRequired": {
			reason: "A field newly required refuses objects written without it.",
			now:    strings.Replace(base, "required: [name]", "required: [name, mode]", 1),
			want:   []string{"v: field mode newly required"},
		},
		"Narrower": {
			reason: "A lower maximum, a higher minimum, an enum value gone, another pattern and a new rule each refuse an old value.",
			now: strings.NewReplacer("maxLength: 63", "maxLength: 32", "enum: [A, B]", "enum: [A]", "minimum: 1", "minimum: 2",
				"'^[a-z]+$'", "'^[a-z]{1,8}$'", "maxItems: 32", "maxItems: 32\n    x-kubernetes-validations: [{rule: 'size(self) > 0'}]").Replace(base),
			want: []string{
				"v.count: minimum 1 → 2",
				"v.mode: enum value B refused",
				"v.name: maxLength 63 → 32",
				"v.name: pattern ^[a-z]+$ → ^[a-z]{1,8}$",
				"v.tags: new validation rule size(self) > 0",
			},
		},
	}
	parse := func(s string) map[string]any {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := narrowed("v", parse(base), parse(tc.now))
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s\nnarrowed: %q\nwant:     %q", tc.reason, got, tc.want)
			}
		})
	}
}
