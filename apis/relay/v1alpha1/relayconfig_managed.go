package v1alpha1

import (
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
)

// The methods below make RelayConfig a crossplane-runtime ModernManaged.
// They are what angryjet would generate; written out because angryjet is not
// served here.

// GetCondition of this RelayConfig.
func (r *RelayConfig) GetCondition(ct xpv2.ConditionType) xpv2.Condition {
	return r.Status.GetCondition(ct)
}

// SetConditions of this RelayConfig.
func (r *RelayConfig) SetConditions(c ...xpv2.Condition) { r.Status.SetConditions(c...) }

// GetManagementPolicies of this RelayConfig.
func (r *RelayConfig) GetManagementPolicies() xpv2.ManagementPolicies {
	return r.Spec.ManagementPolicies
}

// SetManagementPolicies of this RelayConfig.
func (r *RelayConfig) SetManagementPolicies(p xpv2.ManagementPolicies) {
	r.Spec.ManagementPolicies = p
}

// GetProviderConfigReference of this RelayConfig.
func (r *RelayConfig) GetProviderConfigReference() *xpv2.ProviderConfigReference {
	return r.Spec.ProviderConfigReference
}

// SetProviderConfigReference of this RelayConfig.
func (r *RelayConfig) SetProviderConfigReference(p *xpv2.ProviderConfigReference) {
	r.Spec.ProviderConfigReference = p
}

// GetWriteConnectionSecretToReference of this RelayConfig.
func (r *RelayConfig) GetWriteConnectionSecretToReference() *xpv2.LocalSecretReference {
	return r.Spec.WriteConnectionSecretToReference
}

// SetWriteConnectionSecretToReference of this RelayConfig.
func (r *RelayConfig) SetWriteConnectionSecretToReference(ref *xpv2.LocalSecretReference) {
	r.Spec.WriteConnectionSecretToReference = ref
}
