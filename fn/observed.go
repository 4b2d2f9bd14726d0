package fn

import (
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
)

// Observed objects are read where Crossplane left them, in protobuf
// Structs: converting each to an unstructured object (through JSON) on every
// call cost more than everything else the function does for a steady XR.

func value(s *structpb.Struct, path ...string) *structpb.Value {
	var v *structpb.Value
	for _, p := range path {
		v = s.GetFields()[p]
		s = v.GetStructValue()
	}
	return v
}

func str(s *structpb.Struct, path ...string) string { return value(s, path...).GetStringValue() }

func number(s *structpb.Struct, path ...string) int64 {
	return int64(value(s, path...).GetNumberValue())
}

// conditionStatus is the status ("True", "False", "Unknown") of the
// object's condition of the given type, or "" when it has none.
func conditionStatus(s *structpb.Struct, typ string) string {
	for _, c := range value(s, "status", "conditions").GetListValue().GetValues() {
		if str(c.GetStructValue(), "type") == typ {
			return str(c.GetStructValue(), "status")
		}
	}
	return ""
}

func stringList(s *structpb.Struct, path ...string) []string {
	var out []string
	for _, v := range value(s, path...).GetListValue().GetValues() {
		out = append(out, v.GetStringValue())
	}
	return out
}

// indexed reads the replica index of a key such as "service-3" with the
// given prefix ("service-").
func indexed(key, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || rest == "" || rest[0] < '0' || rest[0] > '9' {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil
}
