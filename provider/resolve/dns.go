package resolve

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/miekg/dns"
)

// DNSResolver asks Server (ip:port) when set, else the system resolver.
type DNSResolver struct {
	Server string
}

// LookupIP returns every A and AAAA record of host, sorted: a dual-stack
// load balancer's name has both. A failed query of either family is an
// error, so a caller keeping its last good set never drops one family for a
// moment's fault; a family the name has no records of is not.
func (d DNSResolver) LookupIP(ctx context.Context, host string) ([]netip.Addr, error) {
	var addrs []netip.Addr
	if d.Server == "" {
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
		for _, ip := range ips {
			addrs = append(addrs, ip.Unmap())
		}
	} else {
		for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
			got, err := d.query(ctx, host, qtype)
			if err != nil {
				return nil, err
			}
			addrs = append(addrs, got...)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no A or AAAA records for %s", host)
	}
	return sortAddrs(addrs), nil
}

// query asks Server for host's records of one type.
func (d DNSResolver) query(ctx context.Context, host string, qtype uint16) ([]netip.Addr, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(host), qtype)
	m.RecursionDesired = true
	c := &dns.Client{Net: "udp"}
	in, _, err := c.ExchangeContext(ctx, m, d.Server)
	if err != nil {
		return nil, err
	}
	if in.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("server %s answered %s to %s", d.Server, dns.RcodeToString[in.Rcode], dns.TypeToString[qtype])
	}
	var addrs []netip.Addr
	for _, rr := range in.Answer {
		var ip net.IP
		switch rr := rr.(type) {
		case *dns.A:
			ip = rr.A
		case *dns.AAAA:
			ip = rr.AAAA
		}
		if a, ok := netip.AddrFromSlice(ip); ok {
			addrs = append(addrs, a.Unmap())
		}
	}
	return addrs, nil
}

func sortAddrs(a []netip.Addr) []netip.Addr {
	slices.SortFunc(a, netip.Addr.Compare)
	return slices.Compact(a)
}
