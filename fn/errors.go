package fn

import (
	"errors"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/response"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// specError marks errors in the user's spec, reported on the PeerRelay's
// PeerRelayReady condition as well as in a Fatal result.
type specError struct {
	err error
	aws bool
}

func (e specError) Error() string { return e.err.Error() }

func fail(rsp *fnv1.RunFunctionResponse, err error) {
	response.Fatal(rsp, err)
	var se specError
	if errors.As(err, &se) {
		reason := v1alpha1.ReasonSpecInvalid
		if se.aws {
			reason = v1alpha1.ReasonAWSConfigInvalid
		}
		response.ConditionFalse(rsp, string(v1alpha1.ConditionPeerRelayReady), string(reason)).WithMessage(err.Error()).TargetCompositeAndClaim()
	}
}
