package cloud

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// DNSMode says how the test DNS server answers.
type DNSMode int

// DNS server behaviours, for fault tests.
const (
	DNSAnswer       DNSMode = iota // answer from the records
	DNSServFail                    // answer SERVFAIL
	DNSSilent                      // never answer (a timeout)
	DNSAAAAServFail                // answer A queries, SERVFAIL AAAA ones
)

// DNS is a real DNS server on a loopback UDP port, answering A and AAAA
// queries from a record table the test may change at any time.
type DNS struct {
	Addr string

	mu      sync.Mutex
	records map[string][]string // fqdn -> IPv4 and IPv6 addresses
	mode    DNSMode
	queries int
	srv     *dns.Server
}

// StartDNS starts the server; it stops when the test ends.
func StartDNS(t testing.TB) *DNS {
	t.Helper()
	return StartDNSOn(t, "127.0.0.1:0")
}

// startDNSOn starts the server on addr (UDP).
func StartDNSOn(t testing.TB, addr string) *DNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	d := &DNS{Addr: pc.LocalAddr().String(), records: map[string][]string{}}
	started := make(chan struct{})
	d.srv = &dns.Server{PacketConn: pc, Handler: d, NotifyStartedFunc: func() { close(started) }}
	go func() { _ = d.srv.ActivateAndServe() }()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("DNS server did not start")
	}
	t.Cleanup(func() { _ = d.srv.Shutdown() })
	return d
}

// Set replaces host's A and AAAA records: IPv4 addresses are its A records,
// IPv6 ones its AAAA records.
func (d *DNS) Set(host string, ips ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.records[dns.Fqdn(host)] = ips
}

// SetMode changes how the server answers.
func (d *DNS) SetMode(m DNSMode) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mode = m
}

// Queries counts the questions asked so far.
func (d *DNS) Queries() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.queries
}

// ServeDNS answers one query.
func (d *DNS) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	d.mu.Lock()
	d.queries++
	mode := d.mode
	var ips []string
	if len(r.Question) == 1 {
		ips = d.records[r.Question[0].Name]
	}
	d.mu.Unlock()

	m := new(dns.Msg)
	m.SetReply(r)
	switch mode {
	case DNSSilent:
		return
	case DNSServFail:
		m.Rcode = dns.RcodeServerFailure
	case DNSAAAAServFail:
		if len(r.Question) == 1 && r.Question[0].Qtype == dns.TypeAAAA {
			m.Rcode = dns.RcodeServerFailure
			break
		}
		fallthrough
	default:
		if len(ips) == 0 {
			m.Rcode = dns.RcodeNameError
		}
		// A name with records of the other family only answers with none
		// (NODATA), as a real server does.
		for _, ip := range ips {
			if len(r.Question) != 1 {
				break
			}
			q := r.Question[0]
			hdr := dns.RR_Header{Name: q.Name, Rrtype: q.Qtype, Class: dns.ClassINET, Ttl: 5}
			a := net.ParseIP(ip)
			switch {
			case q.Qtype == dns.TypeA && a.To4() != nil:
				m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: a.To4()})
			case q.Qtype == dns.TypeAAAA && a.To4() == nil:
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: a})
			}
		}
	}
	_ = w.WriteMsg(m)
}
