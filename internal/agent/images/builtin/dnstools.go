package builtin

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// ResolvConf is where dig reads the pod's resolver configuration.
const ResolvConf = "/etc/resolv.conf"

// digOptions are the parts of dig's command line the e2e DNS specs use:
// dig [@server] [-p port] [-t type] [-x addr] [+[no]tcp|vc] [+noall] [+[no]answer] [+[no]search]
// [+short] [+time=N] [+tries=N] name [type] [class].
type digOptions struct {
	server  string
	port    string
	name    string
	qtype   uint16
	tcp     bool
	search  bool
	short   bool
	answer  bool // print the answer section (+noall +answer)
	all     bool // print everything (the default)
	timeout time.Duration
	tries   int
}

func parseDig(args []string) (*digOptions, error) {
	o := &digOptions{port: "53", qtype: dns.TypeA, all: true, answer: true, timeout: 5 * time.Second, tries: 3}
	typed := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case strings.HasPrefix(a, "@"):
			o.server = a[1:]
		case a == "-t" || a == "-x" || a == "-p":
			if i+1 >= len(args) {
				return nil, fmt.Errorf("option %s requires an argument", a)
			}
			i++
			if a == "-p" {
				if n, err := strconv.Atoi(args[i]); err != nil || n < 1 || n > 65535 {
					return nil, fmt.Errorf("invalid port number %s", args[i])
				}
				o.port = args[i]
				continue
			}
			if a == "-x" {
				arpa, err := dns.ReverseAddr(args[i])
				if err != nil {
					return nil, fmt.Errorf("invalid IP address %s", args[i])
				}
				o.name, o.qtype, typed = arpa, dns.TypePTR, true
				continue
			}
			t, ok := dns.StringToType[strings.ToUpper(args[i])]
			if !ok {
				return nil, fmt.Errorf("invalid type: %s", args[i])
			}
			o.qtype, typed = t, true
		case strings.HasPrefix(a, "+"):
			if err := o.setPlus(a[1:]); err != nil {
				return nil, err
			}
		case strings.HasPrefix(a, "-"):
			return nil, fmt.Errorf("invalid option: %s", a)
		default:
			if t, ok := dns.StringToType[strings.ToUpper(a)]; ok && o.name != "" && !typed {
				o.qtype, typed = t, true
			} else if strings.EqualFold(a, "IN") && o.name != "" {
				// The only class a cluster answers.
			} else if o.name == "" {
				o.name = a
			} else {
				return nil, fmt.Errorf("only one name per query: %s", a)
			}
		}
	}
	if o.name == "" {
		o.name, o.qtype = ".", dns.TypeNS
	}
	return o, nil
}

func (o *digOptions) setPlus(opt string) error {
	name, value, hasValue := strings.Cut(opt, "=")
	on := !strings.HasPrefix(name, "no")
	base := strings.TrimPrefix(name, "no")
	switch {
	case base == "tcp" || base == "vc":
		o.tcp = on
	case base == "search":
		o.search = on
	case base == "short":
		o.short = on
	case base == "all":
		o.all, o.answer = on, on
	case base == "answer":
		o.answer = on
	case (base == "time" || base == "tries" || base == "retry") && hasValue:
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			return fmt.Errorf("invalid option: +%s", opt)
		}
		switch base {
		case "time":
			o.timeout = time.Duration(max(n, 1)) * time.Second
		case "tries":
			o.tries = max(n, 1)
		default:
			o.tries = n + 1
		}
	case base == "question" || base == "comments" || base == "stats" || base == "cmd" ||
		base == "authority" || base == "additional" || base == "recurse":
		// Sections and flags of the full output; the answer is what the specs read.
	default:
		return fmt.Errorf("invalid option: +%s", opt)
	}
	return nil
}

// digMain runs `dig ARGS...`: one DNS query (UDP, retried over TCP when truncated, or
// TCP with +tcp) to the pod's name server, through the resolv.conf search list with
// +search, printed as dig prints it: the whole message, the answer records
// (+noall +answer), or their data (+short). Exit status 0 when a server answered
// (whatever its rcode), 9 when none did, 1 for a bad command line. resolvConf is the
// resolver configuration's path (ResolvConf).
func digMain(ctx context.Context, args []string, resolvConf string, stdout, stderr io.Writer) int {
	o, err := parseDig(args)
	if err != nil {
		fmt.Fprintf(stderr, "dig: %v\n", err)
		return 1
	}
	names := []string{dns.Fqdn(o.name)}
	server := o.server
	if cfg, err := dns.ClientConfigFromFile(resolvConf); err == nil {
		if o.search {
			names = cfg.NameList(o.name)
		}
		if server == "" && len(cfg.Servers) > 0 {
			server = cfg.Servers[0]
		}
	} else if server == "" {
		fmt.Fprintf(stderr, "dig: reading %s: %v\n", resolvConf, err)
		return 9
	}
	server = net.JoinHostPort(strings.Trim(server, "[]"), o.port)

	var reply *dns.Msg
	for _, name := range names {
		m := new(dns.Msg)
		m.SetQuestion(name, o.qtype)
		r, err := digExchange(ctx, m, server, o)
		if err != nil {
			fmt.Fprintf(stdout, ";; communications error to %s: %v\n", server, err)
			fmt.Fprintf(stdout, ";; no servers could be reached\n")
			return 9
		}
		reply = r
		if r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0 {
			break
		}
	}
	switch {
	case o.short:
		for _, rr := range reply.Answer {
			fmt.Fprintln(stdout, strings.TrimPrefix(rr.String(), rr.Header().String()))
		}
	case o.all:
		fmt.Fprintln(stdout, reply.String())
	case o.answer:
		for _, rr := range reply.Answer {
			fmt.Fprintln(stdout, rr.String())
		}
	}
	return 0
}

// digExchange sends m, tries times over UDP (then once over TCP if the answer was
// truncated) or over TCP.
func digExchange(ctx context.Context, m *dns.Msg, server string, o *digOptions) (*dns.Msg, error) {
	network := "udp"
	if o.tcp {
		network = "tcp"
	}
	var lastErr error
	for range o.tries {
		c := &dns.Client{Net: network, Timeout: o.timeout}
		r, _, err := c.ExchangeContext(ctx, m, server)
		if err == nil && r.Truncated && network == "udp" {
			c.Net = "tcp"
			r, _, err = c.ExchangeContext(ctx, m, server)
		}
		if err == nil {
			return r, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// getentMain runs `getent hosts [KEY...]`, glibc's name service lookup of hosts: for a
// name, its first address (the hosts file, then DNS through resolv.conf's search list,
// as the pod's resolver does) and the name; for an address, the names it has. Exit
// status 2 when a key is not found, as glibc's getent.
func getentMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "hosts" {
		if len(args) == 0 {
			fmt.Fprintln(stderr, "getent: wrong number of arguments")
		} else {
			fmt.Fprintf(stderr, "Unknown database: %s\n", args[0])
		}
		return 1
	}
	if len(args) == 1 {
		fmt.Fprintln(stderr, "getent: enumerating hosts is not in tranche's getent; name a host")
		return 1
	}
	code := 0
	for _, key := range args[1:] {
		if ip := net.ParseIP(key); ip != nil {
			names, err := net.DefaultResolver.LookupAddr(ctx, key)
			if err != nil || len(names) == 0 {
				code = 2
				continue
			}
			fmt.Fprintf(stdout, "%-15s %s\n", key, strings.Join(trimDots(names), " "))
			continue
		}
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, key)
		if err != nil || len(addrs) == 0 {
			code = 2
			continue
		}
		fmt.Fprintf(stdout, "%-15s %s\n", addrs[0].IP, key)
	}
	return code
}

func trimDots(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.TrimSuffix(n, ".")
	}
	return out
}
