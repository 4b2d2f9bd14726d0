package relayconfig

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"golang.org/x/oauth2"
	tsapi "tailscale.com/client/tailscale/v2"
)

// TestStableMessage: the same failure gives the same message, whatever
// request ID or ephemeral port it came with, and a token endpoint's body
// never reaches it.
func TestStableMessage(t *testing.T) {
	awsErr := func(id string) error {
		return &smithy.OperationError{ServiceID: "Elastic Load Balancing v2", OperationName: "DescribeLoadBalancers", Err: &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 500}},
				Err: &smithy.GenericAPIError{Code: "InternalFailure", Message: "injected by the test"}},
			RequestID: id,
		}}
	}
	cases := map[string]struct {
		reason  string
		a, b    error
		want    string // a substring of both messages
		notWant string // never in a message
	}{
		"AWS": {
			reason: "An AWS error's RequestID changes with every request.",
			a:      fmt.Errorf("cannot resolve endpoints: %w", awsErr("4d2f-1")),
			b:      fmt.Errorf("cannot resolve endpoints: %w", awsErr("9a1c-2")),
			want:   "api error InternalFailure: injected by the test",
		},
		"TailscaleAPI": {
			reason: "The Tailscale API's message may carry its request ID.",
			a:      fmt.Errorf("cannot create an auth key: %w", tsapi.APIError{Message: "internal error, request id: 7f3a", Status: 500}),
			b:      fmt.Errorf("cannot create an auth key: %w", tsapi.APIError{Message: "internal error, request id: 0be1", Status: 500}),
			want:   "cannot create an auth key: internal error (500)",
		},
		"EphemeralPort": {
			reason: "A DNS timeout names the local port it read from.",
			a:      errors.New("lookup lb.example.com on 10.0.0.10:53: read udp 10.0.0.7:51234->10.0.0.10:53: i/o timeout"),
			b:      errors.New("lookup lb.example.com on 10.0.0.10:53: read udp 10.0.0.7:40022->10.0.0.10:53: i/o timeout"),
			want:   "read udp 10.0.0.10:53: i/o timeout",
		},
		"OAuthBody": {
			reason: "A token endpoint that echoes the client secret in its body: status and code only.",
			a: fmt.Errorf("cannot create an auth key: %w", &oauth2.RetrieveError{Response: &http.Response{StatusCode: 401},
				Body: []byte(`{"error":"invalid_client","client_secret":"tskey-client-SECRET"}`)}),
			b: fmt.Errorf("cannot create an auth key: %w", &oauth2.RetrieveError{Response: &http.Response{StatusCode: 401},
				Body: []byte(`{"error":"invalid_client","client_secret":"tskey-client-SECRET","request_id":"2"}`)}),
			want:    "the OAuth token request was refused: HTTP 401",
			notWant: "tskey-client-SECRET",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a, b := stable(tc.a).Error(), stable(tc.b).Error()
			if a != b {
				t.Errorf("%s\nmessages differ:\n%s\n%s", tc.reason, a, b)
			}
			if !strings.Contains(a, tc.want) {
				t.Errorf("%s\nmessage %q, want it to contain %q", tc.reason, a, tc.want)
			}
			if tc.notWant != "" && strings.Contains(a+b, tc.notWant) {
				t.Errorf("%s\nmessage carries %q: %s", tc.reason, tc.notWant, a)
			}
			if !errors.Is(stable(tc.a), tc.a) {
				t.Errorf("%s\nthe stable error does not unwrap to the original", tc.reason)
			}
		})
	}
}
