package relayconfig

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/tailnet"
)

// reasonDeviceNotDeleted is the Warning event of a recorded device that
// the tailnet says is not this replica's.
const reasonDeviceNotDeleted event.Reason = "DeviceNotDeleted"

// clockSkew is how much earlier than the RelayConfig a device may say it
// was created: the tailnet's clock and the API server's differ.
const clockSkew = 5 * time.Minute

// observeDevice reads the replica's state Secret, records the device
// tailscaled wrote there, and says whether the device leaves the tailnet
// with the replica. It returns the state Secret, nil when there is none
// yet (Update creates it).
func (e *external) observeDevice(ctx context.Context, mg *v1alpha1.RelayConfig) (*corev1.Secret, error) {
	state, err := e.stateSecret(ctx, mg)
	if err != nil {
		return nil, err
	}
	e.obs.stateMissing = state == nil && mg.Spec.ForProvider.StateSecretName != ""
	recordDevice(mg, state) // for Delete, even if the state goes later
	e.cleanupCondition(mg)
	return state, nil
}

// stateSecret returns the replica's state Secret, or nil when it is
// missing (or the RelayConfig names none). One the RelayConfig does not
// control (another replica's, or a tenant's) is an error: its device ID is
// not this replica's.
func (e *external) stateSecret(ctx context.Context, mg *v1alpha1.RelayConfig) (*corev1.Secret, error) {
	name := mg.Spec.ForProvider.StateSecretName
	if name == "" {
		return nil, nil
	}
	s := &corev1.Secret{}
	err := e.kube.Get(ctx, types.NamespacedName{Namespace: mg.GetNamespace(), Name: name}, s)
	if kerrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot get state Secret %s named by spec.forProvider.stateSecretName: %w", name, err)
	}
	recorded := mg.Status.AtProvider.StateSecretUID
	switch {
	case metav1.IsControlledBy(s, mg) && (recorded == "" || recorded == string(s.UID)):
		// A RelayConfig from before the provider recorded the UID adopts
		// the Secret it controls, once.
		mg.Status.AtProvider.StateSecretUID = string(s.UID)
		return s, nil
	case meta.WasDeleted(mg):
		return nil, nil // nothing of it is ours: it must not hold the deletion up
	}
	return nil, errForeignSecret(name, "spec.forProvider.stateSecretName")
}

// recordDevice records the device ID containerboot wrote into the state
// Secret, whenever it appears, while the RelayConfig is live (and so
// admitted by its provider config: Connect refuses it otherwise). A device
// ID written into the state Secret once the RelayConfig is being deleted
// is not recorded: Delete acts only on the recorded one.
func recordDevice(mg *v1alpha1.RelayConfig, state *corev1.Secret) {
	if state == nil || meta.WasDeleted(mg) {
		return
	}
	if id := string(state.Data[stateSecretDeviceIDKey]); id != "" {
		mg.Status.AtProvider.DeviceID = id
	}
}

// loggedIn returns the device ID in the state Secret now: a device whose
// state is gone (the Secret deleted by hand) must log in again, with a key.
func loggedIn(state *corev1.Secret) string {
	if state == nil {
		return ""
	}
	return string(state.Data[stateSecretDeviceIDKey])
}

// deleteDevice removes the replica's device id from the tailnet, once the
// tailnet confirms it is this replica's. The ID comes from the state
// Secret, in a namespace whose users can write it: a device ID written
// there must not make the provider delete a device of someone else's. A
// device that is not the replica's is left alone, with a Warning event, and
// the replica goes without it.
func (e *external) deleteDevice(ctx context.Context, mg *v1alpha1.RelayConfig, id string) error {
	d, err := e.confirmedDevice(ctx, mg, id)
	if err != nil || d == nil {
		return err
	}
	if err := e.api.DeleteDevice(ctx, id); err != nil && !e.giveUpDevice(mg, id, err) {
		return err
	}
	return nil
}

// giveUpDevice says whether a RelayConfig goes without removing device id:
// it has been deleted for longer than credentialsGrace, and the tailnet
// still refuses the provider config's OAuth client (err, a 401 or 403),
// which no retry mends. A Warning names the device left in the tailnet, so
// a namespace is not held Terminating for ever.
func (e *external) giveUpDevice(mg *v1alpha1.RelayConfig, id string, err error) bool {
	if !tailnet.IsRefused(err) || !graceOver(mg) {
		return false
	}
	e.record.Event(mg, event.Warning(reasonDeviceNotDeleted, fmt.Errorf("device %s stays in the tailnet: remove it in the admin console; after %s the tailnet still refuses the provider config's OAuth client: %s", id, credentialsGrace, stableMessage(err))))
	return true
}

// deviceLeft says whether the recorded device of a RelayConfig being
// deleted is still in the tailnet, and the replica's: Delete has it to
// remove.
func (e *external) deviceLeft(ctx context.Context, mg *v1alpha1.RelayConfig) (bool, error) {
	id := mg.Status.AtProvider.DeviceID
	if e.api == nil || id == "" {
		return false, nil
	}
	d, err := e.confirmedDevice(ctx, mg, id)
	return d != nil, err
}

// deviceAnswer is what the tailnet said of a device in this reconcile.
type deviceAnswer struct {
	id     string
	device *tailnet.Device // nil: gone, or not the replica's
}

// confirmedDevice is lookUpReplicaDevice once per reconcile: Delete uses what
// Observe's deviceLeft learnt, without a second lookup or Warning.
func (e *external) confirmedDevice(ctx context.Context, mg *v1alpha1.RelayConfig, id string) (*tailnet.Device, error) {
	if e.obs.checked != nil && e.obs.checked.id == id {
		return e.obs.checked.device, nil
	}
	d, err := e.lookUpReplicaDevice(ctx, mg, id)
	if err == nil {
		e.obs.checked = &deviceAnswer{id: id, device: d}
	}
	return d, err
}

// lookUpReplicaDevice returns device id when the tailnet has it and it is the
// replica's; nil when it is gone, or someone else's (with a Warning event).
func (e *external) lookUpReplicaDevice(ctx context.Context, mg *v1alpha1.RelayConfig, id string) (*tailnet.Device, error) {
	d, err := e.api.Device(ctx, id)
	if err != nil && e.giveUpDevice(mg, id, err) {
		return nil, nil
	}
	if err != nil || d == nil {
		return nil, err
	}
	if err := notReplicas(mg, d, e.allowedTags); err != nil {
		e.record.Event(mg, event.Warning(reasonDeviceNotDeleted, fmt.Errorf("device %s recorded in state Secret %s was not deleted: %w", id, mg.Spec.ForProvider.StateSecretName, err)))
		return nil, nil
	}
	return d, nil
}

// notReplicas says why d is not the replica's device, or nil when it is:
// it has the replica's hostname, it was created after the RelayConfig, and
// it is tagged: with exactly the minted tags when the provider mints the
// replica's keys, else (a key the tenant supplies, whose tags the provider
// cannot know) only with tags the provider config's policy allows, if it
// names any. A tenant chooses the hostname; the tags are what keeps it from
// a device it does not own. A person's device carries no tags and is never
// a replica's. Tenants sharing one set of tags share one trust domain:
// policy gives each team its own tags.
func notReplicas(mg *v1alpha1.RelayConfig, d *tailnet.Device, allowed tagPolicy) error {
	p := mg.Spec.ForProvider
	// What the tailnet says of a device the tenant named is not the
	// tenant's to learn: the reasons name this replica's values, never the
	// device's (its hostname, creation time, tags).
	if d.Hostname != p.Hostname {
		return fmt.Errorf("its hostname is not this replica's %q", p.Hostname)
	}
	if created := mg.GetCreationTimestamp().Time; d.Created.Before(created.Add(-clockSkew)) {
		return fmt.Errorf("it was created before this RelayConfig (%s)", created.UTC().Format(time.RFC3339))
	}
	switch {
	case len(d.Tags) == 0:
		return fmt.Errorf("it carries no tags: a person's device, not a relay's")
	case p.AuthKeySecretRef == nil && !sameTags(d.Tags, p.Tags):
		return fmt.Errorf("its tags are not those of the keys minted for this replica %v", p.Tags)
	case len(allowed.outside(d.Tags)) > 0:
		return fmt.Errorf("its tags are not all among those the provider config's policy allows %v", allowed)
	}
	return nil
}

func sameTags(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
