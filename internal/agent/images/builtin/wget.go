package builtin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// wgetUsage is busybox's, whose options wgetMain takes.
const wgetUsage = `Usage: wget [-cqS] [--spider] [-O FILE] [-o LOGFILE] [--header STR]
	[--post-data STR | --post-file FILE] [-Y on/off]
	[--no-check-certificate] [-P DIR] [-U AGENT] [-T SEC] URL...

Retrieve files via HTTP
`

// wgetOptions are the parsed command line of wget.
type wgetOptions struct {
	quiet, spider, showHeaders, insecure bool
	output, logFile, dir, agent          string
	postData                             *string
	headers                              []string
	timeout                              time.Duration
	urls                                 []string
}

// parseWget reads busybox wget's options: short ones bundled or with their value
// attached (-qO-, -T5), long ones with their value as the next argument or after '='.
func parseWget(args []string) (*wgetOptions, error) {
	o := &wgetOptions{timeout: 900 * time.Second, agent: "Wget"}
	value := func(i *int, name, attached string) (string, error) {
		if attached != "" {
			return attached, nil
		}
		if *i+1 >= len(args) {
			return "", fmt.Errorf("option requires an argument -- '%s'", strings.TrimLeft(name, "-"))
		}
		*i++
		return args[*i], nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			o.urls = append(o.urls, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "--"):
			name, attached, _ := strings.Cut(a, "=")
			var err error
			var v string
			switch name {
			case "--spider":
				o.spider = true
			case "--quiet":
				o.quiet = true
			case "--no-check-certificate":
				o.insecure = true
			case "--server-response":
				o.showHeaders = true
			case "--header":
				if v, err = value(&i, name, attached); err == nil {
					o.headers = append(o.headers, v)
				}
			case "--post-data":
				if v, err = value(&i, name, attached); err == nil {
					o.postData = &v
				}
			case "--post-file":
				if v, err = value(&i, name, attached); err == nil {
					var data []byte
					if data, err = os.ReadFile(v); err == nil {
						s := string(data)
						o.postData = &s
					}
				}
			case "--output-document":
				o.output, err = value(&i, name, attached)
			case "--user-agent":
				o.agent, err = value(&i, name, attached)
			case "--timeout":
				if v, err = value(&i, name, attached); err == nil {
					err = o.setTimeout(v)
				}
			case "--directory-prefix":
				o.dir, err = value(&i, name, attached)
			case "--continue", "--proxy", "--no-verbose":
				// Accepted and ignored: no partial files, no proxies here.
				if name == "--proxy" {
					_, err = value(&i, name, attached)
				}
			default:
				return nil, fmt.Errorf("unrecognized option '%s'", a)
			}
			if err != nil {
				return nil, err
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
		short:
			for j := 1; j < len(a); j++ {
				c := a[j]
				rest := a[j+1:]
				var err error
				switch c {
				case 'q':
					o.quiet = true
					continue
				case 'S':
					o.showHeaders = true
					continue
				case 'c':
					continue
				case 'O':
					o.output, err = value(&i, "O", rest)
				case 'o':
					o.logFile, err = value(&i, "o", rest)
				case 'P':
					o.dir, err = value(&i, "P", rest)
				case 'U':
					o.agent, err = value(&i, "U", rest)
				case 'Y':
					_, err = value(&i, "Y", rest)
				case 'T':
					var v string
					if v, err = value(&i, "T", rest); err == nil {
						err = o.setTimeout(v)
					}
				default:
					return nil, fmt.Errorf("invalid option -- '%c'", c)
				}
				if err != nil {
					return nil, err
				}
				break short
			}
		default:
			o.urls = append(o.urls, a)
		}
	}
	if len(o.urls) == 0 {
		return nil, errors.New("")
	}
	return o, nil
}

func (o *wgetOptions) setTimeout(v string) error {
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("invalid number '%s'", v)
	}
	o.timeout = time.Duration(n * float64(time.Second))
	return nil
}

// wgetMain is busybox's wget, which the e2e framework runs in agnhost pods to check
// Services (`wget -T 1 -qO- http://IP:PORT`): Debian's busybox-static is built without
// -T and crashes on it. Messages and exit statuses are busybox's; only HTTP(S).
func wgetMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseWget(args)
	if err != nil {
		if msg := err.Error(); msg != "" {
			fmt.Fprintf(stderr, "wget: %s\n", msg)
		}
		fmt.Fprint(stderr, wgetUsage)
		return 1
	}
	logw := stderr
	if o.logFile != "" {
		f, err := os.Create(o.logFile)
		if err != nil {
			fmt.Fprintf(stderr, "wget: can't open '%s': %v\n", o.logFile, errText(err))
			return 1
		}
		defer f.Close()
		logw = f
	}
	code := 0
	for _, u := range o.urls {
		if err := o.fetch(ctx, u, stdout, logw); err != nil {
			fmt.Fprintf(stderr, "wget: %s\n", err)
			code = 1
			break
		}
	}
	return code
}

// fetch gets one URL into its destination.
func (o *wgetOptions) fetch(ctx context.Context, raw string, stdout, logw io.Writer) error {
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("not an http or ftp url: %s", raw)
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	dialer := &net.Dialer{}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, _ := net.SplitHostPort(addr)
			ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
			if err != nil || len(ips) == 0 {
				return nil, fmt.Errorf("bad address '%s'", host)
			}
			target := net.JoinHostPort(ips[0].IP.String(), port)
			if !o.quiet {
				fmt.Fprintf(logw, "Connecting to %s (%s)\n", addr, target)
			}
			c, err := dialer.DialContext(ctx, network, target)
			if err != nil {
				if ctx.Err() != nil {
					return nil, errTimedOut
				}
				return nil, fmt.Errorf("can't connect to remote host (%s): %s", ips[0].IP, errText(err))
			}
			return c, nil
		},
		TLSClientConfig: &tls.Config{InsecureSkipVerify: o.insecure}, //nolint:gosec // --no-check-certificate asks for it
		Proxy:           nil,
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, CheckRedirect: func(_ *http.Request, via []*http.Request) error {
		if len(via) >= 20 {
			return errors.New("too many redirections")
		}
		return nil
	}}
	method, body := http.MethodGet, io.Reader(nil)
	if o.postData != nil {
		method, body = http.MethodPost, strings.NewReader(*o.postData)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", o.agent)
	if o.postData != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, h := range o.headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if ctx.Err() != nil {
			return errTimedOut
		}
		return err
	}
	defer resp.Body.Close()
	if o.showHeaders {
		fmt.Fprintf(logw, "  %s %s\n", resp.Proto, resp.Status)
		for k, vs := range resp.Header {
			for _, v := range vs {
				fmt.Fprintf(logw, "  %s: %s\n", k, v)
			}
		}
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("server returned error: %s %s", resp.Proto, resp.Status)
	}
	if o.spider {
		if !o.quiet {
			fmt.Fprintln(logw, "remote file exists")
		}
		return nil
	}
	dst, name, err := o.destination(resp.Request.URL, stdout)
	if err != nil {
		return err
	}
	if !o.quiet {
		if name == "" {
			fmt.Fprintln(logw, "writing to stdout")
		} else {
			fmt.Fprintf(logw, "saving to '%s'\n", name)
		}
	}
	_, copyErr := io.Copy(dst, resp.Body)
	if c, ok := dst.(io.Closer); ok && name != "" {
		if err := c.Close(); err != nil && copyErr == nil {
			copyErr = err
		}
	}
	if copyErr != nil {
		if ctx.Err() != nil {
			return errTimedOut
		}
		return fmt.Errorf("error getting response: %s", errText(copyErr))
	}
	if !o.quiet {
		if name == "" {
			fmt.Fprintln(logw, "written to stdout")
		} else {
			fmt.Fprintf(logw, "'%s' saved\n", name)
		}
	}
	return nil
}

var errTimedOut = errors.New("download timed out")

// destination opens where the body goes: stdout for -O -, the -O file, else the URL's
// last path element (index.html for none) under -P, refused when it exists.
func (o *wgetOptions) destination(u *url.URL, stdout io.Writer) (io.Writer, string, error) {
	if o.output == "-" {
		return stdout, "", nil
	}
	name := o.output
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if name == "" {
		name = path.Base(u.Path)
		if name == "/" || name == "." || name == "" {
			name = "index.html"
		}
		flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	}
	if o.dir != "" && !filepath.IsAbs(name) {
		name = filepath.Join(o.dir, name)
	}
	f, err := os.OpenFile(name, flags, 0o666)
	if err != nil {
		return nil, "", fmt.Errorf("can't open '%s': %s", name, errText(err))
	}
	return f, name, nil
}

// errText is the C library's wording of an error (what busybox prints): "Connection
// refused" rather than Go's "dial tcp ...: connect: connection refused".
func errText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		s := errno.Error()
		return strings.ToUpper(s[:1]) + s[1:]
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return errText(pe.Err)
	}
	return err.Error()
}
