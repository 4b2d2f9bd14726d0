// Package awsowner tells whether an AWS resource a RelayConfig names
// belongs to the RelayConfig's namespace. The provider looks such resources
// up with the platform's AWS credentials, which reach every team's: without
// this, a tenant could name another team's Elastic IP or load balancer and
// have it used as its own.
package awsowner

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// Owned says whether tags show the resource is namespace's: tagged
// peerrelay.io/namespace=<namespace> (set aside by the platform team), or
// peerrelay.io/relay=<namespace>/<name> (composed by the function for a
// PeerRelay there). namespace is the RelayConfig's own, never anything its
// spec says; an empty one owns nothing.
func Owned(namespace string, tags map[string]string) bool {
	if namespace == "" {
		return false
	}
	if v, ok := tags[v1alpha1.TagNamespace]; ok && v == namespace {
		return true
	}
	// A namespace name has no "/", so "team-a/" cannot be the start of
	// another namespace's value.
	name, ok := strings.CutPrefix(tags[v1alpha1.TagRelay], namespace+"/")
	return ok && name != ""
}

// Wanted names the tags that would make a resource namespace's, for a
// message.
func Wanted(namespace string) string {
	return "neither tag " + v1alpha1.TagNamespace + "=" + namespace + " nor " + v1alpha1.TagRelay + "=" + namespace + "/…"
}

// EC2Tags is an EC2 resource's tags as a map, for Owned.
func EC2Tags(tags []ec2types.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}
