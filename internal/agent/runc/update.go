package runc

import (
	"fmt"
	"os"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// UpdateCgroup writes res to the existing cgroup at path (a running container's, or a
// pod's), as `runc update` does for a container: cpu shares (cpu.weight on cgroup v2),
// CFS quota and period (cpu.max), memory limit (memory.max, swap in step), pids limit.
// A quota or memory limit of -1 is unlimited. Unlike EnsurePod it creates nothing: a
// cgroup that is gone (the container exited) is an error.
func UpdateCgroup(path string, res *specs.LinuxResources) error {
	if err := checkPath(path); err != nil {
		return err
	}
	hs, unified, err := hierarchies()
	if err != nil {
		return err
	}
	dir, err := controllerDir(hs, unified, "cpu", path)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("updating cgroup %s: %w", path, err)
	}
	if unified {
		err = ensureV2(path, res)
	} else {
		err = ensureV1(hs, path, res)
	}
	if err != nil {
		return fmt.Errorf("updating cgroup %s: %w", path, err)
	}
	return nil
}
