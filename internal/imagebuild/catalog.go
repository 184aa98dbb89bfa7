package imagebuild

import "strings"

// Entry is one catalog image.
type Entry struct {
	// Pattern is matched against the normalized reference and its short form
	// (docker.io/ and library/ removed); '*' matches any run of characters, slashes
	// included.
	Pattern string
	// Name is the image's canonical local name, under which a store keeps it.
	Name string
}

// The catalog's image names. An entry's Name chooses its builder (planFor), so the
// two busybox patterns, with their own names, get the same image.
const (
	busyboxName  = "docker.io/library/busybox:1.37"
	e2eBusybox   = "registry.k8s.io/e2e-test-images/busybox:1.36.1-1"
	agnhostName  = "registry.k8s.io/e2e-test-images/agnhost:2.53"
	pauseName    = "registry.k8s.io/pause:3.10"
	trancheName  = "docker.io/library/tranche:dev"
	nginxName    = "docker.io/library/nginx:1.27"
	postgresName = "docker.io/library/postgres:16"
)

// Catalog lists the entries in match order: the first match wins.
func Catalog() []Entry {
	return []Entry{
		{Pattern: "busybox*", Name: busyboxName},
		{Pattern: "registry.k8s.io/e2e-test-images/busybox*", Name: e2eBusybox},
		{Pattern: "registry.k8s.io/e2e-test-images/agnhost*", Name: agnhostName},
		{Pattern: "registry.k8s.io/pause*", Name: pauseName},
		{Pattern: "tranche*", Name: trancheName},
		{Pattern: "nginx*", Name: nginxName},
		{Pattern: "postgres*", Name: postgresName},
		// The e2e suite's nginx is the official nginx image under another name.
		{Pattern: "registry.k8s.io/e2e-test-images/nginx*", Name: nginxName},
		{Pattern: "registry.k8s.io/e2e-test-images/nautilus*", Name: nautilusName},
		{Pattern: "registry.k8s.io/e2e-test-images/kitten*", Name: kittenName},
		{Pattern: "registry.k8s.io/e2e-test-images/glibc-dns-testing*", Name: glibcDNSTestingName},
		{Pattern: "registry.k8s.io/e2e-test-images/nonewprivs*", Name: nonewprivsName},
		{Pattern: "registry.k8s.io/e2e-test-images/sample-apiserver*", Name: sampleAPIServerName},
		{Pattern: "registry.k8s.io/etcd*", Name: etcdName},
	}
}

// Match returns the entry for a reference (normalized or as written), ok=false when
// none matches.
func Match(ref string) (Entry, bool) {
	full, short := normalize(ref)
	for _, e := range Catalog() {
		if match(e.Pattern, ref) || match(e.Pattern, full) || match(e.Pattern, short) {
			return e, true
		}
	}
	return Entry{}, false
}

// normalize returns a reference's full form as a container runtime reports it
// (docker.io/library/nginx:latest) and its short form (nginx:latest).
func normalize(ref string) (full, short string) {
	name := ref
	if i := strings.IndexByte(name, '/'); i < 0 {
		name = "docker.io/library/" + name
	} else if first := name[:i]; !strings.ContainsAny(first, ".:") && first != "localhost" {
		name = "docker.io/" + name
	}
	last := name[strings.LastIndexByte(name, '/')+1:]
	if !strings.ContainsAny(last, ":@") {
		name += ":latest"
	}
	short = strings.TrimPrefix(name, "docker.io/")
	short = strings.TrimPrefix(short, "library/")
	return name, short
}

// match reports whether s matches pattern, where '*' matches any run of characters
// and everything else matches itself.
func match(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return len(s) >= len(parts[len(parts)-1]) && strings.HasSuffix(s, parts[len(parts)-1])
}
