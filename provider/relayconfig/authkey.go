package relayconfig

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/tailnet"
)

// Where a minted key lives and what tailscaled writes into its state Secret.
const (
	annotationKeyExpires   = "relay.peerrelay.io/authkey-expires"
	annotationKeyID        = "relay.peerrelay.io/authkey-id"
	annotationKeyMinted    = "relay.peerrelay.io/authkey-minted"
	stateSecretDeviceIDKey = "device_id"
	// stateSecretReissueKey is containerboot's request for a new key: the
	// AuthKey its config had when login failed. It waits until the
	// config's AuthKey differs.
	stateSecretReissueKey = "reissue_authkey"
)

// mintedDataKey is the minted key's file name in R-i-authkey: a new key is
// a new file, so the config's AuthKey changes, which is what containerboot
// waits for after it asked for a new key.
func mintedDataKey(id string) string { return "authkey-" + id }

// authKey returns what the config's AuthKey says, and whether a key must be
// minted first (by Create or Update: Observe only observes). The AuthKey is
// a file path by default, so the config Secret carries no credential, or
// the key itself when the RelayConfig asks for Inline. With no auth key
// Secret named and Tailscale API access configured, the provider mints one
// into R-i-authkey. The key never reaches an error or a log.
//
// Once the replica's device exists (its state holds a device ID) the
// config carries no key at all: tailscaled logs in from its state, and a
// restarted pod must not depend on a key Secret deleted after enrolment or
// a single-use key already spent (the pod mounts the key Secret as
// optional). A device that lost its login asks for a key again
// (reissue_authkey), and gets one.
func (e *external) authKey(ctx context.Context, mg *v1alpha1.RelayConfig, state *corev1.Secret) (ref string, mint bool, err error) {
	var reissue []byte
	asked := false
	if state != nil {
		reissue, asked = state.Data[stateSecretReissueKey]
	}
	if loggedIn(state) != "" && !asked && !meta.WasDeleted(mg) {
		// A key that was fine stays so: one status write less per replica,
		// and every write is a watch event on the PeerRelay. A problem the
		// login solved is cleared.
		if c := mg.GetCondition(v1alpha1.ConditionAuthKey); c.Status != corev1.ConditionTrue {
			setKeyCondition(mg, corev1.ConditionTrue, v1alpha1.ReasonKeyLoggedIn, "the device is logged in; the config carries no key")
		}
		return "", false, nil
	}
	r := mg.Spec.ForProvider.AuthKeySecretRef
	switch {
	case r == nil && e.api == nil:
		setKeyCondition(mg, corev1.ConditionFalse, v1alpha1.ReasonKeyUnavailable, "no auth key: spec.forProvider.authKeySecretRef (the PeerRelay's spec.authKeySecretRef) is not set, and the provider config has no Tailscale API access (spec.tailscale, an OAuth client) to mint one; the replica cannot log in")
		return "", false, nil
	case r == nil:
		if bad := e.allowedTags.outside(mg.Spec.ForProvider.Tags); len(bad) > 0 {
			setKeyCondition(mg, corev1.ConditionFalse, v1alpha1.ReasonKeyUnavailable, fmt.Sprintf("no key is minted: spec.forProvider.tags (the PeerRelay's spec.tags) %v are not allowed by the provider config's spec.policy.tags %v", bad, e.allowedTags))
			return "", false, nil
		}
		return e.mintedKeyRef(ctx, mg, reissue, asked, loggedIn(state))
	}
	ref, missing, err := e.suppliedKey(ctx, mg, r)
	switch {
	case err != nil:
		return "", false, err
	case missing != "":
		setKeyCondition(mg, corev1.ConditionFalse, v1alpha1.ReasonKeySecretMissing, missing)
	case asked:
		setKeyCondition(mg, corev1.ConditionFalse, v1alpha1.ReasonKeyRejected, fmt.Sprintf("tailscaled could not log in with the key in Secret %s (expired, revoked, or single-use and spent): put a new key there; the pod picks it up when it restarts", r.Name))
	default:
		setKeyCondition(mg, corev1.ConditionTrue, v1alpha1.ReasonKeyAvailable, "the key in Secret "+r.Name)
	}
	return ref, false, nil
}

// suppliedKey is the AuthKey for the key Secret the user named, and what
// is missing when the Secret or its key is. It reads the Secret past the
// cache (the user's Secret is not the provider's), only while the replica
// still has to log in; its data is never logged or copied, except into an
// Inline config.
func (e *external) suppliedKey(ctx context.Context, mg *v1alpha1.RelayConfig, ref *v1alpha1.AuthKeyRef) (authKey, missing string, err error) {
	key := cmp.Or(ref.Key, "authkey")
	if ref.Mode != v1alpha1.AuthKeyModeInline {
		// The file is there once the Secret is: the pod mounts it as
		// optional, and the config need not change when it appears.
		authKey = "file:" + path.Join(cmp.Or(ref.MountPath, v1alpha1.DefaultAuthKeyMountPath), key)
	}
	s := &corev1.Secret{}
	err = e.read.Get(ctx, types.NamespacedName{Namespace: mg.GetNamespace(), Name: ref.Name}, s)
	switch {
	case kerrors.IsNotFound(err):
		return authKey, fmt.Sprintf("Secret %s named by spec.authKeySecretRef does not exist: create it with a pre-authorised auth key under key %q", ref.Name, key), nil
	case err != nil:
		return "", "", fmt.Errorf("cannot get the auth key Secret %s named by spec.authKeySecretRef: %w", ref.Name, err)
	}
	v := bytes.TrimSpace(s.Data[key])
	if len(v) == 0 {
		// The Secret's other keys are not named: the status is read by
		// more people than the Secret.
		return authKey, fmt.Sprintf("Secret %s named by spec.authKeySecretRef has no key %q: set spec.authKeySecretRef.key", ref.Name, key), nil
	}
	if ref.Mode == v1alpha1.AuthKeyModeInline {
		if len(v) > maxCachedValue {
			// Not a Tailscale auth key (tens of bytes); in the config it
			// would outgrow what the provider's cache keeps of it.
			return "", fmt.Sprintf("the value under key %q of Secret %s named by spec.authKeySecretRef is %d bytes, more than an auth key's %d at most: put the auth key alone there", key, ref.Name, len(v), maxCachedValue), nil
		}
		return string(v), "", nil
	}
	return authKey, "", nil
}

func setKeyCondition(mg *v1alpha1.RelayConfig, s corev1.ConditionStatus, r xpv2.ConditionReason, msg string) {
	mg.SetConditions(condition(v1alpha1.ConditionAuthKey, s, r, msg))
}

// createStateSecret creates the replica's empty state Secret, controlled by
// the RelayConfig so it lives exactly as long as the replica: a restarted
// pod keeps its device identity, and the device ID is still there to read
// when the RelayConfig is deleted. It is the provider's, not a composed
// resource, because containerboot writes it often and every write to a
// composed resource is a watch event on the PeerRelay.
func (e *external) createStateSecret(ctx context.Context, mg *v1alpha1.RelayConfig) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: mg.Spec.ForProvider.StateSecretName, Namespace: mg.GetNamespace()}}
	_ = ownSecret(s, mg, "") // new: nobody else controls it
	err := e.kube.Create(ctx, s)
	switch {
	case err == nil:
		// The provider's own record of which Secret it made: a tenant's
		// Secret of the same name with a forged controller reference is
		// not it.
		mg.Status.AtProvider.StateSecretUID = string(s.UID)
		return nil
	case kerrors.IsAlreadyExists(err):
		// Ours, not in the cache yet; or someone else's: the pod must not
		// log in with another's state.
		err = e.notForeign(ctx, mg, s.Name, "spec.forProvider.stateSecretName")
	}
	if err != nil {
		return fmt.Errorf("cannot create state Secret %s: %w", s.Name, err)
	}
	return nil
}

// reissueInterval is the least time between two keys minted for one
// replica: a device whose every login fails (an ACL refusing its tags,
// say), or a key Secret deleted or edited again and again, would otherwise
// mint a key per reconcile. The Tailscale operator allows one per 30 s too.
const reissueInterval = 30 * time.Second

// errReissueTooSoon is a key needed within reissueInterval of the last
// mint: the reconciler's backoff brings it back.
var errReissueTooSoon = errors.New("a new key is needed within 30 s of the last one minted for this replica: the next is minted once 30 s have passed")

// mintedKeyRef reads R-i-authkey and returns the config's reference to its
// key, or mint when a new key is needed: there is none, it expired unused,
// or containerboot asked for a new one in place of this one (device, which
// lost its login, then goes first). The key's ID is the provider's record
// (status.atProvider.authKeyID), not the Secret's annotation, which the
// tenant may write; a key is needed at most once per reissueInterval.
func (e *external) mintedKeyRef(ctx context.Context, mg *v1alpha1.RelayConfig, reissue []byte, asked bool, device string) (string, bool, error) {
	if meta.WasDeleted(mg) {
		return "", false, nil // never mint for a replica on its way out
	}
	s := &corev1.Secret{}
	err := e.kube.Get(ctx, types.NamespacedName{Namespace: mg.GetNamespace(), Name: mg.GetName() + v1alpha1.MintedAuthKeySuffix}, s)
	if kerrors.IsNotFound(err) {
		setKeyCondition(mg, corev1.ConditionFalse, v1alpha1.ReasonKeyMinting, "minting a key through the Tailscale API")
		return "", true, tooSoon(mg)
	}
	if err != nil {
		return "", false, fmt.Errorf("cannot get minted auth key Secret %s: %w", s.Name, err)
	}
	id := mg.Status.AtProvider.AuthKeyID
	ref := mintedKeyFile(mg, id)
	expires, _ := time.Parse(time.RFC3339, s.Annotations[annotationKeyExpires])
	switch {
	case id == "" || len(s.Data[mintedDataKey(id)]) == 0 || !time.Now().Before(expires):
		setKeyCondition(mg, corev1.ConditionFalse, v1alpha1.ReasonKeyMinting, "the minted key expired unused: minting a new one")
		return ref, true, tooSoon(mg)
	case asked && string(reissue) == ref:
		setKeyCondition(mg, corev1.ConditionFalse, v1alpha1.ReasonKeyRejected, "tailscaled could not log in with minted key "+id+": minting a new one")
		if err := tooSoon(mg); err != nil {
			return ref, false, err
		}
		e.obs.staleDevice = device
		return ref, true, nil
	}
	setKeyCondition(mg, corev1.ConditionTrue, v1alpha1.ReasonKeyAvailable, "minted key "+id)
	return ref, false, nil
}

// tooSoon is errReissueTooSoon when the provider's own record says a key
// was minted for this replica less than reissueInterval ago: Observe
// fails, and the reconciler's backoff brings it back.
func tooSoon(mg *v1alpha1.RelayConfig) error {
	if last := mg.Status.AtProvider.LastMinted; last != nil && time.Since(last.Time) < reissueInterval {
		return errReissueTooSoon
	}
	return nil
}

// recordMint records key id, minted at at, in the RelayConfig's status at
// once, by a merge patch of just these fields that needs no resource
// version (and leaves mg at the new one, so the reconciler's own status
// write goes through): the record
// that throttles the next mint and names the key to revoke must not be
// lost with a status write that meets a conflict.
func (e *external) recordMint(ctx context.Context, mg *v1alpha1.RelayConfig, id string, at metav1.Time) error {
	before := mg.DeepCopy()
	mg.Status.AtProvider.AuthKeyID = id
	mg.Status.AtProvider.LastMinted = &at
	setKeyCondition(mg, corev1.ConditionTrue, v1alpha1.ReasonKeyAvailable, "minted key "+id)
	// Patched on a copy: the server's answer must not replace what this
	// reconcile recorded in mg and has not written yet (admission, the
	// state Secret's UID); mg takes only its resource version.
	patched := mg.DeepCopy()
	if err := e.kube.Status().Patch(ctx, patched, client.MergeFrom(before)); err != nil {
		return err
	}
	mg.SetResourceVersion(patched.GetResourceVersion())
	return nil
}

// mintedKeyFile is where the pod sees minted key id (the StatefulSet mounts
// R-i-authkey at DefaultAuthKeyMountPath/R-i).
func mintedKeyFile(mg *v1alpha1.RelayConfig, id string) string {
	return "file:" + path.Join(v1alpha1.DefaultAuthKeyMountPath, mg.GetName(), mintedDataKey(id))
}

// mint writes a new key into R-i-authkey, replacing the one there, and
// returns the config's reference to it.
func (e *external) mint(ctx context.Context, mg *v1alpha1.RelayConfig) (string, error) {
	name := mg.GetName() + v1alpha1.MintedAuthKeySuffix
	field := "metadata.name (the minted key's Secret is <name>" + v1alpha1.MintedAuthKeySuffix + ")"
	// A key is minted only where it can be written: a Secret someone else
	// wrote under its name (the cache does not hold it) is refused first.
	if err := e.notForeign(ctx, mg, name, field); err != nil {
		return "", err
	}
	if err := e.budgets.spend(mg); err != nil {
		setKeyCondition(mg, corev1.ConditionFalse, v1alpha1.ReasonMintBudgetSpent, err.Error())
		return "", err
	}
	id, key, expires, err := e.api.CreateAuthKey(ctx, tailnet.KeyRequest{Tags: mg.Spec.ForProvider.Tags, Description: "peer relay " + mg.GetNamespace() + "/" + mg.GetName()})
	if err != nil {
		return "", err
	}
	now := metav1.Now()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mg.GetNamespace()}}
	err = e.writeSecret(ctx, mg, s, field, func() {
		s.Annotations = map[string]string{annotationKeyExpires: expires.UTC().Format(time.RFC3339), annotationKeyID: id, annotationKeyMinted: now.UTC().Format(time.RFC3339)}
		s.Data = map[string][]byte{mintedDataKey(id): []byte(key)}
	})
	if err != nil {
		err = fmt.Errorf("cannot write minted auth key Secret %s: %w", name, err)
	}
	replaced := mg.Status.AtProvider.AuthKeyID
	if err == nil {
		if err = e.recordMint(ctx, mg, id, now); err != nil {
			err = fmt.Errorf("cannot record minted key %s in status.atProvider: %w", id, err)
		}
	}
	if err != nil {
		// A key nobody can read, or the provider cannot account for, is
		// revoked at once: the next attempt mints another, and no usable
		// key is left behind in the tailnet.
		if rerr := e.api.RevokeKey(ctx, id); rerr != nil {
			return "", errors.Join(err, rerr)
		}
		return "", fmt.Errorf("%w; the key minted for it, %s, is revoked", err, id)
	}
	// The key it replaces, by the provider's own record, can mint no
	// device any more: revoked, so a tenant deleting its key Secret again
	// and again is not left with a pile of pre-authorised keys. A key that
	// cannot be revoked (used, expired) lapses by itself.
	if replaced != "" && replaced != id {
		_ = e.api.RevokeKey(ctx, replaced)
	}
	return mintedKeyFile(mg, id), nil
}
