package relayconfig

import (
	"context"
	"fmt"
	"strings"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// checkPlacement checks spec.forProvider.aws's subnet and Elastic IP
// against AWS and records what it found in status.atProvider.aws, which the
// function reads before it places anything with them. A valid placement is
// checked once; a bad one again on every poll, so a fix in AWS is seen. A
// failure to ask AWS keeps the last result and is returned: Observe fails
// with it once the config is written, so the reconciler retries with
// backoff. A replica's Service waits for the check, so a timeout must not
// wait for the next poll, minutes away.
func (e *external) checkPlacement(ctx context.Context, mg *v1alpha1.RelayConfig) error {
	p := mg.Spec.ForProvider.AWS
	if p == nil || (p.SubnetID == "" && p.AllocationID == "") {
		mg.Status.AtProvider.AWS = nil
		return nil
	}
	prev := mg.Status.AtProvider.AWS
	if prev != nil && prev.Checked && len(prev.Problems) == 0 && prev.SubnetID == p.SubnetID && prev.AllocationID == p.AllocationID {
		recordLastValid(prev, nil) // one checked before the record existed
		return nil
	}
	var last *v1alpha1.AWSPlacement
	if prev != nil {
		last = prev.LastValid
	}
	if e.placement == nil {
		mg.Status.AtProvider.AWS = &v1alpha1.AWSPlacementObservation{SubnetID: p.SubnetID, AllocationID: p.AllocationID,
			Message: "not checked: the provider config has no AWS credentials (spec.aws.source)"}
		recordLastValid(mg.Status.AtProvider.AWS, last)
		setPlacementCondition(mg, corev1.ConditionUnknown, v1alpha1.ReasonNotChecked, mg.Status.AtProvider.AWS.Message)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.resolver.TimeoutOrDefault())
	defer cancel()
	obs, err := e.placement.Check(ctx, p.SubnetID, p.AllocationID)
	if err != nil {
		err = fmt.Errorf("cannot check the placement against AWS (will retry): %s", stableMessage(err))
		setPlacementCondition(mg, corev1.ConditionFalse, v1alpha1.ReasonCheckFailed, err.Error())
		return err
	}
	recordLastValid(&obs, last)
	mg.Status.AtProvider.AWS = &obs
	if len(obs.Problems) > 0 {
		setPlacementCondition(mg, corev1.ConditionFalse, v1alpha1.ReasonPlacementBad, strings.Join(obs.Problems, "; "))
		return nil
	}
	msg := fmt.Sprintf("subnet %s is public, in zone %s of %s", obs.SubnetID, obs.Zone, obs.VPCID)
	if obs.AllocationID != "" {
		msg += fmt.Sprintf("; Elastic IP %s is free for it", obs.AllocationID)
	}
	setPlacementCondition(mg, corev1.ConditionTrue, v1alpha1.ReasonPlacementValid, msg)
	return nil
}

// recordLastValid records obs's placement as the last valid one when
// nothing was found against it, else keeps last. A subnet alone (a new
// Elastic IP not yet allocated) is no placement a Service can keep: the
// last full one stays.
func recordLastValid(obs *v1alpha1.AWSPlacementObservation, last *v1alpha1.AWSPlacement) {
	if len(obs.Problems) > 0 || obs.SubnetID == "" || obs.AllocationID == "" {
		obs.LastValid = last
		return
	}
	obs.LastValid = &v1alpha1.AWSPlacement{SubnetID: obs.SubnetID, AllocationID: obs.AllocationID}
}

func setPlacementCondition(mg *v1alpha1.RelayConfig, s corev1.ConditionStatus, r xpv2.ConditionReason, msg string) {
	mg.SetConditions(condition(v1alpha1.ConditionAWSPlacement, s, r, msg))
}
