package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pmiAddresses decides where the PMI server listens for ssh ranks (listen:
// local IP addresses) and what the ranks of each host dial (dial[i] for
// hosts[i]). It never chooses the wildcard address:
//
//   - with pmiHost (--pmi-host), the server listens on the addresses that
//     name resolves to and every rank dials the name;
//   - ranks on a loopback or local host name dial 127.0.0.1;
//   - for a remote host, the server listens on the source address of this
//     machine's route to that host, and its ranks dial that address;
//   - when a remote host's name does not resolve here (an ssh alias, say),
//     the addresses of this machine's host name, which its ranks dial.
//
// lookup resolves a name; route returns the local address of the route to
// an IP. Both are parameters for tests.
func pmiAddresses(hosts []Host, pmiHost string, lookup func(string) ([]net.IP, error), route func(net.IP) (net.IP, error)) (listen, dial []string, err error) {
	seen := map[string]bool{}
	add := func(ip net.IP) {
		if s := ip.String(); !seen[s] {
			seen[s] = true
			listen = append(listen, s)
		}
	}
	dial = make([]string, len(hosts))
	if pmiHost != "" {
		ips, err := lookup(pmiHost)
		if err != nil || len(ips) == 0 {
			return nil, nil, fmt.Errorf("%w: --pmi-host %q: no address (%v)", ErrUsage, pmiHost, err)
		}
		for _, ip := range ips {
			if ip.IsUnspecified() {
				return nil, nil, fmt.Errorf("%w: --pmi-host %q is the wildcard address; name an address the ranks reach", ErrUsage, pmiHost)
			}
			add(ip)
		}
		for i := range dial {
			dial[i] = pmiHost
		}
		return listen, dial, nil
	}
	var fallback []int // hosts whose name does not resolve here
	for i, h := range hosts {
		if isLocalHost(h.Name) || isLoopbackSSHTarget(h.Name) {
			add(net.IPv4(127, 0, 0, 1))
			dial[i] = "127.0.0.1"
			continue
		}
		name := h.Name
		if k := strings.LastIndexByte(name, '@'); k >= 0 {
			name = name[k+1:]
		}
		src, ok := net.IP(nil), false
		if ips, err := lookup(name); err == nil {
			for _, ip := range preferIPv4(ips) {
				if s, err := route(ip); err == nil && s != nil && !s.IsUnspecified() {
					src, ok = s, true
					break
				}
			}
		}
		if !ok {
			fallback = append(fallback, i)
			continue
		}
		add(src)
		dial[i] = src.String()
	}
	if len(fallback) > 0 {
		self, err := os.Hostname()
		if err != nil {
			return nil, nil, fmt.Errorf("launch: hostname for PMI_PORT: %w", err)
		}
		ips, err := lookup(self)
		n := 0
		for _, ip := range ips {
			if !ip.IsLoopback() && !ip.IsUnspecified() {
				add(ip)
				n++
			}
		}
		if err != nil || n == 0 {
			return nil, nil, fmt.Errorf("%w: cannot tell which address of this machine host %q reaches (its name does not resolve here, and %q has no non-loopback address); set --pmi-host",
				ErrUsage, hosts[fallback[0]].Name, self)
		}
		for _, i := range fallback {
			dial[i] = self
		}
	}
	return listen, dial, nil
}

// preferIPv4 orders IPv4 addresses first.
func preferIPv4(ips []net.IP) []net.IP {
	var v4, v6 []net.IP
	for _, ip := range ips {
		if ip.To4() != nil {
			v4 = append(v4, ip)
		} else {
			v6 = append(v6, ip)
		}
	}
	return append(v4, v6...)
}

// lookupIP resolves a host name or IP literal.
func lookupIP(name string) ([]net.IP, error) {
	if ip := net.ParseIP(name); ip != nil {
		return []net.IP{ip}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return net.DefaultResolver.LookupIP(ctx, "ip", name)
}

// routeSource returns this machine's source address for packets to ip: a
// connected UDP socket, which sends nothing, reports it.
func routeSource(ip net.IP) (net.IP, error) {
	c, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: ip, Port: 9})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP, nil
}

// listenAll listens on every address with one common TCP port, so a name
// that resolves to any of them works as PMI_PORT's host.
func listenAll(addrs []string) ([]net.Listener, error) {
	if len(addrs) == 0 {
		return nil, fmt.Errorf("launch: PMI server: no address to listen on")
	}
	var lastErr error
	for range 20 {
		first, err := net.Listen("tcp", net.JoinHostPort(addrs[0], "0"))
		if err != nil {
			return nil, fmt.Errorf("launch: PMI server on %s: %w", addrs[0], err)
		}
		ls := []net.Listener{first}
		port := strconv.Itoa(first.Addr().(*net.TCPAddr).Port)
		for _, a := range addrs[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(a, port))
			if err != nil {
				lastErr = err
				break
			}
			ls = append(ls, l)
		}
		if len(ls) == len(addrs) {
			return ls, nil
		}
		for _, l := range ls {
			l.Close()
		}
		if !errors.Is(lastErr, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("launch: PMI server: %w", lastErr)
		}
	}
	return nil, fmt.Errorf("launch: PMI server: no port free on all of %v: %w", addrs, lastErr)
}
