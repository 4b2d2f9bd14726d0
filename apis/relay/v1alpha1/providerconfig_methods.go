package v1alpha1

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
)

// The methods below satisfy crossplane-runtime's ProviderConfig and
// ProviderConfigUsage interfaces (what angryjet would generate).

// GetCondition of this ProviderConfig.
func (p *ProviderConfig) GetCondition(ct xpv2.ConditionType) xpv2.Condition {
	return p.Status.GetCondition(ct)
}

// SetConditions of this ProviderConfig.
func (p *ProviderConfig) SetConditions(c ...xpv2.Condition) { p.Status.SetConditions(c...) }

// GetUsers of this ProviderConfig.
func (p *ProviderConfig) GetUsers() int64 { return p.Status.Users }

// SetUsers of this ProviderConfig.
func (p *ProviderConfig) SetUsers(i int64) { p.Status.Users = i }

// GetCondition of this ClusterProviderConfig.
func (p *ClusterProviderConfig) GetCondition(ct xpv2.ConditionType) xpv2.Condition {
	return p.Status.GetCondition(ct)
}

// SetConditions of this ClusterProviderConfig.
func (p *ClusterProviderConfig) SetConditions(c ...xpv2.Condition) { p.Status.SetConditions(c...) }

// GetUsers of this ClusterProviderConfig.
func (p *ClusterProviderConfig) GetUsers() int64 { return p.Status.Users }

// SetUsers of this ClusterProviderConfig.
func (p *ClusterProviderConfig) SetUsers(i int64) { p.Status.Users = i }

// GetProviderConfigReference of this usage.
func (u *ProviderConfigUsage) GetProviderConfigReference() xpv2.ProviderConfigReference {
	return u.ProviderConfigReference
}

// SetProviderConfigReference of this usage.
func (u *ProviderConfigUsage) SetProviderConfigReference(r xpv2.ProviderConfigReference) {
	u.ProviderConfigReference = r
}

// GetResourceReference of this usage.
func (u *ProviderConfigUsage) GetResourceReference() xpv2.TypedReference { return u.ResourceReference }

// SetResourceReference of this usage.
func (u *ProviderConfigUsage) SetResourceReference(r xpv2.TypedReference) { u.ResourceReference = r }

// GetItems of this list.
func (l *ProviderConfigUsageList) GetItems() []resource.ProviderConfigUsage {
	items := make([]resource.ProviderConfigUsage, len(l.Items))
	for i := range l.Items {
		items[i] = &l.Items[i]
	}
	return items
}
