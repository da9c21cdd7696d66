// Command modproxy adds one version of a module to a Go module proxy directory, the layout
// GOPROXY=file://<dir> serves: <dir>/<module>/@v/{list,<version>.info,<version>.mod,<version>.zip}.
// The zip is made by golang.org/x/mod/zip, so it follows the rules the go command checks (file
// names, sizes, no nested modules or symbolic links).
//
//	go run . -module holdoff.dev/go -version v0.1.0 -time 2025-01-01T00:00:00Z -dir <module dir> -out <proxy dir>
//
// It is a module of its own so that the published module keeps no dependency.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

func main() {
	path := flag.String("module", "", "module path")
	version := flag.String("version", "", "semantic version, v-prefixed")
	stamp := flag.String("time", "", "the version's time, RFC 3339 (the .info file)")
	dir := flag.String("dir", "", "the module's root directory (holding go.mod)")
	out := flag.String("out", "", "the proxy directory")
	flag.Parse()
	if err := run(*path, *version, *stamp, *dir, *out); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func run(path, version, stamp, dir, out string) error {
	mv := module.Version{Path: path, Version: version}
	if err := module.Check(path, version); err != nil {
		return err
	}
	if semver.Canonical(version) != version {
		return fmt.Errorf("version %s is not canonical", version)
	}
	when, err := time.Parse(time.RFC3339, stamp)
	if err != nil {
		return fmt.Errorf("-time: %w", err)
	}
	escaped, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	vdir := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(vdir, version+".mod"), gomod, 0o644); err != nil {
		return err
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, when.UTC()})
	if err := os.WriteFile(filepath.Join(vdir, version+".info"), append(info, '\n'), 0o644); err != nil {
		return err
	}
	zipPath := filepath.Join(vdir, version+".zip")
	f, err := os.Create(zipPath)
	if err != nil {
		return err
	}
	if err := modzip.CreateFromDir(f, mv, dir); err != nil {
		f.Close()
		os.Remove(zipPath)
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if _, err := modzip.CheckZip(mv, zipPath); err != nil {
		return err
	}
	// list: every version the directory serves, one a line, in semantic version order.
	listPath := filepath.Join(vdir, "list")
	var versions []string
	if old, err := os.ReadFile(listPath); err == nil {
		versions = strings.Fields(string(old))
	}
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	semver.Sort(versions)
	return os.WriteFile(listPath, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}
