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

// LookupA returns every A record of host, sorted.
func (d DNSResolver) LookupA(ctx context.Context, host string) ([]netip.Addr, error) {
	var addrs []netip.Addr
	if d.Server == "" {
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
		if err != nil {
			return nil, err
		}
		for _, ip := range ips {
			addrs = append(addrs, ip.Unmap())
		}
	} else {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(host), dns.TypeA)
		m.RecursionDesired = true
		c := &dns.Client{Net: "udp"}
		in, _, err := c.ExchangeContext(ctx, m, d.Server)
		if err != nil {
			return nil, err
		}
		if in.Rcode != dns.RcodeSuccess {
			return nil, fmt.Errorf("server %s answered %s", d.Server, dns.RcodeToString[in.Rcode])
		}
		for _, rr := range in.Answer {
			if a, ok := rr.(*dns.A); ok {
				if ip, ok := netip.AddrFromSlice(a.A.To4()); ok {
					addrs = append(addrs, ip)
				}
			}
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no A records for %s", host)
	}
	return sortAddrs(addrs), nil
}

func sortAddrs(a []netip.Addr) []netip.Addr {
	slices.SortFunc(a, netip.Addr.Compare)
	return slices.Compact(a)
}
