package ocispec

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// ResolveUser resolves a user string against rootfs's /etc/passwd and /etc/group the way
// containerd's WithUser and WithAdditionalGIDs do:
//
//   - "uid": the uid; gid is the passwd entry's group, or 0 when no entry has that uid;
//   - "name": the passwd entry's uid and gid; a name with no entry is an error;
//   - "uid:gid", "name:gid", "uid:group", "name:group": each part numeric or looked up
//     (passwd for the user, group for the group; a missing name is an error).
//
// additional is the gids of the /etc/group entries that list the user as a member (a
// group named like the user is skipped: it is its primary group), in file order; it
// does not include gid itself. The files are read inside rootfs (symbolic links cannot
// leave it); a missing file counts as empty. Ids must be in [0, 2^31-1].
func ResolveUser(rootfs, user string) (uid, gid uint32, additional []uint32, err error) {
	db, err := readUserDB(rootfs)
	if err != nil {
		return 0, 0, nil, err
	}
	return db.resolve(user)
}

// passwdEntry is one line of /etc/passwd.
type passwdEntry struct {
	name     string
	uid, gid uint32
}

// groupEntry is one line of /etc/group.
type groupEntry struct {
	name    string
	gid     uint32
	members []string
}

// userDB is a rootfs's /etc/passwd and /etc/group.
type userDB struct {
	passwd []passwdEntry
	group  []groupEntry
}

// maxID is the largest uid or gid containerd accepts in a user string.
const maxID = math.MaxInt32

func readUserDB(rootfs string) (*userDB, error) {
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return nil, fmt.Errorf("opening the container's root file system: %w", err)
	}
	defer root.Close()
	db := &userDB{}
	if err := readColonFile(root, "etc/passwd", func(f []string) {
		if len(f) < 4 {
			return
		}
		uid, err1 := parseID(f[2])
		gid, err2 := parseID(f[3])
		if f[0] == "" || err1 != nil || err2 != nil {
			return
		}
		db.passwd = append(db.passwd, passwdEntry{name: f[0], uid: uid, gid: gid})
	}); err != nil {
		return nil, err
	}
	if err := readColonFile(root, "etc/group", func(f []string) {
		if len(f) < 3 {
			return
		}
		gid, err := parseID(f[2])
		if f[0] == "" || err != nil {
			return
		}
		g := groupEntry{name: f[0], gid: gid}
		if len(f) > 3 && f[3] != "" {
			for _, m := range strings.Split(f[3], ",") {
				if m = strings.TrimSpace(m); m != "" {
					g.members = append(g.members, m)
				}
			}
		}
		db.group = append(db.group, g)
	}); err != nil {
		return nil, err
	}
	return db, nil
}

// readColonFile calls line with the colon-separated fields of each non-comment line of
// name; a missing file has no lines.
func readColonFile(root *os.Root, name string, line func([]string)) error {
	f, err := root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading /%s in the container's root file system: %w", name, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		line(strings.Split(text, ":"))
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading /%s in the container's root file system: %w", name, err)
	}
	return nil
}

// parseID parses a decimal id in [0, maxID].
func parseID(s string) (uint32, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, err
	}
	if v < 0 || v > maxID {
		return 0, strconv.ErrRange
	}
	return uint32(v), nil
}

// numeric reports whether s is a decimal id, and whether it is in range.
func numeric(s string) (id uint32, isNum bool, err error) {
	id, err = parseID(s)
	switch {
	case err == nil:
		return id, true, nil
	case errors.Is(err, strconv.ErrRange):
		return 0, true, err
	default:
		return 0, false, nil
	}
}

func (db *userDB) resolve(user string) (uid, gid uint32, additional []uint32, err error) {
	userPart, groupPart, hasGroup := strings.Cut(user, ":")
	if strings.Contains(groupPart, ":") || userPart == "" || (hasGroup && groupPart == "") {
		return 0, 0, nil, fmt.Errorf("invalid USER value %q", user)
	}
	id, isNum, err := numeric(userPart)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("invalid USER value %q: uid out of range", user)
	}
	name := userPart
	switch {
	case isNum:
		uid = id
		name = ""
		if e, ok := db.byUID(uid); ok {
			gid, name = e.gid, e.name
		}
	default:
		e, ok := db.byName(userPart)
		if !ok {
			return 0, 0, nil, fmt.Errorf("unable to find user %s: no matching entries in passwd file", userPart)
		}
		uid, gid = e.uid, e.gid
	}
	if hasGroup {
		id, isNum, err := numeric(groupPart)
		switch {
		case err != nil:
			return 0, 0, nil, fmt.Errorf("invalid USER value %q: gid out of range", user)
		case isNum:
			gid = id
		default:
			g, ok := db.groupByName(groupPart)
			if !ok {
				return 0, 0, nil, fmt.Errorf("unable to find group %s: no matching entries in group file", groupPart)
			}
			gid = g.gid
		}
	}
	if name != "" {
		for _, g := range db.group {
			if g.name != name && slices.Contains(g.members, name) {
				additional = append(additional, g.gid)
			}
		}
	}
	return uid, gid, additional, nil
}

func (db *userDB) byUID(uid uint32) (passwdEntry, bool) {
	for _, e := range db.passwd {
		if e.uid == uid {
			return e, true
		}
	}
	return passwdEntry{}, false
}

func (db *userDB) byName(name string) (passwdEntry, bool) {
	for _, e := range db.passwd {
		if e.name == name {
			return e, true
		}
	}
	return passwdEntry{}, false
}

func (db *userDB) groupByName(name string) (groupEntry, bool) {
	for _, g := range db.group {
		if g.name == name {
			return g, true
		}
	}
	return groupEntry{}, false
}
