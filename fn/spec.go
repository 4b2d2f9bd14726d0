package fn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/crossplane/function-sdk-go/resource/composite"

	fnv1alpha1 "github.com/peerrelay/peerrelay/apis/fn/v1alpha1"
	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// crossplaneSpecFields are the spec fields Crossplane itself adds to XRs (v2
// under spec.crossplane, legacy at the top of spec). They are not ours to
// validate.
var crossplaneSpecFields = []string{
	"crossplane", "claimRef", "compositionRef", "compositionSelector",
	"compositionRevisionRef", "compositionRevisionSelector",
	"compositionUpdatePolicy", "compositeDeletePolicy", "resourceRefs",
	"writeConnectionSecretToRef", "publishConnectionDetailsTo",
	"environmentConfigRefs",
}

// relay is a PeerRelay with every default applied: what the builders read.
type relay struct {
	// Name and Namespace of the PeerRelay the user wrote: the XR's own for
	// a v2 XR, the claim's for a legacy XR.
	Name      string
	Namespace string
	// Base prefixes every composed object's name; Name unless Name is too
	// long or not a valid DNS label (see names.go).
	Base string

	Spec     v1alpha1.PeerRelaySpec
	Replicas int
	Port     int32
	Tags     []string
	Image    string
	Hostname string // prefix; replica i is Hostname-i
	AuthKey  *v1alpha1.SecretKeyRef

	Cloud          fnv1alpha1.Cloud
	ProviderConfig providerConfigRef
}

type providerConfigRef struct{ Kind, Name string }

// parseSpec reads the XR's spec strictly: unknown fields and wrong types are
// errors that name the field.
func parseSpec(xr *composite.Unstructured) (v1alpha1.PeerRelaySpec, error) {
	var spec v1alpha1.PeerRelaySpec
	raw, ok := xr.Object["spec"]
	if !ok || raw == nil {
		return spec, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return spec, fmt.Errorf("spec: must be an object, got %T", raw)
	}
	own := make(map[string]any, len(m))
	for k, v := range m {
		own[k] = v
	}
	for _, k := range crossplaneSpecFields {
		delete(own, k)
	}
	b, err := json.Marshal(own)
	if err != nil {
		return spec, fmt.Errorf("spec: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return spec, fmt.Errorf("spec: %s", describeJSONError(err))
	}
	return spec, nil
}

// describeJSONError rewrites encoding/json's messages into field paths a
// user recognises: "spec.replicas: want int32, got string".
func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			return fmt.Sprintf("want an object, got %s", te.Value)
		}
		return fmt.Sprintf("spec.%s: want %s, got %s", field, jsonKind(te.Type.Kind().String()), te.Value)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return fmt.Sprintf("unknown field %s: PeerRelay has no such field (check its spelling and nesting)", f)
	}
	return strings.TrimPrefix(msg, "json: ")
}

func jsonKind(k string) string {
	switch k {
	case "int32", "int64", "int":
		return "an integer"
	case "string":
		return "a string"
	case "slice":
		return "a list"
	case "map", "struct", "ptr":
		return "an object"
	case "bool":
		return "true or false"
	}
	return k
}
