package relayconfig

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// Traffic samples: a replica's relay counters, read from its pod's metrics
// endpoint (containerboot's /metrics, which serves tailscaled's) at most
// once a minute while the function asks for them (spec.forProvider.traffic,
// set while the PeerRelay's metrics are on). A sample equal to the last
// one is not recorded, so a relay carrying nothing writes nothing; nor,
// within recordEvery, is one that only counts on (worthRecording).

const (
	// sampleEvery is how often a replica's counters are read at most; a
	// RelayConfig that samples is polled as often.
	sampleEvery = time.Minute
	// scrapeTimeout bounds one read of a pod's metrics, maxScrape its
	// size and maxLine a line's: the pod is in a tenant's namespace.
	scrapeTimeout = 2 * time.Second
	maxScrape     = 256 << 10
	maxLine       = 4 << 10
)

// The counters tailscaled's relay server publishes (net/udprelay).
const (
	metricForwardedPackets = "tailscaled_peer_relay_forwarded_packets_total"
	metricForwardedBytes   = "tailscaled_peer_relay_forwarded_bytes_total"
	metricEndpoints        = "tailscaled_peer_relay_endpoints"
)

// samplers remembers when each RelayConfig was last sampled.
type samplers struct {
	now func() time.Time
	// sched is when each RelayConfig was last sampled.
	sched  *schedule
	scrape func(ctx context.Context, addr netip.AddrPort) (v1alpha1.TrafficSample, error)
}

func newSamplers() *samplers {
	s := &samplers{now: time.Now, scrape: scrapeTraffic}
	s.sched = newSchedule(func() time.Time { return s.now() }) // tests set s.now
	return s
}

// due says whether a RelayConfig is to be sampled now, and if so records
// that it was.
func (s *samplers) due(uid types.UID) bool {
	return s.sched.due(uid, "", sampleEvery, sampleEvery)
}

func (s *samplers) forget(uid types.UID) { s.sched.forget(uid) }

// pollInterval polls a sampling RelayConfig every sampleEvery
// (managed.PollIntervalHook), so a relay's traffic shows within a minute.
func (s *samplers) pollInterval(uid types.UID, poll time.Duration) time.Duration {
	return s.sched.pollInterval(uid, poll, sampleEvery)
}

// sampleTraffic reads the replica's relay counters when due and records
// them if they changed. A pod that is not running or does not answer
// leaves the last sample as it is: counting it is the metric's job
// (peerrelay_traffic_samples_total), and a condition would be a write.
func (e *external) sampleTraffic(ctx context.Context, mg *v1alpha1.RelayConfig) {
	src := mg.Spec.ForProvider.Traffic
	if e.samplers == nil {
		return
	}
	if src == nil {
		mg.Status.AtProvider.Traffic = nil
		e.samplers.forget(mg.GetUID())
		return
	}
	if meta.WasDeleted(mg) || !e.samplers.due(mg.GetUID()) {
		// A replica being deleted is not sampled again (Delete forgets it).
		return
	}
	sample, err := e.readTraffic(ctx, mg)
	if err != nil {
		observeSample(sampleFailed)
		return
	}
	now, last := e.samplers.now(), mg.Status.AtProvider.Traffic
	switch {
	case last != nil && sameCounts(*last, sample):
		observeSample(sampleUnchanged)
		return
	case !worthRecording(last, sample, now):
		observeSample(sampleHeld)
		return
	}
	observeSample(sampleChanged)
	sample.SampledAt = metav1.NewTime(now)
	mg.Status.AtProvider.Traffic = &sample
}

func sameCounts(a, b v1alpha1.TrafficSample) bool {
	return a.Sessions == b.Sessions && a.ForwardedPackets == b.ForwardedPackets && a.ForwardedBytes == b.ForwardedBytes
}

// recordEvery is how often a relay's changing counters are recorded at
// most. Each record is a write to the RelayConfig, and so a composition
// pass of its PeerRelay, which re-applies everything it composes: a busy
// relay would cost one a minute.
const recordEvery = 5 * time.Minute

// worthRecording says whether sample replaces last in the RelayConfig's
// status: the first sample; a relay that starts or stops relaying (the
// forwarded packets or the sessions leave or reach zero), at once;
// otherwise changed counters at most every recordEvery.
func worthRecording(last *v1alpha1.TrafficSample, sample v1alpha1.TrafficSample, now time.Time) bool {
	switch {
	case last == nil:
		return true
	case sameCounts(*last, sample):
		return false
	case (last.ForwardedPackets == 0) != (sample.ForwardedPackets == 0), (last.Sessions == 0) != (sample.Sessions == 0):
		return true
	}
	return now.Sub(last.SampledAt.Time) >= recordEvery
}

// readTraffic scrapes the replica's pod, src.Pod in mg's namespace, on its
// metrics port. Only a pod of the replica's StatefulSet (named as the
// RelayConfig) on the pod network is read: a pod on its node's network has
// the node's address, and its port would be the node's. A tenant can
// write a pod's ownerReferences, so that check keeps a stray pod of the
// same name from being counted, not the provider's requests in bounds;
// the pod network does that: the scrape reaches only the tenant's pod.
func (e *external) readTraffic(ctx context.Context, mg *v1alpha1.RelayConfig) (v1alpha1.TrafficSample, error) {
	src := mg.Spec.ForProvider.Traffic
	pod := &corev1.Pod{}
	if err := e.read.Get(ctx, types.NamespacedName{Namespace: mg.GetNamespace(), Name: src.Pod}, pod); err != nil {
		return v1alpha1.TrafficSample{}, err
	}
	if owner := metav1.GetControllerOf(pod); owner == nil || owner.Kind != "StatefulSet" || owner.Name != mg.GetName() {
		return v1alpha1.TrafficSample{}, fmt.Errorf("pod %s is not controlled by StatefulSet %s", src.Pod, mg.GetName())
	}
	if pod.Spec.HostNetwork {
		return v1alpha1.TrafficSample{}, fmt.Errorf("pod %s runs on its node's network", src.Pod)
	}
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil || pod.Status.Phase != corev1.PodRunning {
		return v1alpha1.TrafficSample{}, fmt.Errorf("pod %s is not running with an IP", src.Pod)
	}
	return e.samplers.scrape(ctx, netip.AddrPortFrom(ip, uint16(src.Port)))
}

// scrapeClient reads a pod's metrics. The pod is in a tenant's namespace
// and its answers are the tenant's to choose: no redirect is followed and
// no proxy used, and it dials only the address it was asked for, so the
// provider sends nothing from crossplane-system to any other address
// (another namespace's pod, a node port, the cloud's metadata service).
var scrapeClient = &http.Client{
	Timeout:       scrapeTimeout,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport: &http.Transport{
		Proxy:             nil,
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			want, ok := ctx.Value(scrapeAddr{}).(netip.AddrPort)
			if !ok || address != want.String() {
				return nil, fmt.Errorf("scrape dials only the pod's metrics address %s, not %s", want, address)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, address)
		},
	},
}

// scrapeAddr is the context key of the one address a scrape may dial.
type scrapeAddr struct{}

// scrapeTraffic reads the relay counters from a metrics endpoint.
func scrapeTraffic(ctx context.Context, addr netip.AddrPort) (v1alpha1.TrafficSample, error) {
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, scrapeAddr{}, addr), scrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr.String()+"/metrics", nil)
	if err != nil {
		return v1alpha1.TrafficSample{}, err
	}
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return v1alpha1.TrafficSample{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return v1alpha1.TrafficSample{}, fmt.Errorf("metrics answered HTTP %d", resp.StatusCode)
	}
	return parseTraffic(resp.Body)
}

// relayLines keeps, of a metrics exposition read line by line, only the
// lines of the relay counters (their samples and TYPE lines), at most
// maxScrape bytes read and maxLine per line: what is parsed stays small
// whatever the pod serves.
func relayLines(r io.Reader) ([]byte, error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxScrape))
	sc.Buffer(make([]byte, 0, 1024), maxLine)
	var kept bytes.Buffer
	for sc.Scan() {
		line := sc.Bytes()
		name := bytes.TrimPrefix(line, []byte("# TYPE "))
		for _, m := range []string{metricForwardedPackets, metricForwardedBytes, metricEndpoints} {
			if rest, ok := bytes.CutPrefix(name, []byte(m)); ok && (len(rest) == 0 || rest[0] == ' ' || rest[0] == '{') {
				kept.Write(line)
				kept.WriteByte('\n')
				break
			}
		}
	}
	return kept.Bytes(), sc.Err()
}

// parseTraffic sums the relay counters in a Prometheus text exposition;
// one without them (metrics of a tailscaled that runs no relay) is an
// error.
func parseTraffic(r io.Reader) (v1alpha1.TrafficSample, error) {
	lines, err := relayLines(r)
	if err != nil {
		return v1alpha1.TrafficSample{}, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(lines))
	if err != nil {
		return v1alpha1.TrafficSample{}, err
	}
	if families[metricForwardedPackets] == nil {
		return v1alpha1.TrafficSample{}, fmt.Errorf("no %s in the metrics: the pod runs no peer relay", metricForwardedPackets)
	}
	var s v1alpha1.TrafficSample
	s.ForwardedPackets = sum(families[metricForwardedPackets], nil)
	s.ForwardedBytes = sum(families[metricForwardedBytes], nil)
	s.Sessions = sum(families[metricEndpoints], map[string]string{"state": "open"})
	return s, nil
}

// sum adds the values of a family's series whose labels include match.
func sum(f *dto.MetricFamily, match map[string]string) int64 {
	if f == nil {
		return 0
	}
	var total float64
	for _, m := range f.GetMetric() {
		if !hasLabels(m, match) {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			total += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			total += m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			total += m.GetUntyped().GetValue()
		}
	}
	return int64(total)
}

func hasLabels(m *dto.Metric, match map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if v, ok := match[l.GetName()]; ok && v == l.GetValue() {
			found++
		}
	}
	return found == len(match)
}
