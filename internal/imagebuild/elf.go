package imagebuild

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
)

// elfClosure returns what the host programs at paths need to run in an image with no
// other files: the programs, their interpreter (PT_INTERP) and, transitively, every
// library named by DT_NEEDED, resolved as the dynamic loader of an image with no
// /etc/ld.so.cache would: the object's DT_RPATH (when it has no DT_RUNPATH) or
// DT_RUNPATH, $ORIGIN expanded, then the system directories of its machine. Paths are
// host paths as the loader opens them (/lib/x86_64-linux-gnu/libc.so.6), in the order
// found, each once; tree.hostPath copies them with the links on the way. A static
// program's closure is itself. Libraries loaded with dlopen are not found: callers add
// those they know of.
func elfClosure(paths ...string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	queue := append([]string(nil), paths...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p)
		deps, err := elfDeps(p)
		if err != nil {
			return nil, err
		}
		queue = append(queue, deps...)
	}
	return out, nil
}

// elfDeps returns the interpreter and the resolved DT_NEEDED libraries of one object.
func elfDeps(p string) ([]string, error) {
	f, err := elf.Open(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	defer f.Close()
	var deps []string
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("%s: reading PT_INTERP: %w", p, err)
		}
		deps = append(deps, strings.TrimRight(string(b), "\x00"))
	}
	needed, err := f.DynString(elf.DT_NEEDED)
	if err != nil {
		if errors.Is(err, elf.ErrNoSymbols) {
			return deps, nil
		}
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	runpath, _ := f.DynString(elf.DT_RUNPATH)
	if len(runpath) == 0 {
		runpath, _ = f.DynString(elf.DT_RPATH)
	}
	var dirs []string
	for _, rp := range runpath {
		for _, d := range strings.Split(rp, ":") {
			d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", path.Dir(p)), "$ORIGIN", path.Dir(p))
			if d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	dirs = append(dirs, systemLibDirs(f)...)
	for _, name := range needed {
		lib, err := findLib(name, dirs, f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		deps = append(deps, lib)
	}
	return deps, nil
}

// systemLibDirs are the directories the loader searches when a library is not found
// by its object's run path (Debian's multiarch glibc: the triplet directories first).
func systemLibDirs(f *elf.File) []string {
	var triplet string
	switch f.Machine {
	case elf.EM_X86_64:
		triplet = "x86_64-linux-gnu"
	case elf.EM_AARCH64:
		triplet = "aarch64-linux-gnu"
	case elf.EM_386:
		triplet = "i386-linux-gnu"
	case elf.EM_RISCV:
		triplet = "riscv64-linux-gnu"
	}
	var dirs []string
	if triplet != "" {
		dirs = append(dirs, "/lib/"+triplet, "/usr/lib/"+triplet)
	}
	if f.Class == elf.ELFCLASS64 {
		dirs = append(dirs, "/lib64", "/usr/lib64")
	}
	return append(dirs, "/lib", "/usr/lib")
}

// findLib finds the library name for the object from (same class and machine, as the
// loader skips others).
func findLib(name string, dirs []string, from *elf.File) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, d := range dirs {
		p := path.Join(d, name)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		lf, err := elf.Open(p)
		if err != nil {
			continue
		}
		ok := lf.Class == from.Class && lf.Machine == from.Machine
		lf.Close()
		if ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("library %s not found in %s", name, strings.Join(dirs, ":"))
}

// isStatic reports whether the ELF program at p has no interpreter, i.e. runs with no
// other file of its image.
func isStatic(p string) (bool, error) {
	f, err := elf.Open(p)
	if err != nil {
		return false, fmt.Errorf("%s: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}
